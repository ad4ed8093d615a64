// msgpack read value by value: where each value ends without decoding it, and an array's
// elements decoded one at a time, so a file cut short or corrupt can be reported with the element
// (and so the field) it broke in, and everything before it still used. Iterative: nesting depth
// costs nothing. Wire format: https://github.com/msgpack/msgpack/blob/master/spec.md
import { decode } from '@msgpack/msgpack';

export class MsgpackStructureError extends Error {
  constructor(
    message: string,
    readonly at: number,
  ) {
    super(message);
  }
}

function need(bytes: Uint8Array, pos: number, n: number): void {
  if (pos + n > bytes.length) {
    throw new MsgpackStructureError(
      `cut short: needs ${pos + n - bytes.length} more byte(s) at byte ${bytes.length} (file truncated?)`,
      bytes.length,
    );
  }
}

function uint(bytes: Uint8Array, pos: number, width: 1 | 2 | 4): number {
  need(bytes, pos, width);
  if (width === 1) return bytes[pos]!;
  if (width === 2) return (bytes[pos]! << 8) | bytes[pos + 1]!;
  return ((bytes[pos]! << 24) >>> 0) + ((bytes[pos + 1]! << 16) | (bytes[pos + 2]! << 8) | bytes[pos + 3]!);
}

/** Byte offset just past the msgpack value that starts at `pos`. */
export function msgpackValueEnd(bytes: Uint8Array, pos: number): number {
  let pending = 1;
  while (pending > 0) {
    pending--;
    need(bytes, pos, 1);
    const t = bytes[pos]!;
    pos++;
    if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) continue;
    if (t >= 0x80 && t <= 0x8f) pending += 2 * (t & 0x0f);
    else if (t >= 0x90 && t <= 0x9f) pending += t & 0x0f;
    else if (t >= 0xa0 && t <= 0xbf) pos += t & 0x1f;
    else {
      switch (t) {
        case 0xc4:
        case 0xd9:
          pos += 1 + uint(bytes, pos, 1);
          break; // bin8 / str8
        case 0xc5:
        case 0xda:
          pos += 2 + uint(bytes, pos, 2);
          break; // bin16 / str16
        case 0xc6:
        case 0xdb:
          pos += 4 + uint(bytes, pos, 4);
          break; // bin32 / str32
        case 0xc7:
          pos += 2 + uint(bytes, pos, 1);
          break; // ext8
        case 0xc8:
          pos += 3 + uint(bytes, pos, 2);
          break; // ext16
        case 0xc9:
          pos += 5 + uint(bytes, pos, 4);
          break; // ext32
        case 0xca:
          pos += 4;
          break; // float32
        case 0xcb:
          pos += 8;
          break; // float64
        case 0xcc:
        case 0xd0:
          pos += 1;
          break;
        case 0xcd:
        case 0xd1:
          pos += 2;
          break;
        case 0xce:
        case 0xd2:
          pos += 4;
          break;
        case 0xcf:
        case 0xd3:
          pos += 8;
          break;
        case 0xd4:
          pos += 2;
          break; // fixext1..16: type byte + data
        case 0xd5:
          pos += 3;
          break;
        case 0xd6:
          pos += 5;
          break;
        case 0xd7:
          pos += 9;
          break;
        case 0xd8:
          pos += 17;
          break;
        case 0xdc:
          pending += uint(bytes, pos, 2);
          pos += 2;
          break;
        case 0xdd:
          pending += uint(bytes, pos, 4);
          pos += 4;
          break;
        case 0xde:
          pending += 2 * uint(bytes, pos, 2);
          pos += 2;
          break;
        case 0xdf:
          pending += 2 * uint(bytes, pos, 4);
          pos += 4;
          break;
        default:
          throw new MsgpackStructureError(
            `byte 0x${t.toString(16)} at ${pos - 1} is not a msgpack type (corrupt data)`,
            pos - 1,
          );
      }
    }
    if (pos > bytes.length) need(bytes, bytes.length, pos - bytes.length);
  }
  return pos;
}

/** The element count of the msgpack array starting at `pos` and where its first element starts, or undefined when it is no array. */
export function arrayHeader(bytes: Uint8Array, pos: number): { count: number; body: number } | undefined {
  need(bytes, pos, 1);
  const t = bytes[pos]!;
  if (t >= 0x90 && t <= 0x9f) return { count: t & 0x0f, body: pos + 1 };
  if (t === 0xdc) return { count: uint(bytes, pos + 1, 2), body: pos + 3 };
  if (t === 0xdd) return { count: uint(bytes, pos + 1, 4), body: pos + 5 };
  return undefined;
}

/** True for the type bytes of integers: positive/negative fixint, uint8…64 and int8…64. */
export function isIntegerType(t: number): boolean {
  return t <= 0x7f || t >= 0xe0 || (t >= 0xcc && t <= 0xd3);
}

/** What the value at `pos` is, in words, for error messages. */
export function msgpackTypeName(bytes: Uint8Array, pos: number): string {
  const t = bytes[pos];
  if (t === undefined) return 'nothing';
  if (isIntegerType(t)) return 'an integer';
  if ((t >= 0x80 && t <= 0x8f) || t === 0xde || t === 0xdf) return 'a map';
  if ((t >= 0xa0 && t <= 0xbf) || (t >= 0xd9 && t <= 0xdb)) return 'a string';
  if (t === 0xc0) return 'nil';
  if (t === 0xc2 || t === 0xc3) return 'a boolean';
  if (t >= 0xc4 && t <= 0xc6) return 'bytes';
  if (t === 0xca || t === 0xcb) return 'a float';
  return `type byte 0x${t.toString(16)}`;
}

export type ElementsRead =
  | { elements: unknown[]; end: number }
  | { elements: unknown[]; failedAt: number; error: MsgpackStructureError };

/**
 * Decode `count` consecutive values starting at `pos` (the elements of an array whose header has
 * been read) one by one: the values before a failure, and the index of the one it happened in.
 */
export function decodeElements(bytes: Uint8Array, pos: number, count: number): ElementsRead {
  const elements: unknown[] = [];
  for (let i = 0; i < count; i++) {
    let end: number;
    try {
      end = msgpackValueEnd(bytes, pos);
    } catch (e) {
      if (e instanceof MsgpackStructureError) return { elements, failedAt: i, error: e };
      throw e;
    }
    try {
      elements.push(decode(bytes.subarray(pos, end)));
    } catch (e) {
      return { elements, failedAt: i, error: new MsgpackStructureError((e as Error).message, pos) };
    }
    pos = end;
  }
  return { elements, end: pos };
}
