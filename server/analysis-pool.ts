// Spreads the analysis over worker threads so `check` and `export` use every core. Streamed
// files reach the workers as raw lines (they parse, validate and analyze them, so this thread
// only reads and hands out results); whole-loaded files as trajectories. Results come back in
// input order with a bounded number in flight (pipeline.ts), so memory stays bounded however
// large the run.
import { Worker } from 'node:worker_threads';
import type { FormatName, Trajectory } from './model/trajectory.ts';
import { profileNamed, uncoveredModelOf, type ModelProfile } from './profiles/profile.ts';
import type { RecordLine } from './import/read/lines.ts';
import type { CheckedTrajectory } from './analysis/checked.ts';
import type { ChunkOutcome, ExportedEvent, RunOptions } from './pipeline/analyze.ts';
import {
  packForWire,
  unpackFromWire,
  type Job,
  type Reply,
  type WireChecked,
  type WireEvent,
} from './pipeline/wire.ts';
import type { ReadUnit, UnitPart } from './pipeline/units.ts';

export { packForWire, unpackFromWire } from './pipeline/wire.ts';

const lazyProfiles = new Map<string, ModelProfile>();

/**
 * The profile a worker used, opened here only when something reads more than its name, its notes
 * and whether it covers its model: a `check --json` never needs this thread's own copy of the
 * tokenizer (a second of start-up).
 */
function lazyProfile(
  name: string,
  notes: readonly string[],
  manifest?: Pick<ModelProfile, 'family' | 'hashes'>,
): ModelProfile {
  let p = lazyProfiles.get(name);
  if (!p) {
    let loaded: ModelProfile | undefined;
    const real = () => (loaded ??= profileNamed(name));
    const known: Partial<Record<keyof ModelProfile, unknown>> = {
      name,
      notes,
      uncoveredModel: uncoveredModelOf(name),
      ...manifest,
    };
    p = new Proxy({} as ModelProfile, {
      get: (_t, key) => (key in known ? known[key as keyof ModelProfile] : Reflect.get(real(), key)),
      has: (_t, key) => Reflect.has(real(), key),
      ownKeys: () => Reflect.ownKeys(real()),
      getOwnPropertyDescriptor: (_t, key) => {
        const d = Reflect.getOwnPropertyDescriptor(real(), key);
        return d && { ...d, configurable: true };
      },
    });
    lazyProfiles.set(name, p);
  }
  return p;
}

function fromWire(w: WireChecked): CheckedTrajectory {
  // In place, not by spreading: a spread would read (and so materialize) every lazy stream.
  const c = w as Partial<WireChecked> & Partial<CheckedTrajectory>;
  const name = w.profileName;
  const notes = w.profileNotes ?? [];
  const manifest =
    w.profileFamily !== undefined && w.profileHashes !== undefined
      ? { family: w.profileFamily, hashes: w.profileHashes }
      : undefined;
  delete c.profileName;
  delete c.profileNotes;
  delete c.profileFamily;
  delete c.profileHashes;
  c.profile = lazyProfile(name, notes, manifest);
  return c as CheckedTrajectory;
}

function fromWireEvent(e: WireEvent): ChunkOutcome['events'][number] {
  return e.type === 'trajectory'
    ? { type: 'trajectory', checked: fromWire(e.checked), ...(e.exported ? { exported: e.exported } : {}) }
    : e;
}

interface Waiting {
  resolve: (r: Extract<Reply, { ok: true }>) => void;
  reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  waiting: Map<number, Waiting>;
  /** Units being read there: each gets its events in parts. */
  units: Map<number, PartQueue>;
  dead?: Error;
}

/** The parts of one unit as they arrive, read in order by one consumer. */
class PartQueue {
  private readonly parts: UnitPart[] = [];
  private failed?: Error;
  private wake?: () => void;

  push(part: UnitPart): void {
    this.parts.push(part);
    this.wake?.();
  }

  fail(e: Error): void {
    this.failed = e;
    this.wake?.();
  }

