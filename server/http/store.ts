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
import { type FilterSubject, matchesFilter, parseFilter } from '../report/filter.ts';
import {
  analyzeInputs,
  analyzeTrajectory,
  batchingFor,
  defaultRoots,
  type CheckedTrajectory,
  type PipelineInput,
  type RunOptions,
  lineWorkersFor,
} from '../pipeline.ts';
import { AnalysisPool } from '../analysis-pool.ts';
import { loadFile } from '../import/index.ts';
import { importerFor, readsLineByLine } from '../import/formats.ts';
import { readLines, type RecordLine } from '../import/read/lines.ts';
import { importLines, readFileChunks } from '../import/stream.ts';
import type { LoadedFile } from '../import/index.ts';
import { profileFor, uncoveredLimitation } from '../profiles/profile.ts';
import { inRatioBin } from './views-logprobs.ts';
import { PLACEHOLDER_KINDS, runSteps } from './steps.ts';
import type {
  FindingCounts,
  GroupInfo,
  GroupList,
  GroupQuery,
  ListQuery,
  RunInfo,
  RunSteps,
  TrajectoryList,
  TrajectorySummary,
} from './api.ts';
import { GroupChecks, type GroupMember } from '../analysis/groups.ts';
import { indexFacts, packedHasToken } from '../analysis/index-facts.ts';
import type { ReportFacts } from '../analysis/checked.ts';
import { factsOf } from '../report/build.ts';
import { isRunFileName } from '../import/formats.ts';

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

interface Entry {
  summary: TrajectorySummary;
  /** Id as the file states it (the key, the store's id, gets `#N` when an earlier trajectory has it). */
  originalId: string;
  /** Distinct token ids of the trajectory's streams, sorted: a token-id query without holding the streams. */
  tokenSet: Uint8Array;
  /** The profile it was checked with and the model name its record states. */
  model: { profile: string; name: string | null };
  /** The trajectory's own findings (its summary's counts add its group's). */
  own: { findings: FindingCounts; health: TrajectorySummary['health'] };
  groupKey?: string;
  /** What the trajectory held when read (`extentOf`): a call log's trajectory grows as its session takes turns. */
  extent: string;
}

