// UTF-8 validation that says where the text breaks. rollscope does not guess an encoding (the
// tokens must match the text), so a bad byte is reported with its position, and a character cut
// at the end of a buffer is told apart from a bad one (a truncated file, not an encoding problem).

/** First byte that breaks UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). */
export function firstInvalidUtf8(buf: Uint8Array): { at: number; incompleteAtEnd: boolean } | undefined {
  const n = buf.length;
  let i = 0;
  while (i < n) {
    const b = buf[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let min = 0x80;
    let max = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) min = 0xa0;
      if (b === 0xed) max = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) min = 0x90;
      if (b === 0xf4) max = 0x8f;
    } else return { at: i, incompleteAtEnd: false };
    for (let k = 1; k <= need; k++) {
      if (i + k >= n) return { at: i, incompleteAtEnd: true };
      const c = buf[i + k]!;
      if (k === 1 ? c < min || c > max : c < 0x80 || c > 0xbf) return { at: i, incompleteAtEnd: false };
    }
    i += need + 1;
  }
  return undefined;
}
