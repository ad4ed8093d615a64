// Rollout against trainer logprobs, token by token, mask-aware: only tokens the loss trains on
// (loss mask 1) count, because masked tokens (tool output, template scaffolding) are scored by
// nobody at rollout time and show tens of nats of divergence that means nothing (miles#2476).
// Definitions (docs/reference/logprob-mismatch.md):
//   Δ_i      trainer_i − rollout_i
//   ratio_i  exp(Δ_i), the per-token importance weight π_train/π_rollout
//   k3       mean of (ratio_i − 1) − Δ_i, Schulman's low-variance estimator of KL(π_rollout ‖ π_train)
//            with tokens sampled from the rollout policy
//   past cap share of tokens whose ratio exceeds the truncated-IS cap (or falls below 1/cap)
// A one-position shift between the arrays (ms-swift#8196) is told apart from drift by comparing
// the mean |Δ| unshifted with the mean |Δ| against the trainer array moved by one position.
import type { Finding } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';

export interface MismatchThresholds {
  /** A token whose |Δ| exceeds this is "past the threshold" (nats). */
  maxDelta: number;
  /** A trajectory whose mean |Δ| over trained tokens exceeds this is reported (nats). */
  meanDelta: number;
  /** Truncated importance sampling cap on exp(Δ). */
  isCap: number;
}

export const DEFAULT_THRESHOLDS: MismatchThresholds = { maxDelta: 1, meanDelta: 0.1, isCap: 2 };

export interface MismatchStats {
  /** Tokens compared: loss mask 1 and both logprobs finite. */
  tokens: number;
  meanAbsDelta: number;
  maxAbsDelta: number;
  /** Absolute index in the sample's tokens of the largest |Δ|. */
  maxAt: number;
  k3: number;
  maxRatio: number;
  minRatio: number;
  /** Share of compared tokens with exp(Δ) > cap or < 1/cap. */
  pastCapShare: number;
  /** Absolute index of the first token whose |Δ| exceeds `maxDelta`, if any. */
  firstPastThreshold?: number;
}

export interface TurnMismatch extends MismatchStats {
  turn: number;
}

export interface TrajectoryMismatch extends MismatchStats {
  turns: TurnMismatch[];
  /** Set when the rollout logprobs agree far better with the trainer's moved by one position. */
  shift?: { by: 1 | -1; meanAbsDeltaShifted: number };
}

/** The per-token arrays of a sample on one index space: absolute token positions of the response. */
export interface AlignedLogprobs {
  /** Absolute token index of entry 0. */
  offset: number;
  rollout: readonly (number | null)[];
  trainer: readonly (number | null)[];
  /** Loss mask on the same entries (absent = all trained). */
  mask?: readonly number[];
}

export function alignedLogprobs(traj: Trajectory): AlignedLogprobs | undefined {
  const s = traj.sample;
  if (!s?.logprobs || !s.trainerLogprobs) return undefined;
  const offset = s.maskScope === 'full' ? 0 : s.tokens.length - (s.responseLength ?? 0);
  return { offset, rollout: s.logprobs, trainer: s.trainerLogprobs, mask: s.lossMask };
}

const usable = (x: number | null | undefined): x is number => typeof x === 'number' && Number.isFinite(x);

function statsOver(a: AlignedLogprobs, from: number, to: number, t: MismatchThresholds): MismatchStats {
  let n = 0;
  let sumAbs = 0;
  let maxAbs = 0;
  let maxAt = -1;
  let k3 = 0;
  let maxRatio = 0;
  let minRatio = Number.POSITIVE_INFINITY;
  let past = 0;
  let firstPast: number | undefined;
  for (let i = from; i < to; i++) {
    if (a.mask && (a.mask[i] ?? 0) === 0) continue;
    const r = a.rollout[i];
    const p = a.trainer[i];
    if (!usable(r) || !usable(p)) continue;
    const delta = p - r;
    const abs = Math.abs(delta);
    const ratio = Math.exp(delta);
    n++;
    sumAbs += abs;
    if (abs > maxAbs || maxAt < 0) {
      maxAbs = abs;
      maxAt = a.offset + i;
    }
    k3 += ratio - 1 - delta;
    maxRatio = Math.max(maxRatio, ratio);
    minRatio = Math.min(minRatio, ratio);
    if (ratio > t.isCap || ratio < 1 / t.isCap) past++;
    if (firstPast === undefined && abs > t.maxDelta) firstPast = a.offset + i;
  }
  return {
    tokens: n,
    meanAbsDelta: n ? sumAbs / n : 0,
    maxAbsDelta: maxAbs,
    maxAt,
    k3: n ? k3 / n : 0,
    maxRatio: n ? maxRatio : 1,
    minRatio: n ? minRatio : 1,
    pastCapShare: n ? past / n : 0,
    ...(firstPast !== undefined ? { firstPastThreshold: firstPast } : {}),
  };
}

/** Mean |Δ| with the trainer array moved by `by` positions (trainer[i + by] against rollout[i]). */
function meanAbsShifted(a: AlignedLogprobs, by: 1 | -1): number {
  let n = 0;
  let sum = 0;
  for (let i = 0; i < a.rollout.length; i++) {
    if (a.mask && (a.mask[i] ?? 0) === 0) continue;
    const r = a.rollout[i];
    const p = a.trainer[i + by];
    if (!usable(r) || !usable(p)) continue;
    n++;
    sum += Math.abs(p - r);
  }
  return n ? sum / n : Number.POSITIVE_INFINITY;
}

/**
 * Turn ranges on the aligned arrays: each turn's generated run, found from the turns' prompt
 * lengths (a turn's generated ids start where its prompt ends).
 */
