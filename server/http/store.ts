// What the server knows about a run: a small summary per trajectory in memory, the full
// analysis (token streams, alignment) re-read on demand and kept for a few trajectories only.
// Runs are read by the same pipeline as `check` and `export` (server/pipeline.ts: streamed
// import, validation, analysis on the worker pool) and trajectories get the same keys
// (model/trajectory-key.ts). This file composes the serve layer, one job per file:
// serve/folders.ts (polling the paths), serve/file-reads.ts (reading what was appended),
// serve/run-index.ts (the summaries, groups, steps), serve/list-query.ts (the overview's list) and
// serve/rereads.ts (one record's full analysis).
import fs from 'node:fs';
import path from 'node:path';
import type { Finding } from '../model/finding.ts';
import type { ReadError } from '../model/trajectory.ts';
import type { TrajectoryKeys } from '../model/trajectory-key.ts';
import {
  analyzeInputs,
  defaultRoots,
  type CheckedTrajectory,
  type PipelineInput,
  type RunOptions,
  lineWorkersFor,
} from '../pipeline.ts';
import { AnalysisPool } from '../analysis-pool.ts';
import { BUILTIN_PROFILES, profileFor } from '../profiles/profile.ts';
import type {
  GroupList,
  GroupQuery,
  ListFilter,
  ListQuery,
  RunInfo,
  RunSteps,
  TrajectoryList,
  TrajectorySummary,
} from './api.ts';
import { RunFolders } from './serve/folders.ts';
import { FileReads } from './serve/file-reads.ts';
import { RunIndex } from './serve/run-index.ts';
import { ListQueries } from './serve/list-query.ts';
import { RecordRereads } from './serve/rereads.ts';

export { RunFolders } from './serve/folders.ts';
export { countFindings, summarize } from './serve/summary.ts';

export interface RunStore {
  info(): RunInfo;
  list(query: ListQuery): TrajectoryList;
  /** Every trajectory `filter` selects, in the order they were read (the export of "the current filter"). */
  select(filter: ListFilter): TrajectorySummary[];
  summary(id: string): TrajectorySummary | undefined;
  /** The full analysis of one trajectory (re-loaded and re-checked when not cached). */
  get(id: string): Promise<CheckedTrajectory | undefined>;
  /** Folders image files may be read from. */
  roots(): readonly string[];
  options(): RunOptions;
  /** Read the paths again now (new files, appended records); the poll does this on its own. */
  refresh(): Promise<void>;
  /** The trajectory keys the run was given (the export names rows by them). */
  keys(): Pick<TrajectoryKeys, 'peek'>;
  /** Per rollout step: counts, findings, reward and length distributions. */
  steps(): RunSteps;
  /** GRPO groups in the order their first sample was read, with their members. */
  groups(query: GroupQuery): GroupList;
  /** The group findings of a trajectory's group (empty when it names none, or its group is fine). */
  groupFindings(id: string): Finding[];
  /** Resolves once every file given at start has been read once. */
  ready: Promise<void>;
  close(): void;
}

/**
 * Worker threads start once a read has at least this many bytes to do: each worker opens its own
 * tokenizer (about a second), which a small run or a few appended lines do not repay.
 */
const POOL_FROM_BYTES = 4 * 1024 * 1024;

export interface StoreOptions extends RunOptions {
  /** Poll interval for growing files (ms); 0 disables watching. */
  pollMs?: number;
  demo?: boolean;
  /** Full analyses kept in memory. */
  cacheSize?: number;
  /**
   * With `workers`, a read of at least this many bytes runs on worker threads (default
   * POOL_FROM_BYTES); without `workers`, the threads `check` would start for the read.
   */
  poolFromBytes?: number;
}

