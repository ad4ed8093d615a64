// The images of a request and the pad runs they stand for. Data URLs and local files under the
// allowed folders are read to size them (sharp reads the header only); an http(s) URL is left for
// the engine to fetch and is read here only with --allow-remote-images, as `serve` does
// (docs/security.md). Each image is sized once per session: later calls repeat it in their history.
import { createHash } from 'node:crypto';
import type { Message, ProcessorSettings } from '../model/trajectory.ts';
import { imagesInMessages } from '../model/message-images.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import { visionConfigFor } from '../analysis/context.ts';
import { imageBytes, imageSize, ImageUnavailable } from '../images/resolve.ts';
import { fetchRemoteImage } from '../images/remote.ts';
import type { SessionImage } from './sessions.ts';

export interface ImageReadOptions {
  roots: readonly string[];
  baseDir: string;
  allowRemote: boolean;
}

/** `mm_processor_kwargs` as processor settings (Qwen3-VL states them as `size`, docs/reference/image-math.md). */
export function processorSettingsOf(kwargs: Record<string, unknown> | null | undefined): ProcessorSettings | undefined {
  if (!kwargs) return undefined;
  const size = (kwargs.size ?? {}) as { shortest_edge?: unknown; longest_edge?: unknown };
  const min = kwargs.min_pixels ?? size.shortest_edge;
  const max = kwargs.max_pixels ?? size.longest_edge;
  const out: ProcessorSettings = {};
  if (typeof min === 'number' && Number.isInteger(min) && min > 0) out.minPixels = min;
  if (typeof max === 'number' && Number.isInteger(max) && max > 0) out.maxPixels = max;
  return out.minPixels || out.maxPixels ? out : undefined;
}

const sizes = new Map<string, Promise<{ width: number; height: number }>>();
const SIZE_CACHE_ENTRIES = 4096;

async function readSize(url: string, opts: ImageReadOptions): Promise<{ width: number; height: number }> {
  if (/^https?:\/\//i.test(url)) {
    if (!opts.allowRemote)
      throw new ImageUnavailable(
        'remote image left to the engine (the gateway reads none without --allow-remote-images)',
      );
    const got = await fetchRemoteImage(url);
    return { width: got.width, height: got.height };
  }
  return imageSize(imageBytes(url, opts.baseDir, opts.roots).bytes);
}

function sizeOf(key: string, url: string, opts: ImageReadOptions): Promise<{ width: number; height: number }> {
  let p = sizes.get(key);
  if (!p) {
    if (sizes.size >= SIZE_CACHE_ENTRIES) sizes.clear();
    p = readSize(url, opts);
    sizes.set(key, p);
    // A failure is not remembered: the file may appear, the flag may change.
    p.catch(() => sizes.delete(key));
  }
  return p;
}

/**
 * The images of `messages` in template order, each with its pad count from the processor math
 * (record-stated `min_pixels`/`max_pixels` first), reusing what `known` already says for an image
 * at the same position with the same URL.
 */
export async function conversationImages(
  messages: readonly Message[],
  profile: ModelProfile,
  processor: ProcessorSettings | undefined,
  known: readonly SessionImage[],
  opts: ImageReadOptions,
): Promise<SessionImage[]> {
  const refs = imagesInMessages(messages);
  return Promise.all(
    refs.map(async (ref, i): Promise<SessionImage> => {
      if (!ref.url) return { key: `missing-${i}`, problem: ref.unavailable ?? 'no URL' };
      const key = createHash('sha1').update(ref.url).digest('base64url');
      const vision = visionConfigFor(profile, ref, processor, undefined);
      const settingsKey = `${key}:${vision.minPixels}:${vision.maxPixels}`;
      const prior = known[i];
      if (prior && prior.key === settingsKey) return prior;
      try {
        const { width, height } = await sizeOf(key, ref.url, opts);
        return { key: settingsKey, padCount: profile.modelFamily.imageTokens(width, height, vision).padCount };
      } catch (e) {
        return { key: settingsKey, problem: (e as Error).message };
      }
    }),
  );
}
