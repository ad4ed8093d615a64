// Spreads the analysis over worker threads so `check` and `export` use every core. Streamed
// files reach the workers as raw lines (they parse, validate and analyze them, so this thread
// only reads and hands out results); whole-loaded files as trajectories. Results come back in
// input order with a bounded number in flight (pipeline.ts), so memory stays bounded however
// large the run.
import { Worker } from 'node:worker_threads';
import type { FormatName, Trajectory } from './model/trajectory.ts';
import { loadProfile, type ModelProfile } from './profiles/profile.ts';
import type { RecordLine } from './import/read/lines.ts';
import type { ChunkOutcome, CheckedTrajectory, RunEvent, RunOptions } from './pipeline.ts';

/** A checked trajectory as it crosses threads: the profile by name (tokenizers are not transferable). */
export type WireChecked = Omit<CheckedTrajectory, 'profile'> & { profileName: string };
export type WireEvent = { type: 'trajectory'; checked: WireChecked } | Exclude<RunEvent, { type: 'trajectory' }>;

export type Job =
  | { kind: 'trajectory'; seq: number; trajectory: Trajectory; opts: RunOptions; roots: string[] }
  | {
      kind: 'lines';
      seq: number;
      file: string;
      format: FormatName;
      lines: RecordLine[];
      opts: RunOptions;
      roots: string[];
    };

export type Reply =
  | { seq: number; ok: true; kind: 'trajectory'; result: WireChecked }
  | { seq: number; ok: true; kind: 'lines'; events: WireEvent[]; imported: number }
  | { seq: number; ok: false; message: string };

export function toWire(c: CheckedTrajectory): WireChecked {
  const { profile, ...rest } = c;
  return { ...rest, profileName: profile.name };
}

const lazyProfiles = new Map<string, ModelProfile>();

/**
 * The profile a worker used, opened here only when something reads more than its name: a
 * `check --json` never needs this thread's own copy of the tokenizer (a second of start-up).
 */
function lazyProfile(name: string): ModelProfile {
  let p = lazyProfiles.get(name);
  if (!p) {
    let loaded: ModelProfile | undefined;
    const real = () => (loaded ??= loadProfile(name));
    p = new Proxy({} as ModelProfile, {
      get: (_t, key) => (key === 'name' ? name : Reflect.get(real(), key)),
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
  delete c.profileName;
  c.profile = lazyProfile(name);
  return c as CheckedTrajectory;
}

/** Arrays this long or longer that hold only numbers cross threads as transferred Float64Arrays. */
const PACK_MIN_LENGTH = 64;

/**
 * Structured cloning copies a number[] element by element, and the token streams, logprobs and
 * masks of a checked trajectory are most of its bytes: as Float64Arrays (exact for every double,
 * NaN and -0 included) they move without a copy and turn back into arrays in one tight loop.
 * Returns a new tree; `value` itself is not touched (it may share arrays with caches).
 */
export function packForWire(value: unknown, transfer: ArrayBuffer[]): unknown {
  if (Array.isArray(value)) {
    const n = value.length;
    if (n >= PACK_MIN_LENGTH && typeof value[0] === 'number') {
      const f = new Float64Array(n);
      let i = 0;
      for (; i < n; i++) {
        const x: unknown = value[i];
        if (typeof x !== 'number') break;
        f[i] = x;
      }
      if (i === n) {
        transfer.push(f.buffer as ArrayBuffer);
        return f;
      }
    }
    const out = new Array<unknown>(n);
    for (let i = 0; i < n; i++) out[i] = packForWire(value[i], transfer);
    return out;
  }
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const k in value) out[k] = packForWire((value as Record<string, unknown>)[k], transfer);
    return out;
  }
  return value;
}

function toNumbers(f: Float64Array): number[] {
  const out = new Array<number>(f.length);
  for (let i = 0; i < f.length; i++) out[i] = f[i]!;
  return out;
}

/**
 * The inverse of packForWire, in place on the freshly received tree. A packed array that is an
 * object's property turns back into a number[] only when first read (then stays one): a consumer
 * that reports findings never pays for the token streams it does not look at, here or in the
 * garbage collector. Reads, writes, spreads, JSON and zod all see plain arrays.
 */
export function unpackFromWire(value: unknown): unknown {
  if (value instanceof Float64Array) return toNumbers(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === 'object' && v !== null) value[i] = unpackFromWire(v);
    }
    return value;
  }
  if (typeof value === 'object' && value !== null) {
    const o = value as Record<string, unknown>;
    for (const k in o) {
      const v = o[k];
      if (v instanceof Float64Array) {
        const settle = (x: unknown) =>
          Object.defineProperty(o, k, { value: x, writable: true, enumerable: true, configurable: true });
        Object.defineProperty(o, k, {
          get: () => {
            const arr = toNumbers(v);
            settle(arr);
            return arr;
          },
          set: settle,
          enumerable: true,
          configurable: true,
        });
      } else if (typeof v === 'object' && v !== null) unpackFromWire(v);
    }
  }
  return value;
}

interface Waiting {
  resolve: (r: Extract<Reply, { ok: true }>) => void;
  reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  waiting: Map<number, Waiting>;
  dead?: Error;
}

export class AnalysisPool {
  private readonly slots: Slot[];
  private seq = 0;

  constructor(size: number) {
    const boot = new URL('../bin/worker-boot.js', import.meta.url);
    const module = new URL('./analysis-worker.ts', import.meta.url).href;
    this.slots = Array.from({ length: size }, () => {
      const slot: Slot = { worker: new Worker(boot, { workerData: { module } }), waiting: new Map() };
      slot.worker.on('message', (m: Reply) => this.settle(slot, m));
      // A worker that dies takes its jobs with it; later jobs go to the others.
      const fail = (e: Error) => {
        slot.dead ??= e;
        for (const p of slot.waiting.values()) p.reject(e);
        slot.waiting.clear();
      };
      slot.worker.on('error', fail);
      slot.worker.on('exit', (code) => fail(new Error(`analysis worker exited (code ${code})`)));
      return slot;
    });
  }

  private settle(slot: Slot, m: Reply): void {
    const p = slot.waiting.get(m.seq);
    if (!p) return;
    slot.waiting.delete(m.seq);
    if (!m.ok) p.reject(new Error(m.message));
    else p.resolve(unpackFromWire(m) as Extract<Reply, { ok: true }>);
  }

  /** The live worker with the fewest jobs (batches cost more than single trajectories). */
  private send(job: Job): Promise<Extract<Reply, { ok: true }>> {
    let best: Slot | undefined;
    for (const s of this.slots) if (!s.dead && (!best || s.waiting.size < best.waiting.size)) best = s;
    if (!best) return Promise.reject(this.slots[0]?.dead ?? new Error('no analysis worker'));
    const slot = best;
    return new Promise((resolve, reject) => {
      slot.waiting.set(job.seq, { resolve, reject });
      const transfer: ArrayBuffer[] = [];
      slot.worker.postMessage(packForWire(job, transfer), transfer);
    });
  }

  async analyze(trajectory: Trajectory, opts: RunOptions, roots: readonly string[]): Promise<CheckedTrajectory> {
    const r = await this.send({ kind: 'trajectory', seq: this.seq++, trajectory, opts, roots: [...roots] });
    if (r.kind !== 'trajectory') throw new Error('analysis worker answered a trajectory with a batch');
    return fromWire(r.result);
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
    return {
      events: r.events.map(
        (e): RunEvent => (e.type === 'trajectory' ? { type: 'trajectory', checked: fromWire(e.checked) } : e),
      ),
      imported: r.imported,
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }
}
