// slime / vime `Sample` records as JSON or JSONL: one `Sample.to_dict()` per line, a JSON array of
// them, or the debug-dump wrapper `{"rollout_id", "samples": [...]}` that `--save-debug-rollout-data`
// writes (with torch.save; a converter turns it into JSON with images as paths or data: URLs).
// Fields (THUDM/slime: slime/utils/types.py; vllm-project/vime: vime/utils/types.py; docs/reference/frameworks.md):
//   tokens            prompt ⧺ response ids (image pads expanded by the HF processor)
//   response_length   the response is the last `response_length` tokens
//   loss_mask         per response token, 1 = sampled by the model, 0 = tool/env tokens; None = all 1
//                     (slime/ray/rollout.py fills `[1] * response_length`, and zeroes it when `remove_sample`)
//   rollout_log_probs per response token (0.0 for non-trainable ones)
//   prompt            rendered prompt text or the chat messages
//   multimodal_inputs.images, multimodal_train_inputs.image_grid_thw (one dict, or one per turn:
//                     examples/geo3k_vlm_multi_turn/rollout.py merges them by concatenation);
//                     the rest of multimodal_inputs is splatted into the processor call
//                     (slime/utils/processing_utils.py::build_processor_kwargs), so its
//                     `images_kwargs` / `min_pixels` / `max_pixels` / `size` are the sample's settings;
//                     image dicts may state their own (slime/utils/data.py, qwen-vl-utils)
//   reward, status (finish_reason.type: stop→completed, length→truncated, abort→aborted), group_index,
//   index, metadata
// `_validate_response_metadata_lengths` requires len(loss_mask) == len(rollout_log_probs) ==
// response_length; a record that breaks it still loads so the checks can say where.
import { z } from 'zod';
import { Message, type ProcessorSettings, type TrajectoryInput } from '../model/trajectory.ts';
import { readProcessorKwargs } from './processor-kwargs.ts';
import type { Importer, ImportResult } from './importer.ts';
import { stepOf } from './step.ts';
import { isObject } from './importer.ts';
import { safeParseBounded, zodErrors } from './read/validate.ts';
import {
  ImageEntry,
  LogprobValues,
  MaskValues,
  TokenIdValues,
  ProcessorOutputs,
  fileStem,
  gridsOf,
  videosOf,
  idAllocator,
  imageRefOf,
  smallValues,
  statedModel,
  turnsFromMask,
} from './turns-from-mask.ts';

export const SlimeSample = z
  .object({
    tokens: TokenIdValues,
    response_length: z.number().int().nonnegative(),
    loss_mask: MaskValues.nullish(),
    rollout_log_probs: LogprobValues.nullish(),
    prompt: z.union([z.string(), z.array(Message)]).nullish(),
    response: z.string().nullish(),
    reward: z.unknown().optional(),
    status: z.string().nullish(),
    group_index: z.union([z.number(), z.string()]).nullish(),
    index: z.union([z.number(), z.string()]).nullish(),
    rollout_id: z.union([z.number(), z.string()]).nullish(),
    label: z.unknown().optional(),
    multimodal_inputs: z
      .object({ images: z.array(ImageEntry).nullish(), videos: z.unknown().optional() })
      .passthrough()
      .nullish(),
    multimodal_train_inputs: ProcessorOutputs.nullish(),
    metadata: z.record(z.string(), z.unknown()).nullish(),
    weight_versions: z.array(z.union([z.string(), z.number()])).nullish(),
  })
  .passthrough();
export type SlimeSample = z.infer<typeof SlimeSample>;

/** slime's `Sample.Status` values mapped back to the engine's finish reason. */
const FINISH_REASON: Record<string, string> = { completed: 'stop', truncated: 'length', aborted: 'abort' };

/** `Status.COMPLETED` / `completed` / `COMPLETED` → `completed`. */
function statusName(status: string): string {
  return status.replace(/^.*\./, '').toLowerCase();
}

/** A reward slime stores as a float, or as a dict from a reward model (`{"score": ...}`). */
export function rewardValue(reward: unknown): number | null | undefined {
  if (typeof reward === 'number') return reward;
  if (reward === null) return null;
  if (isObject(reward)) for (const k of ['score', 'reward', 'acc']) if (typeof reward[k] === 'number') return reward[k];
  return undefined;
}

function isSlimeSample(x: unknown): boolean {
  return isObject(x) && Array.isArray(x.tokens) && typeof x.response_length === 'number';
}

