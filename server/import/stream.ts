// Reading a run without holding it: JSON-lines files whose importer reads each record on its own
// (`Importer.recordLocal`) come out as batches of raw lines, which any thread can import with
// `importLines`, so `check` and `export` keep memory bounded by the batches in flight and can
// parse and validate on worker threads. Every other file (grouping formats such as vLLM call
// logs, whole-file JSON, binary dumps, files whose format is still unknown) is loaded whole by
// `loadFile`, exactly as before.
import fs from 'node:fs';
import { Trajectory, type FormatName, type ReadError } from '../model/trajectory.ts';
import { fileContext, type Importer } from './importer.ts';
import { importerFor, planRead, readsLineByLine, sniffRecords, SNIFF_RECORDS } from './formats.ts';
import { importIsolated, loadFile, type LoadedFile, type LoadOptions } from './index.ts';
import { parseJson } from './read/json.ts';
import { readLimits, type ReadLimits } from './read/limits.ts';
import { isGzipFile, lineFeedsBefore, lineStartAtOrAfter, readLines, type RecordLine } from './read/lines.ts';
import { isReadError, parseRecordLine, type RawRecord } from './read/record.ts';
import { safeParseBounded, zodErrors } from './read/validate.ts';
import { withPathStep } from './step.ts';

export type { RecordLine } from './read/lines.ts';

export type FileChunk =
  /** Raw lines of a record-local JSONL file, in order; import them with `importLines`. */
  | { kind: 'lines'; file: string; format: FormatName; lines: RecordLine[] }
  /** The whole file, loaded by `loadFile`. */
  | { kind: 'loaded'; loaded: LoadedFile };

export interface ChunkOptions extends LoadOptions {
  /** A batch closes at this many lines... */
  batchLines?: number;
  /** ...or once it holds this many bytes of text. */
  batchBytes?: number;
  /**
   * Only the lines that start in bytes [start, end) of the file, each aligned forward to a line
   * start (`lineStartAtOrAfter`): the file must be one `splitsAtLines` accepts.
   */
  range?: { start: number; end: number };
  /**
   * Lines [start, end) of the file, both already line starts, the first numbered `firstLine`
   * (pipeline/units.ts aligns and numbers the units it hands out).
   */
  aligned?: { start: number; end: number; firstLine: number };
}

/**
 * Whether a file can be cut at line starts and each piece read on its own: a record-local JSONL
 * file (as `readFileChunks` would stream it), uncompressed (a gzip stream cannot be entered
 * mid-way). Decided from the file's name and first records, the same in every shard.
 */
export async function splitsAtLines(file: string, opts: LoadOptions = {}): Promise<boolean> {
  const limits = readLimits({
    ...opts.limits,
    ...(opts.maxLineBytes !== undefined ? { maxLineBytes: opts.maxLineBytes } : {}),
  });
  try {
    if (!fs.statSync(file).isFile() || isGzipFile(file)) return false;
    return (await streamingImporter(file, opts, limits)) !== undefined;
  } catch {
    return false;
  }
}

/**
 * The importer a file would be read with, decided the way `loadFile` decides (`--format`, then
 * the file name, then the structure of the first records), but only when the file can be
 * streamed: a record-local JSONL importer and a first line that is a complete JSON object (so
 * `loadFile` would read it line by line too). Undefined: load the file whole.
 */
async function streamingImporter(file: string, opts: LoadOptions, limits: ReadLimits): Promise<Importer | undefined> {
  const plan = planRead(file, opts.format);
  if (plan.read !== 'text') return undefined;
  if (plan.importer)
    return readsLineByLine(plan.importer) && (await firstLineIsRecord(file, limits)) ? plan.importer : undefined;
  // By structure, on the same sample `loadFile` looks at (the first readable records), with the
  // same function, so the plan holds.
  const sample: unknown[] = [];
  let first = true;
  for await (const l of readLines(file, { limits, chunkBytes: SNIFF_CHUNK_BYTES })) {
    if (first && !isObjectLine(l, limits)) return undefined;
    first = false;
    const r = parseRecordLine(file, l, limits);
    if (!isReadError(r)) sample.push(r.value);
    if (sample.length === SNIFF_RECORDS) break;
  }
  const { importer } = sniffRecords(sample);
  return readsLineByLine(importer) ? importer : undefined;
}

