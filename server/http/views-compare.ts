// One rollout trajectory against the trained trajectory joined to it (serve --trained): each
// compared field's state and the values on both sides around its first difference, the tokens
// aligned with the first difference in words (idsDiff, as the diff view does), the images of both
// sides with their sha256, and the pad runs with their grids. Findings come from the one
// comparison `rollscope compare` runs (analysis/compare.ts).
import { TRAINED_FIELDS, type TrainedField } from '../analysis/compare.ts';
import { padRuns } from '../analysis/vision-spans.ts';
import type { Finding } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import type { CheckedTrajectory } from '../pipeline.ts';
import { tokenDisplay } from '../profiles/profile.ts';
import type { CompareField, CompareImage, ComparePair } from './api.ts';
import { compareSide, comparePair } from './trained-side.ts';
import { idsDiff } from './views.ts';

const WINDOW = 5;

/** A per-response array of the trained sample at an absolute token index (undefined outside it). */
function trainedAt(
  t: Trajectory,
  values: readonly (number | null)[] | undefined,
  i: number,
): number | null | undefined {
  const s = t.sample;
  if (!s || !values) return undefined;
  const offset = s.maskScope === 'full' ? 0 : s.tokens.length - (s.responseLength ?? 0);
  return i >= offset ? values[i - offset] : undefined;
}

const show = (x: number | null | undefined) => (typeof x !== 'number' ? '—' : String(Number(x.toPrecision(5))));

function fieldState(
  field: TrainedField,
  finding: Finding | undefined,
  rollout: CheckedTrajectory,
  trained: CheckedTrajectory,
  /** Where an inserted or dropped token shifts every later position (positional fields stop there). */
  shiftedFrom: number | undefined,
): CompareField {
  const s = trained.trajectory.sample;
  const a = rollout.alignment;
  const carried: Record<TrainedField, boolean> = {
    tokens: s !== undefined,
    images:
      trained.trajectory.images.length > 0 ||
      trained.trajectory.source.format !== 'slime-train' ||
      s?.imageGridThw !== undefined,
    placeholders: s !== undefined,
    loss_mask: s?.lossMask !== undefined,
    logprobs: s?.logprobs !== undefined,
    position_ids: (s?.positionIds?.length ?? 0) > 0,
  };
  const what: Record<TrainedField, string> = {
    tokens: 'the trained tokens are the rollout canonical tokens',
    images:
      trained.trajectory.images.length > 0
        ? `${trained.trajectory.images.length} image(s) on both sides, the same bytes where both state a sha256`
        : carried.images
          ? `the trained side holds no image bytes: its image_grid_thw counts ${s?.imageGridThw?.length ?? 0}, as many as the rollout's images`
          : 'the trained side holds neither image bytes nor image_grid_thw: its images cannot be compared',
    placeholders: 'the same pad runs and image_grid_thw',
    loss_mask: carried.loss_mask
      ? 'the trained loss mask is 1 exactly on the generated tokens'
      : 'the trained side has no loss mask (read as all 1: it agrees)',
    logprobs: carried.logprobs
      ? 'the rollout logprobs the trainer was given are the ones generated'
      : 'the trained side carries no rollout logprobs',
    position_ids: carried.position_ids
      ? 'the stored position_ids are the mRoPE computation on the trained tokens'
      : 'the trained side stores no position_ids',
  };
  if (!finding) {
    const state = carried[field] || field === 'loss_mask' ? 'same' : 'absent';
    const positional = state === 'same' && field !== 'tokens' && field !== 'images' && shiftedFrom !== undefined;
    return {
      field,
      state,
      index: -1,
      message: positional
        ? `${what[field]}, up to token ${shiftedFrom}: the tokens part there and every later position is shifted, so it is compared no further`
        : what[field],
      window: null,
    };
  }
  const i = finding.index;
  let window: CompareField['window'] = null;
  if (i >= 0 && s && (field === 'tokens' || field === 'loss_mask' || field === 'logprobs')) {
    const from = Math.max(0, i - WINDOW);
    const to = Math.min(Math.max(a.tokens.length, s.tokens.length), i + WINDOW + 1);
    const pieceOf = (id: number | undefined) => (id === undefined ? '—' : tokenDisplay(rollout.profile, id));
    const rows = { pieces: [] as string[], rollout: [] as string[], trained: [] as string[] };
    for (let k = from; k < to; k++) {
      rows.pieces.push(pieceOf(a.tokens[k] ?? s.tokens[k]));
      if (field === 'tokens') {
        rows.rollout.push(pieceOf(a.tokens[k]));
        rows.trained.push(pieceOf(s.tokens[k]));
      } else if (field === 'loss_mask') {
        rows.rollout.push(show(a.lossMask[k]));
        rows.trained.push(
          show(
            trainedAt(trained.trajectory, s.lossMask, k) ??
              (k >= s.tokens.length - (s.responseLength ?? 0) ? 1 : undefined),
          ),
        );
      } else {
        rows.rollout.push(a.lossMask[k] === 1 ? show(a.logprobs[k]) : '—');
        rows.trained.push(show(trainedAt(trained.trajectory, s.logprobs, k)));
      }
    }
    window = { from, ...rows };
  }
  return { field, state: 'differs', index: i, message: finding.message, window };
}

