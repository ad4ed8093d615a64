// The one path from files to checked trajectories, shared by `check`, `export` and the server:
// load (detect format, import), resolve image sizes from their bytes, pick the model profile,
// run the checks and the canonical re-alignment.
import path from 'node:path';
import type { Finding } from './model/finding.ts';
import type { FormatName, ProcessorSettings, ReadError, Trajectory } from './model/trajectory.ts';
import { profileFor, type ModelProfile } from './profiles/profile.ts';
import { analysisContext } from './analysis/context.ts';
import type { MismatchThresholds } from './analysis/logprob-mismatch.ts';
import { checkTrajectory } from './analysis/checks.ts';
import type { Alignment } from './analysis/realign.ts';
import { expandPaths } from './import/index.ts';
import { importLines, readFileChunks } from './import/stream.ts';
import type { RecordLine } from './import/records.ts';
import { resolveImages } from './images/resolve.ts';
import { AnalysisPool } from './analysis-pool.ts';

export interface RunOptions {
  /** Built-in profile name, model name, or local model folder. */
  model?: string;
  format?: string;
  processor?: ProcessorSettings;
  /** Folders local images may be read from (default: the folders of the inputs). */
  roots?: string[];
  /** Worker threads for the analysis; 0 runs it on the main thread. */
  workers?: number;
  /** Fetch http(s) images named by the records (`--allow-remote-images`; SSRF-guarded, server/images/remote.ts). */
  allowRemoteImages?: boolean;
  /** Rollout-vs-trainer logprob thresholds (`--max-logprob-delta`, `--mean-logprob-delta`, `--is-cap`). */
  mismatch?: MismatchThresholds;
}

export interface CheckedTrajectory {
  trajectory: Trajectory;
  profile: ModelProfile;
  findings: Finding[];
  alignment: Alignment;
  rerender?: number[];
}

export async function analyzeTrajectory(
  traj: Trajectory,
  opts: RunOptions,
  roots: readonly string[],
): Promise<CheckedTrajectory> {
  const baseDir = path.dirname(path.resolve(traj.source.file));
  const resolved = await resolveImages(traj, { baseDir, roots, allowRemoteImages: opts.allowRemoteImages === true });
  const profile = profileFor(opts.model, resolved.model);
  const ctx = { ...analysisContext(resolved, profile, opts.processor), mismatch: opts.mismatch };
  const { findings, alignment, rerender } = await checkTrajectory(resolved, ctx);
  return { trajectory: resolved, profile, findings, alignment, rerender };
}

export function defaultRoots(paths: readonly string[]): string[] {
  return paths.map((p) => path.resolve(p)).map((p) => (/\.[a-z0-9]+$/i.test(p) ? path.dirname(p) : p));
}

export type RunEvent =
  | { type: 'trajectory'; checked: CheckedTrajectory }
  | { type: 'error'; error: ReadError }
  /** A file is done (after its errors and trajectories): its format and how many trajectories it held. */
  | { type: 'file'; file: string; format?: string; count: number };

/**
 * Streamed files go in batches of up to BATCH_LINES records or BATCH_BYTES of text. Within a
 * batch the read errors come first, as `loadFile` reports them, so a file that fits one batch
 * gives exactly the events it gave when files were loaded whole.
 */
const BATCH_LINES = 64;
const BATCH_BYTES = 1024 * 1024;

/** Settles to the events of one piece of work, in order; `imported` counts the trajectories it read. */
export interface ChunkOutcome {
  events: RunEvent[];
  imported: number;
}

/** Import and analyze one batch of raw lines on this thread (what a pool worker does with it). */
export async function importAndAnalyze(
  chunk: { file: string; format: FormatName; lines: RecordLine[] },
  opts: RunOptions,
  roots: readonly string[],
): Promise<ChunkOutcome> {
  const { trajectories, errors } = importLines(chunk.file, chunk.format, chunk.lines);
  const events: RunEvent[] = errors.map((error) => ({ type: 'error', error }));
  for (const traj of trajectories) events.push(await analyzeOrError(traj, analyzeTrajectory(traj, opts, roots)));
  return { events, imported: trajectories.length };
}

