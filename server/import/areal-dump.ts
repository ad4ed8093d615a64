// AReaL's rollout dump (`dump_to_file`): `<log_path>/rollout/<tail_version>/<task_id>.jsonl`
// (`eval-rollout/` for evaluation), one object per sample, `{task_id, sample_idx, seqlen,
// prompt_len, head_version, tail_version, reward, prompt, completion}` (inclusionAI/AReaL:
// areal/infra/workflow_executor.py::_dump_trajectory; docs/reference/frameworks.md#areal). `prompt`/`completion` are
// decoded WITH special tokens (`skip_special_tokens=False`), split at `prompt_len = seqlen −
// sum(loss_mask)`; head/tail_version are min/max over all `versions` (prompt tokens are −1);
// samples whose last mask bit is 0 are not written. No ids, masks, logprobs or images are saved,
// and decoded text does not give back the ids AReaL trained on, so these load as text with their
// limitations stated; the pad counts the text still shows are kept in meta.
import { z } from 'zod';
import { Reward, type TrajectoryInput } from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { importEachRecord, isObject } from './importer.ts';
import type { PlaceholderIds } from '../families/family.ts';
import { idAllocator, smallValues } from './turns-from-mask.ts';

export const AREAL_DUMP_LIMITATION =
  "AReaL's rollout dump keeps only decoded text (special tokens kept): no token ids, loss mask, logprobs, images or image_grid_thw, " +
  'so the prefix, re-render, sample, image and mask checks cannot run; prompt_len and seqlen are recorded as stated. ' +
  'The prompt/completion split is at seqlen − sum(loss_mask), so in a multi-turn sample the completion also holds the tool and user turns between generations';

export const ArealDumpRecord = z
  .object({
    task_id: z.union([z.number().int(), z.string()]),
    sample_idx: z.number().int().nullish(),
    seqlen: z.number().int().nonnegative(),
    prompt_len: z.number().int().nonnegative(),
    head_version: z.number().int().nullish(),
    tail_version: z.number().int().nullish(),
    reward: Reward.nullish(),
    prompt: z.string(),
    completion: z.string(),
  })
  .passthrough();
export type ArealDumpRecord = z.infer<typeof ArealDumpRecord>;

const escaped = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The pad count of each image span in decoded text (special tokens kept), spelled as the model's tokens are. */
export function imagePadRuns(text: string, spelled: PlaceholderIds['imageText']): number[] {
  const span = new RegExp(
    `${escaped(spelled.begin + spelled.header)}((?:${escaped(spelled.pad)})*)${escaped(spelled.end)}`,
    'g',
  );
  return [...text.matchAll(span)].map((m) => m[1]!.length / spelled.pad.length);
}

export function arealDumpTrajectory(
  d: ArealDumpRecord,
  where: { file: string; line: number; id: string },
  vision: PlaceholderIds | undefined,
): TrajectoryInput {
  const pads = vision ? imagePadRuns(d.prompt + d.completion, vision.imageText) : [];
  const meta = smallValues(
    {
      task_id: d.task_id,
      sample_idx: d.sample_idx,
      seqlen: d.seqlen,
      prompt_len: d.prompt_len,
      head_version: d.head_version,
      tail_version: d.tail_version,
      prompt: d.prompt,
      image_pad_runs: pads.length > 0 ? pads : undefined,
    },
    [],
    Infinity,
  );
  return {
    id: where.id,
    source: { file: where.file, line: where.line, format: 'areal-dump' },
    turns: [{ generatedText: d.completion }],
    images: [],
    reward: d.reward ?? undefined,
    group: String(d.task_id),
    step: d.tail_version !== null && d.tail_version !== undefined && d.tail_version >= 0 ? d.tail_version : undefined,
    limitations: [AREAL_DUMP_LIMITATION],
    meta,
  };
}

export const arealDumpImporter: Importer = {
  format: 'areal-dump',
  description:
    'AReaL rollout dump, rollout/<version>/<task_id>.jsonl ({"task_id", "prompt", "completion", "prompt_len", "seqlen", "reward", ...}; text only)',
  container: 'jsonl',
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (!('task_id' in record)) return 'no "task_id" (AReaL rollout dump)';
    if (typeof record.prompt !== 'string' || typeof record.completion !== 'string')
      return 'has "task_id" but no string "prompt" and "completion" (AReaL rollout dump)';
    if (!('seqlen' in record) && !('prompt_len' in record))
      return 'has "task_id"/"prompt"/"completion" but neither "seqlen" nor "prompt_len" (AReaL rollout dump)';
    return true;
  },
  importRecords(records, ctx): ImportResult {
    const { file } = ctx;
    const allocate = idAllocator();
    // AReaL's dump names no model: the placeholders of the profile the run is checked with.
    const vision = ctx.visionIds(undefined);
    return importEachRecord(records, file, ArealDumpRecord, (d, r) => {
      const base = `task-${String(d.task_id)}/${d.sample_idx ?? `line-${r.line}`}`;
      return arealDumpTrajectory(d, { file, line: r.line, id: allocate(base) }, vision);
    });
  },
};
