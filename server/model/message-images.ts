// The images OpenAI-style chat messages name, in the order the Qwen-VL templates render them
// (docs/reference/chat-templates.md): shared by importers that read messages and by the checks
// that count a conversation's images.
import type { ImageRef, VideoRef } from './trajectory.ts';

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

const positive = (v: unknown): number | undefined =>
  typeof v === 'number' && v > 0 && Number.isFinite(v) ? v : undefined;
const positiveInt = (v: unknown): number | undefined => {
  const n = positive(v);
  return n !== undefined && Number.isInteger(n) ? n : undefined;
};

function frameRef(frame: unknown): ImageRef {
  if (typeof frame === 'string') return { url: frame };
  if (isObject(frame)) {
    const url = imageUrlOf(frame) ?? (typeof frame.url === 'string' ? frame.url : undefined);
    if (url !== undefined) return { url };
  }
  return { unavailable: 'a video frame the record names but does not carry (no URL)' };
}

/**
 * Videos of OpenAI-style messages in order of appearance: what the templates render as a video
 * span (`type == 'video'`, or a `video` / `video_url` key). `video` may be a list of frames (a
 * pre-sampled video, qwen-vl-utils' form) or a file; `video_url` a file or `data:` URL. qwen-vl-utils'
 * `fps`, `nframes`, and a stated frame size (`width`/`height`) and `timestamps` are read when given.
 */
export function videosInMessages(messages: readonly unknown[]): VideoRef[] {
  const out: VideoRef[] = [];
  for (const m of messages) {
    if (!isObject(m) || !Array.isArray(m.content)) continue;
    for (const part of m.content) {
      if (!isObject(part) || !(part.type === 'video' || 'video' in part || 'video_url' in part)) continue;
      const video: VideoRef = {};
      const v = part.video_url !== undefined ? part.video_url : part.video;
      if (Array.isArray(v)) {
        video.frames = v.map(frameRef);
        video.frameCount = v.length;
      } else if (typeof v === 'string') video.url = v;
      else if (isObject(v) && typeof v.url === 'string') video.url = v.url;
      else video.unavailable = 'the record names the video but does not carry it (no frames or URL)';
      const fps = positive(part.fps) ?? positive(part.sample_fps);
      if (fps !== undefined) video.fps = fps;
      const frames = positiveInt(part.nframes);
      if (frames !== undefined && video.frameCount === undefined) video.frameCount = frames;
      const width = positiveInt(part.width);
      const height = positiveInt(part.height);
      if (width !== undefined && height !== undefined) {
        video.width = width;
        video.height = height;
      }
      if (Array.isArray(part.timestamps) && part.timestamps.every((t) => typeof t === 'number' && t >= 0))
        video.timestamps = part.timestamps as number[];
      out.push(video);
    }
  }
  return out;
}
