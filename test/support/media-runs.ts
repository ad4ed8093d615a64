// Media items as the family interface's `expandMedia` takes them (`MediaRuns`, counted from no earlier text).
import type { ImageTokens, MediaOffsets, MediaRuns } from '../../server/families/family.ts';

export const NO_EARLIER_MEDIA: MediaOffsets = { images: 0, videos: 0 };

/** Images in order, each with its token layout, or undefined (its placeholder kept). */
export function imageRuns(items: readonly ({ tokens: ImageTokens } | undefined)[]): MediaRuns {
  return { images: items.map((i) => (i ? { pads: i.tokens.padCount, tokens: i.tokens } : undefined)), videos: [] };
}
