// The one path from files to checked trajectories, shared by `check`, `export` and `serve`:
// stream each file (import/stream.ts: batches of raw lines where the format reads records one by
// one, else the file loaded whole), import and validate it, analyze every trajectory (on the
// worker pool when there is one), and hand the events out in input order with a bounded amount
// of work in flight. Every trajectory leaves with its run-wide key as its id
// (model/trajectory-key.ts), so a trajectory is named alike by the CLI, the API and an export.
import fs from 'node:fs';
import os from 'node:os';
import type { Trajectory } from './model/trajectory.ts';
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
import {
  ownsError,
  ownsTrajectory,
  planInputSplits,
  runRoot,
  type InputSplit,
  type PlannedFile,
  type Skipped,
} from './pipeline/shard.ts';
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

/** The chunks of one shard's input splits, each followed by the end of its file. */
export async function* splitInputs(
  splits: readonly InputSplit[],
  opts: { format?: string; model?: string },
  batching: Batching = batchingFor(true),
): AsyncGenerator<PipelineInput> {
  for (const s of splits) {
    yield* readFileChunks(s.file, {
      format: opts.format,
      model: opts.model,
      ...batching,
      ...(s.whole ? {} : { range: { start: s.start, end: s.end } }),
    });
    yield { kind: 'end', file: s.file };
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
  onSkipped?: (s: Skipped) => void,
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
    for (const ev of events) {
      if (ev.type === 'skipped') onSkipped?.(ev);
      else yield ev;
    }
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
            events: due.map((error): ChunkOutcome['events'][number] =>
              ownsError(opts.shard, error) ? { type: 'error', error } : { type: 'skipped', what: 'error' },
            ),
            imported: 0,
          }),
          true,
        );
      };
      for (const traj of loaded.trajectories) {
        errorsUpTo(traj.source.line);
        if (!ownsTrajectory(opts.shard, traj)) {
          const skipped: Skipped = { type: 'skipped', what: 'trajectory', trajectory: traj };
          submit(Promise.resolve({ events: [skipped], imported: 0 }), false);
          continue;
        }
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
            ownsError(opts.shard, where)
              ? {
                  type: 'error',
                  error: {
                    ...where,
                    message: `cannot analyze the ${chunk.lines.length} record(s) from line ${where.line}: ${(e as Error).message}`,
                  },
                }
              : { type: 'skipped', what: 'error' },
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
  /**
   * Called, in run order, for each trajectory and unreadable record another shard owns
   * (`opts.shard`): their keys are given all the same, so a shard names its own as a whole run would.
   */
  onSkipped?: (s: Skipped) => void;
  /** Bytes of the inputs read so far, of `total` (a progress line; reading runs a few batches ahead of the analysis). */
  onRead?: (read: number, total: number) => void;
  /**
   * With `opts.shard.split === 'input'`: the run's files and the splits this shard reads, before
   * the first event (each split's events end with its `file` event).
   */
  onPlan?: (plan: { files: readonly PlannedFile[]; splits: readonly InputSplit[] }) => void;
}

/**
 * With the worker count left to it, `checkPaths` starts workers only for inputs this large: a
 * worker opens its own modules and tokenizer (1–2 s of CPU each), and on a small run the main
 * thread alone finishes sooner than the workers start.
 */
export const WORKERS_FROM_BYTES = 512 * 1024 * 1024;

/**
 * The worker count `checkPaths` uses: `requested` when given; else, for big inputs, one per idle
 * core (≤ 8) when at least three are idle, none otherwise. Cores other processes keep busy (the
 * load average) do not count: a worker there only competes with the main thread and costs its
 * start-up. With two idle cores the main thread (reading, decoding lines, receiving results)
 * and two workers share two cores: measured slower than the main thread alone, with twice its
 * memory (bench/README.md), so two cores run on the main thread.
 */
export function workersFor(
  requested: number | undefined,
  totalBytes: number,
  cores = os.availableParallelism?.() ?? os.cpus().length,
  load = os.loadavg()[0] ?? 0,
): number {
  if (requested !== undefined) return Math.max(0, requested);
  const idle = Math.floor(cores - load + 0.5);
  return idle >= 3 && totalBytes >= WORKERS_FROM_BYTES ? Math.min(idle, 8) : 0;
}

const fileBytes = (file: string): number => {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
};

