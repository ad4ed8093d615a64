// How `render`, `image-tokens` and the playground turn an image reference into a size: the I/O
// half of server/analysis/ask.ts, which only says which images a conversation holds and what
// their sizes make of them. Each sizer is an `ImageSizer` of ask.ts and rejects with an error whose
// message is what the user sees.
import { imageBytes, imageSize, ImageUnavailable } from './resolve.ts';

/** Failures other than a refused or unreadable image (a bug, a system error) keep their message under a prefix. */
function unavailable(e: unknown, what: string): ImageUnavailable {
  return e instanceof ImageUnavailable ? e : new ImageUnavailable(`${what}: ${(e as Error).message}`);
}

/** Sizes from `data:` URLs only: for text someone else wrote (the playground), which must not read local files. */
export async function dataUrlSizer(url: string): Promise<{ width: number; height: number }> {
  try {
    if (!url.startsWith('data:')) throw new ImageUnavailable('only data: URLs or width/height are accepted here');
    return await imageSize(imageBytes(url, '.', []).bytes);
  } catch (e) {
    throw unavailable(e, 'cannot read image');
  }
}

/** Sizes from data: URLs and local files under `roots` (relative paths from `baseDir`), read with sharp. */
export function localImageSizer(opts: {
  baseDir: string;
  roots: readonly string[];
}): (url: string) => Promise<{ width: number; height: number }> {
  return async (url) => {
    let bytes: Buffer;
    try {
      bytes = imageBytes(url, opts.baseDir, opts.roots).bytes;
    } catch (e) {
      throw unavailable(e, 'cannot read image');
    }
    try {
      return await imageSize(bytes);
    } catch (e) {
      throw unavailable(e, 'cannot decode image');
    }
  };
}
