// Gemma 3's image spans in a token stream and the processor's expansion of the template's
// placeholders (docs/reference/models/gemma3.md#images). A run is `<start_of_image>`, soft tokens,
// `<end_of_image>`; the newlines around it are ordinary tokens (and merge with the text's).
import type { TokenizerHandle } from '../../profiles/tokenizer.ts';
import type { ImageRun, MediaSpan } from '../family.ts';
import type { Gemma3Ids } from './ids.ts';
import { expandImagesInIds, imageReplacement } from './vision.ts';

/** Each `<start_of_image>` (and a soft-token run a prompt cut on the left starts with) as a span. */
export function findGemma3Spans(tokens: readonly number[], t: Gemma3Ids): MediaSpan[] {
  const spans: MediaSpan[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const id = tokens[i];
    const headless = id === t.imageSoftToken && i === 0;
    if (id !== t.startOfImage && !headless) continue;
    const start = headless ? -1 : i;
    const padStart = headless ? i : i + 1;
    let j = padStart;
    while (j < tokens.length && tokens[j] === t.imageSoftToken) j++;
    const end = j < tokens.length && tokens[j] === t.endOfImage ? j : -1;
    spans.push({ kind: 'image', start, padStart, padLength: j - padStart, end });
    i = end >= 0 ? end : j - 1;
  }
  return spans;
}

/** Images the template wrote: a `<start_of_image>` not followed by a soft token. */
export function countGemma3Placeholders(ids: readonly number[], t: Gemma3Ids): { images: number; videos: number } {
  let images = 0;
  for (let i = 0; i < ids.length; i++) if (ids[i] === t.startOfImage && ids[i + 1] !== t.imageSoftToken) images++;
  return { images, videos: 0 };
}

/**
 * The processor's expansion, in ids, the way vLLM builds it from a prompt's ids (equal to the ids
 * of the text the Hugging Face processor expands; test/families-gemma3.test.ts): each placeholder
 * `<start_of_image>` (counted from `first` in `media`) replaced by its replacement's ids, then the
 * newline tokens merged. An item without an expansion keeps its placeholder.
 */
export async function expandGemma3Media(
  ids: readonly number[],
  media: readonly (ImageRun | undefined)[],
  first: number,
  t: Gemma3Ids,
  seqLength: number,
  tok: TokenizerHandle,
): Promise<number[]> {
  const replacements: number[][] = [];
  const cache = new Map<number, number[]>();
  let k = first;
  let placeholders = 0;
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] !== t.startOfImage || ids[i + 1] === t.imageSoftToken) continue;
    placeholders++;
    const item = media[k++];
    if (!item) {
      replacements.push([t.startOfImage]);
      continue;
    }
    const crops = Math.max(0, Math.round(item.pads / seqLength) - 1);
    let r = cache.get(crops);
    if (!r) {
      r = await tok.encode(imageReplacement(crops, seqLength));
      cache.set(crops, r);
    }
    replacements.push(r);
  }
  if (placeholders === 0) return [...ids];
  // Only the placeholders are replaced: an already expanded run's `<start_of_image>` stays as it is.
  const marker = -1;
  const marked = ids.map((id, i) => (id === t.startOfImage && ids[i + 1] !== t.imageSoftToken ? marker : id));
  return expandImagesInIds(marked, marker, replacements, {
    one: t.newline,
    two: t.newline2,
    three: t.newline3,
    four: t.newline4,
  });
}
