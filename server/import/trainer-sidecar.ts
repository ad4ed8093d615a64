// A trainer sidecar: JSONL, one line per trajectory, for trainers whose dumps rollscope does not read
// (docs/native-format.md, "Trainer sidecar"):
//   {"trajectory_id": "rollout-0/sample-3", "log_probs": [...], "ref_log_probs": [...], "advantages": [...]}
// `log_probs` are the trainer's logprobs of the stored sample's tokens, indexed like its rollout
// logprobs (over the response for slime/verl samples, over every token for AReaL/prime-rl). A bad line
// is an error naming file, line and field; the other lines still count.
import { z } from 'zod';
import type { ReadError } from '../model/trajectory.ts';
import type { TrainerSide } from '../model/trainer-side.ts';
import { readLines } from './read/lines.ts';
import { isReadError, parseRecordLine } from './read/record.ts';
import { validateRecord } from './read/validate.ts';
import { LogprobValues } from './turns-from-mask.ts';

export const TrainerSidecarRecord = z.object({
  trajectory_id: z.string().min(1),
  log_probs: LogprobValues,
  ref_log_probs: LogprobValues.nullish(),
  advantages: z.array(z.number()).nullish(),
});

export async function readTrainerSidecar(file: string): Promise<{ side: TrainerSide; errors: ReadError[] }> {
  const side: TrainerSide = {};
  const errors: ReadError[] = [];
  try {
    for await (const l of readLines(file)) {
      if (l.text.trim() === '') continue;
      const r = parseRecordLine(file, l);
      if (isReadError(r)) {
        errors.push(r);
        continue;
      }
      const parsed = validateRecord(TrainerSidecarRecord, r.value, file, r.line);
      if ('errors' in parsed) {
        errors.push(...parsed.errors);
        continue;
      }
      const rec = parsed.data;
      if (Object.hasOwn(side, rec.trajectory_id)) {
        errors.push({
          file,
          line: r.line,
          field: 'trajectory_id',
          message: `trajectory_id "${rec.trajectory_id}" appears twice; the first line counts`,
        });
        continue;
      }
      side[rec.trajectory_id] = {
        trainerLogprobs: rec.log_probs,
        ...(rec.ref_log_probs ? { refLogprobs: rec.ref_log_probs } : {}),
        ...(rec.advantages ? { advantages: rec.advantages } : {}),
      };
    }
  } catch (e) {
    errors.push({
      file,
      line: 0,
      message: `cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    });
  }
  return { side, errors };
}