/** `inputs`, telling `onRead` how far into the inputs the reading is (`spans`: the bytes of each file to be read, in order). */
async function* reportingReads(
  inputs: AsyncIterable<PipelineInput>,
  spans: readonly { file: string; start: number; end: number }[],
  onRead: (read: number, total: number) => void,
): AsyncGenerator<PipelineInput> {
  const total = spans.reduce((n, s) => n + (s.end - s.start), 0);
  let span = 0;
  let before = 0;
  for await (const input of inputs) {
    const s = spans[span];
    if (input.kind === 'end') {
      before += s ? s.end - s.start : 0;
      span++;
      onRead(before, total);
    } else if (input.kind === 'lines') {
      const last = input.lines[input.lines.length - 1];
      if (last && s) onRead(before + Math.min(s.end, last.offset + last.length) - s.start, total);
    }
    yield input;
  }
}

/**
 * Load and check every trajectory under `paths`, file by file, in input order (folders expanded
 * as the format registry says), with `opts.workers` analysis threads (unset: `workersFor`).
 */
export async function* checkPaths(
  paths: readonly string[],
  opts: RunOptions,
  hooks: CheckPathsHooks = {},
): AsyncGenerator<RunEvent> {
  const roots = opts.roots ?? defaultRoots(paths);
  if (opts.shard?.split === 'input') {
    yield* checkInputSplit(paths, opts, hooks, roots);
    return;
  }
  if (opts.shard && opts.shard.root === undefined) opts = { ...opts, shard: { ...opts.shard, root: runRoot(paths) } };
  const { files, errors } = expandPaths(paths);
  for (const error of errors) {
    if (ownsError(opts.shard, error)) yield { type: 'error', error };
    else hooks.onSkipped?.({ type: 'skipped', what: 'error' });
  }
  const total = files.reduce((n, f) => n + fileBytes(f), 0);
  const workers = workersFor(opts.workers, total);
  const pool = workers > 0 ? new AnalysisPool(workers) : undefined;
  // This thread's tokenizer is built while the first reads are under way, not after the first
  // batch is parsed (a no-op when the CLI built it while its modules loaded).
  if (!pool) setImmediate(() => prewarmProfile(opts.model));
  const keys = new TrajectoryKeys();
  const keyOf = hooks.keyOf ?? ((t: KeySource) => keys.keyOf(t));
  const batching = batchingFor(pool !== undefined);
  const inputs = hooks.onRead
    ? reportingReads(
        fileInputs(files, opts, batching),
        files.map((file) => ({ file, start: 0, end: fileBytes(file) })),
        hooks.onRead,
      )
    : fileInputs(files, opts, batching);
  try {
    const onSkipped = (s: Skipped) => {
      if (s.what === 'trajectory') keyOf(s.trajectory);
      hooks.onSkipped?.(s);
    };
    yield* keyed(analyzeInputs(inputs, opts, roots, pool, onSkipped), keyOf);
  } finally {
    await pool?.close();
  }
}

/**
 * `checkPaths` for a shard that reads only its share of the input (pipeline/shard.ts
 * `planInputSplits`): every record it reads is its own, and the paths that cannot be read are
 * shard 0's. It sees no record of the others, so trajectories keep the id their data states:
 * `merge` gives the run-wide keys.
 */
async function* checkInputSplit(
  paths: readonly string[],
  opts: RunOptions,
  hooks: CheckPathsHooks,
  roots: readonly string[],
): AsyncGenerator<RunEvent> {
  const shard = opts.shard!;
  const { files, errors } = expandPaths(paths);
  if (shard.index === 0) for (const error of errors) yield { type: 'error', error };
  const planned = await plannedFiles(files, shard.count, opts);
  const splits = planInputSplits(planned, shard.index, shard.count);
  hooks.onPlan?.({ files: planned, splits });
  const own = { ...opts, shard: undefined };
  const total = splits.reduce((n, s) => n + (s.end - s.start), 0);
  const workers = workersFor(opts.workers, total);
  const pool = workers > 0 ? new AnalysisPool(workers) : undefined;
  const batching = batchingFor(pool !== undefined);
  const inputs = hooks.onRead
    ? reportingReads(splitInputs(splits, opts, batching), splits, hooks.onRead)
    : splitInputs(splits, opts, batching);
  try {
    yield* analyzeInputs(inputs, own, roots, pool);
  } finally {
    await pool?.close();
  }
}
