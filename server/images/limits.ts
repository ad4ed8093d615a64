// What an image may be before rollscope reads it (bytes, pixels), and its size from the header
// alone: shared by local resolution (resolve.ts) and remote fetches (remote.ts).
import sharp from 'sharp';

/** Largest image file, data: URL payload or download (a 4K PNG screenshot is ~10 MB). */
export const MAX_IMAGE_BYTES = 64 * 1024 * 1024;
export const MAX_DATA_URL_BYTES = MAX_IMAGE_BYTES;
/**
 * PIL's decompression-bomb threshold (2 × Image.MAX_IMAGE_PIXELS = 178,956,970), so rollscope
 * refuses what the Qwen-VL processors refuse; below sharp's own default (268 M).
 */
export const MAX_INPUT_PIXELS = 178_956_970;

export class ImageUnavailable extends Error {}

/**
 * Width and height from the image header, EXIF orientation applied. An image that claims more
 * than `maxPixels` is refused here, before any decode could allocate for it.
 */
export async function imageSize(
  bytes: Buffer,
  maxPixels = MAX_INPUT_PIXELS,
): Promise<{ width: number; height: number }> {
  // SVG is XML a renderer may follow links from, and no Qwen-VL processor (PIL) reads it.
  const head = bytes
    .subarray(0, 256)
    .toString('latin1')
    .replace(/^\ufeff|^\u00ef\u00bb\u00bf/, '')
    .trimStart();
  if (head.startsWith('<')) throw new ImageUnavailable('not a raster image (SVG/XML is not read)');
  let meta: Awaited<ReturnType<ReturnType<typeof sharp>['metadata']>>;
  try {
    // Header only, nothing decoded: the pixel count is checked below with a message that says so.
    meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch (e) {
    throw new ImageUnavailable(`cannot decode image: ${(e as Error).message}`);
  }
  if (!meta.width || !meta.height) throw new ImageUnavailable('image has no size');
  if (meta.width * meta.height > maxPixels) {
    throw new ImageUnavailable(
      `image claims ${meta.width}×${meta.height} pixels, over the ${maxPixels}-pixel limit (a decompression bomb?); not decoded`,
    );
  }
  // EXIF orientations 5-8 swap width and height once applied, as PIL's exif_transpose does in qwen-vl-utils.
  return meta.orientation && meta.orientation >= 5
    ? { width: meta.height, height: meta.width }
    : { width: meta.width, height: meta.height };
}
