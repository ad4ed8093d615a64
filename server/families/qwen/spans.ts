// Qwen's vision spans: `<|vision_start|>` + a run of `<|image_pad|>` (or `<|video_pad|>`) +
// `<|vision_end|>` (docs/reference/image-math.md#pad-count), and how the processor expands the one
// pad a chat template writes per item. A Qwen3-VL video is one span per temporal slice, each after
// its `<t seconds>` text (docs/reference/image-math.md#video). A span cut by truncation has no end.
import type { TokenizerHandle } from '../../profiles/tokenizer.ts';
import type { MediaOffsets, MediaRuns, MediaSpan } from '../family.ts';
import type { QwenTokens } from './ids.ts';

export function findQwenSpans(tokens: readonly number[], t: QwenTokens): MediaSpan[] {
  const spans: MediaSpan[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const id = tokens[i];
    const isPad = id === t.imagePad || id === t.videoPad;
    if (id !== t.visionStart && !isPad) continue;
    // A pad run without `<|vision_start|>` is an image only where a prompt cut on the left starts
    // mid-span (index 0); elsewhere it is the placeholder string typed as text, not an image.
    if (isPad && i > 0) continue;
    const start = id === t.visionStart ? i : -1;
    const padStart = id === t.visionStart ? i + 1 : i;
    const padToken = tokens[padStart];
    const kind = padToken === t.videoPad ? 'video' : 'image';
    let j = padStart;
    while (j < tokens.length && tokens[j] === padToken && (padToken === t.imagePad || padToken === t.videoPad)) j++;
    const end = j < tokens.length && tokens[j] === t.visionEnd ? j : -1;
    spans.push({ kind, start, padStart, padLength: j - padStart, end });
    i = end >= 0 ? end : j - 1;
  }
  return spans;
}

/** Items the template wrote: a pad right after `<|vision_start|>` (a typed `<|image_pad|>` is text). */
export function countQwenPlaceholders(ids: readonly number[], t: QwenTokens): { images: number; videos: number } {
  let images = 0;
  let videos = 0;
  for (let i = 1; i < ids.length; i++) {
    if (ids[i - 1] !== t.visionStart) continue;
    if (ids[i] === t.imagePad) images++;
    else if (ids[i] === t.videoPad) videos++;
  }
  return { images, videos };
}

/**
 * The processor's expansion of the template's placeholders, in ids: each `<|vision_start|>`
 * `<|image_pad|>` takes the next item's pad count; a video's `<|video_pad|>` its count (Qwen2/2.5-VL),
 * or the whole `<|vision_start|><|video_pad|><|vision_end|>` its runs, each after its timestamp
 * text (Qwen3-VL `processing_qwen3_vl.py`: the text between added tokens tokenizes on its own).
 * An item without an expansion keeps its one pad.
 */
export function expandQwenMedia(
  ids: readonly number[],
  media: MediaRuns,
  first: MediaOffsets,
  t: QwenTokens,
  tok?: TokenizerHandle,
): number[] | Promise<number[]> {
  const out: number[] = [];
  const texts: { at: number; text: string }[] = [];
  let image = first.images;
  let video = first.videos;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    const placeholder = (id === t.imagePad || id === t.videoPad) && ids[i - 1] === t.visionStart;
    if (!placeholder) {
      out.push(id);
      continue;
    }
    if (id === t.videoPad) {
      const item = media.videos[video++];
      if (!item) {
        out.push(id);
        continue;
      }
      const runs = item.runs;
      const timed = runs.some((r) => r.textBefore !== '');
      if (timed && ids[i + 1] === t.visionEnd && tok) {
        // Replace the whole triple: drop the `<|vision_start|>` already written.
        out.pop();
        for (const run of runs) {
          if (run.textBefore !== '') texts.push({ at: out.length, text: run.textBefore });
          out.push(t.visionStart);
          for (let n = 0; n < run.pads; n++) out.push(t.videoPad);
          out.push(t.visionEnd);
        }
        i++;
        continue;
      }
      for (let n = 0; n < item.padCount; n++) out.push(id);
      continue;
    }
    const n = media.images[image++]?.pads ?? 1;
    for (let c = 0; c < n; c++) out.push(id);
  }
  if (texts.length === 0) return out;
  return (async () => {
    const encoded = await Promise.all(texts.map((x) => tok!.encode(x.text)));
    const withText: number[] = [];
    let from = 0;
    texts.forEach((x, j) => {
      for (let p = from; p < x.at; p++) withText.push(out[p]!);
      for (const e of encoded[j]!) withText.push(e);
      from = x.at;
    });
    for (let p = from; p < out.length; p++) withText.push(out[p]!);
    return withText;
  })();
}
