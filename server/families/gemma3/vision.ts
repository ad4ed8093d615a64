// Gemma 3's image placeholders (docs/reference/models/gemma3.md#images): the chat template writes
// `<start_of_image>` once per image; the processor replaces it by `\n\n<start_of_image>`, 256
// `<image_soft_token>`s and `<end_of_image>\n\n`, and with pan-and-scan by an introduction, that
// sequence for the whole image, and one more per crop. Pure functions of the image size and the
// processor settings; the token strings are the family's (tokens.ts).
import { GEMMA3_TOKENS } from './tokens.ts';

/** The processor's pan-and-scan settings (transformers `Gemma3ProcessorKwargs` images_kwargs). */
export interface PanAndScan {
  /** `do_pan_and_scan`: off unless the run states it (processor default `False`). */
  enabled: boolean;
  /** `pan_and_scan_min_crop_size` (px, default 256). */
  minCropSize: number;
  /** `pan_and_scan_max_num_crops` (default 4). */
  maxNumCrops: number;
  /** `pan_and_scan_min_ratio_to_activate` (default 1.2). */
  minRatioToActivate: number;
}

export const PAN_AND_SCAN_DEFAULTS: PanAndScan = {
  enabled: false,
  minCropSize: 256,
  maxNumCrops: 4,
  minRatioToActivate: 1.2,
};

/** Soft tokens per image and per crop: `image_seq_length` (processor) = `mm_tokens_per_image` (config.json). */
export const IMAGE_SEQ_LENGTH = 256;

/** The crops pan-and-scan cuts an image into: none when it is off, the image too square, or a crop too small. */
export interface Crops {
  /** Crops across and down (one of them is 1); 0 and 0 when there are none. */
  wide: number;
  high: number;
  /** Side of each crop in px of the original image (the last one may be narrower). */
  width: number;
  height: number;
  /** wide · high: what `num_crops` holds. */
  count: number;
}

const NO_CROPS: Crops = { wide: 0, high: 0, width: 0, height: 0, count: 0 };

/**
 * transformers `Gemma3ImageProcessor.pan_and_scan` (image_processing_gemma3.py) and vLLM
 * `Gemma3ProcessingInfo.get_num_crops` (gemma3_mm.py), which compute the same numbers: the number
 * of crops near the aspect ratio (rounded half up), within [2, max] and no more than fit
 * `minCropSize`, then nothing at all if a crop would still be smaller than `minCropSize`.
 */
export function panAndScanCrops(width: number, height: number, s: PanAndScan): Crops {
  if (!s.enabled) return NO_CROPS;
  let wide: number;
  let high: number;
  if (width >= height) {
    if (width / height < s.minRatioToActivate) return NO_CROPS;
    wide = Math.floor(width / height + 0.5);
    wide = Math.min(Math.floor(width / s.minCropSize), wide);
    wide = Math.min(s.maxNumCrops, Math.max(2, wide));
    high = 1;
  } else {
    if (height / width < s.minRatioToActivate) return NO_CROPS;
    high = Math.floor(height / width + 0.5);
    high = Math.min(Math.floor(height / s.minCropSize), high);
    high = Math.min(s.maxNumCrops, Math.max(2, high));
    wide = 1;
  }
  const cropWidth = Math.ceil(width / wide);
  const cropHeight = Math.ceil(height / high);
  if (Math.min(cropWidth, cropHeight) < s.minCropSize) return NO_CROPS;
  return { wide, high, width: cropWidth, height: cropHeight, count: wide * high };
}

/** One image's soft-token sequence as text: `\n\n<start_of_image>` + 256 soft tokens + `<end_of_image>\n\n`. */
export function fullImageSequence(seqLength = IMAGE_SEQ_LENGTH): string {
  const t = GEMMA3_TOKENS;
  return `\n\n${t.startOfImage}${t.imageSoftToken.repeat(seqLength)}${t.endOfImage}\n\n`;
}

/**
 * What the processor writes for one `<start_of_image>` (transformers `Gemma3Processor.replace_image_token`):
 * the full sequence, or with crops the introduction, the whole image's sequence, and one per crop
 * joined by spaces.
 */
export function imageReplacement(crops: number, seqLength = IMAGE_SEQ_LENGTH): string {
  const full = fullImageSequence(seqLength);
  if (crops <= 0) return full;
  return `Here is the original image ${full} and here are some crops to help you see better ${Array(crops).fill(full).join(' ')}`;
}

/**
 * The text the processor tokenizes: each `<start_of_image>` of a rendered prompt replaced, in
 * order, by its image's replacement (`crops[k]` for the k-th). Throws when the text holds more
 * placeholders than images, as the processor does.
 */
export function expandImagesInText(text: string, crops: readonly number[], seqLength = IMAGE_SEQ_LENGTH): string {
  const marker = GEMMA3_TOKENS.startOfImage;
  const parts = text.split(marker);
  if (parts.length - 1 !== crops.length)
    throw new Error(`the text holds ${parts.length - 1} ${marker} and ${crops.length} images were given`);
  let out = parts[0]!;
  for (let k = 0; k < crops.length; k++) out += imageReplacement(crops[k]!, seqLength) + parts[k + 1]!;
  return out;
}

/** Soft tokens one image brings: 256 for the image and 256 per crop. */
export function softTokenCount(crops: number, seqLength = IMAGE_SEQ_LENGTH): number {
  return seqLength * (1 + Math.max(0, crops));
}

/** The ids of the newline runs Gemma's vocabulary holds as single tokens, which vLLM's expansion merges. */
export interface NewlineIds {
  one: number;
  two: number;
  three: number;
  four: number;
}

/** Every place in `ids` where `pattern` occurs (left to right, not overlapping) replaced by `by`. */
function replaceRuns(ids: readonly number[], pattern: readonly number[], by: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < ids.length; ) {
    let match = i + pattern.length <= ids.length;
    for (let j = 0; match && j < pattern.length; j++) match = ids[i + j] === pattern[j];
    if (match) {
      out.push(...by);
      i += pattern.length;
    } else out.push(ids[i++]!);
  }
  return out;
}

/**
 * vLLM's expansion of a prompt given as ids (gemma3_mm.py `_apply_token_matches`): each
 * `<start_of_image>` id replaced by its replacement's ids (`replacements[k]`, tokenized on their
 * own), then the newline tokens the replacement put next to the prompt's merged as the tokenizer
 * would have: `\n`+`\n\n` and `\n\n`+`\n` into `\n\n\n`, `\n\n`+`\n\n` into `\n\n\n\n`, in that order.
 */
export function expandImagesInIds(
  ids: readonly number[],
  startOfImage: number,
  replacements: readonly (readonly number[])[],
  nl: NewlineIds,
): number[] {
  const out: number[] = [];
  let k = 0;
  for (const id of ids) {
    if (id !== startOfImage) {
      out.push(id);
      continue;
    }
    const r = replacements[k++];
    if (!r) throw new Error(`the prompt holds more than ${replacements.length} image placeholders`);
    out.push(...r);
  }
  if (k !== replacements.length)
    throw new Error(`the prompt holds ${k} image placeholders and ${replacements.length} images were given`);
  let merged = replaceRuns(out, [nl.one, nl.two], [nl.three]);
  merged = replaceRuns(merged, [nl.two, nl.one], [nl.three]);
  return replaceRuns(merged, [nl.two, nl.two], [nl.four]);
}
