// Reading records from trajectory files: JSONL line by line with 1-based line numbers and byte
// offsets (so a server can index a multi-GB file and come back for one record), gzip input,
// Python's NaN/Infinity accepted, and every failure turned into a ReadError that names the file,
// the line and the field.
//
// The input is untrusted (files written by crashing jobs and by code under test, docs/security.md):
// every limit below is checked while streaming or before JSON.parse allocates, so a hostile line
// costs bounded memory and time and never takes the other records of the file with it.
import fs from 'node:fs';
import { isUtf8 } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { pipeline, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { ZodError, ZodType } from 'zod';
import type { ReadError } from '../model/trajectory.ts';

export interface RawRecord {
  /** 1-based line where the record starts. */
  line: number;
  /** Byte offset of the record in the (decompressed) file, and its length in bytes. */
  offset: number;
  length: number;
  value: unknown;
}

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

export interface ReadLimits {
  /** Longest JSONL line; longer ones are skipped without being held in memory. */
  maxLineBytes: number;
  /** Largest whole-file JSON document (`[...]` or a pretty-printed object). */
  maxDocumentBytes: number;
  /** Deepest nesting of arrays/objects in one record. */
  maxDepth: number;
  /** Most entries in one JSON array. */
  maxArrayEntries: number;
  /** gzip input: decompressed bytes allowed per compressed byte... */
  maxGzipRatio: number;
  /** ...but never fewer than this many (tiny files of repeated records compress very well). */
  minGzipAllowance: number;
}

export const DEFAULT_MAX_LINE_BYTES = 128 * 1024 * 1024;

export const DEFAULT_LIMITS: ReadLimits = {
  // A screenshot-heavy agent trajectory with inline base64 images stays under this; 4× it is the
  // peak memory of reading one line (chunks, the joined buffer, the string, the parsed value).
  maxLineBytes: DEFAULT_MAX_LINE_BYTES,
  // V8 cannot make a string longer than ~512 M characters; half of that leaves room to parse.
  maxDocumentBytes: 256 * 1024 * 1024,
  // Real records nest < 20 levels, and Python's json.dumps stops near 1000 (its recursion limit).
  // 256 keeps every recursive consumer downstream (JSON.parse's reviver, zod, structuredClone
  // to the analysis workers, JSON.stringify, the app's JSON view) far from the stack limit.
  maxDepth: 256,
  // The longest Qwen-VL context is 1 M tokens (Qwen3-VL with YaRN); 4 M entries leaves room for
  // flattened 3-row mRoPE position ids. More is not a rollout, and a list of millions of
  // wrong-typed entries would become millions of zod issues (out of memory).
  maxArrayEntries: 4 * 1024 * 1024,
  // JSONL compresses 3–20× with gzip; deflate's ceiling is ~1032× (all zeros), i.e. a bomb.
  maxGzipRatio: 200,
  minGzipAllowance: 64 * 1024 * 1024,
};

export function readLimits(overrides: Partial<ReadLimits> = {}): ReadLimits {
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  return { ...DEFAULT_LIMITS, ...defined };
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
function openBytes(file: string, gzip: boolean, start: number, end: number | undefined): Readable {
  if (!gzip)
    return fs.createReadStream(file, { start, ...(end !== undefined ? { end: end - 1 } : {}), highWaterMark: 1 << 20 });
  const raw = fs.createReadStream(file, { highWaterMark: 1 << 20 });
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
  } = {},
): AsyncGenerator<RecordLine> {
  const limits = readLimits(opts.limits);
  const maxLineBytes = opts.maxLineBytes ?? limits.maxLineBytes;
  const gzip = isGzipFile(file);
  const start = opts.start ?? 0;
  const maxDecompressed = gzip
    ? Math.max(limits.minGzipAllowance, limits.maxGzipRatio * fs.statSync(file).size)
    : Infinity;
  const stream = openBytes(file, gzip, start, opts.end);
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

/**
 * The field path (`turns.1.generatedIds.57`) at the end of `bytes`, a prefix of a JSON text:
 * where a syntax error, a bad byte or a limit was hit. Works on bytes so it can follow a line
 * that is never decoded whole; structural characters are ASCII in UTF-8.
 */
export function fieldAt(bytes: Uint8Array | readonly Uint8Array[]): string | undefined {
  type Frame = { array: true; index: number } | { array: false; key?: string; expectingKey: boolean };
  const frames: Frame[] = [];
  let inString = false;
  let escaped = false;
  let key: number[] | undefined; // bytes of an object key being read
  const chunks = bytes instanceof Uint8Array ? [bytes] : bytes;
  for (const buf of chunks) {
    let i = 0;
    const n = buf.length;
    let nextQuote = -1;
    let nextBackslash = -1;
    while (i < n) {
      const c = buf[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === 0x5c) escaped = true;
        else if (c === 0x22) {
          inString = false;
          if (key) {
            const top = frames.length > 0 ? frames[frames.length - 1] : undefined;
            if (top && !top.array) top.key = decodeKey(key);
            key = undefined;
          }
          i++;
          continue;
        } else if (!key) {
          // Jump over string content to the next quote or backslash (positions cached, so a
          // string full of escapes stays linear).
          if (nextQuote < i) nextQuote = indexOrEnd(buf, 0x22, i);
          if (nextBackslash < i) nextBackslash = indexOrEnd(buf, 0x5c, i);
          i = Math.min(nextQuote, nextBackslash);
          continue;
        }
        if (key && key.length < 200) key.push(c);
        i++;
        continue;
      }
      if (STRUCTURAL[c] === 0) {
        i = nextStructural(buf, i + 1, n);
        continue;
      }
      // Never frames[-1]: an out-of-bounds read is a slow named-property lookup in V8.
      const top = frames.length > 0 ? frames[frames.length - 1] : undefined;
      switch (c) {
        case 0x22:
          inString = true;
          if (top && !top.array && top.expectingKey) key = [];
          break;
        case 0x5b:
          frames.push({ array: true, index: 0 });
          break;
        case 0x7b:
          frames.push({ array: false, expectingKey: true });
          break;
        case 0x5d:
        case 0x7d:
          frames.pop();
          break;
        case 0x2c:
          if (top?.array) top.index++;
          else if (top) {
            top.expectingKey = true;
            top.key = undefined;
          }
          break;
        case 0x3a:
          if (top && !top.array) top.expectingKey = false;
          break;
      }
      i++;
    }
  }
  const path: string[] = [];
  for (const f of frames) {
    if (f.array) path.push(String(f.index));
    else if (f.key !== undefined && !f.expectingKey) path.push(f.key);
    else break;
  }
  if (path.length === 0) return undefined;
  // 256 levels of `0.0.0…` say less than their count.
  return path.length > 16
    ? `${path.slice(0, 8).join('.')}.…(${path.length - 12} more levels)….${path.slice(-4).join('.')}`
    : path.join('.');
}

const STRUCTURAL = new Uint8Array(256);
for (const ch of '"[]{},:') STRUCTURAL[ch.charCodeAt(0)] = 1;

function nextStructural(buf: Uint8Array, from: number, n: number): number {
  let i = from;
  while (i < n && STRUCTURAL[buf[i]!] === 0) i++;
  return i;
}

function indexOrEnd(buf: Uint8Array, byte: number, from: number): number {
  const at = buf.indexOf(byte, from);
  return at < 0 ? buf.length : at;
}

function decodeKey(bytes: number[]): string {
  const raw = Buffer.from(bytes).toString('utf8');
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/** A JSON text over a limit of ReadLimits, with the character position where it was crossed. */
export class JsonLimitError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(message);
  }
}

