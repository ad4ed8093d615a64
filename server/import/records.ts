// Reading records from trajectory files: JSONL line by line with 1-based line numbers and byte
// offsets (so a server can index a multi-GB file and come back for one record), bounded line
// length, Python's NaN/Infinity accepted, and every failure turned into a ReadError that names
// the file, the line and the field.
import fs from 'node:fs';
import type { ZodError } from 'zod';
import type { ReadError } from '../model/trajectory.ts';

export interface RawRecord {
  /** 1-based line (1 for a whole-file JSON document). */
  line: number;
  /** Byte offset of the record in the file, and its length in bytes. */
  offset: number;
  length: number;
  value: unknown;
}

export interface RecordLine {
  line: number;
  offset: number;
  length: number;
  text: string;
  /** Set when the line was skipped (too long) or is the unterminated last line of a file being written. */
  problem?: 'too_long' | 'unterminated';
}

export const DEFAULT_MAX_LINE_BYTES = 256 * 1024 * 1024;

/**
 * Lines of a file, streamed: memory stays bounded by the longest accepted line. A line over
 * `maxLineBytes` is reported and skipped without being held.
 */
export async function* readLines(
  file: string,
  opts: { maxLineBytes?: number; start?: number; end?: number; firstLine?: number } = {},
): AsyncGenerator<RecordLine> {
  const maxLineBytes = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  const stream = fs.createReadStream(file, { start: opts.start ?? 0, ...(opts.end !== undefined ? { end: opts.end - 1 } : {}), highWaterMark: 1 << 20 });
  let line = opts.firstLine ?? 1;
  let offset = opts.start ?? 0;
  let parts: Buffer[] = [];
  let partBytes = 0;
  let tooLong = false;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    let from = 0;
    while (from < chunk.length) {
      const nl = chunk.indexOf(0x0a, from);
      const endAt = nl < 0 ? chunk.length : nl;
      if (!tooLong) {
        if (partBytes + (endAt - from) > maxLineBytes) {
          tooLong = true;
          parts = [];
        } else parts.push(chunk.subarray(from, endAt));
      }
      partBytes += endAt - from;
      if (nl < 0) break;
      const length = partBytes;
      if (tooLong) yield { line, offset, length, text: '', problem: 'too_long' };
      else {
        const text = Buffer.concat(parts).toString('utf8');
        if (text.trim() !== '') yield { line, offset, length, text: text.endsWith('\r') ? text.slice(0, -1) : text };
      }
      line++;
      offset += length + 1;
      parts = [];
      partBytes = 0;
      tooLong = false;
      from = nl + 1;
    }
  }
  if (partBytes > 0) {
    const text = tooLong ? '' : Buffer.concat(parts).toString('utf8');
    if (tooLong || text.trim() !== '') yield { line, offset, length: partBytes, text, problem: tooLong ? 'too_long' : 'unterminated' };
  }
}

const NON_FINITE = /"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)/g;
const MARK = '\u0000rollscope:';

/** JSON.parse that also takes Python's `NaN`, `Infinity`, `-Infinity` (json.dumps writes them by default). */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (first) {
    if (!/NaN|Infinity/.test(text)) throw first;
    const replaced = text.replace(NON_FINITE, (m, bare: string | undefined) => (bare ? `"\\u0000rollscope:${bare}"` : m));
    return JSON.parse(replaced, (_k, v: unknown) => {
      if (typeof v === 'string' && v.startsWith(MARK)) {
        const w = v.slice(MARK.length);
        return w === 'NaN' ? NaN : w === 'Infinity' ? Infinity : -Infinity;
      }
      return v;
    });
  }
}

/** Parse one JSONL line into a record, or a ReadError naming the line. */
export function parseRecordLine(file: string, l: RecordLine): RawRecord | ReadError {
  if (l.problem === 'too_long') return { file, line: l.line, message: `line is ${l.length} bytes, over the limit; skipped` };
  try {
    return { line: l.line, offset: l.offset, length: l.length, value: parseJson(l.text) };
  } catch (e) {
    const why = (e as Error).message;
    if (l.problem === 'unterminated') return { file, line: l.line, message: `last line is incomplete (file still being written or truncated): ${why}` };
    return { file, line: l.line, message: `not valid JSON: ${why}` };
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
