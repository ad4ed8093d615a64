// Rollout-vs-trainer logprob metrics in `check --json` (docs/check-json.md): per trajectory when it
// has trainer logprobs, and run totals in the summary.
import { z } from 'zod';
import {
  DEFAULT_THRESHOLDS,
  type MismatchThresholds,
  type RunMismatch,
  type TrajectoryMismatch,
} from '../analysis/logprob-mismatch.ts';

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
