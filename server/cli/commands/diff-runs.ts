import { COMMON_OPTIONS, COMMON_USAGE, parse, UsageError, type Command, runOptions } from '../command.ts';
import { DiffInputError, printDiff, runDiff } from '../diff-runs.ts';
import { MISMATCH_OPTIONS, MISMATCH_USAGE, mismatchThresholds } from '../mismatch-options.ts';
import { diffExitStatus, FAIL_ON, type FailOn } from '../../report/diff-runs.ts';

export const command: Command = {
  name: 'diff-runs',
  summary: 'run against run: what a fix, a checkpoint or an engine upgrade fixed and broke, pair by pair',
  usage: `rollscope diff-runs A B [--json] [--fail-on new-errors|new-findings|never] [--model M] [--format F]

A and B are runs (files or folders, checked as rollscope check reads them) or check --json reports.
Trajectories pair by id, else by their first prompt (several samples of one prompt in order); each
pair lists the findings that appeared (B) or vanished (A), the reward, response-length and logprob
mismatch changes; counts per step and overall; trajectories of one side only (docs/diff-runs.md).

Exit status: 0; 1 when --fail-on finds something: new-errors (default) when B has an error finding
of a kind (kind/cause) A has no error of, new-findings when B has a finding of a kind A has none of,
never; 2 on wrong arguments or a side that cannot be read.

${COMMON_USAGE}
  --fail-on WHEN   new-errors (default), new-findings or never
  --workers N      analysis threads for a side that is a run
${MISMATCH_USAGE}`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      ...COMMON_OPTIONS,
      ...MISMATCH_OPTIONS,
      'fail-on': { type: 'string', default: 'new-errors' },
      workers: { type: 'string' },
    });
    if (positionals.length !== 2) throw new UsageError('diff-runs takes two paths: A B');
    const failOn = values['fail-on'] as FailOn;
    if (!FAIL_ON.includes(failOn))
      throw new UsageError(`--fail-on takes ${FAIL_ON.join(', ')}, got "${values['fail-on']}"`);
    try {
      const diff = await runDiff(positionals[0]!, positionals[1]!, {
        ...runOptions(values),
        mismatch: mismatchThresholds(values),
      });
      if (values.json) process.stdout.write(`${JSON.stringify(diff)}\n`);
      else printDiff(diff, process.stdout);
      return diffExitStatus(diff, failOn);
    } catch (e) {
      if (e instanceof DiffInputError) {
        process.stderr.write(`rollscope diff-runs: ${e.message}\n`);
        return 2;
      }
      throw e;
    }
  },
};
