// The one path from files to checked trajectories, shared by `check`, `export` and `serve`:
// stream each file (import/stream.ts: batches of raw lines where the format reads records one by
// one, else the file loaded whole), import and validate it, analyze every trajectory (on the
// worker pool when there is one), and hand the events out in input order with a bounded amount
// of work in flight. Every trajectory leaves with its run-wide key as its id
// (model/trajectory-key.ts), so a trajectory is named alike by the CLI, the API and an export.
import fs from 'node:fs';
import os from 'node:os';
import type { FormatName, Trajectory } from './model/trajectory.ts';
import { TrajectoryKeys, type KeySource } from './model/trajectory-key.ts';
import type { RunEvent } from './analysis/checked.ts';
import { expandPaths } from './import/index.ts';
import { readFileChunks, splitsAtLines, type FileChunk } from './import/stream.ts';
import { AnalysisPool } from './analysis-pool.ts';
import {
  analyzeOrError,
  analyzeTrajectory,
  defaultRoots,
  importAndAnalyze,
  withExport,
  type ChunkOutcome,
  type RunOptions,
} from './pipeline/analyze.ts';
import { planInputSplits, type InputSplit, type PlannedFile } from './pipeline/shard.ts';
import {
  alignedUnits,
  planUnits,
  unitBytesFor,
  unitEvents,
  wholeSplits,
  type ReadUnit,
  type UnitPart,
} from './pipeline/units.ts';
import { prewarmProfile } from './profiles/profile.ts';

export type { CheckedTrajectory, RunEvent } from './analysis/checked.ts';
export { streamTokens } from './analysis/checked.ts';
export {
  analyzeTrajectory,
  defaultRoots,
  failedAnalysis,
  importAndAnalyze,
  type ChunkOutcome,
  type RunOptions,
} from './pipeline/analyze.ts';

/**
 * Streamed files go in batches of up to BATCH_LINES records or BATCH_BYTES of text. A batch's
 * events come in line order, its unreadable records among its trajectories
 * (pipeline/analyze.ts `importAndAnalyze`), so where a batch begins, and so the batch size and the
 * thread that analyzes it, does not change the events.
 */
export const BATCH_LINES = 64;
export const BATCH_BYTES = 1024 * 1024;

/**
 * Batches analyzed on this thread are small: a batch's lines and parsed records stay live until
 * its last record is analyzed, long enough for V8's scavenger to copy them and promote them to
 * the old generation. With 1 MiB batches the standard run promoted ~570 MB (its whole text and
 * more) and spent ~0.65 s in scavenges; with 64 KiB batches, ~80 MB and ~0.27 s (bench/README.md).
 * Workers keep big batches: a message costs more than the scavenges it saves there.
 */
export const LOCAL_BATCH_LINES = 16;
export const LOCAL_BATCH_BYTES = 64 * 1024;

/** How a pipeline's streamed files are cut into batches. */
export interface Batching {
  batchLines: number;
  batchBytes: number;
}
/** The batching for a pipeline with or without analysis workers. */
export const batchingFor = (pooled: boolean): Batching =>
  pooled
    ? { batchLines: BATCH_LINES, batchBytes: BATCH_BYTES }
    : { batchLines: LOCAL_BATCH_LINES, batchBytes: LOCAL_BATCH_BYTES };

/** What the pipeline is fed: the chunks of each file in turn, and the end of each file. */
export type PipelineInput = FileChunk | { kind: 'end'; file: string };

/** The chunks of `files`, each file followed by its end (what `checkPaths` feeds the pipeline). */
export async function* fileInputs(
  files: readonly string[],
  opts: { format?: string; model?: string },
  batching: Batching = batchingFor(true),
): AsyncGenerator<PipelineInput> {
  for (const file of files) {
    yield* readFileChunks(file, { format: opts.format, model: opts.model, ...batching });
    yield { kind: 'end', file };
  }
}

/** The run's files as a split plan sees them: sizes, and which can be cut at line starts (asked only of files larger than one share). */
export async function plannedFiles(
  files: readonly string[],
  count: number,
  opts: { format?: string; model?: string },
): Promise<PlannedFile[]> {
  const sized = files.map((file) => ({ file, bytes: fileBytes(file) }));
  const total = sized.reduce((n, f) => n + f.bytes, 0);
  const out: PlannedFile[] = [];
  for (const f of sized)
    out.push({
      ...f,
      splittable: f.bytes * count > total && (await splitsAtLines(f.file, { format: opts.format, model: opts.model })),
    });
  return out;
}

