// What the server knows about a run: a small summary per trajectory in memory, the full
// analysis (token streams, alignment) re-loaded on demand and kept for a few trajectories only.
// Runs are read by the same pipeline as `check` and `export` (server/pipeline.ts: streamed
// import, validation, analysis on the worker pool) and trajectories get the same keys
// (model/trajectory-key.ts); the store adds what a server needs on top: reading only what was
// appended since the last read, and a line index to re-read one record.
import fs from 'node:fs';
import path from 'node:path';
import type { Finding } from '../model/finding.ts';
import type { FormatName, ReadError, Trajectory } from '../model/trajectory.ts';
import { TrajectoryKeys } from '../model/trajectory-key.ts';
import {
  analyzeInputs,
  analyzeTrajectory,
  BATCH_BYTES,
  BATCH_LINES,
  defaultRoots,
  type CheckedTrajectory,
  type PipelineInput,
  type RunOptions,
} from '../pipeline.ts';
import { AnalysisPool } from '../analysis-pool.ts';
import { expandPaths, loadFile } from '../import/index.ts';
import { importerFor, readsLineByLine } from '../import/formats.ts';
import { readLines, type RecordLine } from '../import/read/lines.ts';
import { importLines, readFileChunks } from '../import/stream.ts';
import type { LoadedFile } from '../import/index.ts';
import { profileFor } from '../profiles/profile.ts';
import type { FindingCounts, ListQuery, RunInfo, TrajectoryList, TrajectorySummary } from './api.ts';

export interface RunStore {
  info(): RunInfo;
  list(query: ListQuery): TrajectoryList;
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
  /** Resolves once every file given at start has been read once. */
  ready: Promise<void>;
  close(): void;
}

interface Entry {
  summary: TrajectorySummary;
  /** Id as the file states it (the key, the store's id, gets `#N` when an earlier trajectory has it). */
  originalId: string;
  /** Distinct token ids of the trajectory's streams, sorted: a token-id query without holding the streams. */
  tokenSet: Uint32Array;
  /** The profile it was checked with and the model name its record states. */
  model: { profile: string; name: string | null };
}

interface FileState {
  size: number;
  format: string | null;
  errors: ReadError[];
  count: number;
  /** Lines of a whole-loaded file whose trajectory could not be analyzed: not retried when the file grows. */
  failedLines: Set<number>;
  /** A record-local JSONL file read as a stream (never held whole): where the next read starts. */
  streamed?: { end: number; nextLine: number; format: FormatName };
}

/** Appended lines are imported in batches of this many. */
const APPENDED_BATCH_LINES = 16;
/**
 * Worker threads start once a read has at least this many bytes to do: each worker opens its own
 * tokenizer (about a second), which a small run or a few appended lines do not repay.
 */
const POOL_FROM_BYTES = 4 * 1024 * 1024;

/** Least-recently-used cache of full analyses. */
class Lru<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly capacity: number) {}
  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: string, v: V): void {
    this.map.delete(key);
    this.map.set(key, v);
    while (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value!);
  }
}

export function countFindings(findings: readonly Finding[]): FindingCounts {
  const out: FindingCounts = { kind: {}, cause: {}, severity: {} };
  for (const f of findings) {
    out.kind[f.kind] = (out.kind[f.kind] ?? 0) + 1;
    if (f.cause) out.cause[f.cause] = (out.cause[f.cause] ?? 0) + 1;
    out.severity[f.severity] = (out.severity[f.severity] ?? 0) + 1;
  }
  return out;
}

function distinctTokens(c: CheckedTrajectory): Uint32Array {
  const set = new Set<number>(c.alignment.tokens);
  for (const t of c.trajectory.turns) {
    for (const id of t.promptIds ?? []) set.add(id);
    for (const id of t.generatedIds ?? []) set.add(id);
  }
  for (const id of c.trajectory.sample?.tokens ?? []) set.add(id);
  for (const id of c.rerender ?? []) set.add(id);
  return Uint32Array.from([...set].filter((x) => x >= 0 && x < 2 ** 32)).sort();
}

