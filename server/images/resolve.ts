// Image sizes from the real bytes (sharp reads the header without decoding), for `data:` URLs
// and files relative to the data file's folder. Remote URLs are fetched only when asked
// (`--allow-remote-images`, server/images/remote.ts): fetching what a rollout file names is a
// request-forgery risk. Local files stay inside the folders rollscope was given, whatever the
// spelling (`..`, absolute, `file:` URLs, percent-encoding, symlinks); sizes and pixel counts are
// bounded before anything is decoded (docs/security.md §Images).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import type { ImageRef, Trajectory, VideoRef } from '../model/trajectory.ts';
import { fetchRemoteImage, type RemoteImageLimits } from './remote.ts';
import { ImageUnavailable, imageSize, MAX_DATA_URL_BYTES, MAX_IMAGE_BYTES, MAX_INPUT_PIXELS } from './limits.ts';
import { ByteLru, sharedCacheBytes } from '../util/shared-cache.ts';

export { ImageUnavailable, imageSize, MAX_DATA_URL_BYTES, MAX_IMAGE_BYTES, MAX_INPUT_PIXELS };

export interface ImageBytes {
  bytes: Buffer;
  /** Absolute path when the image is a local file. */
  path?: string;
}

const REMOTE = /^https?:\/\//i;
const SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i;

/** Resolve an image reference to bytes, confined to `roots` for local files. Never fetches. */
export function imageBytes(url: string, baseDir: string, roots: readonly string[]): ImageBytes {
  if (url.startsWith('data:')) return { bytes: dataUrlBytes(url) };
  if (REMOTE.test(url))
    throw new ImageUnavailable(
      'remote image not fetched (rollscope fetches nothing unless --allow-remote-images is given)',
    );
  let local = url;
  if (/^file:/i.test(url)) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ImageUnavailable('malformed file: URL');
    }
    if (parsed.hostname && parsed.hostname !== 'localhost')
      throw new ImageUnavailable(`file: URL names another host (${parsed.hostname})`);
    try {
      // Decodes percent-escapes once, after the URL parser has already folded `..` and `%2e%2e`;
      // refuses an encoded `/` (ERR_INVALID_FILE_URL_PATH).
      local = fileURLToPath(parsed);
    } catch (e) {
      throw new ImageUnavailable(`malformed file: URL (${(e as Error).message})`);
    }
  } else {
    const scheme = SCHEME.exec(url);
    if (scheme) throw new ImageUnavailable(`unsupported image URL scheme "${scheme[1]}:"`);
  }
  // A plain path is a path: `%2e%2e` in it is a file name, not `..`.
  if (local.includes('\u0000')) throw new ImageUnavailable('image path contains a NUL byte');
  return { ...confinedRead(path.resolve(baseDir, local), local, roots) };
}

function dataUrlBytes(url: string): Buffer {
  const comma = url.indexOf(',');
  if (comma < 0) throw new ImageUnavailable('malformed data: URL (no comma)');
  const meta = url.slice(5, comma);
  const payloadChars = url.length - comma - 1;
  const base64 = /;base64$/i.test(meta);
  // Checked on the encoded length, before anything is decoded.
  const decodedAtMost = base64 ? Math.floor((payloadChars * 3) / 4) : payloadChars;
  if (decodedAtMost > MAX_DATA_URL_BYTES)
    throw new ImageUnavailable(`data: URL of ~${decodedAtMost} bytes is over the ${MAX_DATA_URL_BYTES}-byte limit`);
  const payload = url.slice(comma + 1);
  return base64 ? Buffer.from(payload, 'base64') : percentDecodeBytes(payload);
}

/** Percent-decoding to bytes (decodeURIComponent would turn binary %XX into UTF-8 text). */
function percentDecodeBytes(s: string): Buffer {
  const out = Buffer.alloc(Buffer.byteLength(s));
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x25 && /^[0-9a-f]{2}$/i.test(s.slice(i + 1, i + 3))) {
      out[n++] = parseInt(s.slice(i + 1, i + 3), 16);
      i += 2;
    } else n += out.write(s[i]!, n);
  }
  return out.subarray(0, n);
}

/**
 * Open first, then check what was opened: on Linux the kernel tells the real path of the open
 * descriptor (/proc/self/fd), so a symlink swapped in between a check and the open cannot lead
 * out of the roots. Non-blocking, so a FIFO planted under a root cannot hang the read.
 */
