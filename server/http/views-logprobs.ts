// Rollout against trainer logprobs in the browser: one trajectory's per-token Δ, ratio and mask
// on the training sample's tokens, and the run's importance-ratio histogram. Everything is
// computed here from the shared analysis (logprob-mismatch.ts, ratio-histogram.ts); the app only
// draws it.
import type { CheckedTrajectory, RunOptions } from '../pipeline.ts';
import { alignedLogprobs, DEFAULT_THRESHOLDS, logprobMismatch } from '../analysis/logprob-mismatch.ts';
import { RATIO_BIN_COUNT, ratioBinRange } from '../analysis/ratio-histogram.ts';
import { findVisionSpans } from '../analysis/vision-spans.ts';
import type { LogprobView, RatioHistogram, TrajectorySummary } from './api.ts';
import { pieces } from './views.ts';

const finite = (x: number | null | undefined): number | null =>
  typeof x === 'number' && Number.isFinite(x) ? x : null;

/** Why a trajectory has no logprob view, or undefined when it has one. */
function unavailable(c: CheckedTrajectory): string | undefined {
  const s = c.trajectory.sample;
  if (!s) return 'this trajectory has no training sample: trainer logprobs live in a train dump or batch';
  if (!s.trainerLogprobs)
    return `the ${c.trajectory.source.format} record holds no trainer logprobs (log_probs / old_log_probs): load the train dump, or a native sidecar with them`;
  if (!s.logprobs) return 'the training sample holds trainer logprobs but no rollout logprobs to compare them with';
  return undefined;
}

/** A rollout logprob no sampler can give: NaN, ±∞, or above 0 (a probability over 1). */
const invalidLogprob = (x: number | null | undefined) => typeof x === 'number' && !(Number.isFinite(x) && x <= 0);

/**
 * Where the rollout's own logprobs are when the trainer's are not: the stored sample's (on its
 * tokens), else each turn's generated logprobs on the re-aligned stream. Undefined when neither.
 */
function rolloutOnly(
  c: CheckedTrajectory,
): { ids: number[]; values: (number | undefined)[]; mask: (number | null)[] } | undefined {
  const traj = c.trajectory;
  const s = traj.sample;
  if (s?.logprobs) {
    const n = s.tokens.length;
    const offset = s.maskScope === 'full' ? 0 : n - (s.responseLength ?? s.logprobs.length);
    const values = new Array<number | undefined>(n).fill(undefined);
    const mask = new Array<number | null>(n).fill(null);
    for (let i = 0; i < s.logprobs.length && offset + i < n; i++) {
      values[offset + i] = s.logprobs[i] ?? undefined;
      mask[offset + i] = s.lossMask ? (s.lossMask[i] ?? 0) : 1;
    }
    return { ids: s.tokens, values, mask };
  }
  const ids = c.alignment.tokens;
  if (ids.length === 0 || !traj.turns.some((t) => t.generatedLogprobs)) return undefined;
  const values = new Array<number | undefined>(ids.length).fill(undefined);
  const mask = new Array<number | null>(ids.length).fill(null);
  for (const span of c.alignment.turns) {
    const lps = traj.turns[span.turn]?.generatedLogprobs;
    for (let i = span.generated[0]; i < span.generated[1]; i++) {
      values[i] = lps?.[i - span.generated[0]] ?? undefined;
      mask[i] = c.alignment.lossMask[i] ?? 1;
    }
  }
  return { ids, values, mask };
}

