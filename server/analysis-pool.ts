// Spreads analyzeTrajectory over worker threads so `check` and `export` use every core while
// the main thread reads and imports records. Results come back in input order with a bounded
// number in flight, so memory stays bounded however large the run.
import { Worker } from 'node:worker_threads';
import type { Trajectory } from './model/trajectory.ts';
import { loadProfile } from './profiles/profile.ts';
import type { CheckedTrajectory, RunOptions } from './pipeline.ts';

type Reply = { seq: number; ok: true; result: Omit<CheckedTrajectory, 'profile'> & { profileName: string } } | { seq: number; ok: false; message: string };

export class AnalysisPool {
  private readonly workers: Worker[];
  private readonly waiting = new Map<number, { resolve: (c: CheckedTrajectory) => void; reject: (e: Error) => void }>();
  private seq = 0;
  private next = 0;

  constructor(size: number) {
    const boot = new URL('../bin/worker-boot.js', import.meta.url);
    const module = new URL('./analysis-worker.ts', import.meta.url).href;
    this.workers = Array.from({ length: size }, () => {
      const w = new Worker(boot, { workerData: { module } });
      w.on('message', (m: Reply) => this.settle(m));
      w.on('error', (e) => {
        for (const p of this.waiting.values()) p.reject(e);
        this.waiting.clear();
      });
      return w;
    });
  }

  private settle(m: Reply): void {
    const p = this.waiting.get(m.seq);
    if (!p) return;
    this.waiting.delete(m.seq);
    if (!m.ok) p.reject(new Error(m.message));
    else {
      const { profileName, ...rest } = m.result;
      p.resolve({ ...rest, profile: loadProfile(profileName) });
    }
  }

  analyze(trajectory: Trajectory, opts: RunOptions, roots: readonly string[]): Promise<CheckedTrajectory> {
    const seq = this.seq++;
    const worker = this.workers[this.next++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.waiting.set(seq, { resolve, reject });
      worker.postMessage({ seq, trajectory, opts, roots: [...roots] });
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
