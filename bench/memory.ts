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

/** Peak RSS of `rollscope export --format parquet` (default workers, images embedded) of the same run. */
async function peakOfExport(run: BenchRun): Promise<{ rss: number; seconds: number; trajectories: number }> {
  const out = path.join(path.dirname(run.file), `memory-export-${process.pid}.parquet`);
  const outputs = [out, `${out}.manifest.json`, `${out}.rejects.jsonl`];
  try {
    const r = await measureProcess(process.execPath, [
      ROLLSCOPE,
      'export',
      run.file,
      '--out',
      out,
      '--format',
      'parquet',
      '--json',
      '--force',
    ]);
    if (r.code !== 0) throw new Error(`rollscope export exited with ${r.code}: ${r.stderr.slice(0, 2000)}`);
    const manifest = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { counts?: { read?: number } };
    const trajectories = manifest.counts?.read ?? -1;
    if (trajectories !== run.trajectories)
      throw new Error(`export read ${trajectories} trajectories of ${run.trajectories}`);
    return { rss: r.peakRssMB, seconds: r.wallSeconds, trajectories };
  } finally {
    for (const f of outputs) fs.rmSync(f, { force: true });
  }
}

/** Peak RSS below this, at every run size, for check and export alike (issue 24). */
const RSS_CEILING_MB = 400;

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
  const ea = await peakOfExport(small);
  const eb = await peakOfExport(large);
  const ratio = b.rss / a.rss;
  const exportRatio = eb.rss / ea.rss;
  const highest = Math.max(a.rss, b.rss, ea.rss, eb.rss);
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
    {
      name: `export --format parquet peak RSS, ${round(small.bytes / 1e6)} MB run`,
      value: ea.rss,
      unit: 'MB',
      note: `${round(ea.seconds)} s`,
    },
    {
      name: `export --format parquet peak RSS, ${round(large.bytes / 1e6)} MB run`,
      value: eb.rss,
      unit: 'MB',
      note: `${round(eb.seconds)} s`,
    },
  ];
  return {
    figure: 'memory',
    title: 'memory: peak RSS of check and export as the run grows',
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
      {
        name: 'flat and low, check and export alike',
        wanted: `peak RSS below ${RSS_CEILING_MB} MB and the same (±10 %) on both runs, for check and for export --format parquet`,
        measured: `check ${round(a.rss)} → ${round(b.rss)} MB (${round(ratio, 2)}×); export ${round(ea.rss)} → ${round(eb.rss)} MB (${round(exportRatio, 2)}×); highest ${round(highest)} MB${quick ? '; quick sizes, not the target sizes' : ''}`,
        met: quick ? null : highest < RSS_CEILING_MB && Math.max(ratio, exportRatio) <= 1.1,
      },
    ],
    notes: ['Peak RSS is the kernel’s (GNU time %M, or VmHWM) for the whole process, worker threads included.'],
  };
}

if (isMain(import.meta.url)) await runStandalone(memoryFigure);