/**
 * One linear pass over a JSON text before JSON.parse allocates anything: nesting depth, array
 * sizes, and whether Python's bare NaN/Infinity occur outside strings. Costs ~10% of the parse.
 */
export function scanJson(
  text: string,
  limits: Pick<ReadLimits, 'maxDepth' | 'maxArrayEntries'> = DEFAULT_LIMITS,
): { nonFinite: boolean } {
  const n = text.length;
  const entries = new Int32Array(limits.maxDepth + 2);
  const isArray = new Uint8Array(limits.maxDepth + 2);
  const opened = new Float64Array(limits.maxDepth + 2); // where each open container starts
  let depth = 0;
  let nonFinite = false;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Jump to the closing quote (one not preceded by an odd number of backslashes).
      let from = i + 1;
      for (;;) {
        const q = text.indexOf('"', from);
        if (q < 0) return { nonFinite }; // unterminated string: JSON.parse will say so
        let b = q - 1;
        while (text.charCodeAt(b) === 0x5c) b--;
        if ((q - 1 - b) % 2 === 0) {
          i = q;
          break;
        }
        from = q + 1;
      }
    } else if (c === 0x2c) {
      if (isArray[depth] && ++entries[depth]! >= limits.maxArrayEntries) {
        // Positioned at the array's `[`, so the field named is the array itself.
        throw new JsonLimitError(
          `array has more than ${limits.maxArrayEntries} entries (the limit; no rollout list is that long)`,
          opened[depth]!,
        );
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limits.maxDepth)
        throw new JsonLimitError(
          `nested more than ${limits.maxDepth} levels deep (the limit; real records nest < 20)`,
          i,
        );
      entries[depth] = 0;
      isArray[depth] = c === 0x5b ? 1 : 0;
      opened[depth] = i;
    } else if (c === 0x5d || c === 0x7d) {
      if (depth > 0) depth--;
    } else if (c === 0x4e || c === 0x49) nonFinite = true; // N(aN), I(nfinity): no other JSON token starts so
  }
  return { nonFinite };
}

