// One exported training row: a trajectory after the canonical re-alignment, in the field names
// slime and vime use for a `Sample` (THUDM/slime slime/utils/types.py: `tokens` = prompt ⧺
// response, `response_length`, `loss_mask` and `rollout_log_probs` per response token, `reward`,
// `status`), plus the multimodal fields the model family's trainer needs (grids, token types,
// position ids; `ModelFamily.trainerFields`). The schema is versioned
// (docs/export-format.md); a row is written only after it passed every check again.
import path from 'node:path';
import type { Finding } from '../model/finding.ts';
import type { GridThw, ProcessorSettings, Trajectory } from '../model/trajectory.ts';
import { inferProfileName, uncoveredLimitation, type ModelProfile } from '../profiles/profile.ts';
import { analysisContext } from '../analysis/context.ts';
import { checkTrajectory } from '../analysis/checks.ts';
import { padRuns } from '../analysis/vision-spans.ts';
import { positionIds as positionIdsOf, positionMedia } from '../analysis/position-ids.ts';
import type { CheckedTrajectory } from '../analysis/checked.ts';
import { exportImages, type ImageMode, type RecentImages } from './images.ts';
import { originalRejections, warningDoubtsRow, type RejectReason } from './policy.ts';
import {
  EXPORT_SCHEMA_VERSION,
  ExportRow,
  passesRowContract,
  rowToTrajectory,
  SAMPLE_STATUSES,
  type SampleStatus,
} from './row-schema.ts';

export {
  EXPORT_SCHEMA_VERSION,
  ExportImage,
  ExportRow,
  rowToTrajectory,
  SAMPLE_STATUSES,
  SampleStatus,
} from './row-schema.ts';

/** `qwen`: the family's own rows (3 mRoPE rows for Qwen); `verl`: verl's 4 (a text row first). */
export type PositionIdsLayout = 'qwen' | 'verl';

export interface RowOptions {
  images: ImageMode;
  positionIds: PositionIdsLayout;
  /** Export trajectories whose warnings doubt the row too (default: reject them; warnings that describe the row never reject). */
  includeWarnings: boolean;
  /** Processor overrides of the run (`--min-pixels/--max-pixels`). */
  processor?: ProcessorSettings;
  /** Folders local images may be read from. */
  roots: readonly string[];
  /** Folder of the batch file: image paths are written relative to it. */
  outDir: string;
  /** Folder for images that exist only inside the data (`data:` URLs) when images are written as paths. */
  imageDir: string;
  /** The images the last rows read (shared by the samples of a GRPO group). */
  recentImages?: RecentImages;
}

export type RowOutcome =
  | {
      kind: 'row';
      row: ExportRow;
      /** Original error findings the re-alignment repaired. */
      repaired: Finding[];
      /** Original warnings of the exported row (those that describe it; all of them with includeWarnings). */
      warnings: Finding[];
    }
  | {
      kind: 'rejected';
      reasons: RejectReason[];
      messages: string[] /** Findings that caused the rejection. */;
      causes: Finding[];
      recheck: Finding[];
    };

function sampleStatus(traj: Trajectory, lastGenerated: readonly number[], eos: number): SampleStatus {
  const stated = traj.status?.toLowerCase();
  if (stated && (SAMPLE_STATUSES as readonly string[]).includes(stated)) return stated as SampleStatus;
  // slime maps SGLang's finish_reason: length → truncated, abort → aborted, stop → completed.
  const reason = (stated ?? traj.turns[traj.turns.length - 1]?.finishReason)?.toLowerCase();
  if (reason === 'length') return 'truncated';
  if (reason === 'abort' || reason === 'aborted') return 'aborted';
  if (reason === 'stop') return 'completed';
  return lastGenerated[lastGenerated.length - 1] === eos ? 'completed' : 'truncated';
}

/**
 * The model name a batch reader will map back to the same profile: the data's name when it picks
 * this built-in, or when a model folder was the profile (the reader is then given the folder too).
 */
