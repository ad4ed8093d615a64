import {
  COMMON_OPTIONS,
  COMMON_USAGE,
  parse,
  processorOptions,
  TRAINER_USAGE,
  trainerSidecars,
  UsageError,
  type Command,
} from '../command.ts';
import { runCheck, type TextOut } from '../check.ts';
import { workerCount } from '../command.ts';
import { MISMATCH_OPTIONS, MISMATCH_USAGE, mismatchThresholds } from '../mismatch-options.ts';
import { parseShard, type ShardSpec } from '../../pipeline/shard.ts';
import { AtomicFile, bufferedText } from '../../util/atomic-file.ts';

export const command: Command = {
  name: 'check',
  summary: 'check trajectories: prefix stability, re-render drift, image placeholders, masks, logprobs',
  usage: `rollscope check PATH... [--model M] [--format F] [--min-pixels N] [--max-pixels N] [--workers N] [--json]
                [--shard K/N] [--out FILE] [--findings-parquet FILE]

Exit status: 0 when no finding is an error and every record was read; 1 when a finding is an
error or a record could not be read; 2 on wrong arguments or a path that cannot be read.

${COMMON_USAGE}
  --workers N      analysis threads (default: one per idle core for runs of 512 MB or more, else none;
                   0 = main thread only)
  --all            list every trajectory (default: a summary by finding kind with a few examples each)
  --shard K/N      check only shard K of N (K from 0 to N−1: "$JOB_COMPLETION_INDEX/N", "$SLURM_ARRAY_TASK_ID/N");
                   whole trajectories and GRPO groups, by a stable hash; fold the reports with rollscope merge
                   (docs/distributed.md)
  --out FILE       write the report to FILE instead of stdout; FILE appears only when complete, and a rerun
                   writes the same bytes
  --findings-parquet FILE
                   also write one Parquet row per finding (docs/check-json.md, "Findings as Parquet")
${MISMATCH_USAGE}
${TRAINER_USAGE}`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      ...COMMON_OPTIONS,
      ...MISMATCH_OPTIONS,
      workers: { type: 'string' },
      all: { type: 'boolean' },
      trainer: { type: 'string', multiple: true },
      shard: { type: 'string' },
      out: { type: 'string', short: 'o' },
      'findings-parquet': { type: 'string' },
    });
    if (positionals.length === 0) throw new UsageError('check needs at least one PATH');
    let shard: ShardSpec | undefined;
    if (values.shard !== undefined) {
      try {
        shard = parseShard(values.shard);
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
    }
    const trainer = await trainerSidecars(values.trainer);
    const file = values.out !== undefined ? new AtomicFile(values.out) : undefined;
    const text = file ? bufferedText(file) : undefined;
    const out: TextOut = text ?? process.stdout;
    try {
      const status = await runCheck(
        positionals,
        {
          json: values.json === true,
          all: values.all === true,
          model: values.model,
          format: values.format,
          processor: processorOptions(values),
          // Unset: the pipeline starts workers only for a run big enough to repay them.
          workers: values.workers === undefined ? undefined : workerCount(values.workers),
          allowRemoteImages: values['allow-remote-images'] === true,
          mismatch: mismatchThresholds(values),
          ...(trainer.side ? { trainer: trainer.side } : {}),
          shard,
          findingsParquet: values['findings-parquet'],
        },
        out,
      );
      text?.flush();
      file?.commit();
      // A sidecar line that could not be read is a record that could not be read.
      return trainer.bad ? Math.max(status, 1) : status;
    } catch (e) {
      file?.discard();
      throw e;
    }
  },
};