  async *drain(): AsyncGenerator<UnitPart> {
    for (;;) {
      const part = this.parts.shift();
      if (part) {
        yield part;
        if ('done' in part) return;
        continue;
      }
      if (this.failed) throw this.failed;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}

export class AnalysisPool {
  private readonly slots: Slot[];
  private seq = 0;
  /** Units each worker has read to their end (`readUnit`), by worker: how the input was divided. */
  readonly unitsRead: number[];

  constructor(readonly size: number) {
    this.unitsRead = Array.from({ length: size }, () => 0);
    const boot = new URL('../bin/worker-boot.js', import.meta.url);
    const module = new URL('./analysis-worker.ts', import.meta.url).href;
    this.slots = Array.from({ length: size }, () => {
      // Started from the bundle (bin/rollscope.js), a worker loads the bundled worker directly, without tsx.
      const bundled = (globalThis as { rollscopeWorkerEntry?: string }).rollscopeWorkerEntry;
      const worker = bundled ? new Worker(new URL(bundled)) : new Worker(boot, { workerData: { module } });
      const slot: Slot = { worker, waiting: new Map(), units: new Map() };
      slot.worker.on('message', (m: Reply) => this.settle(slot, m));
      // A worker that dies takes its jobs with it; later jobs go to the others.
      const fail = (e: Error) => {
        slot.dead ??= e;
        for (const p of slot.waiting.values()) p.reject(e);
        slot.waiting.clear();
        for (const q of slot.units.values()) q.fail(e);
        slot.units.clear();
      };
      slot.worker.on('error', fail);
      slot.worker.on('exit', (code) => fail(new Error(`analysis worker exited (code ${code})`)));
      return slot;
    });
  }

  private settle(slot: Slot, m: Reply): void {
    const q = slot.units.get(m.seq);
    if (q) {
      if (!m.ok) {
        slot.units.delete(m.seq);
        q.fail(new Error(m.message));
      } else if (m.kind === 'unit-done') {
        slot.units.delete(m.seq);
        this.unitsRead[this.slots.indexOf(slot)]!++;
        q.push({ done: true, ...(m.format ? { format: m.format } : {}) });
      } else if (m.kind === 'unit-part') {
        const r = unpackFromWire(m) as typeof m;
        q.push({
          events: r.events.map(fromWireEvent),
          imported: r.imported,
          ...(r.readTo !== undefined ? { readTo: r.readTo } : {}),
        });
      }
      return;
    }
    const p = slot.waiting.get(m.seq);
    if (!p) return;
    slot.waiting.delete(m.seq);
    if (!m.ok) p.reject(new Error(m.message));
    else p.resolve(unpackFromWire(m) as Extract<Reply, { ok: true }>);
  }

  /** The live worker with the fewest jobs (units, batches and single trajectories alike). */
  private leastBusy(): Slot | undefined {
    let best: Slot | undefined;
    const load = (s: Slot) => s.waiting.size + s.units.size;
    for (const s of this.slots) if (!s.dead && (!best || load(s) < load(best))) best = s;
    return best;
  }

  /**
   * Read, import and analyze a unit of the input on a worker (pipeline/units.ts unitEvents there):
   * its events in parts as the worker posts them, then `done` with the file's format. Throws if
   * the worker dies or fails on the way.
   */
  readUnit(unit: ReadUnit, opts: RunOptions, roots: readonly string[]): AsyncGenerator<UnitPart> {
    const slot = this.leastBusy();
    if (!slot) throw this.slots[0]?.dead ?? new Error('no analysis worker');
    const seq = this.seq++;
    const queue = new PartQueue();
    slot.units.set(seq, queue);
    const transfer: ArrayBuffer[] = [];
    slot.worker.postMessage(
      packForWire({ kind: 'unit', seq, unit, opts, roots: [...roots] } satisfies Job, transfer),
      transfer,
    );
    return queue.drain();
  }

  private send(job: Job): Promise<Extract<Reply, { ok: true }>> {
    const best = this.leastBusy();
    if (!best) return Promise.reject(this.slots[0]?.dead ?? new Error('no analysis worker'));
    const slot = best;
    return new Promise((resolve, reject) => {
      slot.waiting.set(job.seq, { resolve, reject });
      const transfer: ArrayBuffer[] = [];
      slot.worker.postMessage(packForWire(job, transfer), transfer);
    });
  }

  async analyze(trajectory: Trajectory, opts: RunOptions, roots: readonly string[]): Promise<CheckedTrajectory> {
    return (await this.analyzeEvent(trajectory, opts, roots)).checked;
  }

  /** The trajectory's event: checked, and with RunOptions `exportRows` its row built and encoded there too. */
  async analyzeEvent(trajectory: Trajectory, opts: RunOptions, roots: readonly string[]): Promise<ExportedEvent> {
    const r = await this.send({ kind: 'trajectory', seq: this.seq++, trajectory, opts, roots: [...roots] });
    if (r.kind !== 'trajectory') throw new Error('analysis worker answered a trajectory with a batch');
    return { type: 'trajectory', checked: fromWire(r.result), ...(r.exported ? { exported: r.exported } : {}) };
  }

  /** Import and analyze raw lines of a record-local file on a worker (pipeline.importAndAnalyze there). */
  async importAndAnalyze(
    chunk: { file: string; format: FormatName; lines: RecordLine[] },
    opts: RunOptions,
    roots: readonly string[],
  ): Promise<ChunkOutcome> {
    const r = await this.send({
      kind: 'lines',
      seq: this.seq++,
      file: chunk.file,
      format: chunk.format,
      lines: chunk.lines,
      opts,
      roots: [...roots],
    });
    if (r.kind !== 'lines') throw new Error('analysis worker answered a batch with a trajectory');
    return { events: r.events.map(fromWireEvent), imported: r.imported };
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }
}
