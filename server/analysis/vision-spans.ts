// Vision spans in a token stream, as the model's family lays them out (server/families/): a begin
// token, a run of pads, an end token (docs/reference/image-math.md#pad-count). A span cut by
// truncation has no end.
import type { FamilyIds, MediaSpan, ModelFamily } from '../families/family.ts';

export type VisionSpan = MediaSpan;

/** What span finding needs of a profile: its family and its ids. */
export interface FamilyView {
  modelFamily: ModelFamily;
  ids: FamilyIds;
}

export function findVisionSpans(tokens: readonly number[], model: FamilyView): VisionSpan[] {
  return model.modelFamily.findMediaSpans(tokens, model.ids);
}

/** The pad ids of a model: its image pad, and its video pad when it has another. */
export function padIdsOf(ids: FamilyIds): number[] {
  const { image, video } = ids.media;
  return video && video.pad !== image.pad ? [image.pad, video.pad] : [image.pad];
}

/** Whether `t` is one of the model's vision tokens (begin, header-free pads, end). */
export function isVisionToken(ids: FamilyIds, t: number): boolean {
  const { image, video } = ids.media;
  return (
    t === image.begin ||
    t === image.end ||
    t === image.pad ||
    (!!video && (t === video.begin || t === video.end || t === video.pad))
  );
}

/** Maximal runs of pad tokens (what placeholder ranges and `mm_token_type_ids` must cover). */
export function padRuns(tokens: readonly number[], ids: FamilyIds): { offset: number; length: number }[] {
  const pads = padIdsOf(ids);
  const runs: { offset: number; length: number }[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (!pads.includes(t)) continue;
    let j = i;
    while (j < tokens.length && tokens[j] === t) j++;
    runs.push({ offset: i, length: j - i });
    i = j - 1;
  }
  return runs;
}

export function countToken(tokens: readonly number[], id: number): number {
  let n = 0;
  for (const t of tokens) if (t === id) n++;
  return n;
}
