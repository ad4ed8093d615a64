// slime / vime train debug dumps (`--save-debug-train-data`, written with torch.save; read through
// server/import/read/torch-records.ts). What the trainer trained on, per sample: `tokens`,
// `loss_masks`, the rollout's `rollout_log_probs`, the trainer's recomputed `log_probs`, the
// reference model's `ref_log_probs`, `advantages`, `response_lengths`, `total_lengths`, `rewards`.
// Two layouts have shipped (docs/reference/frameworks.md#slime-train-dumps):
//   v0.3.1     dict(rollout_id, rank, rollout_data) with one list per field (a list of per-sample
//              tensors, or plain lists), `sample_indices` naming each sample's rollout index
//              (THUDM/slime v0.3.1: slime/backends/megatron_utils/data.py `save_debug_train_data`)
//   version 2  {format_version: 2, rollout_id, rank, samples: [{sample_index, rollout_position,
//              data_parallel_rank, tokens, log_probs, …}], dp_shards: [...]} sorted to line up with
//              the rollout dump (THUDM/slime: slime/observability/train_data_utils.py `_build_dump_payload`)
// Each sample gets the id the rollout dump's sample has (`rollout-<id>/sample-<index>`), so
// `rollscope compare` joins the two sides without a key file.
import { z } from 'zod';
import type { TrajectoryInput } from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { stepOf } from './step.ts';
import { isObject } from './importer.ts';
import { zodErrors } from './read/validate.ts';
import { rewardValue } from './slime.ts';
import { GridList, LogprobValues, MaskValues, fileStem, idAllocator, turnsFromMask } from './turns-from-mask.ts';

const Int = z.number().int().nonnegative();
const TrainSample = z
  .object({
    tokens: z.array(Int),
    response_lengths: Int,
    total_lengths: Int.nullish(),
    loss_masks: MaskValues.nullish(),
    rollout_log_probs: LogprobValues.nullish(),
    log_probs: LogprobValues.nullish(),
    ref_log_probs: LogprobValues.nullish(),
    advantages: z.array(z.number()).nullish(),
    rewards: z.unknown().optional(),
    sample_index: z.union([z.number(), z.string()]).nullish(),
    rollout_position: z.number().int().nullish(),
    data_parallel_rank: z.number().int().nullish(),
    multimodal_train_inputs: z.object({ image_grid_thw: GridList.nullish() }).passthrough().nullish(),
  })
  .passthrough();
type TrainSample = z.infer<typeof TrainSample>;

/** v0.3.1's column layout → one dict per sample, with v2's key names. */
function samplesOfColumns(columns: Record<string, unknown>): Record<string, unknown>[] {
  const n = Array.isArray(columns.tokens) ? columns.tokens.length : 0;
  return Array.from({ length: n }, (_, i) => {
    const sample: Record<string, unknown> = {};
    for (const [key, column] of Object.entries(columns)) {
      if (!Array.isArray(column) || column.length !== n) continue;
      sample[key === 'sample_indices' ? 'sample_index' : key === 'partition' ? 'rollout_position' : key] = column[i];
    }
    return sample;
  });
}

function trainSamples(value: Record<string, unknown>): { samples: unknown[]; field: string } {
  if (Array.isArray(value.samples)) return { samples: value.samples, field: 'samples' };
  if (isObject(value.rollout_data)) return { samples: samplesOfColumns(value.rollout_data), field: 'rollout_data' };
  return { samples: [], field: '' };
}

function trainTrajectory(s: TrainSample, id: string, file: string, meta: Record<string, unknown>): TrajectoryInput {
  const turns = turnsFromMask({
    tokens: s.tokens,
    scope: 'response',
    responseLength: s.response_lengths,
    mask: s.loss_masks ?? undefined,
    logprobs: s.rollout_log_probs ?? undefined,
  });
  const reward = Array.isArray(s.rewards) ? undefined : rewardValue(s.rewards);
  return {
    id,
    source: { file, line: 1, format: 'slime-train' },
    turns,
    sample: {
      tokens: s.tokens,
      responseLength: s.response_lengths,
      lossMask: s.loss_masks ?? undefined,
      logprobs: s.rollout_log_probs ?? undefined,
      trainerLogprobs: s.log_probs ?? undefined,
      refLogprobs: s.ref_log_probs ?? undefined,
      advantages: s.advantages ?? undefined,
      maskScope: 'response',
      imageGridThw: s.multimodal_train_inputs?.image_grid_thw ?? undefined,
    },
    reward,
    step: stepOf(meta.rollout_id),
    advantage: s.advantages?.[0],
    limitations: [
      'a train dump holds token ids and per-token fields, not the images or messages: compare it with its rollout (rollscope compare)',
    ],
    meta: { ...meta, sample_index: s.sample_index ?? undefined, data_parallel_rank: s.data_parallel_rank ?? undefined },
  };
}

export const slimeTrainImporter: Importer = {
  format: 'slime-train',
  description:
    'slime / vime train debug dump (torch.save): {rollout_id, rank, rollout_data} (v0.3.1) or {format_version: 2, samples, dp_shards}',
  container: 'json',
  sniff(record) {
    if (!isObject(record)) return 'not an object';
    const { samples } = trainSamples(record);
    if (!('rollout_data' in record) && record.format_version === undefined)
      return 'no "rollout_data" or "format_version" (slime train dump)';
    const first = samples[0];
    if (!isObject(first)) return 'no training sample in "samples" / "rollout_data"';
    return Array.isArray(first.tokens) && typeof first.response_lengths === 'number'
      ? true
      : 'the first training sample has no "tokens" with a numeric "response_lengths"';
  },
  importRecords(records, { file }): ImportResult {
    const out: ImportResult = { trajectories: [], errors: [] };
    const allocate = idAllocator();
    for (const r of records) {
      if (!isObject(r.value)) continue;
      const { samples, field } = trainSamples(r.value);
      const rolloutId = r.value.rollout_id;
      const meta = { rollout_id: rolloutId, rank: r.value.rank, format_version: r.value.format_version ?? 1 };
      samples.forEach((value, k) => {
        const parsed = TrainSample.safeParse(value);
        if (!parsed.success) {
          out.errors.push(...zodErrors(file, r.line, parsed.error, `${field}.${k}`));
          return;
        }
        const s = parsed.data;
        const prefix = rolloutId !== undefined && rolloutId !== null ? `rollout-${String(rolloutId)}/` : '';
        // `rollout_position` is the sample's place in the rollout dump: its id there when it has no index.
        const base =
          s.sample_index !== undefined && s.sample_index !== null
            ? `${prefix}sample-${String(s.sample_index)}`
            : s.rollout_position !== undefined && s.rollout_position !== null && prefix
              ? `${prefix}position-${s.rollout_position}`
              : `${fileStem(file)}:${k}`;
        out.trajectories.push(trainTrajectory(s, allocate(base), file, meta));
      });
    }
    return out;
  },
};