/** A trajectory's turns and the lines they came from: more of either means it was read again grown. */
function extentOf(t: Pick<Trajectory, 'turns' | 'source'>): string {
  return `${t.turns.length}:${t.source.lines?.join(',') ?? t.source.line}`;
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

/**
 * What the store lists of a trajectory: its record's fields, findings, and the facts computed from
 * its streams where it was analyzed (a worker sends them instead of the streams: wire.ts `forStore`).
 */
interface Indexed {
  summary: TrajectorySummary;
  tokenSet: Uint8Array;
  member: ReportFacts['member'];
}

export function summarize(id: string, c: CheckedTrajectory): Indexed {
  const t = c.trajectory;
  const report = factsOf(c, undefined);
  const index = c.index ?? indexFacts(c, report.logprobs);
  const counts = countFindings(c.findings);
  const health = c.findings.some((f) => f.severity === 'error') ? 'error' : c.findings.length > 0 ? 'warning' : 'ok';
  const summary: TrajectorySummary = {
    id,
    format: t.source.format,
    source: { file: t.source.file, line: t.source.line },
    turns: t.turns.length,
    tokens: index.tokens,
    images: t.images.length,
    // JSON cannot carry a NaN or infinite reward; its invalid_value finding says what it was.
    reward: typeof t.reward === 'number' && Number.isFinite(t.reward) ? t.reward : null,
    status: t.status ?? null,
    health,
    findings: counts,
    headline: headline(c.findings[0]?.message),
    mismatch: index.mismatch,
    group: t.group ?? null,
    step: t.step ?? null,
    advantage: t.advantage ?? null,
    responseTokens: report.responseTokens,
    truncated: truncated(t),
    placeholderErrors: c.findings.filter((f) => f.severity === 'error' && PLACEHOLDER_KINDS.includes(f.kind)).length,
  };
  return { summary, tokenSet: index.tokenSet, member: report.member };
}

/**
 * Whether generation stopped at the length limit, as the data states it: a `truncated` status, or
 * the finish reason `length` (slime maps SGLang's `length` to TRUNCATED; vLLM and SGLang report
 * `length`; docs/reference/frameworks.md).
 */
function truncated(t: Trajectory): boolean | null {
  const status = t.status?.toLowerCase();
  if (status === 'truncated' || status === 'length') return true;
  if (status === 'completed' || status === 'stop') return false;
  const reason = t.turns[t.turns.length - 1]?.finishReason?.toLowerCase();
  if (reason === 'length') return true;
  if (reason === undefined) return null;
  return false;
}

/** The health and counts of a trajectory's own findings plus its group's. */
function withGroupFindings(
  own: Entry['own'],
  group: readonly Finding[],
): { findings: FindingCounts; health: TrajectorySummary['health'] } {
  if (group.length === 0) return own;
  const findings: FindingCounts = {
    kind: { ...own.findings.kind },
    cause: { ...own.findings.cause },
    severity: { ...own.findings.severity },
  };
  for (const f of group) {
    findings.kind[f.kind] = (findings.kind[f.kind] ?? 0) + 1;
    findings.severity[f.severity] = (findings.severity[f.severity] ?? 0) + 1;
  }
  return { findings, health: own.health === 'error' ? 'error' : 'warning' };
}

/** The row tooltip: the first finding's sentence, capped (100k rows × full messages would be most of the list's bytes). */
function headline(message: string | undefined): string | null {
  if (message === undefined) return null;
  return message.length > 200 ? `${message.slice(0, 199)}…` : message;
}

/** Trajectories per model profile, most first, with the model names their records state. */
/** What a run says once per profile: the model it does not cover, what its loader defaulted. */
interface ProfileNotes {
  limitation: string | null;
  notes: string[];
}

function modelCounts(entries: Iterable<Entry>, notesOf: ReadonlyMap<string, ProfileNotes>): RunInfo['models'] {
  const byProfile = new Map<string, { trajectories: number; names: Set<string> }>();
  for (const e of entries) {
    const m = byProfile.get(e.model.profile) ?? { trajectories: 0, names: new Set<string>() };
    m.trajectories++;
    if (e.model.name) m.names.add(e.model.name);
    byProfile.set(e.model.profile, m);
  }
  return [...byProfile.entries()]
    .map(([profile, m]) => ({
      profile,
      trajectories: m.trajectories,
      names: [...m.names].sort(),
      ...(notesOf.get(profile) ?? { limitation: null, notes: [] }),
    }))
    .sort((a, b) => b.trajectories - a.trajectories || a.profile.localeCompare(b.profile));
}

const HEALTH_RANK = { ok: 0, warning: 1, error: 2 } as const;

/** Findings of a summary, counted once per counts object (a sort compares each summary many times). */
const findingTotals = new WeakMap<FindingCounts, number>();
function findingTotal(counts: FindingCounts): number {
  let n = findingTotals.get(counts);
  if (n === undefined) {
    n = 0;
    for (const k in counts.kind) n += counts.kind[k]!;
    findingTotals.set(counts, n);
  }
  return n;
}

function compareBy(key: ListQuery['sort']): (a: TrajectorySummary, b: TrajectorySummary) => number {
  const num = (x: number | null) => x ?? Number.NEGATIVE_INFINITY;
  const total = (s: TrajectorySummary) => findingTotal(s.findings);
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
    case 'group':
      return () => 0; // the store orders by group itself (filterAndSort)
    default:
      return (a, b) => a[key] - b[key];
  }
}

/**
 * The number a numeric sort orders by (undefined for the text sorts): computed once per summary,
 * so sorting a run of 30k trajectories once a second while it loads stays cheap.
 */
function numericKey(key: ListQuery['sort']): ((s: TrajectorySummary) => number) | undefined {
  switch (key) {
    case 'id':
    case 'format':
    case 'file':
    case 'status':
    case 'group':
      return undefined;
    case 'reward':
      return (s) => s.reward ?? Number.NEGATIVE_INFINITY;
    case 'findings':
      // Health first, then the number of findings (far below 2^32).
      return (s) => HEALTH_RANK[s.health] * 2 ** 32 + findingTotal(s.findings);
    default:
      return (s) => s[key];
  }
}