function confinedRead(resolved: string, shown: string, roots: readonly string[]): { bytes: Buffer; path: string } {
  let fd: number;
  try {
    fd = fs.openSync(resolved, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ImageUnavailable(
      code === 'ENOENT' || code === 'ENOTDIR'
        ? `image file not found: ${shown}`
        : `cannot open image ${shown}: ${code ?? (e as Error).message}`,
    );
  }
  try {
    const real = openedPath(fd, resolved);
    if (real === undefined || !insideRoots(real, roots))
      throw new ImageUnavailable(`image path ${shown} leads outside the folders rollscope was given`);
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new ImageUnavailable(`image path ${shown} is not a regular file`);
    if (st.size > MAX_IMAGE_BYTES)
      throw new ImageUnavailable(`image file ${shown} is ${st.size} bytes, over the ${MAX_IMAGE_BYTES}-byte limit`);
    const bytes = Buffer.alloc(st.size);
    let got = 0;
    while (got < st.size) {
      const n = fs.readSync(fd, bytes, got, st.size - got, got);
      if (n === 0) break;
      got += n;
    }
    return { bytes: bytes.subarray(0, got), path: real };
  } finally {
    fs.closeSync(fd);
  }
}

function openedPath(fd: number, resolved: string): string | undefined {
  try {
    return fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return safeRealpath(resolved); // not Linux: the check-then-use window stays open (docs/security.md)
  }
}

function insideRoots(real: string, roots: readonly string[]): boolean {
  return roots.some((root) => {
    const r = safeRealpath(root);
    return r !== undefined && (real === r || real.startsWith(r.endsWith(path.sep) ? r : r + path.sep));
  });
}

function safeRealpath(p: string): string | undefined {
  try {
    return fs.realpathSync(p);
  } catch {
    return undefined;
  }
}

type SizeHit = { width: number; height: number; sha256: string } | { error: string };

/** Local and remote images by where they are (and what confines them): the same file is read once. */
const sizeCache = new Map<string, SizeHit>();

/**
 * Inline images by their bytes: the samples of a GRPO group, and later steps of the same prompt,
 * repeat the same `data:` URL. Keyed by what is cheap to read (the length and characters sampled
 * across the string); a hit counts only when the kept URL equals this one (a comparison of the
 * two strings, far cheaper than a digest of either), so the cache never answers for other bytes.
 * Bounded by the URLs' bytes (util/shared-cache.ts); with the bound at 0 each one is decoded anew.
 */
let dataUrlSizes: ByteLru<string, { url: string; hit: SizeHit }> | undefined;
const DATA_URL_SAMPLES = 64;

/** What the inline-image cache of this thread holds and has answered. */
export function inlineImageCacheStats(): { entries: number; bytes: number; hits: number; misses: number } {
  const c = dataUrlSizes;
  return { entries: c?.size ?? 0, bytes: c?.bytes ?? 0, hits: c?.hits ?? 0, misses: c?.misses ?? 0 };
}

/** The cache key of an inline image: its length and characters sampled across it. */
export function inlineImageKey(url: string): string {
  const n = url.length;
  const codes = new Array<number>(DATA_URL_SAMPLES);
  for (let k = 0; k < DATA_URL_SAMPLES; k++)
    codes[k] = url.charCodeAt(Math.floor((k * (n - 1)) / (DATA_URL_SAMPLES - 1)));
  return `${n}:${String.fromCharCode(...codes)}`;
}

export interface ResolveOptions {
  /** Folder that relative image paths are relative to (the data file's folder). */
  baseDir: string;
  /** Folders local images must stay inside. */
  roots: readonly string[];
  /** Fetch http(s) images (`--allow-remote-images`); off by default. */
  allowRemoteImages?: boolean;
  /** Limits for remote fetches (and the tests' address seam). */
  remote?: Partial<RemoteImageLimits>;
}

/**
 * Fill width/height/sha256 of every image from its bytes, and each video's frame size from its
 * frames'; unreadable images are marked, never fatal.
 */
export async function resolveImages(traj: Trajectory, opts: ResolveOptions): Promise<Trajectory> {
  const images = await Promise.all(traj.images.map((img) => resolveImage(img, opts)));
  if (!traj.videos || traj.videos.length === 0) return { ...traj, images };
  const videos = await Promise.all(traj.videos.map((v) => resolveVideo(v, opts)));
  return { ...traj, images, videos };
}

/**
 * A video's frames sized from their bytes (every frame of a video has the first's size). A video
 * file is not decoded: its size and frame count are the record's, when it states them.
 */
async function resolveVideo(video: VideoRef, opts: ResolveOptions): Promise<VideoRef> {
  if (!video.frames || video.frames.length === 0) {
    if (video.width && video.height && video.frameCount) return video;
    return {
      ...video,
      unavailable:
        video.unavailable ??
        'video files are not decoded: the record must give its frames (a list of images) or its width, height and frame count',
    };
  }
  const frames = await Promise.all(video.frames.map((f) => resolveImage(f, opts)));
  const first = frames.find((f) => f.width && f.height);
  const broken = frames.find((f) => f.unavailable);
  const other = first && frames.find((f) => f.width && (f.width !== first.width || f.height !== first.height));
  return {
    ...video,
    frames,
    frameCount: frames.length,
    ...(first ? { width: first.width, height: first.height } : {}),
    ...(broken
      ? { unavailable: `frame ${frames.indexOf(broken)}: ${broken.unavailable}` }
      : other
        ? {
            unavailable: `frame ${frames.indexOf(other)} is ${other.width}×${other.height}, frame 0 ${first!.width}×${first!.height}: a video's frames have one size`,
          }
        : {}),
  };
}

async function readImage(
  url: string,
  opts: ResolveOptions,
): Promise<{ width: number; height: number; sha256: string }> {
  if (REMOTE.test(url) && opts.allowRemoteImages) {
    const got = await fetchRemoteImage(url, opts.remote);
    return { width: got.width, height: got.height, sha256: createHash('sha256').update(got.bytes).digest('hex') };
  }
  const { bytes } = imageBytes(url, opts.baseDir, opts.roots);
  const size = await imageSize(bytes);
  return { ...size, sha256: createHash('sha256').update(bytes).digest('hex') };
}

async function resolveImage(img: ImageRef, opts: ResolveOptions): Promise<ImageRef> {
  if (!img.url) return img;
  const hit = img.url.startsWith('data:') ? await inlineImage(img.url, opts) : await imageByPlace(img.url, opts);
  if ('error' in hit) return { ...img, unavailable: hit.error };
  if (img.width && img.height && (img.width !== hit.width || img.height !== hit.height)) {
    // The bytes are the truth; a stated size that disagrees is worth keeping visible.
    return {
      ...img,
      width: hit.width,
      height: hit.height,
      sizeFrom: 'bytes',
      sha256: hit.sha256,
      unavailable: undefined,
    };
  }
  return { ...img, width: hit.width, height: hit.height, sizeFrom: 'bytes', sha256: hit.sha256 };
}

async function sizeOf(url: string, opts: ResolveOptions): Promise<SizeHit> {
  try {
    return await readImage(url, opts);
  } catch (e) {
    return { error: e instanceof ImageUnavailable ? e.message : `cannot decode image: ${(e as Error).message}` };
  }
}

async function inlineImage(url: string, opts: ResolveOptions): Promise<SizeHit> {
  dataUrlSizes ??= new ByteLru(sharedCacheBytes() - Math.floor(sharedCacheBytes() / 3));
  if (!dataUrlSizes.enabled) return sizeOf(url, opts);
  const key = inlineImageKey(url);
  const known = dataUrlSizes.get(key, (v) => v.url === url);
  if (known) return known.hit;
  const hit = await sizeOf(url, opts);
  // A base64 URL is ASCII: a byte a character.
  dataUrlSizes.set(key, { url, hit }, url.length + 128);
  return hit;
}

async function imageByPlace(url: string, opts: ResolveOptions): Promise<SizeHit> {
  // The answer depends on where relative paths start, which roots confine them, and whether fetching is allowed.
  const key = [opts.baseDir, opts.roots.join('\u0001'), opts.allowRemoteImages ? 'remote' : 'local', url].join(
    '\u0000',
  );
  let hit = sizeCache.get(key);
  if (!hit) {
    hit = await sizeOf(url, opts);
    if (sizeCache.size > 50_000) sizeCache.clear();
    sizeCache.set(key, hit);
  }
  return hit;
}
