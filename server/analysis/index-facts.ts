// What the server's run index (server/http/store.ts) keeps of one trajectory besides its record's
// own fields, computed where the trajectory was analyzed: a worker of a served run then sends
// these instead of the token streams (pipeline/wire.ts `forStore`), and the store never goes over
// the streams a second time.
import type { CheckedTrajectory, IndexFacts } from './checked.ts';
import type { TrajectoryMismatch } from './logprob-mismatch.ts';
import { trajectoryRatioBins } from './ratio-histogram.ts';
import type { Trajectory } from '../model/trajectory.ts';

/** `logprobs`: the trajectory's logprob mismatch under the default thresholds, as its report facts hold it. */
export function indexFacts(
  c: Omit<CheckedTrajectory, 'profile'>,
  logprobs: TrajectoryMismatch | null | undefined,
): IndexFacts {
  return {
    tokens: c.alignment.tokens.length,
    tokenSet: distinctTokens(c),
    mismatch: summaryMismatch(c.trajectory, logprobs),
  };
}

/** The per-trajectory numbers the run overview lists and its histogram sums (null without trainer logprobs). */
export function summaryMismatch(t: Trajectory, m: TrajectoryMismatch | null | undefined): IndexFacts['mismatch'] {
  const ratioBins = m ? trajectoryRatioBins(t) : undefined;
  if (!m || !ratioBins) return null;
  return {
    meanAbsDelta: m.meanAbsDelta,
    maxAbsDelta: m.maxAbsDelta,
    maxRatio: m.maxRatio,
    pastCapShare: m.pastCapShare,
    ratioBins,
  };
}

/** Every token id a token-id query can find the trajectory by: its canonical, recorded, sample and re-rendered streams. */
function distinctTokens(c: Omit<CheckedTrajectory, 'profile'>): Uint8Array {
  return packedTokenSet([
    c.alignment.tokens,
    ...c.trajectory.turns.flatMap((t) => [t.promptIds, t.generatedIds]),
    c.trajectory.sample?.tokens,
    c.rerender,
  ]);
}

/** Marks of the ids seen in one trajectory (reused: one trajectory at a time on this thread). */
let seenIds = new Uint8Array(1 << 18);
/** The distinct ids of that trajectory, in the order first seen (reused likewise). */
let distinct = new Uint32Array(1 << 12);

/**
 * The distinct token ids of a trajectory's streams, sorted, as deltas in LEB128 varints: about a
 * byte per id instead of four, for a token-id query without holding the streams (a run of 30k
 * trajectories of ~1k distinct ids each would otherwise hold 100+ MB of sets).
 */
export function packedTokenSet(streams: Iterable<readonly number[] | undefined>): Uint8Array {
  let count = 0;
  for (const stream of streams) {
    if (!stream) continue;
    for (let i = 0; i < stream.length; i++) {
      const id = stream[i]!;
      if (id >>> 0 !== id) continue; // not a uint32: NaN, negative, fractional, or 2^32 and past
      if (id >= seenIds.length) {
        const grown = new Uint8Array(Math.max(id + 1, seenIds.length * 2));
        grown.set(seenIds);
        seenIds = grown;
      }
      if (seenIds[id] === 0) {
        seenIds[id] = 1;
        if (count === distinct.length) {
          const grown = new Uint32Array(distinct.length * 2);
          grown.set(distinct);
          distinct = grown;
        }
        distinct[count++] = id;
      }
    }
  }
  // A typed array sorts numerically without a comparator call per comparison.
  const ids = distinct.subarray(0, count).sort();
  const out = new Uint8Array(count * 5);
  let at = 0;
  let last = 0;
  for (let k = 0; k < count; k++) {
    const id = ids[k]!;
    seenIds[id] = 0;
    let d = id - last;
    last = id;
    while (d >= 0x80) {
      out[at++] = (d & 0x7f) | 0x80;
      d = Math.floor(d / 0x80);
    }
    out[at++] = d;
  }
  return out.slice(0, at);
}

/** Whether `id` is in a set written by packedTokenSet. */
export function packedHasToken(set: Uint8Array, id: number): boolean {
  let value = 0;
  for (let at = 0; at < set.length; ) {
    let d = 0;
    let scale = 1;
    let b: number;
    do {
      b = set[at++]!;
      d += (b & 0x7f) * scale;
      scale *= 0x80;
    } while (b & 0x80);
    value += d;
    if (value >= id) return value === id;
  }
  return false;
}