/** Loads `paths` in the background and keeps watching them for appended records. */
export function openRunStore(paths: readonly string[], opts: StoreOptions = {}): RunStore {
  const roots = opts.roots ?? defaultRoots(paths);
  const runOpts: RunOptions = {
    model: opts.model,
    format: opts.format,
    processor: opts.processor,
    roots,
    allowRemoteImages: opts.allowRemoteImages,
  };
  /**
   * The store's own reads hand out each trajectory cut to its index facts (pipeline/wire.ts
   * `forStore`); `options()` stays what the run was given, for the reads others make (an export).
   */
  const readOpts: RunOptions = { ...runOpts, storeIndex: opts.storeIndex ?? true };
  const index = new RunIndex();
  const lists = new ListQueries(index);
  const rereads = new RecordRereads(runOpts, roots, opts.cacheSize ?? 8);
  const reads = new FileReads({
    format: opts.format,
    model: opts.model,
    known: (t) => index.known(t),
    noteLines: (file, lines) => rereads.note(file, lines),
  });
  const folders = new RunFolders(paths);
  const pathErrors: ReadError[] = [];
  const profile = profileFor(opts.model, undefined);
  let loading = true;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  /**
   * Threads for a read of `bytes`: `opts.workers` when given (for reads of poolFromBytes or more);
   * else what `check` starts for it (workersFor: idle cores, big reads only), so serve reads a run
   * as fast as check does and holds no more tokenizers.
   */
  const workersForRead = (bytes: number) =>
    opts.workers === undefined
      ? lineWorkersFor(undefined, bytes)
      : opts.workers > 0 && bytes >= (opts.poolFromBytes ?? POOL_FROM_BYTES)
        ? opts.workers
        : 0;
  const pools = new Set<AnalysisPool>();

  const display = (file: string) => {
    const rel = path.relative(process.cwd(), file);
    return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
  };

  function addChecked(checked: CheckedTrajectory): void {
    const added = index.add(checked);
    if (added === 'known') return;
    const id = checked.trajectory.id;
    // Read again grown (a gateway session took a turn): its earlier analysis is stale.
    if (added === 'grown') rereads.forget(id);
    // A trajectory that still has its streams (a whole-loaded file's, analyzed on this thread): kept for the first `get`.
    if (!checked.index) rereads.keep(id, checked);
    const state = reads.files.get(checked.trajectory.source.file);
    if (added === 'new' && state) state.count++;
  }

  async function scan(): Promise<void> {
    const { files: found, errors } = folders.expand();
    pathErrors.splice(
      0,
      pathErrors.length,
      ...errors.filter((e) => !pathErrors.some((p) => p.file === e.file && p.message === e.message)),
      ...pathErrors.filter((p) => p.line > 0),
    );
    const changed: { file: string; size: number }[] = [];
    const now = Date.now();
    for (const file of folders.due(found, now)) {
      try {
        const st = fs.statSync(file);
        folders.saw(file, st.mtimeMs);
        if (reads.sizeOf(file) !== st.size) changed.push({ file, size: st.size });
      } catch {
        // gone since the folder was listed
      }
    }
    if (changed.length === 0) return;
    const grown = changed.reduce((n, c) => n + Math.max(0, c.size - Math.max(0, reads.sizeOf(c.file) ?? 0)), 0);
    // Workers for a large read only, closed after it: idle workers would each hold a tokenizer.
    const workers = closed ? 0 : workersForRead(grown);
    const pool = workers > 0 ? new AnalysisPool(workers) : undefined;
    if (pool) pools.add(pool);
    async function* inputs(): AsyncGenerator<PipelineInput> {
      for (const { file, size } of changed) {
        if (closed) return;
        yield* reads.inputs(file, size, pool !== undefined);
      }
    }
    try {
      for await (const ev of analyzeInputs(inputs(), readOpts, roots, pool)) {
        if (ev.type === 'trajectory') addChecked(ev.checked);
        // A streamed file's record and analysis errors are its own; a whole-loaded file's read
        // errors were taken with it, so what comes here could not be analyzed.
        else if (ev.type === 'error' && !reads.error(ev.error)) pathErrors.push(ev.error);
      }
    } finally {
      if (pool) {
        pools.delete(pool);
        await pool.close();
      }
    }
  }

  let scanning: Promise<void> = Promise.resolve();
  const refresh = () => (scanning = scanning.then(scan, scan));
  const ready = refresh()
    .catch((e: unknown) => {
      pathErrors.push({ file: paths.join(', '), line: 0, message: `cannot load: ${(e as Error).message}` });
    })
    .finally(() => {
      loading = false;
      const poll = opts.pollMs ?? 1000;
      if (poll > 0 && !closed) {
        let busy = false;
        timer = setInterval(() => {
          if (busy) return;
          busy = true;
          refresh()
            .catch(() => undefined)
            .finally(() => (busy = false));
        }, poll);
        timer.unref();
      }
    });

  return {
    ready,
    refresh,
    roots: () => roots,
    options: () => runOpts,
    keys: () => index.keys,
    info(): RunInfo {
      return {
        paths: paths.map(display),
        files: [...reads.files.entries()].map(([file, s]) => ({
          file: display(file),
          format: s.format,
          trajectories: s.count,
        })),
        trajectories: index.entries.size,
        ...index.counts(),
        profile: { name: profile.name, family: profile.family },
        builtinProfiles: [...BUILTIN_PROFILES],
        errors: [...pathErrors, ...[...reads.files.values()].flatMap((s) => s.errors)].map((e) => ({
          ...e,
          file: display(e.file),
        })),
        demo: opts.demo === true,
        loading,
        revision: index.version,
      };
    },
    list: (query) => lists.list(query),
    select: (filter) => lists.select(filter),
    summary: (id) => index.summary(id),
    groupFindings: (id) => index.groupFindings(id),
    steps: () => index.steps(),
    groups: (query) => index.groups(query),
    async get(id) {
      const entry = index.entries.get(id);
      if (!entry) return undefined;
      const { file, line } = entry.summary.source;
      return rereads.get({
        id,
        originalId: entry.originalId,
        file,
        format: reads.files.get(file)?.format ?? null,
        line,
      });
    },
    close() {
      closed = true;
      if (timer) clearInterval(timer);
      for (const p of pools) void p.close();
    },
  };
}
