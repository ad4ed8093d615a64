// Figure "shard": the speed of N `check --shard K/N` processes run side by side on this machine,
// folded by `rollscope merge`, against one `check` process on the same run (docs/distributed.md).
// Each shard reads and imports the whole run (so every shard names trajectories by the run-wide
// keys) and analyzes only its own trajectories: import is the part that does not divide, so the
// figure shows how close N shards come to N times one process. The merged report is verified
// equal to the unsharded one before any figure is given.
// `node bin/tsx.js bench/shard.ts [--quick] [--keep]`
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  benchRun,
  isMain,
  measureProcess,
  round,
  ROLLSCOPE,
  runStandalone,
  type BenchRun,
  type Figure,
  type Measure,
  type ProcessRun,
} from './lib.ts';

/** One `check --json` of the whole run, as the reference (`--workers 0`: one thread, as each shard). */
async function wholeRun(file: string, out: string): Promise<ProcessRun> {
  const r = await measureProcess(process.execPath, [
    ROLLSCOPE,
    'check',
    file,
    '--json',
    '--workers',
    '0',
    '--out',
    out,
  ]);
  if (r.code !== 0 && r.code !== 1)
    throw new Error(`rollscope check exited with ${r.code}: ${r.stderr.slice(0, 2000)}`);
  return r;
}

/** N shard processes at once, then the merge; wall time from the first start to the merged report. */
async function shardedRun(
  file: string,
  count: number,
  dir: string,
): Promise<{ wallSeconds: number; cpuSeconds: number; mergeSeconds: number; merged: string }> {
  const t0 = performance.now();
  const reports = Array.from({ length: count }, (_, k) => path.join(dir, `shard-${k}-of-${count}.json`));
  const runs = await Promise.all(
    reports.map((out, k) =>
      measureProcess(process.execPath, [
        ROLLSCOPE,
        'check',
        file,
        '--json',
        '--workers',
        '0',
        '--shard',
        `${k}/${count}`,
        '--out',
        out,
      ]),
    ),
  );
  for (const r of runs)
    if (r.code !== 0 && r.code !== 1) throw new Error(`a shard exited with ${r.code}: ${r.stderr.slice(0, 2000)}`);
  const merged = path.join(dir, `merged-${count}.json`);
  const m = await measureProcess(process.execPath, [ROLLSCOPE, 'merge', ...reports, '--json', '--out', merged]);
  if (m.code !== 0 && m.code !== 1) throw new Error(`merge exited with ${m.code}: ${m.stderr.slice(0, 2000)}`);
  const wallSeconds = (performance.now() - t0) / 1000;
  for (const f of reports) fs.rmSync(f, { force: true });
  return {
    wallSeconds,
    cpuSeconds: runs.reduce((n, r) => n + r.userSeconds + r.systemSeconds, 0),
    mergeSeconds: m.wallSeconds,
    merged,
  };
}

export async function shardFigure(quick: boolean): Promise<Figure> {
  const run: BenchRun = await benchRun(quick ? 'quick' : 'medium');
  const dir = fs.mkdtempSync(path.join(path.dirname(run.file), 'shard-'));
  const cores = os.availableParallelism?.() ?? os.cpus().length;
  const counts = [...new Set([2, cores, 2 * cores])].sort((a, b) => a - b);
  try {
    const wholeOut = path.join(dir, 'whole.json');
    const whole = await wholeRun(run.file, wholeOut);
    const wholeReport = fs.readFileSync(wholeOut, 'utf8');
    const n = run.trajectories;
    const results: Measure[] = [];
    for (const count of counts) {
      const r = await shardedRun(run.file, count, dir);
      if (fs.readFileSync(r.merged, 'utf8') !== wholeReport)
        throw new Error(`merge of ${count} shard reports differs from the unsharded report`);
      fs.rmSync(r.merged, { force: true });
      results.push({
        name: `${count} shards side by side + merge`,
        value: n / r.wallSeconds,
        unit: 'trajectories/s',
        note: `${round(r.wallSeconds)} s wall (merge ${round(r.mergeSeconds)} s), ${round(whole.wallSeconds / r.wallSeconds, 2)}× one process; CPU ${round(r.cpuSeconds)} s in all`,
      });
    }
    return {
      figure: 'shard',
      title: `check --shard K/N on ${cores} cores against one check process`,
      status: 'measured',
      data: { file: path.basename(run.file), bytes: run.bytes, trajectories: n, cores },
      results,
      references: [
        {
          name: 'one check process (--workers 0)',
          value: n / whole.wallSeconds,
          unit: 'trajectories/s',
          note: `${round(whole.wallSeconds)} s wall, CPU ${round(whole.userSeconds + whole.systemSeconds)} s`,
        },
      ],
      targets: [
        {
          name: 'merged = unsharded',
          wanted: 'merge of the shard reports equals the unsharded check --json',
          measured: `byte-identical for N = ${counts.join(', ')}`,
          met: true,
        },
      ],
      notes: [
        'Every shard reads and imports the whole run and analyzes only its own trajectories; with more shards than cores they share the cores.',
        'Each process has a fixed start-up cost (compiling the TypeScript, loading the tokenizer: about 1.5 s of CPU here), which dominates at --quick size.',
        'On a cluster each shard has its own machine: the figure here is the single-machine floor of that speed-up.',
      ],
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) await runStandalone(shardFigure);
