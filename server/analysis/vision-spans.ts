// Vision spans in a token stream: `<|vision_start|>` + a run of `<|image_pad|>` (or
// `<|video_pad|>`) + `<|vision_end|>` (docs/reference/image-math.md#pad-count). A span cut by truncation has no end.
import type { SpecialTokens } from '../profiles/profile.ts';

export interface VisionSpan {
  kind: 'image' | 'video';
  /** Index of `<|vision_start|>`. */
  start: number;
  padStart: number;
  padLength: number;
  /** Index of `<|vision_end|>`, or -1 when the sequence ends (or breaks) before it. */
  end: number;
}

export function findVisionSpans(tokens: readonly number[], special: SpecialTokens): VisionSpan[] {
  const spans: VisionSpan[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    const isPad = t === special.imagePad || t === special.videoPad;
    if (t !== special.visionStart && !isPad) continue;
    // A pad run without `<|vision_start|>` is an image only where a prompt cut on the left starts
    // mid-span (index 0); elsewhere it is the placeholder string typed as text, not an image.
    if (isPad && i > 0) continue;
    const start = t === special.visionStart ? i : -1;
    const padStart = t === special.visionStart ? i + 1 : i;
    const padToken = tokens[padStart];
    const kind = padToken === special.videoPad ? 'video' : 'image';
    let j = padStart;
    while (
      j < tokens.length &&
      tokens[j] === padToken &&
      (padToken === special.imagePad || padToken === special.videoPad)
    )
      j++;
    const end = j < tokens.length && tokens[j] === special.visionEnd ? j : -1;
    spans.push({ kind, start, padStart, padLength: j - padStart, end });
    i = end >= 0 ? end : j - 1;
  }
  return spans;
}

/** Maximal runs of pad tokens (what placeholder ranges and `mm_token_type_ids` must cover). */
export function padRuns(tokens: readonly number[], special: SpecialTokens): { offset: number; length: number }[] {
  const runs: { offset: number; length: number }[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (t !== special.imagePad && t !== special.videoPad) continue;
    let j = i;
    while (j < tokens.length && tokens[j] === t) j++;
    runs.push({ offset: i, length: j - i });
    i = j - 1;
  }
  return runs;
}

/**
 * Replace each single pad token (as a chat template renders it) by `counts[k]` pads for the k-th
 * image. With `visionStart`, only a pad right after `<|vision_start|>` is an image placeholder:
 * `<|image_pad|>` typed in the text stays one token and takes no image's count.
 */
export function expandImagePads(
  tokens: readonly number[],
  padId: number,
  counts: readonly (number | undefined)[],
  firstImage = 0,
  visionStart?: number,
): number[] {
  const out: number[] = [];
  let k = firstImage;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t === padId && (visionStart === undefined || tokens[i - 1] === visionStart)) {
      const n = counts[k++] ?? 1;
      for (let i = 0; i < n; i++) out.push(padId);
    } else out.push(t);
  }
  return out;
}

export function countToken(tokens: readonly number[], id: number): number {
  let n = 0;
  for (const t of tokens) if (t === id) n++;
  return n;
}
