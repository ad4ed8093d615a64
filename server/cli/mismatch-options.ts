// The flags that set the rollout-vs-trainer logprob thresholds (report/logprobs.ts holds the figures).
import { DEFAULT_THRESHOLDS, type MismatchThresholds } from '../analysis/logprob-mismatch.ts';
import { UsageError } from './command.ts';

export const MISMATCH_OPTIONS = {
  'max-logprob-delta': { type: 'string' },
  'mean-logprob-delta': { type: 'string' },
  'is-cap': { type: 'string' },
} as const;

export const MISMATCH_USAGE = `  --max-logprob-delta X   a trained token whose |trainer − rollout| logprob exceeds X nats is reported (default ${DEFAULT_THRESHOLDS.maxDelta})
  --mean-logprob-delta X  a trajectory whose mean |Δ| over trained tokens exceeds X nats is reported (default ${DEFAULT_THRESHOLDS.meanDelta})
  --is-cap C              truncated importance-sampling cap on exp(Δ) (default ${DEFAULT_THRESHOLDS.isCap})`;

function positive(name: string, v: string | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  const x = Number(v);
  if (!Number.isFinite(x) || x <= 0) throw new UsageError(`--${name} takes a positive number, got "${v}"`);
  return x;
}

/** The thresholds the flags set (defaults for the rest); `--is-cap` must exceed 1. */
export function mismatchThresholds(values: {
  'max-logprob-delta'?: string;
  'mean-logprob-delta'?: string;
  'is-cap'?: string;
}): MismatchThresholds {
  const isCap = positive('is-cap', values['is-cap'], DEFAULT_THRESHOLDS.isCap);
  if (isCap <= 1) throw new UsageError(`--is-cap must be greater than 1, got "${values['is-cap']}"`);
  return {
    maxDelta: positive('max-logprob-delta', values['max-logprob-delta'], DEFAULT_THRESHOLDS.maxDelta),
    meanDelta: positive('mean-logprob-delta', values['mean-logprob-delta'], DEFAULT_THRESHOLDS.meanDelta),
    isCap,
  };
}
