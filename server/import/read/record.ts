// One line of a trajectory file (or a whole-file document) parsed into a record, or a ReadError
// that names the file, the line and the field where it breaks.
import type { ReadError } from '../../model/trajectory.ts';
import { fieldAt, JsonLimitError, parseJson, syntaxErrorPosition } from './json.ts';
import { readLimits, type ReadLimits } from './limits.ts';
import type { RecordLine } from './lines.ts';

export interface RawRecord {
  /** 1-based line where the record starts. */
  line: number;
  /** Byte offset of the record in the (decompressed) file, and its length in bytes. */
  offset: number;
  length: number;
  value: unknown;
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
