// Lines of a trajectory file, streamed: JSONL line by line with 1-based line numbers and byte
// offsets (so a server can index a multi-GB file and come back for one record), gzip input
// decompressed on the fly, and the limits of ./limits.ts enforced while reading, so a line over
// the limit, a gzip bomb or a line that is not UTF-8 is reported without being held in memory.
import fs from 'node:fs';
import { isUtf8 } from 'node:buffer';
import { pipeline, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { fieldAt } from './json.ts';
import { readLimits, type ReadLimits } from './limits.ts';
import { firstInvalidUtf8 } from './utf8.ts';

export interface RecordLine {
  line: number;
  offset: number;
  length: number;
  /** The decoded line; for `invalid_utf8`, the valid text before the bad byte. */
  text: string;
  /**
   * Set when the line cannot be used as it is: over the length limit (skipped without being
   * held), the unterminated last line of a file being written or truncated, not UTF-8, or the
   * point where reading stopped (corrupt or over-large compressed data).
   */
  problem?: 'too_long' | 'unterminated' | 'invalid_utf8' | 'unreadable';
  /** Field path where the problem lies (`turns.0.generatedText`), when it can be told. */
  field?: string;
  /** For `invalid_utf8`: 0-based byte of the first bad byte within the line. */
  badByte?: number;
  /** For `unreadable`: why reading stopped; for `too_long`: the limit. */
  reason?: string;
}

const GZIP_MAGIC = [0x1f, 0x8b];

/** True when the file starts with the gzip magic bytes (whatever its name). */
export function isGzipFile(file: string): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(2);
    return fs.readSync(fd, head, 0, 2, 0) === 2 && head[0] === GZIP_MAGIC[0] && head[1] === GZIP_MAGIC[1];
  } finally {
    fs.closeSync(fd);
  }
}

/** The file's bytes, decompressed when it is gzip (offsets then count decompressed bytes). */
function openBytes(file: string, gzip: boolean, start: number, end: number | undefined, chunkBytes: number): Readable {
  if (!gzip)
    return fs.createReadStream(file, {
      start,
      ...(end !== undefined ? { end: end - 1 } : {}),
      highWaterMark: chunkBytes,
    });
  const raw = fs.createReadStream(file, { highWaterMark: chunkBytes });
  const gunzip = zlib.createGunzip({ chunkSize: 1 << 16 });
  pipeline(raw, gunzip, () => undefined); // errors surface on `gunzip` itself
  return gunzip;
}

function gzipMessage(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (err.code === 'Z_BUF_ERROR' || /unexpected end/i.test(err.message))
    return 'compressed data ends early (file truncated?)';
  if (err.code === 'Z_DATA_ERROR') return `corrupt compressed data (${err.message})`;
  return err.message;
}

/**
 * Lines of a file (gzip-compressed or not), streamed: memory stays bounded by the longest
 * accepted line. A line over `maxLineBytes` is reported and skipped without being held; a line
 * that is not UTF-8 is reported with the byte and field where it breaks. With `whole`, the file
 * is one record (a whole-file JSON document, limited by `maxLineBytes`).
 */