async function analyzeOrError(traj: Trajectory, result: Promise<CheckedTrajectory>): Promise<RunEvent> {
  try {
    return { type: 'trajectory', checked: await result };
  } catch (e) {
    return { type: 'error', error: cannotAnalyze(traj, e) };
  }
}

export function cannotAnalyze(traj: Pick<Trajectory, 'id' | 'source'>, e: unknown): ReadError {
  return {
    file: traj.source.file,
    line: traj.source.line,
    message: `cannot analyze trajectory ${traj.id}: ${(e as Error).message}`,
  };
}

/**
 * Load and check every trajectory under `paths`, file by file, in input order. Files a
 * record-local importer reads are streamed in batches of lines (import/stream.ts): with workers,
 * parsing, validation and analysis all run on the worker threads, and this thread only reads
 * lines and hands out the results; memory stays bounded by the records in flight, however large
 * the run. Other files are loaded whole, then analyzed trajectory by trajectory.
 */
export async function* checkPaths(paths: readonly string[], opts: RunOptions): AsyncGenerator<RunEvent> {
  const roots = opts.roots ?? defaultRoots(paths);
  const { files, errors } = expandPaths(paths);
  for (const error of errors) yield { type: 'error', error };
  const workers = opts.workers && opts.workers > 0 ? opts.workers : 0;
  const pool = workers > 0 ? new AnalysisPool(workers) : undefined;
  // Work in flight: enough that a worker never waits for an older batch on another worker to be
  // handed out (results leave in input order), little enough to bound memory. Streamed batches
  // hold at most BATCH_BYTES of text each; whole-loaded files go one trajectory at a time. On
  // this thread alone, two batches: one is parsed and analyzed while the other waits for the
  // tokenizer (it encodes on libuv's thread pool, so another core can do that part).
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
  try {
    for (const file of files) {
      let format: string | undefined;
      for await (const chunk of readFileChunks(file, {
        format: opts.format,
        batchLines: BATCH_LINES,
        batchBytes: BATCH_BYTES,
      })) {
        if (chunk.kind === 'loaded') {
          const { loaded } = chunk;
          format = loaded.format;
          submit(
            Promise.resolve({
              events: loaded.errors.map((error): RunEvent => ({ type: 'error', error })),
              imported: 0,
            }),
            true,
          );
          for (const traj of loaded.trajectories) {
            const result = pool ? pool.analyze(traj, opts, roots) : analyzeTrajectory(traj, opts, roots);
            submit(
              analyzeOrError(traj, result).then((ev) => ({ events: [ev], imported: 1 })),
              false,
            );
            while (full()) yield* settleOldest();
          }
        } else {
          format = chunk.format;
          const where = { file: chunk.file, line: chunk.lines[0]?.line ?? 0 };
          const outcome = (
            pool ? pool.importAndAnalyze(chunk, opts, roots) : importAndAnalyze(chunk, opts, roots)
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
      pending.push({ kind: 'file', file, format });
    }
    while (pending.length > 0) yield* settleOldest();
  } finally {
    await pool?.close();
  }
}

/** The tokens of the stream a finding points into. */
export function streamTokens(c: CheckedTrajectory, stream: Finding['stream'], turn: number): number[] | undefined {
  switch (stream) {
    case 'sample':
      return c.trajectory.sample?.tokens;
    case 'canonical':
      return c.alignment.tokens;
    case 'rerender':
      return c.rerender;
    case 'prompt': {
      const t = c.trajectory.turns[turn];
      return t?.promptIds ? [...t.promptIds, ...(t.generatedIds ?? [])] : undefined;
    }
    default:
      return undefined;
  }
}
