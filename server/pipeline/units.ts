// The input splits of one process: how `check`, `export` (and a shard of either) divide a run
// between the threads that read it. The run (or a shard's share of it, pipeline/shard.ts) is cut
// into read units, as Hadoop cuts files into splits: a file whose records can be cut at line
// starts (a record-local JSONL file, uncompressed) into byte ranges of about `unitBytes`, every
// other file whole. Each unit is read, parsed, validated and analyzed by one thread, which sends
// back only what its consumer keeps (report entries, export rows as bytes, index facts); the
// main thread hands the units out, numbers their lines, and puts their events back in run order.
//
// Line numbers: a unit that starts inside a file must know the number of its first line. The main
// thread aligns each unit to line starts and counts the line feeds of the units before it in the
// same split as it hands them out (a scan for `\n`, no decoding: the bytes the unit's thread then
// reads come from the page cache), so no thread scans the file from its start.
import fs from 'node:fs';
import type { FormatName, ReadError, Trajectory } from '../model/trajectory.ts';
import { lineFeedsBefore, lineStartAtOrAfter } from '../import/read/lines.ts';
import { readFileChunks, splitsAtLines } from '../import/stream.ts';
import {
  analyzeOrError,
  analyzeTrajectory,
  cutChecked,
  importAndAnalyze,
  withExport,
  type ChunkOutcome,
} from './analyze.ts';
import type { RunOptions } from './run-options.ts';
import type { InputSplit } from './shard.ts';
import type { ReadUnit } from './read-unit.ts';

export type { ReadUnit } from './read-unit.ts';

/** A unit as planned, before alignment: bytes [start, end) of its split's file. */
interface PlannedUnit {
  split: InputSplit;
  start: number;
  end: number;
  last: boolean;
}

/** Bytes of a unit: enough that a thread's hand-out costs little, few enough that the threads finish together. */
export const MIN_UNIT_BYTES = 1 << 20;
export const MAX_UNIT_BYTES = 32 << 20;

/** The unit size for `threads` threads over `bytes` of input: about 4 units a thread, within the bounds above. */
export function unitBytesFor(bytes: number, threads: number): number {
  return Math.min(MAX_UNIT_BYTES, Math.max(MIN_UNIT_BYTES, Math.ceil(bytes / Math.max(1, threads * 4))));
}

/** Every file of a run as one whole split, in input order (what an unsharded run reads). */
export function wholeSplits(files: readonly string[]): InputSplit[] {
  return files.map((file, order) => {
    const bytes = fileBytes(file);
    return { order, file, bytes, start: 0, end: bytes, whole: true };
  });
}