export async function* readLines(
  file: string,
  opts: {
    maxLineBytes?: number;
    start?: number;
    end?: number;
    firstLine?: number;
    whole?: boolean;
    limits?: Partial<ReadLimits>;
    /** Bytes read at a time (default 1 MiB); a reader that wants only the first lines asks for less. */
    chunkBytes?: number;
  } = {},
): AsyncGenerator<RecordLine> {
  const limits = readLimits(opts.limits);
  const maxLineBytes = opts.maxLineBytes ?? limits.maxLineBytes;
  const gzip = isGzipFile(file);
  const start = opts.start ?? 0;
  const maxDecompressed = gzip
    ? Math.max(limits.minGzipAllowance, limits.maxGzipRatio * fs.statSync(file).size)
    : Infinity;
  const stream = openBytes(file, gzip, start, opts.end, opts.chunkBytes ?? 1 << 20);
  // For gzip, offsets are in the decompressed stream: skip to `start`, stop at `end`.
  let skip = gzip ? start : 0;
  let decompressed = 0;
  let line = opts.firstLine ?? 1;
  let offset = start;
  let parts: Buffer[] = [];
  let partBytes = 0;
  let tooLong: { field?: string } | undefined;
  const lineAt = (buf: Buffer, length: number, terminated: boolean): RecordLine | undefined => {
    if (line === 1 && offset === 0 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) buf = buf.subarray(3); // UTF-8 BOM
    if (!isUtf8(buf)) {
      const bad = firstInvalidUtf8(buf)!;
      // A file cut mid-character is a truncation, not an encoding problem.
      if (!terminated && bad.incompleteAtEnd)
        return { line, offset, length, text: buf.subarray(0, bad.at).toString('utf8'), problem: 'unterminated' };
      return {
        line,
        offset,
        length,
        text: buf.subarray(0, bad.at).toString('utf8'),
        problem: 'invalid_utf8',
        badByte: bad.at,
        field: fieldAt(buf.subarray(0, bad.at)),
      };
    }
    const text = buf.toString('utf8');
    if (text.trim() === '') return undefined;
    if (!terminated) return { line, offset, length, text, problem: 'unterminated' };
    return { line, offset, length, text: text.endsWith('\r') ? text.slice(0, -1) : text };
  };
  try {
    for await (let chunk of stream as AsyncIterable<Buffer>) {
      if (gzip) {
        decompressed += chunk.length;
        if (decompressed > maxDecompressed) {
          yield {
            line,
            offset,
            length: 0,
            text: '',
            problem: 'unreadable',
            reason: `decompressed data exceeds ${maxDecompressed} bytes (${limits.maxGzipRatio}× the compressed file, a gzip bomb?); stopped reading here`,
          };
          return;
        }
        if (skip > 0) {
          const n = Math.min(skip, chunk.length);
          skip -= n;
          chunk = chunk.subarray(n);
        }
        if (opts.end !== undefined && offset + partBytes + chunk.length > opts.end)
          chunk = chunk.subarray(0, Math.max(0, opts.end - offset - partBytes));
      }
      let from = 0;
      while (from < chunk.length) {
        const nl = opts.whole ? -1 : chunk.indexOf(0x0a, from);
        const endAt = nl < 0 ? chunk.length : nl;
        if (!tooLong) {
          if (partBytes + (endAt - from) > maxLineBytes) {
            // Name the field the line was in when it crossed the limit, then let go of it.
            const seen = [...parts, chunk.subarray(from, from + (maxLineBytes - partBytes))];
            tooLong = { field: fieldAt(seen) };
            parts = [];
          } else parts.push(chunk.subarray(from, endAt));
        }
        partBytes += endAt - from;
        if (nl < 0) break;
        const length = partBytes;
        if (tooLong)
          yield {
            line,
            offset,
            length,
            text: '',
            problem: 'too_long',
            reason: `over the ${maxLineBytes}-byte limit for one record`,
            ...(tooLong.field ? { field: tooLong.field } : {}),
          };
        else {
          const l = lineAt(parts.length === 1 ? parts[0]! : Buffer.concat(parts), length, true);
          if (l) yield l;
        }
        line++;
        offset += length + 1;
        parts = [];
        partBytes = 0;
        tooLong = undefined;
        from = nl + 1;
      }
      if (gzip && opts.end !== undefined && offset + partBytes >= opts.end) break;
    }
  } catch (e) {
    const reason = gzip ? gzipMessage(e) : (e as Error).message;
    yield {
      line,
      offset,
      length: partBytes,
      text: '',
      problem: 'unreadable',
      reason: `cannot read further: ${reason}`,
    };
    return;
  } finally {
    stream.destroy();
  }
  if (partBytes > 0) {
    if (tooLong)
      yield {
        line,
        offset,
        length: partBytes,
        text: '',
        problem: 'too_long',
        reason: `over the ${maxLineBytes}-byte limit for one record`,
        ...(tooLong.field ? { field: tooLong.field } : {}),
      };
    else {
      const l = lineAt(Buffer.concat(parts), partBytes, opts.whole === true);
      if (l) yield l;
    }
  }
}

const SCAN_BYTES = 1 << 20;
/** The first read of a search for the next line start: a record is usually shorter, so the search reads little past it. */
const FIRST_SCAN_BYTES = 64 << 10;

/**
 * The first line start at or after byte `at` of an uncompressed file: `at` itself when it is 0
 * or follows a line feed, else the byte after the next line feed (the file's size when none
 * follows). Two shards that cut a file at `at` agree on it, so every line is read by exactly one.
 */
export function lineStartAtOrAfter(file: string, at: number): number {
  if (at <= 0) return 0;
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    if (at >= size) return size;
    const buf = Buffer.allocUnsafe(SCAN_BYTES);
    for (let pos = at - 1, chunk = FIRST_SCAN_BYTES; pos < size; chunk = Math.min(SCAN_BYTES, chunk * 2)) {
      const n = fs.readSync(fd, buf, 0, chunk, pos);
      if (n <= 0) break;
      const nl = buf.subarray(0, n).indexOf(0x0a);
      if (nl >= 0) return pos + nl + 1;
      pos += n;
    }
    return size;
  } finally {
    fs.closeSync(fd);
  }
}

/** Line feeds in bytes [0, end) of an uncompressed file: the 1-based number of the line at `end` is this plus 1. */
export function lineFeedsBefore(file: string, end: number): number {
  if (end <= 0) return 0;
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(SCAN_BYTES);
    let count = 0;
    for (let pos = 0; pos < end; ) {
      const n = fs.readSync(fd, buf, 0, Math.min(SCAN_BYTES, end - pos), pos);
      if (n <= 0) break;
      const chunk = buf.subarray(0, n);
      for (let i = chunk.indexOf(0x0a); i >= 0; i = chunk.indexOf(0x0a, i + 1)) count++;
      pos += n;
    }
    return count;
  } finally {
    fs.closeSync(fd);
  }
}