export function logprobView(c: CheckedTrajectory, opts: RunOptions): LogprobView {
  const t = opts.mismatch ?? DEFAULT_THRESHOLDS;
  const traj = c.trajectory;
  const reason = unavailable(c) ?? null;
  // Without the trainer's logprobs, the rollout's alone (a NaN or a zero-filled turn is seen there).
  const alone = reason ? rolloutOnly(c) : undefined;
  const ids = alone?.ids ?? traj.sample?.tokens ?? [];
  const n = ids.length;
  const nulls = () => new Array<number | null>(n).fill(null);
  const view: LogprobView = {
    available: false,
    reason,
    rolloutOnly: alone !== undefined,
    invalid: [],
    ids: ids.slice(),
    ...pieces(c.profile, ids),
    rollout: nulls(),
    trainer: nulls(),
    delta: nulls(),
    ratio: nulls(),
    mask: nulls(),
    pastThreshold: [],
    turns: [],
    images: [],
    responseStart: alone
      ? Math.max(
          0,
          alone.mask.findIndex((m) => m !== null),
        )
      : n - (traj.sample?.responseLength ?? 0),
    thresholds: t,
    stats: null,
  };
  const a = reason ? undefined : alignedLogprobs(traj);
  if (alone) {
    alone.values.forEach((x, i) => {
      view.rollout[i] = finite(x);
      if (invalidLogprob(x)) view.invalid.push(i);
    });
    view.mask = alone.mask;
  } else if (reason || !a) return view;
  else {
    view.available = true;
    for (let i = 0; i < a.rollout.length && a.offset + i < n; i++) {
      const at = a.offset + i;
      const r = finite(a.rollout[i]);
      const p = finite(a.trainer[i]);
      view.rollout[at] = r;
      view.trainer[at] = p;
      view.mask[at] = a.mask ? (a.mask[i] ?? 0) : 1;
      if (invalidLogprob(a.rollout[i])) view.invalid.push(at);
      if (r === null || p === null) continue;
      const d = p - r;
      view.delta[at] = d;
      view.ratio[at] = Math.exp(d);
      if (view.mask[at] !== 0 && Math.abs(d) > t.maxDelta) view.pastThreshold.push(at);
    }
  }
  if (alone && !traj.sample?.logprobs)
    for (const span of c.alignment.turns)
      view.turns.push({ turn: span.turn, start: span.generated[0], end: span.generated[1] });
  else
    traj.turns.forEach((turn, k) => {
      const start = turn.promptIds?.length;
      const length = turn.generatedIds?.length ?? 0;
      if (start !== undefined && length > 0 && start < n)
        view.turns.push({ turn: k, start, end: Math.min(n, start + length) });
    });
  let image = 0;
  for (const s of findVisionSpans(ids, c.profile)) {
    if (s.kind !== 'image') continue;
    view.images.push({ image: image++, start: s.start >= 0 ? s.start : s.padStart, end: s.end >= 0 ? s.end + 1 : n });
  }
  if (view.available) view.stats = logprobMismatch(traj, t) ?? null;
  return view;
}

/** Whether a listed trajectory counts trained tokens in ratio bin `bin` (the `ratioBin` list filter). */
export const inRatioBin = (s: TrajectorySummary, bin: number): boolean =>
  s.mismatch?.ratioBins.some(([k, count]) => k === bin && count > 0) === true;

/** The run's importance ratios: tokens and trajectories per bin, summed from the listed summaries. */
export function ratioHistogram(summaries: readonly TrajectorySummary[], opts: RunOptions): RatioHistogram {
  const tokens = new Array<number>(RATIO_BIN_COUNT).fill(0);
  const trajectories = new Array<number>(RATIO_BIN_COUNT).fill(0);
  let withLogprobs = 0;
  for (const s of summaries) {
    if (!s.mismatch) continue;
    withLogprobs++;
    for (const [k, count] of s.mismatch.ratioBins) {
      tokens[k]! += count;
      if (count > 0) trajectories[k]!++;
    }
  }
  return {
    bins: tokens.map((count, bin) => {
      const [lo, hi] = ratioBinRange(bin);
      return { bin, lo, hi: Number.isFinite(hi) ? hi : null, tokens: count, trajectories: trajectories[bin]! };
    }),
    isCap: (opts.mismatch ?? DEFAULT_THRESHOLDS).isCap,
    trajectories: withLogprobs,
    tokens: tokens.reduce((x, y) => x + y, 0),
  };
}
