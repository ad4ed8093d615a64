// Importance ratios exp(trainer − rollout) binned on a log scale, mask-aware as the mismatch
// metrics are (logprob-mismatch.ts): a token counts only when the loss trains on it and both
// logprobs are finite. Bins are 0.25 wide in log2(ratio) from 2^-4 to 2^4, with one open bin on
// each side, so ratio 1 sits on an edge and a cap of 2 (log2 = 1) is an edge too.
import type { Trajectory } from '../model/trajectory.ts';
import { alignedLogprobs } from './logprob-mismatch.ts';

export const RATIO_BIN_WIDTH = 0.25;
export const RATIO_BIN_MIN = -4;
export const RATIO_BIN_MAX = 4;
/** Bins: one below 2^MIN, the 0.25-wide bins, one at or above 2^MAX. */
export const RATIO_BIN_COUNT = (RATIO_BIN_MAX - RATIO_BIN_MIN) / RATIO_BIN_WIDTH + 2;

/** The bin of an importance ratio. */
export function ratioBin(ratio: number): number {
  const l = Math.log2(ratio);
  if (l < RATIO_BIN_MIN) return 0;
  if (l >= RATIO_BIN_MAX) return RATIO_BIN_COUNT - 1;
  return 1 + Math.floor((l - RATIO_BIN_MIN) / RATIO_BIN_WIDTH);
}

/** The ratio range [lo, hi) of bin `k` (0 and Infinity for the open ends). */
export function ratioBinRange(k: number): [number, number] {
  const lo = k === 0 ? 0 : 2 ** (RATIO_BIN_MIN + (k - 1) * RATIO_BIN_WIDTH);
  const hi = k === RATIO_BIN_COUNT - 1 ? Number.POSITIVE_INFINITY : 2 ** (RATIO_BIN_MIN + k * RATIO_BIN_WIDTH);
  return [lo, hi];
}

/** Token counts per bin of one trajectory, as sparse [bin, count] pairs in bin order (undefined without trainer logprobs). */
export function trajectoryRatioBins(traj: Trajectory): [number, number][] | undefined {
  const a = alignedLogprobs(traj);
  if (!a) return undefined;
  const counts = new Map<number, number>();
  const n = Math.min(a.rollout.length, a.trainer.length);
  for (let i = 0; i < n; i++) {
    if (a.mask && (a.mask[i] ?? 0) === 0) continue;
    const r = a.rollout[i];
    const p = a.trainer[i];
    if (typeof r !== 'number' || typeof p !== 'number' || !Number.isFinite(r) || !Number.isFinite(p)) continue;
    const k = ratioBin(Math.exp(p - r));
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return [...counts.entries()].sort((x, y) => x[0] - y[0]);
}