export function fileBytes(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

/**
 * The units of `splits`, in order: a split of a file that can be cut at line starts, larger than
 * `unitBytes`, in ranges of about `unitBytes`; every other split as it is. Asks `splitsAtLines`
 * (the file's first records) only of splits larger than a unit.
 */
export async function planUnits(
  splits: readonly InputSplit[],
  unitBytes: number,
  opts: { format?: string; model?: string },
): Promise<PlannedUnit[]> {
  const units: PlannedUnit[] = [];
  for (const split of splits) {
    const bytes = split.end - split.start;
    const cut =
      bytes > unitBytes &&
      (!split.whole || (await splitsAtLines(split.file, { format: opts.format, model: opts.model })));
    if (!cut) {
      units.push({ split, start: split.start, end: split.end, last: true });
      continue;
    }
    const n = Math.ceil(bytes / unitBytes);
    for (let i = 0; i < n; i++)
      units.push({
        split,
        start: split.start + Math.floor((i * bytes) / n),
        end: split.start + Math.floor(((i + 1) * bytes) / n),
        last: i === n - 1,
      });
  }
  return units;
}

/**
 * The units aligned to line starts and numbered, in order, as they are handed out (lazily: the
 * line feeds of a unit are counted when the next unit of its split is asked for).
 */
export function* alignedUnits(planned: readonly PlannedUnit[]): Generator<ReadUnit> {
  let line = 1;
  let prev: { split: InputSplit; from: number; to: number } | undefined;
  for (const u of planned) {
    const { split } = u;
    if (split.whole && u.start === 0 && u.end === split.bytes && u.last) {
      prev = undefined;
      yield { order: split.order, file: split.file, whole: true, from: 0, to: split.bytes, firstLine: 1, last: true };
      continue;
    }
    const from = prev?.split === split ? prev.to : lineStartAtOrAfter(split.file, u.start);
    const to = lineStartAtOrAfter(split.file, u.end);
    // The first unit of a split that starts inside its file counts the line feeds before it (as a shard
    // does, docs/distributed.md); the next ones, those of the unit before.
    line =
      prev?.split === split
        ? line + lineFeedsIn(split.file, prev.from, prev.to)
        : lineFeedsBefore(split.file, from) + 1;
    prev = { split, from, to };
    yield { order: split.order, file: split.file, whole: false, from, to, firstLine: line, last: u.last };
  }
}

/** Line feeds in bytes [from, to) of an uncompressed file. */
export function lineFeedsIn(file: string, from: number, to: number): number {
  if (to <= from) return 0;
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(Math.min(1 << 20, to - from));
    let count = 0;
    for (let pos = from; pos < to; ) {
      const n = fs.readSync(fd, buf, 0, Math.min(buf.length, to - pos), pos);
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

/** Records of a unit read and analyzed together on one thread: up to this many lines or bytes. */
export const UNIT_BATCH_LINES = 16;
export const UNIT_BATCH_BYTES = 64 * 1024;

/** What reading a unit gives: its events in order, batch by batch (with the byte of the file read up to), then the file's format. */
export type UnitPart = (ChunkOutcome & { readTo?: number }) | { done: true; format?: FormatName };

/**
 * Read, import and analyze one unit on this thread (the same on the main thread and on a worker):
 * batches of lines of a streamed file are imported and analyzed as they come; a file loaded whole
 * gives its trajectories one by one, each unreadable record before the first trajectory read at
 * or after its line (as a streamed file's come). Small batches: a batch's records stay live until
 * its last is analyzed, and bigger ones were promoted to V8's old generation (pipeline.ts).
 */
export async function* unitEvents(
  unit: ReadUnit,
  opts: RunOptions,
  roots: readonly string[],
): AsyncGenerator<UnitPart> {
  let format: FormatName | undefined;
  for await (const chunk of readFileChunks(unit.file, {
    format: opts.format,
    model: opts.model,
    batchLines: UNIT_BATCH_LINES,
    batchBytes: UNIT_BATCH_BYTES,
    ...(unit.whole ? {} : { aligned: { start: unit.from, end: unit.to, firstLine: unit.firstLine } }),
  })) {
    if (chunk.kind === 'lines') {
      format = chunk.format;
      const where = { file: chunk.file, line: chunk.lines[0]?.line ?? 0 };
      const last = chunk.lines.at(-1);
      const readTo = last ? last.offset + last.length : undefined;
      const outcome = await importAndAnalyze(chunk, opts, roots).catch(
        (e: unknown): ChunkOutcome => ({
          events: [
            {
              type: 'error',
              error: {
                ...where,
                message: `cannot analyze the ${chunk.lines.length} record(s) from line ${where.line}: ${(e as Error).message}`,
              },
            },
          ],
          imported: 0,
        }),
      );
      yield readTo === undefined ? outcome : { ...outcome, readTo };
      continue;
    }
    const { loaded } = chunk;
    format = loaded.format;
    const errors = [...loaded.errors].sort((a, b) => a.line - b.line);
    let next = 0;
    const errorsUpTo = (line: number): ReadError[] => {
      const from = next;
      while (next < errors.length && errors[next]!.line <= line) next++;
      return errors.slice(from, next);
    };
    const trajectories: (Trajectory | undefined)[] = loaded.trajectories;
    for (let i = 0; i < trajectories.length; i++) {
      const traj = trajectories[i]!;
      trajectories[i] = undefined; // done with once analyzed: the file's records need not all outlive it
      const due = errorsUpTo(traj.source.line);
      if (due.length > 0) yield { events: due.map((error) => ({ type: 'error', error })), imported: 0 };
      const ev = await withExport(await analyzeOrError(traj, analyzeTrajectory(traj, opts, roots), opts), opts);
      yield { events: [ev.type === 'trajectory' ? { ...ev, checked: cutChecked(ev.checked, opts) } : ev], imported: 1 };
    }
    const rest = errorsUpTo(Number.POSITIVE_INFINITY);
    if (rest.length > 0) yield { events: rest.map((error) => ({ type: 'error', error })), imported: 0 };
  }
  yield { done: true, ...(format ? { format } : {}) };
}