function hasToken(set: Uint32Array, id: number): boolean {
  let lo = 0;
  let hi = set.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = set[mid]!;
    if (v === id) return true;
    if (v < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

export function summarize(id: string, c: CheckedTrajectory): TrajectorySummary {
  const t = c.trajectory;
  const counts = countFindings(c.findings);
  const health = c.findings.some((f) => f.severity === 'error') ? 'error' : c.findings.length > 0 ? 'warning' : 'ok';
  return {
    id,
    format: t.source.format,
    source: { file: t.source.file, line: t.source.line },
    turns: t.turns.length,
    tokens: c.alignment.tokens.length,
    images: t.images.length,
    reward: t.reward ?? null,
    status: t.status ?? null,
    health,
    findings: counts,
    headline: headline(c.findings[0]?.message),
  };
}

/** The row tooltip: the first finding's sentence, capped (100k rows × full messages would be most of the list's bytes). */
function headline(message: string | undefined): string | null {
  if (message === undefined) return null;
  return message.length > 200 ? `${message.slice(0, 199)}…` : message;
}

/** Trajectories per model profile, most first, with the model names their records state. */
function modelCounts(entries: Iterable<Entry>): RunInfo['models'] {
  const byProfile = new Map<string, { trajectories: number; names: Set<string> }>();
  for (const e of entries) {
    const m = byProfile.get(e.model.profile) ?? { trajectories: 0, names: new Set<string>() };
    m.trajectories++;
    if (e.model.name) m.names.add(e.model.name);
    byProfile.set(e.model.profile, m);
  }
  return [...byProfile.entries()]
    .map(([profile, m]) => ({ profile, trajectories: m.trajectories, names: [...m.names].sort() }))
    .sort((a, b) => b.trajectories - a.trajectories || a.profile.localeCompare(b.profile));
}

const HEALTH_RANK = { ok: 0, warning: 1, error: 2 } as const;

function compareBy(key: ListQuery['sort']): (a: TrajectorySummary, b: TrajectorySummary) => number {
  const num = (x: number | null) => x ?? Number.NEGATIVE_INFINITY;
  const total = (s: TrajectorySummary) => Object.values(s.findings.kind).reduce((x, y) => x + y, 0);
  switch (key) {
    case 'id':
      return (a, b) => a.id.localeCompare(b.id, undefined, { numeric: true });
    case 'format':
      return (a, b) => a.format.localeCompare(b.format);
    case 'file':
      return (a, b) => a.source.file.localeCompare(b.source.file) || a.source.line - b.source.line;
    case 'status':
      return (a, b) => (a.status ?? '').localeCompare(b.status ?? '');
    case 'reward':
      return (a, b) => num(a.reward) - num(b.reward);
    case 'findings':
      return (a, b) => HEALTH_RANK[a.health] - HEALTH_RANK[b.health] || total(a) - total(b);
    default:
      return (a, b) => a[key] - b[key];
  }
}

export interface StoreOptions extends RunOptions {
  /** Poll interval for growing files (ms); 0 disables watching. */
  pollMs?: number;
  demo?: boolean;
  /** Full analyses kept in memory. */
  cacheSize?: number;
  /** With `workers`, a read of at least this many bytes runs on worker threads (default POOL_FROM_BYTES). */
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
  const entries = new Map<string, Entry>();
  const order: string[] = [];
  const files = new Map<string, FileState>();
  const pathErrors: ReadError[] = [];
  const cache = new Lru<CheckedTrajectory>(opts.cacheSize ?? 8);
  let loading = true;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  /** Bumped whenever a trajectory is added, so cached list answers go stale. */
  let version = 0;
  let lastList: { key: string; matches: TrajectorySummary[] } | undefined;
  const profile = profileFor(opts.model, undefined);
  const reloader = new Reloader(opts.format);
  const keys = new TrajectoryKeys();
  const workers = opts.workers && opts.workers > 0 ? opts.workers : 0;
  const pools = new Set<AnalysisPool>();
  /** One analysis per trajectory at a time, however many requests ask for it. */
  const pending = new Map<string, Promise<CheckedTrajectory | undefined>>();

  const display = (file: string) => {
    const rel = path.relative(process.cwd(), file);
    return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
  };

  /** What is new in `file` since the last read, as pipeline input (nothing when its size is unchanged). */
  async function* fileInputs(file: string, size: number): AsyncGenerator<PipelineInput> {
    const state = files.get(file) ?? { size: -1, format: null, errors: [], count: 0, failedLines: new Set<number>() };
    files.set(file, state);
    if (state.size === size) return;
    state.size = size;
    // A file whose format reads records one by one is streamed (as `check` and `export` read it):
    // only summaries stay in memory, and later reads start where the last one stopped.
    if (state.streamed && size < state.streamed.end) state.streamed = { ...state.streamed, end: 0, nextLine: 1 }; // rewritten: read again, seen records skipped
    if (state.streamed) {
      let batch: RecordLine[] = [];
      for await (const l of readLines(file, { start: state.streamed.end, firstLine: state.streamed.nextLine })) {
        batch.push(l);
        if (batch.length >= APPENDED_BATCH_LINES) {
          const chunk = streamedChunk(file, state, batch);
          if (chunk) yield chunk;
          batch = [];
        }
      }
      const chunk = streamedChunk(file, state, batch);
      if (chunk) yield chunk;
    } else {
      for await (const chunk of readFileChunks(file, {
        format: opts.format,
        batchLines: BATCH_LINES,
        batchBytes: BATCH_BYTES,
      })) {
        if (chunk.kind === 'loaded') {
          yield { kind: 'loaded', loaded: takeLoaded(file, size, state, chunk.loaded) };
          continue;
        }
        if (!state.streamed) {
          state.streamed = { end: 0, nextLine: 1, format: chunk.format };
          state.format = chunk.format;
          state.errors = [];
        }
        const lines = streamedChunk(file, state, chunk.lines);
        if (lines) yield lines;
      }
    }
    yield { kind: 'end', file };
  }

  /** Complete lines of a streamed file, noted for re-reads; a partial last line waits for the rest of it. */
  function streamedChunk(file: string, state: FileState, lines: readonly RecordLine[]): PipelineInput | undefined {
    const complete = lines.filter((l) => l.problem !== 'unterminated');
    const last = complete.at(-1);
    if (!last || !state.streamed) return undefined;
    reloader.note(file, complete);
    state.streamed = { ...state.streamed, end: last.offset + last.length + 1, nextLine: last.line + 1 };
    return { kind: 'lines', file, format: state.streamed.format, lines: complete };
  }

  /** A whole-loaded file's errors are the file's own; only trajectories not read before go on. */
  function takeLoaded(file: string, size: number, state: FileState, loaded: LoadedFile): LoadedFile {
    state.format = loaded.format ?? null;
    // A file still being written ends in a partial line: its parse error is not an error yet.
    const text = size > 0 ? readLastByte(file) : '\n';
    const lastLine = loaded.errors.reduce((m, e) => Math.max(m, e.line), 0);
    state.errors = text === '\n' ? loaded.errors : loaded.errors.filter((e) => e.line !== lastLine);
    // Records already read (by file, line and id) are skipped: a growing file only adds new lines.
    const fresh = loaded.trajectories.filter(
      (t) => keys.peek(t) === undefined && !state.failedLines.has(t.source.line),
    );
    return { ...loaded, errors: [], trajectories: fresh };
  }

  function addChecked(checked: CheckedTrajectory): void {
    const traj = checked.trajectory;
    if (keys.peek(traj) !== undefined) return; // a rewritten file read again: this record is known
    const originalId = traj.id;
    const id = keys.keyOf(traj);
    traj.id = id;
    entries.set(id, {
      summary: summarize(id, checked),
      originalId,
      tokenSet: distinctTokens(checked),
      model: { profile: checked.profile.name, name: traj.model ?? null },
    });
    order.push(id);
    version++;
    cache.set(id, checked);
    const state = files.get(traj.source.file);
    if (state) state.count++;
  }

  async function scan(): Promise<void> {
    const { files: found, errors } = expandPaths(paths);
    pathErrors.splice(
      0,
      pathErrors.length,
      ...errors.filter((e) => !pathErrors.some((p) => p.file === e.file && p.message === e.message)),
      ...pathErrors.filter((p) => p.line > 0),
    );
    const changed: { file: string; size: number }[] = [];
    for (const file of found) {
      try {
        const size = fs.statSync(file).size;
        if (files.get(file)?.size !== size) changed.push({ file, size });
      } catch {
        // gone since the folder was listed
      }
    }
    if (changed.length === 0) return;
    const grown = changed.reduce((n, c) => n + Math.max(0, c.size - Math.max(0, files.get(c.file)?.size ?? 0)), 0);
    // Workers for a large read only, closed after it: idle workers would each hold a tokenizer.
    const pool =
      workers > 0 && grown >= (opts.poolFromBytes ?? POOL_FROM_BYTES) && !closed
        ? new AnalysisPool(workers)
        : undefined;
    if (pool) pools.add(pool);
    async function* inputs(): AsyncGenerator<PipelineInput> {
      for (const { file, size } of changed) {
        if (closed) return;
        yield* fileInputs(file, size);
      }
    }
    try {
      for await (const ev of analyzeInputs(inputs(), runOpts, roots, pool)) {
        if (ev.type === 'trajectory') addChecked(ev.checked);
        else if (ev.type === 'error') {
          const state = files.get(ev.error.file);
          // A streamed file's record and analysis errors are its own; a whole-loaded file's
          // read errors were taken with it (takeLoaded), so what comes here could not be analyzed.
          if (state?.streamed) state.errors.push(ev.error);
          else {
            state?.failedLines.add(ev.error.line);
            pathErrors.push(ev.error);
          }
        }
      }
    } finally {
      if (pool) {
        pools.delete(pool);
        await pool.close();
      }
    }
  }

  const ready = scan()
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

  function filterAndSort(query: ListQuery): TrajectorySummary[] {
    const q = query.q?.trim();
    const tokenId = q && /^\d+$/.test(q) ? Number(q) : undefined;
    const matches = order
      .map((id) => entries.get(id)!)
      .filter((e) => {
        const s = e.summary;
        if (query.kind && !s.findings.kind[query.kind]) return false;
        if (query.cause && !s.findings.cause[query.cause]) return false;
        if (query.severity && !s.findings.severity[query.severity]) return false;
        if (query.status && s.health !== query.status && s.status !== query.status) return false;
        if (q) {
          const text = `${s.id} ${s.source.file} ${s.headline ?? ''}`.toLowerCase();
          if (!text.includes(q.toLowerCase()) && !(tokenId !== undefined && hasToken(e.tokenSet, tokenId)))
            return false;
        }
        return true;
      })
      .map((e) => e.summary);
    const cmp = compareBy(query.sort);
    const dir = query.order === 'asc' ? 1 : -1;
    // Ties keep load order (Array.prototype.sort is stable), so paging through equal keys is deterministic.
    matches.sort((a, b) => dir * cmp(a, b));
    return matches;
  }
  let scanning: Promise<void> = ready;
  const refresh = () => (scanning = scanning.then(scan, scan));

  return {
    ready,
    refresh,
    roots: () => roots,
    options: () => runOpts,
    keys: () => keys,
    info(): RunInfo {
      const counts: FindingCounts = { kind: {}, cause: {}, severity: {} };
      const health = { ok: 0, warning: 0, error: 0 };
      for (const e of entries.values()) {
        health[e.summary.health]++;
        for (const dim of ['kind', 'cause', 'severity'] as const)
          for (const k of Object.keys(e.summary.findings[dim])) counts[dim][k] = (counts[dim][k] ?? 0) + 1;
      }
      return {
        files: [...files.entries()].map(([file, s]) => ({
          file: display(file),
          format: s.format,
          trajectories: s.count,
        })),
        trajectories: entries.size,
        counts,
        health,
        profile: { name: profile.name, family: profile.family },
        models: modelCounts(entries.values()),
        errors: [...pathErrors, ...[...files.values()].flatMap((s) => s.errors)].map((e) => ({
          ...e,
          file: display(e.file),
        })),
        demo: opts.demo === true,
        loading,
      };
    },
    list(query: ListQuery): TrajectoryList {
      // The app pages through one query: filter and sort once per query and run version.
      const key = JSON.stringify([
        version,
        query.kind,
        query.cause,
        query.severity,
        query.status,
        query.q,
        query.sort,
        query.order,
      ]);
      if (lastList?.key !== key) lastList = { key, matches: filterAndSort(query) };
      const { matches } = lastList;
      return {
        total: matches.length,
        offset: query.offset,
        items: matches.slice(query.offset, query.offset + query.limit),
      };
    },
    summary: (id) => entries.get(id)?.summary,
    async get(id) {
      const entry = entries.get(id);
      if (!entry) return undefined;
      const hit = cache.get(id);
      if (hit) return hit;
      let p = pending.get(id);
      if (!p) {
        p = (async () => {
          const { file, line } = entry.summary.source;
          const found = await reloader.trajectoriesAt(file, files.get(file)?.format ?? null, line);
          const traj =
            found.find((t) => t.source.line === line && t.id === entry.originalId) ??
            found.find((t) => t.id === entry.originalId);
          if (!traj) return undefined;
          const checked = await analyzeTrajectory(traj, runOpts, roots);
          checked.trajectory.id = id;
          cache.set(id, checked);
          return checked;
        })().finally(() => pending.delete(id));
        pending.set(id, p);
      }
      return p;
    },
    close() {
      closed = true;
      if (timer) clearInterval(timer);
      for (const p of pools) void p.close();
    },
  };
}

/** Where each complete line of a file starts, by 1-based line number; `end` is where the scan stopped. */
interface LineIndex {
  offsets: Map<number, { offset: number; length: number }>;
  end: number;
  nextLine: number;
}

/**
 * Re-reading one trajectory under load (measured by bench/serve-load.ts): re-loading the
 * whole file for every trajectory not in the cache would make 50 clients run 50 whole-file loads at
 * once (3 GB RSS and 30 s timeouts on a 28 MB run). So a file of a record-local format gets a
 * line index on the first re-load (one streamed pass, no parsing) and each re-load reads and
 * imports one line; other formats (grouping, whole-file, binary) still load the file, at most
 * `WHOLE_RELOADS` at a time, one load shared by everyone asking for the same file.
 */
const WHOLE_RELOADS = 2;

class Reloader {
  private readonly indexes = new Map<string, LineIndex>();
  private readonly indexing = new Map<string, Promise<LineIndex>>();
  private readonly loading = new Map<string, Promise<Trajectory[]>>();
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly format: string | undefined) {}

  /** Lines the first read streamed past: their offsets, so no re-load has to scan for them. */
  note(file: string, lines: readonly RecordLine[]): void {
    const index = this.indexes.get(file) ?? { offsets: new Map(), end: 0, nextLine: 1 };
    for (const l of lines) {
      index.offsets.set(l.line, { offset: l.offset, length: l.length });
      index.end = l.offset + l.length + 1;
      index.nextLine = l.line + 1;
    }
    this.indexes.set(file, index);
  }

  /** The trajectories read from `line` (and, for formats that group, the rest of the file). */
  async trajectoriesAt(file: string, format: string | null, line: number): Promise<Trajectory[]> {
    const importer = importerFor(format ?? '');
    if (readsLineByLine(importer)) {
      const record = await this.lineAt(file, line);
      if (record) return importLines(file, importer.format, [record]).trajectories;
    }
    return this.whole(file);
  }

  private async lineAt(file: string, line: number): Promise<RecordLine | undefined> {
    let index = this.indexes.get(file);
    if (!index || line >= index.nextLine) index = await this.extend(file);
    const at = index.offsets.get(line);
    if (!at) return undefined;
    for await (const l of readLines(file, { start: at.offset, end: at.offset + at.length + 1, firstLine: line }))
      return l;
    return undefined;
  }

  /** Index the lines not indexed yet (a growing file is scanned from where the last scan stopped). */
  private extend(file: string): Promise<LineIndex> {
    let p = this.indexing.get(file);
    if (!p) {
      p = (async () => {
        let index = this.indexes.get(file) ?? { offsets: new Map(), end: 0, nextLine: 1 };
        // A file that shrank was rewritten, not appended to: its old offsets mean nothing.
        if (fs.statSync(file).size < index.end) index = { offsets: new Map(), end: 0, nextLine: 1 };
        for await (const l of readLines(file, { start: index.end, firstLine: index.nextLine })) {
          if (l.problem === 'unterminated') break; // still being written
          index.offsets.set(l.line, { offset: l.offset, length: l.length });
          index.end = l.offset + l.length + 1;
          index.nextLine = l.line + 1;
        }
        this.indexes.set(file, index);
        return index;
      })().finally(() => this.indexing.delete(file));
      this.indexing.set(file, p);
    }
    return p;
  }

  private whole(file: string): Promise<Trajectory[]> {
    let p = this.loading.get(file);
    if (!p) {
      p = (async () => {
        await this.slot();
        try {
          return (await loadFile(file, { format: this.format })).trajectories;
        } finally {
          this.release();
        }
      })().finally(() => this.loading.delete(file));
      this.loading.set(file, p);
    }
    return p;
  }

  private async slot(): Promise<void> {
    if (this.running < WHOLE_RELOADS) {
      this.running++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}

function readLastByte(file: string): string {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const buf = Buffer.alloc(1);
    fs.readSync(fd, buf, 0, 1, size - 1);
    return buf.toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}