/**
 * Import and analyze what `inputs` holds, in order. Streamed batches of lines are parsed,
 * validated and analyzed on the pool's workers (this thread only reads lines and hands out
 * results); whole-loaded files go to the pool trajectory by trajectory. Without a pool, on this
 * thread. Memory stays bounded by the work in flight, however large the run. Trajectories keep
 * the id their file gives them: `keyed` gives them their run-wide keys.
 */
export async function* analyzeInputs(
  inputs: AsyncIterable<PipelineInput>,
  opts: RunOptions,
  roots: readonly string[],
  pool?: AnalysisPool,
): AsyncGenerator<RunEvent> {
  // Work in flight: enough that a worker never waits for an older batch on another worker to be
  // handed out (results leave in input order), little enough to bound memory. Streamed batches
  // hold at most BATCH_BYTES of text each; whole-loaded files go one trajectory at a time. On
  // this thread alone, two batches: one is parsed and analyzed while the other waits for the
  // tokenizer (it encodes on libuv's thread pool, so another core can do that part).
  const workers = pool?.size ?? 0;
  const maxBatches = pool ? 3 * workers : 2;
  const maxTrajectories = pool ? 16 * workers : 1;
  type Pending =
    | { kind: 'work'; outcome: Promise<ChunkOutcome>; batch: boolean }
    | { kind: 'file'; file: string; format?: string };
  const pending: Pending[] = [];
  let batches = 0;
  let single = 0;
  const full = () => batches >= maxBatches || single >= maxTrajectories;
  let count = 0;
  async function* settleOldest(): AsyncGenerator<RunEvent> {
    const p = pending.shift()!;
    if (p.kind === 'file') {
      yield { type: 'file', file: p.file, format: p.format, count };
      count = 0;
      return;
    }
    if (p.batch) batches--;
    else single--;
    const { events, imported } = await p.outcome;
    count += imported;
    yield* events;
  }
  const submit = (outcome: Promise<ChunkOutcome>, batch: boolean) => {
    outcome.catch(() => undefined); // settled in order; avoid an unhandled rejection meanwhile
    pending.push({ kind: 'work', outcome, batch });
    if (batch) batches++;
    else single++;
  };
  let format: string | undefined;
  for await (const chunk of inputs) {
    if (chunk.kind === 'end') {
      pending.push({ kind: 'file', file: chunk.file, format });
      format = undefined;
      continue;
    }
    if (chunk.kind === 'loaded') {
      const { loaded } = chunk;
      format = loaded.format;
      // A file's unreadable records among its trajectories by line, as a streamed file's come
      // (importAndAnalyze): each before the first trajectory read at or after its line.
      const errors = [...loaded.errors].sort((a, b) => a.line - b.line);
      let nextError = 0;
      const errorsUpTo = (line: number) => {
        let end = nextError;
        while (end < errors.length && errors[end]!.line <= line) end++;
        if (end === nextError) return;
        const due = errors.slice(nextError, end);
        nextError = end;
        submit(
          Promise.resolve({
            events: due.map((error): ChunkOutcome['events'][number] => ({ type: 'error', error })),
            imported: 0,
          }),
          true,
        );
      };
      for (const traj of loaded.trajectories) {
        errorsUpTo(traj.source.line);
        // A worker that fails (it died, its reply did not arrive) leaves the trajectory to this thread.
        const here = () =>
          analyzeOrError(traj, analyzeTrajectory(traj, opts, roots), opts).then((ev) => withExport(ev, opts));
        const event = pool ? pool.analyzeEvent(traj, opts, roots).catch(here) : here();
        submit(
          event.then((ev) => ({ events: [ev], imported: 1 })),
          false,
        );
        while (full()) yield* settleOldest();
      }
      errorsUpTo(Number.POSITIVE_INFINITY);
    } else {
      format = chunk.format;
      const where = { file: chunk.file, line: chunk.lines[0]?.line ?? 0 };
      const outcome = (
        pool
          ? pool.importAndAnalyze(chunk, opts, roots).catch(() => importAndAnalyze(chunk, opts, roots))
          : importAndAnalyze(chunk, opts, roots)
      ).catch(
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
      submit(outcome, true);
    }
    while (full()) yield* settleOldest();
  }
  while (pending.length > 0) yield* settleOldest();
}

/** Give every trajectory its run-wide key as its id (in place: a copy would read every lazily unpacked stream). */
export async function* keyed(
  events: AsyncIterable<RunEvent>,
  keyOf: (t: KeySource) => string,
): AsyncGenerator<RunEvent> {
  for await (const ev of events) {
    if (ev.type === 'trajectory') setKey(ev.checked.trajectory, keyOf);
    yield ev;
  }
}

/** Replace a trajectory's stated id by its key. */
export function setKey(t: Trajectory, keyOf: (t: KeySource) => string): void {
  t.id = keyOf(t);
}

export interface CheckPathsHooks {
  /**
   * The key of each trajectory (default: a fresh `TrajectoryKeys` for this run). The server's
   * export passes the keys its store gave, so an exported row names a trajectory as the API does.
   */
  keyOf?: (t: KeySource) => string;
  /** Bytes of the inputs read so far, of `total` (a progress line; reading runs a few units ahead of the events). */
  onRead?: (read: number, total: number) => void;
  /**
   * With `opts.shard`: the run's files and the splits this shard reads, before the first event
   * (each split's events end with its `file` event).
   */
  onPlan?: (plan: { files: readonly PlannedFile[]; splits: readonly InputSplit[] }) => void;
}

/**
 * With the thread count left to it, `checkPaths` starts threads only for inputs this large: a
 * thread opens its own modules and, when a check needs one, its own tokenizer (~0.5–1 s of CPU),
 * and on a smaller input this thread alone finishes about as soon as the threads have started.
 */
export const THREADS_FROM_BYTES = 32 * 1024 * 1024;

/** The cores this process may run on (its CPU affinity, as the OS gives it). */
export function availableCores(): number {
  return os.availableParallelism?.() ?? os.cpus().length;
}

/**
 * The threads that read and analyze an input of `totalBytes` (pipeline/units.ts): `requested` when
 * given (0: this thread alone); else one per core the process may use, for inputs of
 * THREADS_FROM_BYTES or more on two cores or more, none otherwise. Never more than the input has
 * units (`checkPaths`).
 */
export function workersFor(requested: number | undefined, totalBytes: number, cores = availableCores()): number {
  if (requested !== undefined) return Math.max(0, requested);
  return cores >= 2 && totalBytes >= THREADS_FROM_BYTES ? cores : 0;
}

/**
 * The threads the server's store reads appended data with (server/http/store.ts), which still
 * hands out lines from this thread (`analyzeInputs`): only for big reads on at least three idle
 * cores (the load average), since a worker fed lines here was measured slower than none on two.
 */
export function lineWorkersFor(
  requested: number | undefined,
  totalBytes: number,
  cores = availableCores(),
  load = os.loadavg()[0] ?? 0,
): number {
  if (requested !== undefined) return Math.max(0, requested);
  const idle = Math.floor(cores - load + 0.5);
  return idle >= 3 && totalBytes >= WORKERS_FROM_BYTES ? Math.min(idle, 8) : 0;
}

/** With the worker count left to it, the store starts line workers only for reads this large. */
export const WORKERS_FROM_BYTES = 512 * 1024 * 1024;

const fileBytes = (file: string): number => {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
};

/**
 * Load and check every trajectory under `paths`, in input order (folders expanded as the format
 * registry says). The run, or with `opts.shard` this shard's input splits (pipeline/shard.ts),
 * is cut into units (pipeline/units.ts) that `opts.workers` threads read, parse, validate and
 * analyze on their own (unset: `workersFor`); their events come back in run order. Without
 * `opts.shard` every trajectory gets its run-wide key; a shard sees none of the others' records,
 * so its trajectories keep the id their data states (`merge` gives the keys) and the paths that
 * cannot be read are shard 0's.
 */
export async function* checkPaths(
  paths: readonly string[],
  opts: RunOptions,
  hooks: CheckPathsHooks = {},
): AsyncGenerator<RunEvent> {
  const roots = opts.roots ?? defaultRoots(paths);
  const shard = opts.shard;
  const { files, errors } = expandPaths(paths);
  let splits: InputSplit[];
  if (shard) {
    if (shard.index === 0) for (const error of errors) yield { type: 'error', error };
    const planned = await plannedFiles(files, shard.count, opts);
    splits = planInputSplits(planned, shard.index, shard.count);
    hooks.onPlan?.({ files: planned, splits });
    opts = { ...opts, shard: undefined };
  } else {
    for (const error of errors) yield { type: 'error', error };
    splits = wholeSplits(files);
  }
  const total = splits.reduce((n, s) => n + (s.end - s.start), 0);
  const threads = workersFor(opts.workers, total);
  const planned =
    threads > 0
      ? await planUnits(splits, opts.unitBytes ?? unitBytesFor(total, threads), opts)
      : splits.map((split) => ({ split, start: split.start, end: split.end, last: true }));
  // No more threads than units: a thread without one would only cost its start-up.
  const workers = Math.min(threads, planned.length);
  const pool = workers > 0 ? new AnalysisPool(workers) : undefined;
  // This thread's tokenizer is built while the first reads are under way, and only when this thread
  // analyzes (a thread builds its own when its first check needs it).
  if (!pool) setImmediate(() => prewarmProfile(opts.model));
  const events = analyzeUnits(
    alignedUnits(planned),
    opts,
    roots,
    pool,
    hooks.onRead && ((read) => hooks.onRead!(read, total)),
  );
  try {
    if (shard) yield* events;
    else {
      const keys = new TrajectoryKeys();
      yield* keyed(events, hooks.keyOf ?? ((t: KeySource) => keys.keyOf(t)));
    }
  } finally {
    await pool?.close();
  }
}

/**
 * The events of `units`, in order: each read on the pool's threads (a few units handed out ahead,
 * so no thread waits for the oldest to be taken), or here without a pool; each split's events
 * followed by its file's `file` event. A unit whose thread dies is read again here, its events
 * already given skipped.
 */
export async function* analyzeUnits(
  units: Iterator<ReadUnit>,
  opts: RunOptions,
  roots: readonly string[],
  pool?: AnalysisPool,
  onRead?: (read: number) => void,
): AsyncGenerator<RunEvent> {
  const ahead = pool ? 2 * pool.size : 1;
  const running: { unit: ReadUnit; parts: AsyncGenerator<UnitPart> }[] = [];
  let next = units.next();
  const fill = () => {
    while (!next.done && running.length < ahead) {
      const unit = next.value;
      running.push({ unit, parts: pool ? readElsewhere(pool, unit, opts, roots) : unitEvents(unit, opts, roots) });
      next = units.next();
    }
  };
  let count = 0;
  let format: FormatName | undefined;
  let read = 0;
  fill();
  while (running.length > 0) {
    const { unit, parts } = running.shift()!;
    fill();
    for await (const part of parts) {
      if ('done' in part) {
        format = part.format ?? format;
        break;
      }
      count += part.imported;
      if (part.readTo !== undefined) onRead?.(read + part.readTo - unit.from);
      yield* part.events;
    }
    read += unit.to - unit.from;
    onRead?.(read);
    if (unit.last) {
      yield { type: 'file', file: unit.file, format, count };
      count = 0;
      format = undefined;
    }
  }
}

/**
 * A unit read on the pool; if its worker fails, read here, the parts already given skipped (a unit's
 * parts are the same on any thread). The unit is posted to its worker now, not when its parts are
 * first asked for: `analyzeUnits` keeps several in flight so that every worker reads at once.
 */
function readElsewhere(
  pool: AnalysisPool,
  unit: ReadUnit,
  opts: RunOptions,
  roots: readonly string[],
): AsyncGenerator<UnitPart> {
  let started: AsyncGenerator<UnitPart> | undefined;
  try {
    started = pool.readUnit(unit, opts, roots);
  } catch {
    // no live worker: this thread reads the unit
  }
  return (async function* () {
    let given = 0;
    if (started) {
      try {
        for await (const part of started) {
          yield part;
          given++;
        }
        return;
      } catch {
        // the worker died or failed: this thread reads the unit
      }
    }
    let seen = 0;
    for await (const part of unitEvents(unit, opts, roots)) if (seen++ >= given) yield part;
  })();
}
