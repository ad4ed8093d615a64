// The images of an exported row: every image is identified by the SHA-256 of its bytes and
// carried either inline (`embed`: the file's bytes) or by a path relative to the batch file
// (`path`). Images that exist only inside the data (`data:` URLs) are written once, named by
// their hash, into a folder beside the batch so a path can point at them. Remote URLs are not
// fetched (rollscope fetches nothing it was not asked to), so a row that needs one is rejected.
// `ref` (by reference): every distinct image is written once, named by its SHA-256, into an
// `images/` folder beside the batch, and the row carries its `uri` (relative to the batch
// file's folder) instead of the bytes: inline images are most of a multimodal batch's size.
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import type { Trajectory } from '../model/trajectory.ts';
import type { AnalysisContext } from '../analysis/context.ts';
import { imageBytes, ImageUnavailable } from '../images/resolve.ts';
import { imageMime } from '../images/mime.ts';
import type { ExportImage } from './row-schema.ts';

export type ImageMode = 'embed' | 'path' | 'ref';

export interface ImageExportOptions {
  images: ImageMode;
  roots: readonly string[];
  outDir: string;
  imageDir: string;
  /** Images the last rows used (one export's): the samples of a GRPO group share theirs. */
  recentImages?: RecentImages;
}

/** An image as read for a row: its bytes, the file they came from, their hash, their base64 once asked for. */
interface ReadImage {
  bytes: Buffer;
  path?: string;
  sha256: string;
  base64?: string;
}

/**
 * The images the last rows read, by where they came from (the data file's folder and the URL or
 * path): the samples of a GRPO group follow one another and share their images, so each is read,
 * decoded from its data URL and hashed once. Bounded in entries and bytes; oldest out first.
 */
export class RecentImages {
  private readonly entries = new Map<string, ReadImage>();
  private bytes = 0;
  constructor(
    private readonly maxBytes = 64 << 20,
    private readonly maxEntries = 64,
  ) {}

  read(url: string, baseDir: string, roots: readonly string[]): ReadImage {
    const key = `${baseDir}\u0000${url}`;
    const hit = this.entries.get(key);
    if (hit) return hit;
    const got = imageBytes(url, baseDir, roots);
    const image: ReadImage = {
      bytes: got.bytes,
      ...(got.path !== undefined ? { path: got.path } : {}),
      sha256: createHash('sha256').update(got.bytes).digest('hex'),
    };
    this.entries.set(key, image);
    this.bytes += image.bytes.length;
    for (const [k, v] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= v.bytes.length;
    }
    return image;
  }
}

export { imageMime };

const EXT: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/gif': 'gif',
  'image/webp': 'webp',
  'image/bmp': 'bmp',
};

/** A path as written into a row: relative to the batch folder, with forward slashes on every OS. */
function relativePath(outDir: string, file: string): string {
  return path.relative(outDir, file).split(path.sep).join('/');
}

/** Write `bytes` as `<dir>/<sha256>.<ext>` unless it is already there (content-addressed, so reruns agree). */
function writeContentAddressed(dir: string, sha256: string, bytes: Buffer): string {
  const file = path.join(dir, `${sha256}.${EXT[imageMime(bytes)] ?? 'bin'}`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `.${sha256}.${randomBytes(4).toString('hex')}.tmp`);
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file);
  return file;
}

export async function exportImages(
  traj: Trajectory,
  ctx: AnalysisContext,
  opts: ImageExportOptions,
): Promise<{ images: ExportImage[] } | { problem: string }> {
  const baseDir = path.dirname(path.resolve(traj.source.file));
  const images: ExportImage[] = [];
  for (let i = 0; i < traj.images.length; i++) {
    const ref = traj.images[i]!;
    const vision = ctx.images[i]?.vision;
    if (!ref.url)
      return {
        problem: `image ${i}: the data gives no image, only ${ref.width ? `its size ${ref.width}×${ref.height}` : 'a placeholder'}`,
      };
    if (!ref.width || !ref.height || !vision)
      return { problem: `image ${i}: size unknown (${ref.unavailable ?? 'not stated and not readable'})` };
    let got: ReadImage;
    try {
      got = (opts.recentImages ?? new RecentImages()).read(ref.url, baseDir, opts.roots);
    } catch (e) {
      const why = e instanceof ImageUnavailable ? e.message : (e as Error).message;
      return { problem: `image ${i}: ${why}` };
    }
    const sha256 = got.sha256;
    let bytes: string | null = null;
    let where: string | null = null;
    let uri: string | undefined;
    if (opts.images === 'embed') {
      got.base64 ??= got.bytes.toString('base64');
      bytes = got.base64;
    } else if (opts.images === 'ref')
      uri = relativePath(opts.outDir, writeContentAddressed(opts.imageDir, sha256, got.bytes));
    else where = relativePath(opts.outDir, got.path ?? writeContentAddressed(opts.imageDir, sha256, got.bytes));
    images.push({
      sha256,
      width: ref.width,
      height: ref.height,
      min_pixels: vision.minPixels,
      max_pixels: vision.maxPixels,
      bytes,
      path: where,
      ...(uri !== undefined ? { uri } : {}),
    });
  }
  return { images };
}
