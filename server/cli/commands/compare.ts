import { runCompare } from '../compare.ts';
import {
  COMMON_OPTIONS,
  COMMON_USAGE,
  parse,
  processorOptions,
  type Command,
  UsageError,
  workerCount,
} from '../command.ts';

export const command: Command = {
  name: 'compare',
  summary:
    'compare a rollout with what the trainer trained on: tokens, images, placeholders, masks, logprobs, positions',
  usage: `rollscope compare ROLLOUT TRAINED [--rollout PATH]... [--trained PATH]... [--model M] [--json]

ROLLOUT is what the engine generated (vLLM/SGLang logs, triplets, samples, rollout dumps); TRAINED
is what the trainer was given (an export, a slime/verl batch or train dump, prime-rl micro-batches).
Pairs are joined by trajectory id, then by sample index (docs/compare.md). Each difference is a
trained_mismatch finding naming the field (tokens, images, placeholders, loss_mask, logprobs,
position_ids) and the first token where it differs.

Exit status: 0 when every pair matches and every record was read; 1 when a pair differs or a record
could not be read; 2 on wrong arguments or a path that cannot be read.

${COMMON_USAGE}
  --rollout PATH   more rollout paths (repeatable)
  --trained PATH   more trained-side paths (repeatable)`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      ...COMMON_OPTIONS,
      rollout: { type: 'string', multiple: true },
      trained: { type: 'string', multiple: true },
      workers: { type: 'string' },
    });
    const rollout = [...(positionals[0] !== undefined ? [positionals[0]] : []), ...(values.rollout ?? [])];
    const trained = [...(positionals[1] !== undefined ? [positionals[1]] : []), ...(values.trained ?? [])];
    if (positionals.length > 2) throw new UsageError('compare takes two positional paths: ROLLOUT TRAINED');
    if (rollout.length === 0 || trained.length === 0)
      throw new UsageError('compare needs a ROLLOUT path and a TRAINED path');
    return runCompare(
      rollout,
      trained,
      {
        json: values.json === true,
        model: values.model,
        format: values.format,
        processor: processorOptions(values),
        workers: workerCount(values.workers),
        allowRemoteImages: values['allow-remote-images'] === true,
      },
      process.stdout,
    );
  },
};