/** `items` ordered by `key` (ties in their given order), each key computed once. */
function sortByNumber<T>(items: T[], key: (x: T) => number, dir: 1 | -1): T[] {
  const keys = new Float64Array(items.length);
  for (let i = 0; i < items.length; i++) keys[i] = key(items[i]!);
  const at = Array.from({ length: items.length }, (_, i) => i);
  at.sort((i, j) => {
    const a = keys[i]!;
    const b = keys[j]!;
    return a < b ? -dir : a > b ? dir : i - j;
  });
  return at.map((i) => items[i]!);
}

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
  const entries = new Map<string, Entry>();
  const profileNotes = new Map<string, ProfileNotes>();
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
  const reloader = new Reloader(opts.format, opts.model);
  const keys = new TrajectoryKeys();
  const folders = new RunFolders(paths);
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
  /** One analysis per trajectory at a time, however many requests ask for it. */
  const pending = new Map<string, Promise<CheckedTrajectory | undefined>>();
  const groupChecks = new GroupChecks();
  /** Member ids of each group, by group key, in the order they were read. */
  const groupMembers = new Map<string, string[]>();
  const groupSignatures = new Map<string, string>();
  let lastSteps: { version: number; steps: RunSteps } | undefined;

  const display = (file: string) => {
    const rel = path.relative(process.cwd(), file);
    return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
  };

  /** What is new in `file` since the last read, as pipeline input (nothing when its size is unchanged). */
  async function* fileInputs(file: string, size: number, pooled: boolean): AsyncGenerator<PipelineInput> {
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
        model: opts.model,
        // On this thread, a batch is imported in one go while requests wait: small ones keep the
        // overview answering while a big run is checked (and cost less in the scavenger; pipeline.ts).
        ...batchingFor(pooled),
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
    // Records already read (by file, line and id) are skipped: a growing file only adds new lines,
    // except to a trajectory grouped from several calls (a gateway's session took another turn).
    const fresh = loaded.trajectories.filter((t) => {
      if (state.failedLines.has(t.source.line)) return false;
      const key = keys.peek(t);
      return key === undefined || entries.get(key)?.extent !== extentOf(t);
    });
    return { ...loaded, errors: [], trajectories: fresh };
  }

  function addChecked(checked: CheckedTrajectory): void {
    const traj = checked.trajectory;
    const known = keys.peek(traj);
    if (known !== undefined) {
      // A trajectory read again: replaced in place when it grew, else known (a rewritten file).
      const entry = entries.get(known);
      if (entry && entry.extent !== extentOf(traj)) regrown(known, entry, checked);
      return;
    }
    const originalId = traj.id;
    const id = keys.keyOf(traj);
    traj.id = id;
    const { summary, tokenSet, member } = summarize(id, checked);
    const entry: Entry = {
      summary,
      originalId,
      tokenSet,
      model: { profile: checked.profile.name, name: traj.model ?? null },
      own: { findings: summary.findings, health: summary.health },
      extent: extentOf(traj),
    };
    entries.set(id, entry);
    if (!profileNotes.has(checked.profile.name)) {
      const uncovered = checked.profile.uncoveredModel;
      profileNotes.set(checked.profile.name, {
        limitation: uncovered !== undefined ? uncoveredLimitation(uncovered) : null,
        notes: uncovered !== undefined ? [] : checked.profile.notes,
      });
    }
    order.push(id);
    if (member) addToGroup(entry, member);
    version++;
    cacheIfWhole(id, checked);
    const state = files.get(traj.source.file);
    if (state) state.count++;
  }

  /** A trajectory that grew keeps its key and its place; its summary and streams are the new ones. */
  function regrown(id: string, entry: Entry, checked: CheckedTrajectory): void {
    checked.trajectory.id = id;
    const { summary, tokenSet } = summarize(id, checked);
    entry.own = { findings: summary.findings, health: summary.health };
    entry.tokenSet = tokenSet;
    entry.extent = extentOf(checked.trajectory);
    const groupFindings = entry.groupKey ? (groupChecks.summary(entry.groupKey)?.findings ?? []) : [];
    entry.summary = groupFindings.length > 0 ? { ...summary, ...withGroupFindings(entry.own, groupFindings) } : summary;
    cacheIfWhole(id, checked);
    version++;
  }

  /** A trajectory that still has its streams (a whole-loaded file's, analyzed on this thread): kept for the first `get`. */
  function cacheIfWhole(id: string, checked: CheckedTrajectory): void {
    if (!checked.index) cache.set(id, checked);
  }

  /** Join `entry` to its group and give every member the group's findings when they change. */
  function addToGroup(entry: Entry, member: GroupMember): void {
    const key = groupChecks.add(member);
    entry.groupKey = key;
    const members = groupMembers.get(key) ?? [];
    if (members.length === 0) groupMembers.set(key, members);
    members.push(entry.summary.id);
    const findings = groupChecks.summary(key)!.findings;
    const signature = findings.map((f) => `${f.field}:${f.message}`).join('\n');
    // Members are touched only when the group's verdict changes: a large group costs one pass per change.
    const changed = groupSignatures.get(key) !== signature;
    groupSignatures.set(key, signature);
    for (const id of changed ? members : [entry.summary.id]) {
      const e = entries.get(id)!;
      Object.assign(e.summary, withGroupFindings(e.own, findings));
    }
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
        if (files.get(file)?.size !== st.size) changed.push({ file, size: st.size });
      } catch {
        // gone since the folder was listed
      }
    }
    if (changed.length === 0) return;
    const grown = changed.reduce((n, c) => n + Math.max(0, c.size - Math.max(0, files.get(c.file)?.size ?? 0)), 0);
    // Workers for a large read only, closed after it: idle workers would each hold a tokenizer.
    const workers = closed ? 0 : workersForRead(grown);
    const pool = workers > 0 ? new AnalysisPool(workers) : undefined;
    if (pool) pools.add(pool);
    async function* inputs(): AsyncGenerator<PipelineInput> {
      for (const { file, size } of changed) {
        if (closed) return;
        yield* fileInputs(file, size, pool !== undefined);
      }
    }
    try {
      for await (const ev of analyzeInputs(inputs(), readOpts, roots, pool)) {
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

  /** What `--where` reads of an entry (docs/filter.md): its summary's fields and findings, and its group. */
  function filterSubject(e: Entry): FilterSubject {
    const s = e.summary;
    return {
      entry: {
        id: s.id,
        source: s.source,
        format: s.format,
        model: e.model.name,
        group: s.group,
        step: s.step,
        // Its place among its group's members in the order they were read, as check counts it.
        sample: e.groupKey === undefined ? null : (groupMembers.get(e.groupKey)?.indexOf(s.id) ?? null),
        reward: s.reward,
        turns: s.turns,
        response_tokens: s.responseTokens,
        images: s.images,
        status: s.status,
        // Its counts (its group's findings included) as findings of one facet each: what kind:, cause: and severity: test.
        findings: (['kind', 'cause', 'severity'] as const).flatMap((facet) =>
          Object.entries(s.findings[facet])
            .filter(([, n]) => n > 0)
            .map(([value]) => ({ [facet]: value })),
        ),
      },
      group: e.groupKey === undefined ? null : (groupChecks.summary(e.groupKey) ?? null),
    };
  }

  function filterAndSort(query: ListQuery): TrajectorySummary[] {
    // A bad expression throws its FilterError: the API answers 400 with its offset.
    const where = query.where?.trim() ? parseFilter(query.where) : undefined;
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
        if (query.ratioBin !== undefined && !inRatioBin(s, query.ratioBin)) return false;
        if (query.step !== undefined && s.step !== query.step) return false;
        if (query.group !== undefined && s.group !== query.group) return false;
        if (where && !matchesFilter(where, filterSubject(e))) return false;
        if (q) {
          const text = `${s.id} ${s.source.file} ${s.headline ?? ''}`.toLowerCase();
          if (!text.includes(q.toLowerCase()) && !(tokenId !== undefined && packedHasToken(e.tokenSet, tokenId)))
            return false;
        }
        return true;
      })
      .map((e) => e.summary);
    if (query.sort === 'group') {
      // Load order within a group; groups by their first sample; the ungrouped after them.
      const rank = new Map<string, number>();
      for (const key of groupMembers.keys()) rank.set(key, rank.size);
      const at = new Map(order.map((id, i) => [id, i]));
      const groupRank = (s: TrajectorySummary) => {
        const key = entries.get(s.id)!.groupKey;
        return key === undefined ? rank.size : rank.get(key)!;
      };
      return matches.sort((a, b) => groupRank(a) - groupRank(b) || at.get(a.id)! - at.get(b.id)!);
    }
    const dir = query.order === 'asc' ? 1 : -1;
    // Ties keep load order, so paging through equal keys is deterministic.
    const byNumber = numericKey(query.sort);
    if (byNumber) return sortByNumber(matches, byNumber, dir);
    const cmp = compareBy(query.sort);
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
        models: modelCounts(entries.values(), profileNotes),
        errors: [...pathErrors, ...[...files.values()].flatMap((s) => s.errors)].map((e) => ({
          ...e,
          file: display(e.file),
        })),
        demo: opts.demo === true,
        loading,
        revision: version,
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
        query.ratioBin,
        query.step,
        query.group,
        query.where,
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
    groupFindings(id) {
      const key = entries.get(id)?.groupKey;
      return key === undefined ? [] : (groupChecks.summary(key)?.findings ?? []);
    },
    steps(): RunSteps {
      if (lastSteps?.version === version) return lastSteps.steps;
      const result = runSteps(
        order.map((id) => entries.get(id)!.summary),
        groupChecks.summaries(),
      );
      lastSteps = { version, steps: result };
      return result;
    },
    groups(query): GroupList {
      const wanted = query.degenerate === undefined ? undefined : query.degenerate === 'true';
      const matches: { key: string; ids: string[]; g: NonNullable<ReturnType<GroupChecks['summary']>> }[] = [];
      for (const [key, ids] of groupMembers) {
        const g = groupChecks.summary(key)!;
        if (query.step !== undefined && g.step !== query.step) continue;
        if (wanted !== undefined && g.degenerate !== wanted) continue;
        matches.push({ key, ids, g });
      }
      const page = matches.slice(query.offset, query.offset + query.limit).map(
        ({ key, ids, g }): GroupInfo => ({
          key,
          ...g,
          members: (query.members === 'false' ? [] : ids).map((id) => {
            const s = entries.get(id)!.summary;
            return {
              id,
              reward: s.reward,
              advantage: s.advantage,
              health: s.health,
              responseTokens: s.responseTokens,
            };
          }),
        }),
      );
      let grouped = 0;
      for (const ids of groupMembers.values()) grouped += ids.length;
      return {
        total: matches.length,
        offset: query.offset,
        ungrouped: entries.size - grouped,
        items: page,
      };
    },
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

  constructor(
    private readonly format: string | undefined,
    private readonly model: string | undefined,
  ) {}

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
      if (record) return importLines(file, importer.format, [record], { model: this.model }).trajectories;
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
          return (await loadFile(file, { format: this.format, model: this.model })).trajectories;
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

/** A file that grew this recently is looked at on every poll. */
const HOT_MS = 60_000;
/** Files looked at per poll among the ones that have not changed for a while (round robin). */
const COLD_PER_POLL = 256;
/** A folder modified this recently is listed again whatever its mtime says (mtime ticks can be coarse). */
const FRESH_FOLDER_MS = 3_000;

/**
 * The files of a run being written, polled cheaply on a big folder: a folder is listed again only
 * when its mtime changed (a new file or `step_N/` folder changes its parent's), and a poll stats
 * new and recently grown files, plus a bounded slice of the quiet ones, so appending to an old
 * file is still seen within a few polls. Same files, order and errors as `expandPaths`.
 */
export class RunFolders {
  private readonly dirs = new Map<string, { mtimeMs: number; children: { path: string; dir: boolean }[] }>();
  private readonly lastChange = new Map<string, number>();
  private cursor = 0;

  constructor(private readonly paths: readonly string[]) {}

  expand(): { files: string[]; errors: ReadError[] } {
    const files: string[] = [];
    const errors: ReadError[] = [];
    const now = Date.now();
    const walk = (dir: string, st: fs.Stats) => {
      let known = this.dirs.get(dir);
      if (!known || known.mtimeMs !== st.mtimeMs || now - st.mtimeMs < FRESH_FOLDER_MS) {
        known = { mtimeMs: st.mtimeMs, children: [] };
        for (const name of fs.readdirSync(dir).sort()) {
          if (name.startsWith('.') || name === 'node_modules') continue;
          const child = path.join(dir, name);
          try {
            if (fs.statSync(child).isDirectory()) known.children.push({ path: child, dir: true });
            else if (isRunFileName(name)) known.children.push({ path: child, dir: false });
          } catch {
            // gone since the folder was listed
          }
        }
        this.dirs.set(dir, known);
      }
      for (const c of known.children) {
        if (!c.dir) {
          files.push(c.path);
          continue;
        }
        try {
          walk(c.path, fs.statSync(c.path));
        } catch {
          this.dirs.delete(c.path);
        }
      }
    };
    for (const p of this.paths) {
      let st: fs.Stats;
      try {
        st = fs.statSync(p);
      } catch {
        errors.push({ file: p, line: 0, message: 'no such file or directory' });
        continue;
      }
      if (st.isDirectory()) walk(p, st);
      else files.push(p);
    }
    return { files, errors };
  }

  /** The files to stat on this poll: never seen, modified lately, or the quiet ones' turn. */
  due(files: readonly string[], now: number): string[] {
    const out: string[] = [];
    const quiet: string[] = [];
    for (const f of files) {
      const at = this.lastChange.get(f);
      if (at === undefined || now - at < HOT_MS) out.push(f);
      else quiet.push(f);
    }
    if (quiet.length <= COLD_PER_POLL) return out.concat(quiet);
    for (let i = 0; i < COLD_PER_POLL; i++) out.push(quiet[(this.cursor + i) % quiet.length]!);
    this.cursor = (this.cursor + COLD_PER_POLL) % quiet.length;
    return out;
  }

  /** A stat of `file`: its mtime says whether it is being written (then it is looked at on every poll). */
  saw(file: string, mtimeMs: number): void {
    this.lastChange.set(file, Math.max(this.lastChange.get(file) ?? mtimeMs, mtimeMs));
  }
}