/** Replace bare NaN/Infinity/-Infinity (outside strings) by marker strings JSON.parse accepts. */
function markNonFinite(text: string, mark: string): string {
  const out: string[] = [];
  let last = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let from = i + 1;
      for (;;) {
        const q = text.indexOf('"', from);
        if (q < 0) return out.join('') + text.slice(last);
        let b = q - 1;
        while (text.charCodeAt(b) === 0x5c) b--;
        if ((q - 1 - b) % 2 === 0) {
          i = q;
          break;
        }
        from = q + 1;
      }
      continue;
    }
    const word =
      c === 0x4e && text.startsWith('NaN', i)
        ? 'NaN'
        : c === 0x49 && text.startsWith('Infinity', i)
          ? 'Infinity'
          : undefined;
    if (!word) continue;
    const negative = i > 0 && text.charCodeAt(i - 1) === 0x2d;
    const from = negative ? i - 1 : i;
    // The marker starts with a NUL, written as its JSON escape (a raw control character is invalid JSON).
    out.push(text.slice(last, from), `"\\u0000${mark.slice(1)}${negative ? '-' : ''}${word}"`);
    last = i + word.length;
    i = last - 1;
  }
  out.push(text.slice(last));
  return out.join('');
}

/**
 * JSON.parse that also takes Python's `NaN`, `Infinity`, `-Infinity` (json.dumps writes them by
 * default), refuses nesting and arrays over the limits before allocating (JsonLimitError with
 * the position), and never recurses on the input: V8's JSON.parse is iterative, the reviver
 * only runs within the depth limit.
 */
export function parseJson(
  text: string,
  limits: Pick<ReadLimits, 'maxDepth' | 'maxArrayEntries'> = DEFAULT_LIMITS,
): unknown {
  const { nonFinite } = scanJson(text, limits);
  if (!nonFinite) return JSON.parse(text);
  try {
    return JSON.parse(text);
  } catch (first) {
    // A per-parse random marker: no string in the data can collide with it.
    const mark = `\u0000rollscope-${randomBytes(6).toString('hex')}:`;
    let replaced: string;
    try {
      replaced = markNonFinite(text, mark);
    } catch {
      throw first;
    }
    try {
      return JSON.parse(replaced, (_k, v: unknown) => {
        if (typeof v === 'string' && v.startsWith(mark)) {
          const w = v.slice(mark.length);
          return w === 'NaN' || w === '-NaN' ? NaN : w === 'Infinity' ? Infinity : w === '-Infinity' ? -Infinity : v;
        }
        return v;
      });
    } catch {
      throw first; // its position is in the text as written, not in the marked copy
    }
  }
}

/**
 * The character position of a JSON.parse SyntaxError. V8 names it ("... in JSON at position 12"),
 * except for "Unexpected token": then it quotes 10 characters either side of it (V8
 * src/json/json-parser.cc, kMinOriginalSourceLengthForContext), found back in the text here.
 */
export function syntaxErrorPosition(e: unknown, text: string): number | undefined {
  const message = (e as Error).message;
  const at = /at position (\d+)/.exec(message);
  if (at) return Number(at[1]);
  if (/Unexpected end of JSON input/.test(message)) return text.length;
  const m = /^Unexpected token '[\s\S]*?', (\.\.\.)?"([\s\S]*)"(\.\.\.)? is not valid JSON$/.exec(message);
  if (!m) return undefined;
  const [, before, snippet = '', after] = m;
  const context = 10;
  if (before && after) {
    const found = text.indexOf(snippet);
    return found >= 0 && found === text.lastIndexOf(snippet) ? found + context : undefined;
  }
  if (before) return text.length - snippet.length + context;
  if (after) return snippet.length - context;
  return undefined;
}

/** V8 quotes the input in some messages; a 100 MB line should not end up in an error report. */
function shortMessage(e: unknown): string {
  const msg = (e as Error).message;
  return msg.length > 300 ? `${msg.slice(0, 300)}…` : msg;
}

function linesBefore(text: string, position: number): number {
  let count = 0;
  for (let i = text.indexOf('\n'); i >= 0 && i < position; i = text.indexOf('\n', i + 1)) count++;
  return count;
}

