// The images OpenAI-style chat messages name, in the order the Qwen-VL templates render them
// (docs/reference/chat-templates.md): shared by importers that read messages and by the checks
// that count a conversation's images.
import type { ImageRef } from './trajectory.ts';

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function imageUrlOf(part: Record<string, unknown>): string | undefined {
  const u = part.image_url;
  if (typeof u === 'string') return u;
  if (isObject(u) && typeof u.url === 'string') return u.url;
  if (typeof part.image === 'string') return part.image;
  return undefined;
}

/**
 * Images of OpenAI-style messages in order of appearance: what the Qwen templates render as a
 * vision span (`type == 'image'`, or an `image` / `image_url` key), with qwen-vl-utils'
 * per-image `min_pixels`/`max_pixels` when stated.
 */
export function imagesInMessages(messages: readonly unknown[]): ImageRef[] {
  const out: ImageRef[] = [];
  for (const m of messages) {
    if (!isObject(m) || !Array.isArray(m.content)) continue;
    for (const part of m.content) {
      if (!isObject(part) || !(part.type === 'image' || 'image' in part || 'image_url' in part)) continue;
      const url = imageUrlOf(part);
      const img: ImageRef =
        url !== undefined ? { url } : { unavailable: 'the record names the image but does not carry it (no URL)' };
      if (typeof part.min_pixels === 'number' && part.min_pixels > 0) img.minPixels = Math.round(part.min_pixels);
      if (typeof part.max_pixels === 'number' && part.max_pixels > 0) img.maxPixels = Math.round(part.max_pixels);
      out.push(img);
    }
  }
  return out;
}
