// What the trainer saw against what the rollout generated. The rollout side's canonical
// re-alignment (prompt once, generated ids verbatim, EOS-aware suffixes: realign.ts) is what a
// correct trainer batch holds; the trained side is whatever the batch, dump or export stored.
// Each difference is a `trained_mismatch` finding whose `field` names what differs, at the first
// index where it does (an absolute index into the trained sample's tokens). Pairs that match get none.
import type { Finding } from '../model/finding.ts';
import type { GridThw, PlaceholderRange, Trajectory } from '../model/trajectory.ts';
import { tokenDisplay, type ModelProfile } from '../profiles/profile.ts';
import { positionIds, positionMedia } from './position-ids.ts';
import type { Alignment } from './realign.ts';
import { padRuns } from './vision-spans.ts';

export const TRAINED_FIELDS = ['tokens', 'images', 'placeholders', 'loss_mask', 'logprobs', 'position_ids'] as const;
export type TrainedField = (typeof TRAINED_FIELDS)[number];

export interface RolloutSide {
  trajectory: Trajectory;
  alignment: Alignment;
}

export interface TrainedSide {
  trajectory: Trajectory;
  profile: ModelProfile;
}

/** A token id with its text, as a person reads it (a special token as `ID <|…|>`, a piece as `ID "⏎"`). */
function idText(profile: ModelProfile, id: number): string {
  const piece = tokenDisplay(profile, id);
  return piece === `#${id}` ? piece : /^<\|.*\|>$/.test(piece) ? `${id} ${piece}` : `${id} "${piece}"`;
}

/** Same length and only a few scattered positions differ: later positions still line up. */
function isSubstitution(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  let differing = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i] && ++differing > 16) return false;
  return true;
}

const num = (x: number | null | undefined) => (typeof x !== 'number' ? 'missing' : String(Number(x.toPrecision(6))));

/** float32 storage rounds a logprob by up to ~1e-7 relative; anything past this is a real difference. */
const LOGPROB_TOLERANCE = 1e-5;

function firstDifference<T>(a: readonly T[], b: readonly T[], same: (x: T, y: T) => boolean = Object.is): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (!same(a[i]!, b[i]!)) return i;
  return a.length === b.length ? -1 : n;
}

function mismatch(
  field: TrainedField,
  index: number,
  message: string,
  expected?: unknown,
  actual?: unknown,
  image?: number,
): Finding {
  return {
    kind: 'trained_mismatch',
    severity: 'error',
    field,
    turn: -1,
    index,
    stream: 'sample',
    ...(expected !== undefined ? { expected } : {}),
    ...(actual !== undefined ? { actual } : {}),
    ...(image !== undefined ? { image } : {}),
    message,
  };
}

/** A per-response array on the trained side, on the response's index space whatever its scope. */
function responseView<T>(t: Trajectory, values: readonly T[] | undefined): readonly T[] | undefined {
  const s = t.sample;
  if (!s || !values) return undefined;
  if (s.maskScope !== 'full') return values;
  return values.slice(s.tokens.length - (s.responseLength ?? 0));
}

