// An image's media type from its magic bytes, without decoding it (what a `data:` URL needs to say).

/** Media type from the file's magic bytes (what a `data:` URL needs to say). */
export function imageMime(bytes: Uint8Array): string {
  const b = (i: number) => bytes[i] ?? -1;
  if (b(0) === 0x89 && b(1) === 0x50 && b(2) === 0x4e && b(3) === 0x47) return 'image/png';
  if (b(0) === 0xff && b(1) === 0xd8 && b(2) === 0xff) return 'image/jpeg';
  if (b(0) === 0x47 && b(1) === 0x49 && b(2) === 0x46) return 'image/gif';
  if (
    b(0) === 0x52 &&
    b(1) === 0x49 &&
    b(2) === 0x46 &&
    b(3) === 0x46 &&
    b(8) === 0x57 &&
    b(9) === 0x45 &&
    b(10) === 0x42 &&
    b(11) === 0x50
  )
    return 'image/webp';
  if (b(0) === 0x42 && b(1) === 0x4d) return 'image/bmp';
  return 'application/octet-stream';
}