function modelName(traj: Trajectory, profile: ModelProfile): string {
  if (traj.model && (inferProfileName(traj.model) === profile.family || path.isAbsolute(profile.name)))
    return traj.model;
  return profile.family;
}

/** Per-token modality: 0 text, 1 image pad, 2 video pad (transformers v5 / prime-rl `mm_token_type_ids`). */
export function mmTokenTypeIds(tokens: readonly number[], ids: ModelProfile['ids']): number[] {
  const image = ids.media.image.pad;
  const video = ids.media.video?.pad;
  return tokens.map((t) => (t === image ? 1 : t === video ? 2 : 0));
}

/** Logprobs of the generated tokens: all turns have them, none has them (null), or the trajectory is incomplete. */
function generatedLogprobsState(traj: Trajectory): 'all' | 'none' | 'partial' {
  const turns = traj.turns.filter((t) => (t.generatedIds?.length ?? 0) > 0);
  const withLp = turns.filter(
    (t) => t.generatedLogprobs && t.generatedLogprobs.length === t.generatedIds!.length,
  ).length;
  if (withLp === turns.length) return 'all';
  return withLp === 0 && turns.every((t) => !t.generatedLogprobs) ? 'none' : 'partial';
}

/**
 * Decide whether a checked trajectory becomes a row, and build it: the canonical re-alignment's
 * tokens, mask and logprobs; image bytes or paths; grids, placeholder ranges, token types and
 * mRoPE positions; then the row is read back as a trajectory and checked again. Only a row with
 * no error (and, unless `includeWarnings`, no warning that doubts it) on that re-check is returned.
 */