export function compareTrained(rollout: RolloutSide, trained: TrainedSide): Finding[] {
  const out: Finding[] = [];
  const aligned = rollout.alignment;
  // The alignment's per-token arrays cover the whole stream; a trainer's cover the response.
  const expected = {
    ...aligned,
    lossMask: aligned.lossMask.slice(aligned.promptLength),
    logprobs: aligned.logprobs.slice(aligned.promptLength),
  };
  const sample = trained.trajectory.sample;
  if (!sample) return [mismatch('tokens', -1, 'the trained side holds no training sample (no token ids) to compare')];
  const promptLength = sample.tokens.length - (sample.responseLength ?? 0);

  // tokens
  const tokenAt = firstDifference(expected.tokens, sample.tokens);
  if (tokenAt >= 0) {
    out.push(
      mismatch(
        'tokens',
        tokenAt,
        tokenAt < Math.min(expected.tokens.length, sample.tokens.length)
          ? `the trained tokens differ from the rollout's at token ${tokenAt}: ${idText(trained.profile, sample.tokens[tokenAt]!)} where the rollout has ${idText(trained.profile, expected.tokens[tokenAt]!)}`
          : `the trained sample has ${sample.tokens.length} tokens, the rollout ${expected.tokens.length}: they part at token ${tokenAt}`,
        expected.tokens[tokenAt],
        sample.tokens[tokenAt],
      ),
    );
  }
  // After an inserted or dropped token every later position is shifted: positional fields are then
  // compared only before the first token difference, so one insertion is one finding, not five.
  const shifted = tokenAt >= 0 && !isSubstitution(expected.tokens, sample.tokens);
  const comparable = shifted ? tokenAt : Number.POSITIVE_INFINITY;
  const responseComparable = comparable - promptLength;
  if (tokenAt < 0 && sample.responseLength !== undefined && sample.responseLength !== expected.responseLength) {
    out.push(
      mismatch(
        'tokens',
        Math.min(promptLength, expected.promptLength),
        `the trained sample's response starts at token ${promptLength}, the rollout's at ${expected.promptLength} (response_length ${sample.responseLength} vs ${expected.responseLength})`,
        expected.responseLength,
        sample.responseLength,
      ),
    );
  }

  // images: count, then bytes (sha256) where the trained side carries them
  const rolloutImages = rollout.trajectory.images;
  const trainedImages = trained.trajectory.images;
  const trainedGrids = sample.imageGridThw;
  const carriesImages = trainedImages.length > 0 || trained.trajectory.source.format !== 'slime-train';
  const trainedCount = carriesImages ? trainedImages.length : (trainedGrids?.length ?? rolloutImages.length);
  if (trainedCount !== rolloutImages.length) {
    out.push(
      mismatch(
        'images',
        -1,
        `the rollout had ${rolloutImages.length} image(s), the trained side ${trainedCount}: ${trainedCount < rolloutImages.length ? 'images were dropped between rollout and trainer' : 'the trained side has images the rollout did not'}`,
        rolloutImages.length,
        trainedCount,
      ),
    );
  } else if (carriesImages) {
    rolloutImages.forEach((img, k) => {
      const other = trainedImages[k];
      if (img.sha256 && other?.sha256 && img.sha256 !== other.sha256) {
        out.push(
          mismatch(
            'images',
            -1,
            `image ${k} differs: sha256 ${other.sha256.slice(0, 12)}… on the trained side, ${img.sha256.slice(0, 12)}… in the rollout`,
            img.sha256,
            other.sha256,
            k,
          ),
        );
      }
    });
  }

  // placeholders: pad runs of the trained tokens and the stated grids
  const profile = trained.profile;
  const before = (r: PlaceholderRange) => r.offset + r.length <= comparable;
  const runs: PlaceholderRange[] = padRuns(sample.tokens, profile.ids).filter(before);
  const runAt = firstDifference(
    expected.placeholderRanges.filter(before),
    runs,
    (x, y) => x.offset === y.offset && x.length === y.length,
  );
  if (runAt >= 0) {
    const want = expected.placeholderRanges.filter(before)[runAt];
    const got = runs[runAt];
    out.push(
      mismatch(
        'placeholders',
        Math.min(want?.offset ?? Number.POSITIVE_INFINITY, got?.offset ?? Number.POSITIVE_INFINITY),
        want && got
          ? `image ${runAt}'s pad run is ${got.length} tokens at ${got.offset} on the trained side, ${want.length} at ${want.offset} in the rollout`
          : `the trained tokens have ${runs.length} pad run(s), the rollout ${expected.placeholderRanges.length}`,
        want,
        got,
        runAt,
      ),
    );
  }
  const expectedGrids = expected.imageGridThw.filter((g): g is GridThw => g !== null);
  // A grid list of another length is the image-count difference reported above, not a second one.
  if (trainedGrids && trainedGrids.length === expectedGrids.length) {
    const gridAt = firstDifference(
      expectedGrids,
      trainedGrids,
      (x, y) => x[0] === y[0] && x[1] === y[1] && x[2] === y[2],
    );
    if (gridAt >= 0) {
      out.push(
        mismatch(
          'placeholders',
          expected.placeholderRanges[gridAt]?.offset ?? -1,
          `image ${gridAt}'s image_grid_thw is ${JSON.stringify(trainedGrids[gridAt] ?? null)} on the trained side, ${JSON.stringify(expectedGrids[gridAt] ?? null)} in the rollout`,
          expectedGrids[gridAt],
          trainedGrids[gridAt],
          gridAt,
        ),
      );
    }
  }

  // loss mask over the response (a missing mask means "all 1" in slime)
  const mask = (responseView(trained.trajectory, sample.lossMask) ?? expected.lossMask.map(() => 1)).slice(
    0,
    responseComparable,
  );
  const maskAt = firstDifference(expected.lossMask.slice(0, responseComparable), mask);
  if (maskAt >= 0) {
    out.push(
      mismatch(
        'loss_mask',
        promptLength + maskAt,
        maskAt < Math.min(mask.length, expected.lossMask.length)
          ? `the trained loss mask is ${mask[maskAt]} at token ${promptLength + maskAt}, where the rollout ${expected.lossMask[maskAt] === 1 ? 'generated the token (1)' : 'did not generate it (0)'}`
          : `the trained loss mask covers ${mask.length} response tokens, the rollout's ${expected.lossMask.length}`,
        expected.lossMask[maskAt],
        mask[maskAt],
      ),
    );
  }

  // logprobs the trainer was given as the rollout's, on generated tokens only
  const logprobs = responseView(trained.trajectory, sample.logprobs);
  if (logprobs && expected.logprobs.length > 0) {
    let at = -1;
    const n = Math.min(Math.max(logprobs.length, expected.logprobs.length), responseComparable);
    for (let i = 0; i < n; i++) {
      if (expected.lossMask[i] !== 1) continue;
      const a = expected.logprobs[i];
      const b = logprobs[i];
      if (a === undefined || typeof b !== 'number' || !(Math.abs(a - b) <= LOGPROB_TOLERANCE)) {
        at = i;
        break;
      }
    }
    if (at >= 0) {
      out.push(
        mismatch(
          'logprobs',
          promptLength + at,
          `the trained side's rollout logprob of token ${promptLength + at} is ${num(logprobs[at])}, the rollout's ${num(expected.logprobs[at])}`,
          expected.logprobs[at],
          logprobs[at],
        ),
      );
    }
  }

  // position ids, when the trained side stored them: against the family's computation (mRoPE for Qwen) on its own tokens
  const stored = sample.positionIds;
  if (stored && stored.length > 0) {
    let rows: number[][] | undefined;
    try {
      // The trained side's own grids when they cover its pad runs; else the rollout's (a batch that
      // lost its grids is reported as such above; its positions are still checked against the truth).
      const grids =
        trainedGrids && trainedGrids.length === padRuns(sample.tokens, profile.ids).length
          ? trainedGrids
          : expectedGrids;
      rows = positionIds(
        profile,
        sample.tokens,
        positionMedia(profile, sample.tokens, grids),
        stored.length === 4 ? 'verl' : 'model',
      );
    } catch (e) {
      out.push(
        mismatch('position_ids', -1, `position ids cannot be computed for the trained tokens: ${(e as Error).message}`),
      );
    }
    if (rows) {
      let at = -1;
      let row = -1;
      for (let r = 0; r < rows.length; r++) {
        const i = firstDifference(rows[r]!, stored[r] ?? []);
        if (i >= 0 && (at < 0 || i < at)) {
          at = i;
          row = r;
        }
      }
      if (stored.length !== rows.length) {
        out.push(
          mismatch('position_ids', -1, `the trained position_ids have ${stored.length} rows, ${rows.length} expected`),
        );
      } else if (at >= 0) {
        out.push(
          mismatch(
            'position_ids',
            at,
            `position_ids row ${row} is ${stored[row]?.[at] ?? 'missing'} at token ${at}, the computation gives ${rows[row]![at]}`,
            rows[row]![at],
            stored[row]?.[at],
          ),
        );
      }
    }
  }
  return out;
}