/** Parse one JSONL line (or a whole-file document) into a record, or a ReadError naming line and field. */
export function parseRecordLine(file: string, l: RecordLine, limits: Partial<ReadLimits> = {}): RawRecord | ReadError {
  const lim = readLimits(limits);
  const withField = (line: number, field: string | undefined, message: string): ReadError => ({
    file,
    line,
    ...(field ? { field } : {}),
    message,
  });
  switch (l.problem) {
    case 'too_long':
      return withField(
        l.line,
        l.field,
        `record is ${l.length} bytes, ${l.reason ?? 'over the limit'}${l.field ? ` (crossed in ${l.field})` : ''}; skipped without reading it`,
      );
    case 'invalid_utf8':
      return withField(
        l.line + linesBefore(l.text, l.text.length),
        l.field,
        `not UTF-8: invalid byte at byte ${l.badByte} of the line (byte ${l.offset + (l.badByte ?? 0)} of the file)${l.field ? ` in ${l.field}` : ''}; record skipped (rollscope does not guess an encoding: tokens must match the text)`,
      );
    case 'unreadable':
      return withField(l.line, undefined, l.reason ?? 'cannot read further');
  }
  try {
    return { line: l.line, offset: l.offset, length: l.length, value: parseJson(l.text, lim) };
  } catch (e) {
    const position = e instanceof JsonLimitError ? e.position : syntaxErrorPosition(e, l.text);
    const field = position !== undefined ? fieldAt(Buffer.from(l.text.slice(0, position), 'utf8')) : undefined;
    const line = position !== undefined ? l.line + linesBefore(l.text, position) : l.line;
    const where = field ? ` in ${field}` : '';
    if (e instanceof JsonLimitError) return withField(line, field, `${e.message}${where}; record skipped`);
    if (l.problem === 'unterminated')
      return withField(
        line,
        field,
        `last line is incomplete (file truncated or still being written)${where}: ${shortMessage(e)}`,
      );
    if (e instanceof RangeError) return withField(line, field, `record too large to parse: ${shortMessage(e)}`);
    return withField(line, field, `not valid JSON${where}: ${shortMessage(e)}`);
  }
}

export function isReadError(x: RawRecord | ReadError): x is ReadError {
  return 'message' in x && !('value' in x);
}

/** zod issues as ReadErrors: one per issue, field path in dotted form (`turns.1.generatedIds.3`). */
export function zodErrors(file: string, line: number, error: ZodError, fieldPrefix = ''): ReadError[] {
  return error.issues.slice(0, 5).map((issue) => {
    const field = [fieldPrefix, ...issue.path.map(String)].filter(Boolean).join('.');
    return { file, line, field, message: `${field || 'record'}: ${issue.message}` };
  });
}

/** Entries in arrays long enough to matter; below this zod's issue list stays small. */
const BULK_ARRAY = 1024;
const FULL_REPORT_ENTRIES = 50_000;

function bulkEntries(value: unknown, depthLimit: number): number {
  let total = 0;
  const stack: { v: unknown; d: number }[] = [{ v: value, d: 0 }];
  while (stack.length > 0) {
    const { v, d } = stack.pop()!;
    if (typeof v !== 'object' || v === null || d > depthLimit) continue;
    const children = Array.isArray(v) ? v : Object.values(v);
    if (Array.isArray(v) && v.length > BULK_ARRAY) total += v.length;
    for (const c of children) if (typeof c === 'object' && c !== null) stack.push({ v: c, d: d + 1 });
  }
  return total;
}

/**
 * zod safeParse that a hostile record cannot turn into a crash: zod collects one issue per bad
 * array entry and spreads them into the parent's list, so 200 k wrong-typed token ids throw
 * RangeError and 10 M exhaust the heap. Records with large arrays are validated with zod's
 * abort-early mode (the first issue of each container; zod uses it for `z.validate`), the rest
 * with the full issue list.
 */
export function safeParseBounded<T>(
  schema: ZodType<T>,
  value: unknown,
): { success: true; data: T } | { success: false; error: ZodError } {
  const bulky = bulkEntries(value, DEFAULT_LIMITS.maxDepth) > FULL_REPORT_ENTRIES;
  // `abortEarly` is honoured by zod's parser (core/schemas.js) but not part of its public types.
  const ctx = bulky ? ({ abortEarly: true } as unknown as Parameters<ZodType<T>['safeParse']>[1]) : undefined;
  const r = schema.safeParse(value, ctx);
  return r.success ? { success: true, data: r.data } : { success: false, error: r.error };
}

/** Validate one record against a zod schema: the value, or ReadErrors naming line and field. */
export function validateRecord<T>(
  schema: ZodType<T>,
  value: unknown,
  file: string,
  line: number,
  fieldPrefix = '',
): { data: T } | { errors: ReadError[] } {
  const r = safeParseBounded(schema, value);
  return r.success ? { data: r.data } : { errors: zodErrors(file, line, r.error, fieldPrefix) };
}
