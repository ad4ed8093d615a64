// Image sizes from the real bytes (sharp reads the header without decoding), for `data:` URLs
// and files relative to the data file's folder. Remote URLs are not fetched: fetching what a
// rollout file names from a server is a request-forgery risk (docs/security.md).
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import type { ImageRef, Trajectory } from '../model/trajectory.ts';

export const MAX_DATA_URL_BYTES = 64 * 1024 * 1024;
/** sharp's own default pixel limit is 268M; a decompression bomb is refused before decoding. */
export const MAX_INPUT_PIXELS = 178_956_970;

export interface ImageBytes {
  bytes: Buffer;
  /** Absolute path when the image is a local file. */
  path?: string;
}

export class ImageUnavailable extends Error {}

/** Resolve an image reference to bytes, confined to `roots` for local files. */
export function imageBytes(url: string, baseDir: string, roots: readonly string[]): ImageBytes {
  if (url.startsWith('data:')) {
    const comma = url.indexOf(',');
    if (comma < 0) throw new ImageUnavailable('malformed data: URL (no comma)');
    const meta = url.slice(5, comma);
    if (url.length - comma > (MAX_DATA_URL_BYTES * 4) / 3 + 4) throw new ImageUnavailable(`data: URL over ${MAX_DATA_URL_BYTES} bytes`);
    const payload = url.slice(comma + 1);
    const bytes = meta.endsWith(';base64') ? Buffer.from(payload, 'base64') : Buffer.from(decodeURIComponent(payload), 'utf8');
    return { bytes };
  }
  if (/^https?:\/\//i.test(url)) throw new ImageUnavailable('remote image not fetched (rollscope fetches nothing unless asked)');
  const local = url.startsWith('file://') ? decodeURIComponent(new URL(url).pathname) : url;
  const resolved = path.resolve(baseDir, local);
  let real: string;
  try {
    real = fs.realpathSync(resolved);
  } catch {
    throw new ImageUnavailable(`image file not found: ${local}`);
  }
  const allowed = roots.some((root) => {
    const r = safeRealpath(root);
    return r !== undefined && (real === r || real.startsWith(r.endsWith(path.sep) ? r : r + path.sep));
  });
  if (!allowed) throw new ImageUnavailable(`image path ${local} leads outside the folders rollscope was given`);
  return { bytes: fs.readFileSync(real), path: real };
}

function safeRealpath(p: string): string | undefined {
  try {
    return fs.realpathSync(p);
  } catch {
    return undefined;
  }
}

const sizeCache = new Map<string, { width: number; height: number; sha256: string } | { error: string }>();

export async function imageSize(bytes: Buffer): Promise<{ width: number; height: number }> {
  const meta = await sharp(bytes, { limitInputPixels: MAX_INPUT_PIXELS }).metadata();
  if (!meta.width || !meta.height) throw new ImageUnavailable('image has no size');
  if (meta.width * meta.height > MAX_INPUT_PIXELS) {
    throw new ImageUnavailable(`image claims ${meta.width}×${meta.height} pixels, over the ${MAX_INPUT_PIXELS}-pixel limit (decompression bomb?)`);
  }
  // EXIF orientations 5-8 swap width and height once applied, as PIL's exif_transpose does in qwen-vl-utils.
  return meta.orientation && meta.orientation >= 5 ? { width: meta.height, height: meta.width } : { width: meta.width, height: meta.height };
}

export interface ResolveOptions {
  /** Folder that relative image paths are relative to (the data file's folder). */
  baseDir: string;
  /** Folders local images must stay inside. */
  roots: readonly string[];
}

/** Fill width/height/sha256 of every image from its bytes; unreadable images are marked, never fatal. */
export async function resolveImages(traj: Trajectory, opts: ResolveOptions): Promise<Trajectory> {
  const images = await Promise.all(traj.images.map((img) => resolveImage(img, opts)));
  return { ...traj, images };
}

async function resolveImage(img: ImageRef, opts: ResolveOptions): Promise<ImageRef> {
  if (!img.url) return img;
  const key = img.url.startsWith('data:') ? createHash('sha256').update(img.url).digest('hex') : `${opts.baseDir}\u0000${img.url}`;
  let hit = sizeCache.get(key);
  if (!hit) {
    try {
      const { bytes } = imageBytes(img.url, opts.baseDir, opts.roots);
      const size = await imageSize(bytes);
      hit = { ...size, sha256: createHash('sha256').update(bytes).digest('hex') };
    } catch (e) {
      hit = { error: e instanceof ImageUnavailable ? e.message : `cannot decode image: ${(e as Error).message}` };
    }
    if (sizeCache.size > 50_000) sizeCache.clear();
    sizeCache.set(key, hit);
  }
  if ('error' in hit) return { ...img, unavailable: hit.error };
  if (img.width && img.height && (img.width !== hit.width || img.height !== hit.height)) {
    // The bytes are the truth; a stated size that disagrees is worth keeping visible.
    return { ...img, width: hit.width, height: hit.height, sizeFrom: 'bytes', sha256: hit.sha256, unavailable: undefined };
  }
  return { ...img, width: hit.width, height: hit.height, sizeFrom: 'bytes', sha256: hit.sha256 };
}