function turnRanges(traj: Trajectory, a: AlignedLogprobs): { turn: number; from: number; to: number }[] {
  const out: { turn: number; from: number; to: number }[] = [];
  traj.turns.forEach((turn, k) => {
    const start = (turn.promptIds?.length ?? -1) - a.offset;
    const length = turn.generatedIds?.length ?? 0;
    if (start < 0 || length === 0) return;
    out.push({ turn: k, from: start, to: Math.min(start + length, a.rollout.length) });
  });
  return out;
}

export function logprobMismatch(
  traj: Trajectory,
  t: MismatchThresholds = DEFAULT_THRESHOLDS,
): TrajectoryMismatch | undefined {
  const a = alignedLogprobs(traj);
  if (!a) return undefined;
  const whole = statsOver(a, 0, Math.min(a.rollout.length, a.trainer.length), t);
  const turns = turnRanges(traj, a).map(({ turn, from, to }) => ({ turn, ...statsOver(a, from, to, t) }));
  const result: TrajectoryMismatch = { ...whole, turns };
  if (whole.tokens >= 4 && whole.meanAbsDelta > 1e-3) {
    for (const by of [1, -1] as const) {
      const shifted = meanAbsShifted(a, by);
      if (shifted < whole.meanAbsDelta / 4 && (!result.shift || shifted < result.shift.meanAbsDeltaShifted)) {
        result.shift = { by, meanAbsDeltaShifted: shifted };
      }
    }
  }
  return result;
}

const nats = (x: number) => `${x.toFixed(x >= 0.1 ? 2 : 4)} nats`;

/**
 * `logprob_shift` (error) and `logprob_mismatch` (warning) findings for one trajectory;
 * `turnOf` names the turn a sample token belongs to (positions.ts `sampleTurnOf`), else the
 * mismatch is put on the turn with the largest |Δ|.
 */
export function mismatchFindings(
  m: TrajectoryMismatch | undefined,
  t: MismatchThresholds = DEFAULT_THRESHOLDS,
  turnOf?: (index: number) => number,
): Finding[] {
  if (!m || m.tokens === 0) return [];
  if (m.shift) {
    return [
      {
        kind: 'logprob_shift',
        severity: 'error',
        turn: -1,
        index: -1,
        stream: 'sample',
        expected: nats(m.meanAbsDelta),
        actual: nats(m.shift.meanAbsDeltaShifted),
        message: `the rollout logprobs line up with the trainer's ${m.shift.by === 1 ? 'one position later' : 'one position earlier'}: mean |Δ| ${nats(m.meanAbsDelta)} as stored, ${nats(m.shift.meanAbsDeltaShifted)} shifted by one; one of the arrays is off by a position, so every importance ratio is computed against the wrong token`,
      },
    ];
  }
  const findings: Finding[] = [];
  const worstTurn = m.turns.reduce<TurnMismatch | undefined>(
    (w, x) => (!w || x.maxAbsDelta > w.maxAbsDelta ? x : w),
    undefined,
  );
  if (m.firstPastThreshold !== undefined || m.meanAbsDelta > t.meanDelta) {
    const at = m.firstPastThreshold ?? m.maxAt;
    findings.push({
      kind: 'logprob_mismatch',
      severity: 'warning',
      turn: turnOf ? turnOf(at) : (worstTurn?.turn ?? -1),
      index: at,
      stream: 'sample',
      expected: `|Δ| <= ${t.maxDelta} nats per token, mean <= ${t.meanDelta}`,
      actual: {
        meanAbsDelta: m.meanAbsDelta,
        maxAbsDelta: m.maxAbsDelta,
        k3: m.k3,
        maxRatio: m.maxRatio,
        pastCapShare: m.pastCapShare,
      },
      message:
        m.firstPastThreshold !== undefined
          ? `trainer and rollout logprobs differ by ${nats(m.maxAbsDelta)} at most (first past ${t.maxDelta} nats at token ${m.firstPastThreshold}); mean |Δ| ${nats(m.meanAbsDelta)}, k3 KL ${m.k3.toExponential(2)}, ${(m.pastCapShare * 100).toFixed(1)}% of trained tokens past the IS cap ${t.isCap}`
          : `trainer and rollout logprobs drift: mean |Δ| ${nats(m.meanAbsDelta)} over ${m.tokens} trained tokens (threshold ${t.meanDelta}), k3 KL ${m.k3.toExponential(2)}`,
    });
  }
  return findings;
}

/** Run totals: token-weighted means, maxima, and the importance-ratio histogram (log2 bins). */
export interface RunMismatch {
  trajectories: number;
  tokens: number;
  meanAbsDelta: number;
  maxAbsDelta: number;
  k3: number;
  maxRatio: number;
  pastCapShare: number;
}

export function runMismatch(all: readonly (TrajectoryMismatch | undefined)[]): RunMismatch | undefined {
  const ms = all.filter((m): m is TrajectoryMismatch => m !== undefined && m.tokens > 0);
  if (ms.length === 0) return undefined;
  const tokens = ms.reduce((s, m) => s + m.tokens, 0);
  const weighted = (f: (m: TrajectoryMismatch) => number) => ms.reduce((s, m) => s + f(m) * m.tokens, 0) / tokens;
  return {
    trajectories: ms.length,
    tokens,
    meanAbsDelta: weighted((m) => m.meanAbsDelta),
    maxAbsDelta: Math.max(...ms.map((m) => m.maxAbsDelta)),
    k3: weighted((m) => m.k3),
    maxRatio: Math.max(...ms.map((m) => m.maxRatio)),
    pastCapShare: weighted((m) => m.pastCapShare),
  };
}
