// Writes rollscope's native format (docs/native-format.md): one `Trajectory` per JSONL line, read
// back by the native importer (server/import/native.ts). Non-finite logprobs are findings, not
// errors, so they must survive the trip: they are written as the bare `NaN`, `Infinity` and
// `-Infinity` that Python's json module writes and rollscope's reader accepts (JSON.stringify
// would turn them into `null`, which is not a number).
import { FORMAT_RENDER_SEMANTICS, type Trajectory } from './trajectory.ts';

/**
 * The trajectory as the native format holds it: one read from a server's log says whose request
 * handling rendered it (`renderedWith`), which the native format alone would not tell.
 */
export function asNativeRecord(t: Trajectory): Trajectory {
  const semantics = FORMAT_RENDER_SEMANTICS[t.source.format];
  return t.renderedWith === undefined && semantics !== 'transformers' ? { ...t, renderedWith: semantics } : t;
}

/** One native JSONL record (no trailing newline). */
export function nativeJsonLine(trajectory: Trajectory): string {
  const t = asNativeRecord(trajectory);
  const plain = JSON.stringify(t);
  if (!plain.includes('null')) return plain; // JSON.stringify writes every non-finite number as null
  // Non-finite numbers go out as a marker string, then the quoted marker becomes the bare word.
  // The marker is one the record's own text does not contain, so no string value is touched.
  let n = 0;
  while (plain.includes(`~non-finite-${n}~`)) n++;
  const mark = `~non-finite-${n}~`;
  return JSON.stringify(t, (_k, v: unknown) =>
    typeof v === 'number' && !Number.isFinite(v) ? `${mark}${String(v)}` : v,
  ).replace(new RegExp(`"${mark}(NaN|Infinity|-Infinity)"`, 'g'), '$1');
}

/** A whole native JSONL file: one line per trajectory, each ending in a newline. */
export function nativeJsonl(trajectories: readonly Trajectory[]): string {
  return trajectories.map((t) => `${nativeJsonLine(t)}\n`).join('');
}
