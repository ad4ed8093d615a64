// Rollout-vs-trainer logprob metrics in `check --json` (docs/check-json.md): per trajectory when it
// has trainer logprobs, run totals in the summary, and the flags that set the thresholds.
import { z } from 'zod';
import {
  DEFAULT_THRESHOLDS,
  type MismatchThresholds,
  type RunMismatch,
  type TrajectoryMismatch,
} from '../analysis/logprob-mismatch.ts';
import { UsageError } from './command.ts';

const Stats = {
  tokens: z.number().int(),
  meanAbsDelta: z.number(),
  maxAbsDelta: z.number(),
  maxAt: z.number().int(),
  k3: z.number(),
  maxRatio: z.number(),
  pastCapShare: z.number(),
  firstPastThreshold: z.number().int().nullable(),
};

export const TrajectoryLogprobs = z.object({
  ...Stats,
  turns: z.array(z.object({ turn: z.number().int(), ...Stats })),
  shift: z.object({ by: z.number().int(), meanAbsDeltaShifted: z.number() }).nullable(),
});
export type TrajectoryLogprobs = z.infer<typeof TrajectoryLogprobs>;

export const RunLogprobs = z.object({
  trajectories: z.number().int(),
  tokens: z.number().int(),
  meanAbsDelta: z.number(),
  maxAbsDelta: z.number(),
  k3: z.number(),
  maxRatio: z.number(),
  pastCapShare: z.number(),
  thresholds: z.object({ maxDelta: z.number(), meanDelta: z.number(), isCap: z.number() }),
});
export type RunLogprobs = z.infer<typeof RunLogprobs>;

const stats = (m: Omit<TrajectoryMismatch, 'turns' | 'shift'>) => ({
  tokens: m.tokens,
  meanAbsDelta: m.meanAbsDelta,
  maxAbsDelta: m.maxAbsDelta,
  maxAt: m.maxAt,
  k3: m.k3,
  maxRatio: m.maxRatio,
  pastCapShare: m.pastCapShare,
  firstPastThreshold: m.firstPastThreshold ?? null,
});

export function trajectoryLogprobs(m: TrajectoryMismatch): TrajectoryLogprobs {
  return {
    ...stats(m),
    turns: m.turns.map((t) => ({ turn: t.turn, ...stats(t) })),
    shift: m.shift ?? null,
  };
}

export function runLogprobs(r: RunMismatch, t: MismatchThresholds = DEFAULT_THRESHOLDS): RunLogprobs {
  return { ...r, thresholds: { ...t } };
}

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
