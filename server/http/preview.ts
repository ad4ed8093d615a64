// A downscaled PNG of one of a trajectory's images, resized with sharp: what the image panel and
// the pad-run chips show. Answered by the preview route and embedded in shared pages.
import path from 'node:path';
import sharp from 'sharp';
import { imageBytes, MAX_INPUT_PIXELS } from '../images/resolve.ts';
import type { CheckedTrajectory } from '../pipeline.ts';
import { RequestError } from './request-body.ts';

/** Resized previews, keyed by image content and width. */
const previewCache = new Map<string, Buffer>();
const PREVIEW_CACHE_ENTRIES = 128;

/** Image `k` of `checked`, at most `width` pixels wide, as PNG; a RequestError (404) when it has no readable bytes. */
export async function previewPng(
  checked: CheckedTrajectory,
  k: number,
  width: number,
  roots: readonly string[],
): Promise<Buffer> {
  const img = checked.trajectory.images[k];
  if (!img) throw new RequestError(404, `trajectory "${checked.trajectory.id}" has no image ${k}`);
  if (!img.url || img.unavailable)
    throw new RequestError(404, `image ${k} has no readable bytes${img.unavailable ? `: ${img.unavailable}` : ''}`);
  const key = `${img.sha256 ?? `${checked.trajectory.source.file}\u0000${img.url.slice(0, 512)}`}\u0000${width}`;
  let png = previewCache.get(key);
  if (!png) {
    const baseDir = path.dirname(path.resolve(checked.trajectory.source.file));
    const { bytes } = imageBytes(img.url, baseDir, roots);
    // rotate() applies EXIF orientation, as the Qwen processors see the image.
    png = await sharp(bytes, { limitInputPixels: MAX_INPUT_PIXELS })
      .rotate()
      .resize({ width, withoutEnlargement: true })
      .png()
      .toBuffer();
    if (previewCache.size >= PREVIEW_CACHE_ENTRIES) previewCache.delete(previewCache.keys().next().value!);
    previewCache.set(key, png);
  }
  return png;
}