export async function exportRow(checked: CheckedTrajectory, opts: RowOptions): Promise<RowOutcome> {
  const { trajectory: traj, profile, alignment } = checked;
  const { ids } = profile;
  if (profile.uncoveredModel !== undefined)
    return {
      kind: 'rejected',
      reasons: ['no_profile'],
      messages: [
        `${uncoveredLimitation(profile.uncoveredModel)}: a row is built with the model's tokenizer and template`,
      ],
      causes: [],
      recheck: [],
    };
  const first = originalRejections(checked, opts.includeWarnings);
  const reasons = first.reasons;
  const messages = first.messages;

  const lpState = generatedLogprobsState(traj);
  if (lpState === 'partial') {
    reasons.push('incomplete_logprobs');
    messages.push('some generated tokens have logprobs and others do not');
  }
  const runs = padRuns(alignment.tokens, ids);
  // A record with processor outputs and no images (AReaL): the pixel values stand for the images.
  const pixels = traj.images.length === 0 && runs.length > 0 ? traj.sample?.pixelValues : undefined;
  const videoPad = ids.media.video?.pad;
  const videoRun = runs.find((r) => videoPad !== ids.media.image.pad && alignment.tokens[r.offset] === videoPad);
  const grids = alignment.imageGridThw;
  if (videoRun) {
    reasons.push('video_unsupported');
    messages.push(
      `a video pad run at token ${videoRun.offset}: video rows are not exported (schema version ${EXPORT_SCHEMA_VERSION} has image fields only)`,
    );
  } else if (runs.length !== traj.images.length && !pixels) {
    // Every pad run needs its pixels: a run without an image (token ids only) cannot be trained on.
    reasons.push('image_unavailable');
    messages.push(`the tokens hold ${runs.length} image pad run(s) but the data gives ${traj.images.length} image(s)`);
  } else if (grids.some((g) => g === null)) {
    reasons.push('grid_unknown');
    messages.push(
      `no image_grid_thw agrees with pad run ${grids.indexOf(null)} (neither the image size nor a stored grid)`,
    );
  } else if (pixels && patchesOf(grids) !== pixels.shape[0]) {
    reasons.push('image_unavailable');
    messages.push(
      `pixel_values holds ${pixels.shape[0]} patches but image_grid_thw of the pad runs gives ${patchesOf(grids)}`,
    );
  }
  if (reasons.length > 0)
    return { kind: 'rejected', reasons: dedupe(reasons), messages, causes: first.causes, recheck: [] };

  const ctx = analysisContext(traj, profile, opts.processor);
  const images = await exportImages(traj, ctx, opts);
  if ('problem' in images)
    return { kind: 'rejected', reasons: ['image_unavailable'], messages: [images.problem], causes: [], recheck: [] };

  const tokens = alignment.tokens;
  const gridList = grids as NonNullable<(typeof grids)[number]>[];
  let positionIds: number[][];
  try {
    positionIds = positionIdsOf(
      profile,
      tokens,
      positionMedia(profile, tokens, gridList),
      opts.positionIds === 'verl' ? 'verl' : 'model',
    );
  } catch (e) {
    return { kind: 'rejected', reasons: ['position_ids'], messages: [(e as Error).message], causes: [], recheck: [] };
  }

  const p = alignment.promptLength;
  const lastGenerated = traj.turns[traj.turns.length - 1]?.generatedIds ?? [];
  const row: ExportRow = {
    schema_version: EXPORT_SCHEMA_VERSION,
    id: traj.id,
    source: { file: traj.source.file, line: traj.source.line, format: traj.source.format },
    model: modelName(traj, profile),
    group: traj.group ?? null,
    tokens,
    response_length: alignment.responseLength,
    loss_mask: alignment.lossMask.slice(p),
    rollout_log_probs: lpState === 'all' ? alignment.logprobs.slice(p) : null,
    reward: traj.reward ?? null,
    status: sampleStatus(traj, lastGenerated, ids.eos),
    images: images.images,
    image_grid_thw: gridList,
    placeholder_ranges: runs,
    mm_token_type_ids: mmTokenTypeIds(tokens, ids),
    position_ids: positionIds,
    pixel_values: pixels ?? null,
  };

  // The re-check: the row as a trajectory of its own, through every check.
  const again = rowToTrajectory(row, { file: traj.source.file, line: traj.source.line });
  const recheck = (await checkTrajectory(again, analysisContext(again, profile))).findings;
  const blocking = recheck.filter((f) => f.severity === 'error' || (!opts.includeWarnings && warningDoubtsRow(f)));
  if (blocking.length > 0) {
    return {
      kind: 'rejected',
      reasons: ['recheck_failed'],
      messages: blocking.map((f) => `after re-alignment: ${f.kind}: ${f.message}`),
      causes: blocking,
      recheck,
    };
  }
  // The written contract, checked on the row itself: integer ids, 0/1 mask, finite logprobs, each
  // per-token array as long as what it covers. A row that breaks it is never written.
  const contract = passesRowContract(row) ? ({ success: true } as const) : ExportRow.safeParse(row);
  const lengthsOk =
    row.loss_mask.length === row.response_length &&
    (row.rollout_log_probs === null || row.rollout_log_probs.length === row.response_length) &&
    row.mm_token_type_ids.length === row.tokens.length;
  if (!contract.success || !lengthsOk)
    return {
      kind: 'rejected',
      reasons: ['recheck_failed'],
      messages: [
        `the re-aligned row breaks the row contract: ${contract.success ? 'per-token array lengths differ' : contract.error.issues[0]?.message}`,
      ],
      causes: [],
      recheck,
    };
  return {
    kind: 'row',
    row,
    repaired: checked.findings.filter((f) => f.severity === 'error'),
    warnings: checked.findings.filter((f) => f.severity === 'warning'),
  };
}

/** Vision patches before the merge that grids stand for (Σ t·h·w): the first dimension of pixel_values. */
function patchesOf(grids: readonly (GridThw | null)[]): number {
  return grids.reduce((n, g) => n + (g ? g[0] * g[1] * g[2] : 0), 0);
}

function dedupe<T>(xs: T[]): T[] {
  return [...new Set(xs)];
}
