// verl's `trainer.rollout_data_dir` dumps: `{rollout_data_dir}/{global_steps}.jsonl`, one object per
// sample, `{"input", "output", "gts"?, "score", "step", ...reward_extra_infos}` (volcengine/verl:
// verl/trainer/ppo/ray_trainer.py::_dump_generations; same for `trainer.validation_data_dir`).
// `input`/`output` come from `tokenizer.batch_decode(..., skip_special_tokens=True)` of the padded
// prompts and responses (ray_trainer.py::_log_rollout_data), so every special token — turn
// markers, the end of turn, the vision span tokens and all image pads — is gone and no ids, masks,
// logprobs or images are saved (docs/reference/frameworks.md). Tokenizing the text again would not give the
// ids verl trained on, so these load as text with their limitations stated.
import { z } from 'zod';
import { Reward, type TrajectoryInput } from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { stepOf } from './step.ts';
import { importEachRecord, isObject } from './importer.ts';
import { fileStem, idAllocator, smallValues } from './turns-from-mask.ts';

export const VERL_DUMP_LIMITATION =
  "special tokens were stripped by verl's rollout_data_dir dump (skip_special_tokens=True): no token ids, loss mask, logprobs, images or image pads; " +
  'only the decoded input and output text, score and step are kept, so the prefix, re-render, sample, image and mask checks cannot run';

export const VerlDumpRecord = z
  .object({
    input: z.string(),
    output: z.string(),
    score: Reward.nullish(),
    step: z.number().int().nullish(),
    gts: z.unknown().optional(),
    request_id: z.string().nullish(),
  })
  .passthrough();
export type VerlDumpRecord = z.infer<typeof VerlDumpRecord>;

export function verlDumpTrajectory(
  d: VerlDumpRecord,
  where: { file: string; line: number; id: string },
): TrajectoryInput {
  const meta = smallValues({ step: d.step, input: d.input, gts: d.gts }, [], Infinity);
  Object.assign(meta, smallValues(d, ['input', 'output', 'score', 'step', 'gts', 'request_id']));
  return {
    id: where.id,
    source: { file: where.file, line: where.line, format: 'verl-dump' },
    turns: [{ generatedText: d.output }],
    images: [],
    // `token_level_scores.sum(-1).tolist()` through json.dumps: a NaN score is written bare, and
    // loads (an invalid_value finding on the reward).
    reward: d.score ?? undefined,
    step: stepOf(d.step),
    limitations: [VERL_DUMP_LIMITATION],
    meta,
  };
}

export const verlDumpImporter: Importer = {
  format: 'verl-dump',
  description:
    'verl rollout_data_dir dump, <step>.jsonl ({"input", "output", "score", "step", ...}; text only, special tokens stripped)',
  container: 'jsonl',
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (typeof record.input !== 'string' || typeof record.output !== 'string')
      return 'no string "input" and "output" (verl rollout_data_dir dump)';
    if (!('score' in record) && !('step' in record))
      return 'has "input"/"output" but neither "score" nor "step" (verl rollout_data_dir dump)';
    return true;
  },
  importRecords(records, { file }): ImportResult {
    const allocate = idAllocator();
    const stem = fileStem(file);
    return importEachRecord(records, file, VerlDumpRecord, (d, r) => {
      const base =
        d.request_id ?? (d.step !== undefined && d.step !== null ? `step-${d.step}:${r.line}` : `${stem}:${r.line}`);
      return verlDumpTrajectory(d, { file, line: r.line, id: allocate(base) });
    });
  },
};
