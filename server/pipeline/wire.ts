// What crosses between the main thread and an analysis worker (analysis-pool.ts,
// analysis-worker.ts): the jobs, the replies, and the packing that moves number arrays without
// copying them.
import type { FormatName, Trajectory } from '../model/trajectory.ts';
import type { CheckedTrajectory, RunEvent } from '../analysis/checked.ts';
import { reportFacts } from '../analysis/report-facts.ts';
import { indexFacts } from '../analysis/index-facts.ts';
import { visionIdsOf, type ModelProfile, type VisionIds } from '../profiles/profile.ts';
import type { RecordLine } from '../import/stream.ts';
import type { RunOptions } from './run-options.ts';
import type { EncodedOutcome } from '../export/encoded.ts';
import type { ReadUnit } from './read-unit.ts';

/** A checked trajectory as it crosses threads: the profile by name (tokenizers are not transferable). */
export type WireChecked = Omit<CheckedTrajectory, 'profile'> & {
  profileName: string;
  /** What a manifest records of the profile (export/manifest.ts), so the main thread need not open it for an export. */
  profileFamily?: string;
  profileHashes?: ModelProfile['hashes'];
  /** The profile's notes (what its loader defaulted, the model it does not cover), when it has any. */
  profileNotes?: string[];
};
export type WireEvent =
  | { type: 'trajectory'; checked: WireChecked; exported?: EncodedOutcome }
  | Exclude<RunEvent, { type: 'trajectory' }>;

export type Job =
  | { kind: 'trajectory'; seq: number; trajectory: Trajectory; opts: RunOptions; roots: string[] }
  /** Read, import and analyze a unit of the input (pipeline/units.ts): its events come back in parts. */
  | { kind: 'unit'; seq: number; unit: ReadUnit; opts: RunOptions; roots: string[] }
  | {
      kind: 'lines';
      seq: number;
      file: string;
      format: FormatName;
      lines: RecordLine[];
      opts: RunOptions;
      roots: string[];
    };

export type Reply =
  | { seq: number; ok: true; kind: 'trajectory'; result: WireChecked; exported?: EncodedOutcome }
  | { seq: number; ok: true; kind: 'lines'; events: WireEvent[]; imported: number }
  /** Some of a unit's events, in order; then `unit-done` with the file's format. */
  | { seq: number; ok: true; kind: 'unit-part'; events: WireEvent[]; imported: number; readTo?: number }
  | { seq: number; ok: true; kind: 'unit-done'; format?: FormatName }
  | { seq: number; ok: false; message: string };

export function toWire(
  c: CheckedTrajectory,
  opts: Pick<RunOptions, 'reportOnly' | 'storeIndex' | 'mismatch' | 'exportRows'> = {},
): WireChecked {
  const { profile, ...rest } = c;
  return {
    ...(opts.storeIndex
      ? forStore(rest, opts, visionIdsOf(profile))
      : opts.reportOnly
        ? forReport(rest, opts, visionIdsOf(profile))
        : rest),
    profileName: profile.name,
    ...(profile.notes.length > 0 ? { profileNotes: profile.notes } : {}),
    ...(opts.exportRows ? { profileFamily: profile.family, profileHashes: profile.hashes } : {}),
  };
}

/**
 * What the export's thread reads of a trajectory whose row was built where it was analyzed
 * (RunOptions `exportRows`), and what a report reads of one: its key fields, meta and findings;
 * every long number list emptied and inline image bytes dropped (their hash and size stay).
 */
export function forExport<C extends Omit<CheckedTrajectory, 'profile'>>(c: C): C {
  const t = c.trajectory;
  const images = t.images.map((im) => (im.url?.startsWith('data:') ? { ...im, url: 'data:' } : im));
  return {
    ...c,
    trajectory: withoutStreams({ ...t, images }) as typeof t,
    alignment: withoutStreams(c.alignment) as typeof c.alignment,
    rerender: undefined,
  };
}

/**
 * What a report-only consumer (RunOptions `reportOnly`) is sent: the group member and logprob
 * figures computed here, and the trajectory and alignment with every long number list emptied
 * and inline image bytes dropped (their hash and size stay). Copying those to the main thread
 * costs more than the analysis gains from a second core; the report never reads them.
 */