function images(traj: Trajectory, previewUrl: (k: number) => string): CompareImage[] {
  return traj.images.map((img, k) => ({
    index: k,
    width: img.width ?? null,
    height: img.height ?? null,
    sha256: img.sha256 ?? null,
    preview: img.url && !img.unavailable ? previewUrl(k) : null,
    unavailable: img.unavailable ?? null,
  }));
}

const enc = encodeURIComponent;

/** The first token difference when it is an insertion or a deletion (lengths differ), else undefined. */
function shiftedFrom(r: CheckedTrajectory, t: CheckedTrajectory, findings: readonly Finding[]): number | undefined {
  const f = findings.find((x) => x.field === 'tokens' && x.index >= 0);
  const trainedLength = t.trajectory.sample?.tokens.length;
  return f && trainedLength !== r.alignment.tokens.length ? f.index : undefined;
}

export function comparePairView(
  storeId: string,
  rollout: CheckedTrajectory,
  joined: { trained: CheckedTrajectory; joinedBy: 'id' | 'sample_index' } | undefined,
  loading: boolean,
): ComparePair {
  const rolloutImages = images(
    rollout.trajectory,
    (k) => `/api/trajectories/${enc(storeId)}/images/${k}/preview?w=256`,
  );
  const rolloutRuns = rollout.alignment.placeholderRanges.map(({ offset, length }) => ({ offset, length }));
  const base = {
    rollout: compareSide(rollout),
    images: { rollout: rolloutImages, trained: [] as CompareImage[] },
    placeholders: {
      rollout: rolloutRuns,
      trained: [],
      rolloutGrids: rollout.alignment.imageGridThw,
      trainedGrids: null,
    },
  };
  if (!joined)
    return {
      ...base,
      trained: null,
      reason: loading
        ? 'the trained side is still loading'
        : `no trained trajectory joins ${rollout.trajectory.id}: no id nor sample index matches (docs/compare.md)`,
      joinedBy: null,
      fields: [],
      tokens: null,
    };
  const { trained, joinedBy } = joined;
  const findings = comparePair(rollout, trained);
  const sample = trained.trajectory.sample;
  const shift = shiftedFrom(rollout, trained, findings);
  return {
    ...base,
    trained: compareSide(trained),
    reason: null,
    joinedBy,
    fields: TRAINED_FIELDS.map((f) =>
      fieldState(
        f,
        findings.find((x) => x.field === f),
        rollout,
        trained,
        shift,
      ),
    ),
    tokens: sample
      ? idsDiff(rollout.profile, rollout.alignment.tokens, sample.tokens, { a: 'rollout (canonical)', b: 'trained' })
      : null,
    images: {
      rollout: rolloutImages,
      trained: images(
        trained.trajectory,
        (k) => `/api/trajectories/${enc(storeId)}/compare/images/${k}/preview?side=trained&w=256`,
      ),
    },
    placeholders: {
      ...base.placeholders,
      trained: sample ? padRuns(sample.tokens, trained.profile.ids) : [],
      trainedGrids: sample?.imageGridThw ?? null,
    },
  };
}