/** Deciding a file's format reads its first records: a few tens of KB, not the 1 MiB a full read takes at a time. */
const SNIFF_CHUNK_BYTES = 64 << 10;

function isObjectLine(l: RecordLine, limits: ReadLimits): boolean {
  if (l.problem || !l.text.trimStart().startsWith('{')) return false;
  try {
    parseJson(l.text, limits);
    return true;
  } catch {
    return false;
  }
}

async function firstLineIsRecord(file: string, limits: ReadLimits): Promise<boolean> {
  for await (const l of readLines(file, { limits, chunkBytes: SNIFF_CHUNK_BYTES })) return isObjectLine(l, limits);
  return false;
}

/**
 * A file as a sequence of chunks: batches of raw lines when it can be streamed, else one
 * `loaded` chunk. Never throws on bad input: unreadable files become a `loaded` chunk with the
 * error `loadFile` reports.
 */
export async function* readFileChunks(file: string, opts: ChunkOptions = {}): AsyncGenerator<FileChunk> {
  const limits = readLimits({
    ...opts.limits,
    ...(opts.maxLineBytes !== undefined ? { maxLineBytes: opts.maxLineBytes } : {}),
  });
  let importer: Importer | undefined;
  try {
    importer = fs.statSync(file).isFile() ? await streamingImporter(file, opts, limits) : undefined;
  } catch {
    importer = undefined;
  }
  if (!importer) {
    yield { kind: 'loaded', loaded: await loadFile(file, opts) };
    return;
  }
  const batchLines = opts.batchLines ?? 16;
  const batchBytes = opts.batchBytes ?? 2 * 1024 * 1024;
  let lines: RecordLine[] = [];
  let bytes = 0;
  let span: { start: number; end: number; firstLine: number } | undefined = opts.aligned;
  if (span && span.end <= span.start) return;
  if (opts.range) {
    const start = lineStartAtOrAfter(file, opts.range.start);
    const end = lineStartAtOrAfter(file, opts.range.end);
    if (end <= start) return;
    span = { start, end, firstLine: lineFeedsBefore(file, start) + 1 };
  }
  for await (const l of readLines(file, { limits, ...span })) {
    lines.push(l);
    bytes += l.text.length;
    if (lines.length >= batchLines || bytes >= batchBytes) {
      yield { kind: 'lines', file, format: importer.format, lines };
      lines = [];
      bytes = 0;
    }
  }
  if (lines.length > 0) yield { kind: 'lines', file, format: importer.format, lines };
}

/**
 * Import lines of a record-local format: what `loadFile` does per record (parse with the read
 * limits, import, validate into the internal model), with the same errors; a record the importer
 * throws on costs that record only.
 */
export function importLines(
  file: string,
  format: FormatName,
  lines: readonly RecordLine[],
  opts: { limits?: Partial<ReadLimits>; model?: string } = {},
): { trajectories: Trajectory[]; errors: ReadError[] } {
  const importer = importerFor(format);
  if (!readsLineByLine(importer))
    throw new Error(`importLines: the ${format} importer does not read records one by one`);
  const lim = readLimits(opts.limits ?? {});
  const records: RawRecord[] = [];
  const errors: ReadError[] = [];
  for (const l of lines) {
    const r = parseRecordLine(file, l, lim);
    if (isReadError(r)) errors.push(r);
    else records.push(r);
  }
  const result = withPathStep(importIsolated(importer, records, fileContext(file, opts.model)), file);
  const trajectories: Trajectory[] = [];
  for (const t of result.trajectories) {
    if (importer.validates) {
      trajectories.push(t as Trajectory);
      continue;
    }
    const parsed = safeParseBounded(Trajectory, t);
    if (parsed.success) trajectories.push(parsed.data);
    else result.errors.push(...zodErrors(file, t.source?.line ?? 0, parsed.error));
  }
  // By line, then as loadFile reports a line's errors (read, the importer's, validation): the order
  // then does not depend on where a batch began, so a shard that starts reading mid-file
  // (pipeline/shard.ts) lists them as the whole run does.
  return { trajectories, errors: [...errors, ...result.errors].sort((a, b) => a.line - b.line) };
}