/** Keys a trajectory is joined on, in order of preference (docs/compare.md). */
export interface JoinKeys {
  id: string;
  sampleIndex?: string;
}

export function joinKeys(t: Trajectory): JoinKeys {
  const index = t.meta?.index ?? t.meta?.sample_index;
  return {
    id: t.id,
    ...(index !== undefined && index !== null ? { sampleIndex: String(index) } : {}),
  };
}

/**
 * Pairs of rollout and trained trajectories: by id, then the rest by sample index (slime `index` ↔ a
 * train dump's `sample_index`). A key shared by several trajectories on one side pairs nothing.
 */
export function joinSides<A, B>(
  rollout: readonly A[],
  trained: readonly B[],
  keyA: (a: A) => JoinKeys,
  keyB: (b: B) => JoinKeys,
): { pairs: [A, B][]; onlyRollout: A[]; onlyTrained: B[] } {
  const pairs: [A, B][] = [];
  let restA = [...rollout];
  let restB = [...trained];
  const by = (key: (k: JoinKeys) => string | undefined) => {
    const index = new Map<string, B[]>();
    for (const b of restB) {
      const k = key(keyB(b));
      if (k !== undefined) index.set(k, [...(index.get(k) ?? []), b]);
    }
    const keptA: A[] = [];
    const used = new Set<B>();
    for (const a of restA) {
      const k = key(keyA(a));
      const candidates = k !== undefined ? (index.get(k) ?? []).filter((b) => !used.has(b)) : [];
      if (candidates.length === 1 || (candidates.length > 0 && index.get(k!)!.length === 1)) {
        pairs.push([a, candidates[0]!]);
        used.add(candidates[0]!);
      } else keptA.push(a);
    }
    restA = keptA;
    restB = restB.filter((b) => !used.has(b));
  };
  by((k) => k.id);
  by((k) => k.sampleIndex);
  return { pairs, onlyRollout: restA, onlyTrained: restB };
}
