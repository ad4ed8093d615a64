// Position ids of a token stream as the model's family computes them (Qwen: mRoPE,
// docs/reference/mrope.md), in the model's layout or verl's 4-row one (a plain text row first,
// docs/reference/mrope.md#verls-4-row-layout).
import type { PositionMedia } from '../families/family.ts';
import type { GridThw } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import { padRuns } from './vision-spans.ts';

export type PositionIdsLayout = 'model' | 'verl';

/** The media of `tokens` in order, one per pad run, with `grids` (the run's kind read from its pad). */
export function positionMedia(
  profile: Pick<ModelProfile, 'ids'>,
  tokens: readonly number[],
  grids: readonly GridThw[],
): PositionMedia[] {
  const video = profile.ids.media.video?.pad;
  const image = profile.ids.media.image.pad;
  const kinds = padRuns(tokens, profile.ids).map((r) =>
    tokens[r.offset] === video && video !== image ? ('video' as const) : ('image' as const),
  );
  return grids.map((grid, i) => ({ kind: kinds[i] ?? 'image', grid }));
}

/** The stream's position ids: the family's rows, or verl's layout (row 0 = 0..n−1, then the family's). */
export function positionIds(
  profile: Pick<ModelProfile, 'ids' | 'modelFamily' | 'vision'>,
  tokens: readonly number[],
  media: readonly PositionMedia[],
  layout: PositionIdsLayout,
): number[][] {
  const { rows } = profile.modelFamily.positionIds(tokens, media, profile.ids, profile.vision);
  if (layout !== 'verl') return rows;
  return [Array.from({ length: tokens.length }, (_, i) => i), ...rows];
}