export function forReport<C extends Omit<CheckedTrajectory, 'profile'>>(
  c: C,
  opts: Pick<RunOptions, 'mismatch'>,
  vision: VisionIds | undefined,
): C {
  // Already cut (a worker's importAndAnalyze with noStreams): its report was computed from the full trajectory.
  if (c.report) return c;
  return { ...forExport(c), report: reportFacts(c.trajectory, opts, vision) };
}

/**
 * What the server's store (RunOptions `storeIndex`) is sent: its run index's facts (the summary's
 * token count, packed token set and logprob figures) and the report facts (group member, response
 * tokens) computed here, and the trajectory cut as for a report. The store keeps no streams of a
 * trajectory it lists; it re-reads the record when one is asked for.
 */
export function forStore<C extends Omit<CheckedTrajectory, 'profile'>>(
  c: C,
  opts: Pick<RunOptions, 'mismatch'>,
  vision: VisionIds | undefined,
): C {
  if (c.index) return c;
  const report = c.report ?? reportFacts(c.trajectory, opts, vision);
  return { ...forExport(c), report, index: indexFacts(c, report.logprobs) };
}

/** A copy of `value` with each number list of PACK_MIN_LENGTH or more entries emptied. */
function withoutStreams(value: unknown): unknown {
  if (Array.isArray(value)) {
    if (value.length >= PACK_MIN_LENGTH && typeof value[0] === 'number') return [];
    return value.map(withoutStreams);
  }
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const k in value) out[k] = withoutStreams((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}

/** Arrays this long or longer that hold only numbers cross threads as transferred Float64Arrays. */
const PACK_MIN_LENGTH = 64;

/**
 * Structured cloning copies a number[] element by element, and the token streams, logprobs and
 * masks of a checked trajectory are most of its bytes: as Float64Arrays (exact for every double,
 * NaN and -0 included) they move without a copy and turn back into arrays in one tight loop.
 * Returns a new tree; `value` itself is not touched (it may share arrays with caches).
 */
export function packForWire(value: unknown, transfer: ArrayBuffer[]): unknown {
  // Typed arrays (an encoded export row's) are copied whole by postMessage as they are.
  if (ArrayBuffer.isView(value)) return value;
  if (Array.isArray(value)) {
    const n = value.length;
    if (n >= PACK_MIN_LENGTH && typeof value[0] === 'number') {
      const f = new Float64Array(n);
      let i = 0;
      for (; i < n; i++) {
        const x: unknown = value[i];
        if (typeof x !== 'number') break;
        f[i] = x;
      }
      if (i === n) {
        transfer.push(f.buffer as ArrayBuffer);
        return f;
      }
    }
    const out = new Array<unknown>(n);
    for (let i = 0; i < n; i++) out[i] = packForWire(value[i], transfer);
    return out;
  }
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const k in value) out[k] = packForWire((value as Record<string, unknown>)[k], transfer);
    return out;
  }
  return value;
}

function toNumbers(f: Float64Array): number[] {
  const out = new Array<number>(f.length);
  for (let i = 0; i < f.length; i++) out[i] = f[i]!;
  return out;
}

/**
 * The inverse of packForWire, in place on the freshly received tree. A packed array that is an
 * object's property turns back into a number[] only when first read (then stays one): a consumer
 * that reports findings never pays for the token streams it does not look at, here or in the
 * garbage collector. Reads, writes, spreads, JSON and zod all see plain arrays.
 */
export function unpackFromWire(value: unknown): unknown {
  if (value instanceof Float64Array) return toNumbers(value);
  if (ArrayBuffer.isView(value)) return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === 'object' && v !== null) value[i] = unpackFromWire(v);
    }
    return value;
  }
  if (typeof value === 'object' && value !== null) {
    const o = value as Record<string, unknown>;
    for (const k in o) {
      const v = o[k];
      if (v instanceof Float64Array) {
        const settle = (x: unknown) =>
          Object.defineProperty(o, k, { value: x, writable: true, enumerable: true, configurable: true });
        Object.defineProperty(o, k, {
          get: () => {
            const arr = toNumbers(v);
            settle(arr);
            return arr;
          },
          set: settle,
          enumerable: true,
          configurable: true,
        });
      } else if (typeof v === 'object' && v !== null && !ArrayBuffer.isView(v)) unpackFromWire(v);
    }
  }
  return value;
}
