// Re-reading one trajectory's record for its full analysis (its token streams, which the index
// does not keep), a few kept in a least-recently-used cache. Under load (bench/serve-load.ts) a
// re-load of the whole file per trajectory would make 50 clients run 50 whole-file loads at once
// (3 GB RSS and 30 s timeouts on a 28 MB run); so a file of a record-local format gets a line index
// on its first read (one streamed pass, no parsing) and each re-read reads and imports one line;
// other formats (grouping, whole-file, binary) still load the file, at most `WHOLE_RELOADS` at a
// time, one load shared by everyone asking for the same file.
import fs from 'node:fs';
import type { Trajectory } from '../../model/trajectory.ts';
import { analyzeTrajectory, type CheckedTrajectory, type RunOptions } from '../../pipeline.ts';
import { loadFile } from '../../import/index.ts';
import { importerFor, readsLineByLine } from '../../import/formats.ts';
import { readLines, type RecordLine } from '../../import/read/lines.ts';
import { importLines } from '../../import/stream.ts';

const WHOLE_RELOADS = 2;

/** Where each complete line of a file starts, by 1-based line number; `end` is where the scan stopped. */
interface LineIndex {
  offsets: Map<number, { offset: number; length: number }>;
  end: number;
  nextLine: number;
}

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
  delete(key: string): void {
    this.map.delete(key);
  }
  set(key: string, v: V): void {
    this.map.delete(key);
    this.map.set(key, v);
    while (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value!);
  }
}

/** Which record a store entry came from, and the id its file gives it. */
export interface RecordAt {
  id: string;
  originalId: string;
  file: string;
  format: string | null;
  line: number;
}

export class RecordRereads {
  private readonly indexes = new Map<string, LineIndex>();
  private readonly indexing = new Map<string, Promise<LineIndex>>();
  private readonly loading = new Map<string, Promise<Trajectory[]>>();
  private readonly cache: Lru<CheckedTrajectory>;
  /** One analysis per trajectory at a time, however many requests ask for it. */
  private readonly pending = new Map<string, Promise<CheckedTrajectory | undefined>>();
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly runOpts: RunOptions,
    private readonly roots: readonly string[],
    cacheSize: number,
  ) {
    this.cache = new Lru(cacheSize);
  }

  /** A full analysis already in hand (a whole-loaded file's, analyzed on this thread): kept for the first `get`. */
  keep(id: string, checked: CheckedTrajectory): void {
    this.cache.set(id, checked);
  }

  /** Forget the analysis of `id` (it was read again grown: the next `get` reads it again). */
  forget(id: string): void {
    this.cache.delete(id);
  }

  /** The full analysis of one record (re-read and re-checked when not cached), named `at.id`. */
  get(at: RecordAt): Promise<CheckedTrajectory | undefined> {
    const hit = this.cache.get(at.id);
    if (hit) return Promise.resolve(hit);
    let p = this.pending.get(at.id);
    if (!p) {
      p = (async () => {
        const found = await this.trajectoriesAt(at.file, at.format, at.line);
        const traj =
          found.find((t) => t.source.line === at.line && t.id === at.originalId) ??
          found.find((t) => t.id === at.originalId);
        if (!traj) return undefined;
        const checked = await analyzeTrajectory(traj, this.runOpts, this.roots);
        checked.trajectory.id = at.id;
        this.cache.set(at.id, checked);
        return checked;
      })().finally(() => this.pending.delete(at.id));
      this.pending.set(at.id, p);
    }
    return p;
  }

  /** Lines the first read streamed past: their offsets, so no re-read has to scan for them. */
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
  private async trajectoriesAt(file: string, format: string | null, line: number): Promise<Trajectory[]> {
    const importer = importerFor(format ?? '');
    if (readsLineByLine(importer)) {
      const record = await this.lineAt(file, line);
      if (record) return importLines(file, importer.format, [record], { model: this.runOpts.model }).trajectories;
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
          return (await loadFile(file, { format: this.runOpts.format, model: this.runOpts.model })).trajectories;
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