export function slimeTrajectory(
  s: SlimeSample,
  where: { file: string; line: number; id: string; rollout?: unknown; processor?: ProcessorSettings },
): TrajectoryInput {
  const turns = turnsFromMask({
    tokens: s.tokens,
    scope: 'response',
    responseLength: s.response_length,
    mask: s.loss_mask ?? undefined,
    logprobs: s.rollout_log_probs ?? undefined,
  });
  if (Array.isArray(s.prompt) && turns[0]) turns[0].messages = s.prompt;
  const status = s.status ? statusName(s.status) : undefined;
  const last = turns[turns.length - 1];
  if (last && status && FINISH_REASON[status]) last.finishReason = FINISH_REASON[status];
  // The decoded response is the generated text only when the response is one generation.
  if (turns.length === 1 && last && !last.observationIds && typeof s.response === 'string')
    last.generatedText = s.response;

  const limitations: string[] = [];
  const videos = videosOf(s.multimodal_inputs?.videos, 'multimodal_inputs.videos');

  // The dump's rollout_id is the step; a Sample's own rollout_id groups the samples one rollout
  // execution was split into (THUDM/slime: slime/utils/types.py, slime/ray/rollout.py gives the
  // unset ones 0, 1, ...): on a bare Sample line it is the only one, and is taken as the step.
  const wrapped = where.rollout !== undefined && where.rollout !== null;
  const rollout = wrapped ? where.rollout : s.rollout_id;
  const meta = smallValues({
    rollout_id: rollout,
    sample_rollout_id: wrapped ? (s.rollout_id ?? undefined) : undefined,
    index: s.index,
    label: s.label,
    reward: isObject(s.reward) ? s.reward : undefined,
    weight_versions: s.weight_versions,
    remove_sample: s.remove_sample === true ? true : undefined,
    metadata: s.metadata ?? undefined,
  });
  return {
    id: where.id,
    source: { file: where.file, line: where.line, format: 'slime' },
    model: statedModel(s, ['metadata.model', 'metadata.model_name', 'metadata.model_path', 'model']),
    ...(where.processor ? { processor: where.processor } : {}),
    turns,
    images: (s.multimodal_inputs?.images ?? []).map(imageRefOf),
    ...(videos.length > 0 ? { videos } : {}),
    sample: {
      tokens: s.tokens,
      responseLength: s.response_length,
      lossMask: s.loss_mask ?? undefined,
      logprobs: s.rollout_log_probs ?? undefined,
      maskScope: 'response',
      imageGridThw: gridsOf(s.multimodal_train_inputs),
      videoGridThw: gridsOf(s.multimodal_train_inputs, 'video'),
    },
    reward: rewardValue(s.reward),
    status,
    group: s.group_index !== undefined && s.group_index !== null ? String(s.group_index) : undefined,
    step: stepOf(rollout),
    limitations,
    meta: Object.keys(meta).length > 0 ? meta : undefined,
  };
}

export const slimeImporter: Importer = {
  format: 'slime',
  description:
    'slime / vime Sample.to_dict() as JSON or JSONL ({"tokens", "response_length", "loss_mask", ...}), or the dump {"rollout_id", "samples": [...]}',
  container: 'jsonl',
  // Each line is one Sample (or one dump of them): streamed in batches. Ids repeated across
  // batches get the run-wide `#2` suffix from the pipeline's keys, as the file-wide allocator gives.
  recordLocal: true,
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (Array.isArray(record.samples)) {
      if (record.samples.length === 0) return '"samples" is empty: no slime Sample to look at';
      return isSlimeSample(record.samples[0])
        ? true
        : '"samples"[0] has no "tokens" array with a numeric "response_length" (slime Sample)';
    }
    if (!Array.isArray(record.tokens)) return 'no "tokens" array (slime Sample)';
    if (typeof record.response_length !== 'number')
      return 'has "tokens" but no numeric "response_length" (slime Sample)';
    return true;
  },
  importRecords(records, { file }): ImportResult {
    const out: ImportResult = { trajectories: [], errors: [] };
    const allocate = idAllocator();
    const stem = fileStem(file);
    for (const r of records) {
      const wrapped = isObject(r.value) && Array.isArray(r.value.samples);
      const items: { value: unknown; field: string }[] = wrapped
        ? (r.value as { samples: unknown[] }).samples.map((value, k) => ({ value, field: `samples.${k}` }))
        : [{ value: r.value, field: '' }];
      const rollout = wrapped ? (r.value as Record<string, unknown>).rollout_id : undefined;
      items.forEach(({ value, field }, k) => {
        const parsed = safeParseBounded(SlimeSample, value);
        if (!parsed.success) {
          out.errors.push(...zodErrors(file, r.line, parsed.error, field));
          return;
        }
        const s = parsed.data;
        const rid = rollout ?? s.rollout_id;
        const prefix = rid !== undefined && rid !== null ? `rollout-${String(rid)}/` : '';
        // Without an index a dumped Sample is named by its place in the dump, as the train dump's
        // `rollout_position` names it (slime/observability/train_data_utils.py `_build_dump_payload`).
        const base =
          s.index !== undefined && s.index !== null
            ? `${prefix}sample-${String(s.index)}`
            : wrapped && prefix
              ? `${prefix}position-${k}`
              : `${stem}:${r.line}${items.length > 1 ? `:${k}` : ''}`;
        const at = field ? `${field}.multimodal_inputs` : 'multimodal_inputs';
        const stated = readProcessorKwargs(s.multimodal_inputs, at);
        out.errors.push(...stated.problems.map((p) => ({ file, line: r.line, field: p.field, message: p.message })));
        out.trajectories.push(
          slimeTrajectory(s, { file, line: r.line, id: allocate(base), rollout, processor: stated.settings }),
        );
      });
    }
    return out;
  },
};
