// The image-processor settings a record states, read the one way every importer reads them
// (docs/reference/image-math.md#settings-a-record-states). The dict is what reaches the Hugging Face
// processor: vLLM's `mm_processor_kwargs` (passed to `get_hf_processor(**kwargs)`, vllm-project/vllm
// `vllm/model_executor/models/qwen2_vl.py`), or the kwargs a trainer splats into `processor(...)`
// (THUDM/slime `slime/utils/processing_utils.py::build_processor_kwargs`). The bounds are spelled
// `min_pixels`/`max_pixels` or, as Qwen3-VL's config and transformers' newer processors do,
// `size: {shortest_edge, longest_edge}` (pixel counts despite the names); `min_pixels`/`max_pixels`
// override `size` (huggingface/transformers `models/qwen2_vl/image_processing_qwen2_vl.py`, "backward
// compatibility"). Kwargs may also be grouped per modality under `images_kwargs` (transformers
// `ProcessingKwargs`), which then apply to images. Other keys (`fps`, `do_resize`, …) are not read.
//
// A value that is not a positive integer is not applied and is reported with its field; the record
// still loads (a bad setting must not cost the trajectory).
import type { ProcessorSettings } from '../model/trajectory.ts';
import { mergeProcessorSettings } from '../analysis/context.ts';
import { isObject } from './importer.ts';

export interface SettingsProblem {
  /** Dotted field of the value that could not be applied. */
  field: string;
  message: string;
}

export interface StatedSettings {
  settings?: ProcessorSettings;
  problems: SettingsProblem[];
}

const BOUNDS = [
  ['min_pixels', 'minPixels'],
  ['max_pixels', 'maxPixels'],
] as const;
const SIZE_KEYS = [
  ['shortest_edge', 'minPixels'],
  ['longest_edge', 'maxPixels'],
] as const;

function positiveInt(v: unknown): v is number {
  // Safe integers only: the model holds pixel counts as integers, and 1e30 is not a setting.
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0;
}

/** The bounds of one level (flat, or `images_kwargs`): `min_pixels`/`max_pixels` over `size`. */
function readBounds(dict: Record<string, unknown>, field: string, problems: SettingsProblem[]): ProcessorSettings {
  const out: ProcessorSettings = {};
  const take = (value: unknown, at: string, key: keyof ProcessorSettings) => {
    if (value === undefined || value === null) return;
    if (!positiveInt(value)) {
      problems.push({ field: at, message: `${at}: ${JSON.stringify(value)} is not a positive integer; not applied` });
      return;
    }
    out[key] ??= value;
  };
  for (const [name, key] of BOUNDS) take(dict[name], `${field}.${name}`, key);
  const size = dict.size;
  if (isObject(size)) for (const [name, key] of SIZE_KEYS) take(size[name], `${field}.size.${name}`, key);
  else if (size !== undefined && size !== null)
    problems.push({
      field: `${field}.size`,
      message: `${field}.size: expected {"shortest_edge", "longest_edge"} (min and max pixels); not applied`,
    });
  return out;
}

/** The min/max pixels a kwargs dict at `field` states (none when it is absent or states neither), and what could not be applied. */
export function readProcessorKwargs(value: unknown, field: string): StatedSettings {
  const problems: SettingsProblem[] = [];
  if (value === undefined || value === null) return { problems };
  if (!isObject(value)) {
    problems.push({
      field,
      message: `${field}: expected an object of processor kwargs ({"min_pixels", "max_pixels", "size"}); not applied`,
    });
    return { problems };
  }
  const images = isObject(value.images_kwargs)
    ? readBounds(value.images_kwargs, `${field}.images_kwargs`, problems)
    : undefined;
  const settings = mergeProcessorSettings(images, readBounds(value, field, problems));
  return { ...(settings ? { settings } : {}), problems };
}
