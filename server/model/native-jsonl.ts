// Writes rollscope's native format (docs/native-format.md): one `Trajectory` per JSONL line, read
// back by the native importer (server/import/native.ts). Non-finite logprobs are findings, not
// errors, so they must survive the trip: they are written as the bare `NaN`, `Infinity` and
// `-Infinity` that Python's json module writes and rollscope's reader accepts (JSON.stringify
// would turn them into `null`, which is not a number).
import type { Trajectory } from './trajectory.ts';

const MARK = '__rollscope_non_finite__';
const NON_FINITE = new RegExp(`"${MARK}(NaN|Infinity|-Infinity)"`, 'g');

/** One native JSONL record (no trailing newline). */
export function nativeJsonLine(t: Trajectory): string {
  return JSON.stringify(t, (_k, v: unknown) =>
    typeof v === 'number' && !Number.isFinite(v) ? `${MARK}${String(v)}` : v,
  ).replace(NON_FINITE, '$1');
}

/** A whole native JSONL file: one line per trajectory, each ending in a newline. */
export function nativeJsonl(trajectories: readonly Trajectory[]): string {
  return trajectories.map((t) => `${nativeJsonLine(t)}\n`).join('');
}
