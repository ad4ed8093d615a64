import path from 'node:path';
import {
  COMMON_OPTIONS,
  COMMON_USAGE,
  parse,
  TRAINER_USAGE,
  trainerSidecars,
  UsageError,
  WHERE_USAGE,
  whereOption,
  type Command,
} from '../command.ts';
import { runCheck, type TextOut } from '../check.ts';
import { runOptions } from '../command.ts';
import { MISMATCH_OPTIONS, MISMATCH_USAGE, mismatchThresholds } from '../mismatch-options.ts';
import { parseShard, type ShardSpec } from '../../pipeline/shard.ts';
import { AtomicFile, bufferedText } from '../../util/atomic-file.ts';

export const command: Command = {
  name: 'check',
  summary: 'check trajectories: prefix stability, re-render drift, image placeholders, masks, logprobs',
  usage: `rollscope check PATH... [--model M] [--format F] [--min-pixels N] [--max-pixels N] [--workers N] [--json]
                [--where EXPR] [--shard K/N] [--out FILE] [--findings-parquet FILE] [--junit FILE]

Exit status: 0 when no finding is an error and every record was read; 1 when a finding is an
error or a record could not be read; 2 on wrong arguments or a path that cannot be read.

${COMMON_USAGE}
  --workers N      threads that read and analyze the input, each its own pieces of it (default: one per core
                   this process may use, for inputs of 32 MB or more; 0 = this thread alone); the report is
                   the same bytes on any number
  --all            list every trajectory (default: a summary by finding kind with a few examples each)
${WHERE_USAGE}
                   (the summary and the exit status are of those; --json adds "filter")
  --shard K/N      check only shard K of N (K from 0 to N−1: "$JOB_COMPLETION_INDEX/N", "$SLURM_ARRAY_TASK_ID/N");
                   reading only its share of the input (whole files, or line-aligned byte ranges of a JSONL
                   file); fold the reports with rollscope merge (docs/distributed.md)
  --out FILE       write the report to FILE instead of stdout; FILE appears only when complete, and a rerun
                   writes the same bytes
  --findings-parquet FILE
                   also write one Parquet row per finding (docs/check-json.md, "Findings as Parquet")
  --junit FILE     also write the report as JUnit XML for CI test reporters (GitLab, Jenkins, GitHub): one
                   test case per trajectory, error findings as failures, unreadable records as errors
                   (docs/junit.md); FILE appears only when complete
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
      junit: { type: 'string' },
      where: { type: 'string' },
    });
    const where = whereOption(values.where);
    if (positionals.length === 0) throw new UsageError('check needs at least one PATH');
    let shard: ShardSpec | undefined;
    if (values.shard !== undefined) {
      try {
        shard = parseShard(values.shard);
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
      // A shard's entries are completed by merge (run-wide keys, group findings), which a filter reads.
      if (where)
        throw new UsageError('--where reads a whole run (its keys and groups): check the shards without it and merge');
    }
    const trainer = await trainerSidecars(values.trainer);
    const file = values.out !== undefined ? new AtomicFile(values.out) : undefined;
    const text = file ? bufferedText(file) : undefined;
    const out: TextOut = text ?? process.stdout;
    if (
      values.junit !== undefined &&
      values.out !== undefined &&
      path.resolve(values.junit) === path.resolve(values.out)
    )
      throw new UsageError('--junit and --out name the same file');
    const junitFile = values.junit !== undefined ? new AtomicFile(values.junit) : undefined;
    const junit = junitFile ? bufferedText(junitFile) : undefined;
    try {
      const status = await runCheck(
        positionals,
        {
          json: values.json === true,
          all: values.all === true,
          ...runOptions(values),
          mismatch: mismatchThresholds(values),
          ...(trainer.side ? { trainer: trainer.side } : {}),
          shard,
          findingsParquet: values['findings-parquet'],
          junit,
          ...(where ? { where } : {}),
        },
        out,
      );
      text?.flush();
      file?.commit();
      junit?.flush();
      junitFile?.commit();
      // A sidecar line that could not be read is a record that could not be read.
      return trainer.bad ? Math.max(status, 1) : status;
    } catch (e) {
      file?.discard();
      junitFile?.discard();
      throw e;
    }
  },
};
