// Figure "memory": peak RSS of `rollscope check` (default workers: one per core) on a 200 MB
// and a 2 GB run. Bounded memory means the second is not much more than the first: the target
// is RSS(2 GB) < 2 × RSS(200 MB). `serve` has its own script (bench/serve.ts).
// `node bin/tsx.js bench/memory.ts [--quick] [--keep]`
import fs from 'node:fs';
import path from 'node:path';
import {
  benchDir,
  benchRun,
  freeBytes,
  isMain,
  measureProcess,
  round,
  ROLLSCOPE,
  runStandalone,
  type BenchRun,
  type Figure,
  type Measure,
} from './lib.ts';

async function peakOfCheck(run: BenchRun): Promise<{ rss: number; seconds: number; trajectories: number }> {
  const out = path.join(path.dirname(run.file), 'memory-check.json');
  const r = await measureProcess(process.execPath, [ROLLSCOPE, 'check', run.file, '--json'], { stdoutFile: out });
  if (r.code !== 0 && r.code !== 1)
    throw new Error(`rollscope check exited with ${r.code}: ${r.stderr.slice(0, 2000)}`);
  const size = fs.statSync(out).size;
  // The report's tail holds the summary; only that is read back.
  const fd = fs.openSync(out, 'r');
  const tail = Buffer.alloc(Math.min(size, 64 * 1024));
  fs.readSync(fd, tail, 0, tail.length, size - tail.length);
  fs.closeSync(fd);
  fs.rmSync(out, { force: true });
  const m = /"summary":\{"trajectories":(\d+)/.exec(tail.toString('utf8'));
  const trajectories = m ? Number(m[1]) : -1;
  if (trajectories !== run.trajectories)
    throw new Error(`check reported ${trajectories} trajectories of ${run.trajectories}`);
  return { rss: r.peakRssMB, seconds: r.wallSeconds, trajectories };
}

export async function memoryFigure(quick: boolean): Promise<Figure> {
  const smallSize = quick ? 'quick' : 'medium';
  const largeSize = quick ? 'quickLarge' : 'large';
  // The large run needs its bytes on disk, and some room to spare.
  const needed = quick ? 0.3e9 : 2.5e9;
  if (freeBytes(benchDir()) < needed) {
    return {
      figure: 'memory',
      title: 'memory: peak RSS of check as the run grows',
      status: 'not-measured',
      data: {},
      results: [
        { name: 'check peak RSS', value: null, unit: 'MB', note: `less than ${needed / 1e9} GB free in ${benchDir()}` },
      ],
      references: [],
      targets: [],
      notes: [],
    };
  }
  const small = await benchRun(smallSize);
  const a = await peakOfCheck(small);
  const large = await benchRun(largeSize);
  const b = await peakOfCheck(large);
  const ratio = b.rss / a.rss;
  const results: Measure[] = [
    {
      name: `check peak RSS, ${round(small.bytes / 1e6)} MB run (${small.trajectories} trajectories)`,
      value: a.rss,
      unit: 'MB',
      note: `${round(a.seconds)} s`,
    },
    {
      name: `check peak RSS, ${round(large.bytes / 1e6)} MB run (${large.trajectories} trajectories)`,
      value: b.rss,
      unit: 'MB',
      note: `${round(b.seconds)} s, ${round(large.trajectories / b.seconds)} trajectories/s`,
    },
  ];
  return {
    figure: 'memory',
    title: 'memory: peak RSS of check as the run grows',
    status: 'measured',
    data: { workers: 'default (one per core)', small: `${smallSize} run`, large: `${largeSize} run` },
    results,
    references: [{ name: 'run size ratio', value: large.bytes / small.bytes, unit: '×' }],
    targets: [
      {
        name: 'bounded memory',
        wanted: 'RSS on the 2 GB run is less than twice RSS on the 200 MB run',
        measured: `${round(ratio, 2)}× (${round(a.rss)} MB → ${round(b.rss)} MB for ${round(large.bytes / small.bytes)}× the data)${quick ? '; quick sizes, not the target sizes' : ''}`,
        met: quick ? null : ratio < 2,
      },
    ],
    notes: ['Peak RSS is the kernel’s (GNU time %M, or VmHWM) for the whole process, worker threads included.'],
  };
}

if (isMain(import.meta.url)) await runStandalone(memoryFigure);
