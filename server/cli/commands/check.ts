import { COMMON_OPTIONS, COMMON_USAGE, parse, processorOptions, UsageError, type Command } from '../command.ts';
import { runCheck } from '../check.ts';
import { workerCount } from '../command.ts';

export const command: Command = {
  name: 'check',
  summary: 'check trajectories: prefix stability, re-render drift, image placeholders, masks, logprobs',
  usage: `rollscope check PATH... [--model M] [--format F] [--min-pixels N] [--max-pixels N] [--workers N] [--json]

Exit status: 0 when no finding is an error and every record was read; 1 when a finding is an
error or a record could not be read; 2 on wrong arguments or a path that cannot be read.

${COMMON_USAGE}
  --workers N      analysis threads (default: one per idle core for runs of 512 MB or more, else none;
                   0 = main thread only)
  --all            list every trajectory (default: a summary by finding kind with a few examples each)`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      ...COMMON_OPTIONS,
      workers: { type: 'string' },
      all: { type: 'boolean' },
    });
    if (positionals.length === 0) throw new UsageError('check needs at least one PATH');
    return runCheck(
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
      },
      process.stdout,
    );
  },
};
