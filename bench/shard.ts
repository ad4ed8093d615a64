// Figure "shard": `check --shard K/4` of a one-file run, each shard on its own as on a worker of
// its own, against one `check` of the whole run (docs/distributed.md). A shard reads only its
// share of the input (pipeline/shard.ts `planInputSplits`: byte ranges aligned to line starts),
// so its wall time should approach a quarter of the whole one plus its start-up, and the four
// shards' CPU summed should stay near one process's. The merged report is verified equal to the
// unsharded one before any figure is given.
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

/** N shard proc/** Shard K of `count`, alone on the machine (as on a worker of its own). */
async function shardRun(file: string, index: number, count: number, out: string): Promise<ProcessRun> {
  const r = await measureProcess(process.execPath, [
    ROLLSCOPE,
    'check',
    file,
    '--json',
    '--workers',
    '0',
    '--shard',
    `${index}/${count}`,
    '--out',
    out,
  ]);
  if (r.code !== 0 && r.code !== 1)
    throw new Error(`shard ${index}/${count} exited with ${r.code}: ${r.stderr.slice(0, 2000)}`);
  return r;
}

const cpu = (r: ProcessRun) => r.userSeconds + r.systemSeconds;

/** Shards of the issue's target. */
const SHARDS = 4;
/** Shard K of 4's wall against the whole check's (issue 24). */
const WALL_TARGET = 0.35;
/** The four shards' CPU summed against one process's (issue 24). */
const CPU_TARGET = 1.2;

export async function shardFigure(quick: boolean): Promise<Figure> {
  const run: BenchRun = await benchRun(quick ? 'quick' : 'medium');
  const dir = fs.mkdtempSync(path.join(path.dirname(run.file), 'shard-'));
  const cores = os.availableParallelism?.() ?? os.cpus().length;
  try {
    const wholeOut = path.join(dir, 'whole.json');
    // The whole check before and after the shards, the faster counted: the machine is shared, and
    // other work only ever makes a run slower (a faster reference makes the ratios no kinder).
    const first = await wholeRun(run.file, wholeOut);
    const wholeReport = fs.readFileSync(wholeOut, 'utf8');
    const reports = Array.from({ length: SHARDS }, (_, k) => path.join(dir, `shard-${k}-of-${SHARDS}.json`));
    const shards: ProcessRun[] = [];
    for (let k = 0; k < SHARDS; k++) shards.push(await shardRun(run.file, k, SHARDS, reports[k]!));
    const second = await wholeRun(run.file, wholeOut);
    // What every shard pays whatever its share: a shard of a thousand reads a line or two.
    const floor = await shardRun(run.file, 0, 1000, path.join(dir, 'floor.json'));
    const whole = second.wallSeconds < first.wallSeconds ? second : first;
    const merged = path.join(dir, 'merged.json');
    const m = await measureProcess(process.execPath, [ROLLSCOPE, 'merge', ...reports, '--json', '--out', merged]);
    if (m.code !== 0 && m.code !== 1) throw new Error(`merge exited with ${m.code}: ${m.stderr.slice(0, 2000)}`);
    if (fs.readFileSync(merged, 'utf8') !== wholeReport)
      throw new Error(`merge of ${SHARDS} shard reports differs from the unsharded report`);
    const slowest = shards.reduce((a, b) => (b.wallSeconds > a.wallSeconds ? b : a));
    const wallRatio = slowest.wallSeconds / whole.wallSeconds;
    const cpuSum = shards.reduce((n, r) => n + cpu(r), 0);
    const cpuRatio = cpuSum / cpu(whole);
    const n = run.trajectories;
    const results: Measure[] = shards.map((r, k) => ({
      name: `shard ${k}/${SHARDS} alone`,
      value: round(r.wallSeconds / whole.wallSeconds, 3),
      unit: "× the whole check's wall",
      note: `${round(r.wallSeconds, 2)} s wall, CPU ${round(cpu(r), 2)} s, peak RSS ${round(r.peakRssMB)} MB`,
    }));
    results.push({
      name: `merge of the ${SHARDS} reports`,
      value: round(m.wallSeconds, 2),
      unit: 's wall',
      note: `CPU ${round(cpu(m), 2)} s`,
    });
    return {
      figure: 'shard',
      title: `check --shard K/${SHARDS} of a one-file run, each shard alone, against one check process`,
      status: 'measured',
      data: { file: path.basename(run.file), bytes: run.bytes, trajectories: n, cores },
      results,
      references: [
        {
          name: 'one check process (--workers 0), the faster of two',
          value: round(whole.wallSeconds, 2),
          unit: 's wall',
          note: `CPU ${round(cpu(whole), 2)} s, peak RSS ${round(whole.peakRssMB)} MB (the other: ${round(first === whole ? second.wallSeconds : first.wallSeconds, 2)} s)`,
        },
        {
          name: 'a shard that reads almost nothing (0/1000)',
          value: round(cpu(floor), 2),
          unit: 's CPU',
          note: `${round(floor.wallSeconds, 2)} s wall: the start-up each shard pays (modules, tokenizer, first-call compilation); ${SHARDS} shards pay it ${SHARDS} times, one process once`,
        },
      ],
      targets: [
        {
          name: `shard K of ${SHARDS}: wall`,
          wanted: `the slowest shard K of ${SHARDS} takes ≤ ${WALL_TARGET}× the whole check's wall`,
          measured: `${round(wallRatio, 3)}× (shard ${shards.indexOf(slowest)}: ${round(slowest.wallSeconds, 2)} s of ${round(whole.wallSeconds, 2)} s)`,
          met: wallRatio <= WALL_TARGET,
        },
        {
          name: `${SHARDS} shards: CPU summed`,
          wanted: `the ${SHARDS} shards' CPU summed ≤ ${CPU_TARGET}× one process's`,
          measured: `${round(cpuRatio, 3)}× (${round(cpuSum, 2)} s of ${round(cpu(whole), 2)} s; without the ${SHARDS - 1} extra start-ups ${round((cpuSum - (SHARDS - 1) * cpu(floor)) / cpu(whole), 3)}×)`,
          met: cpuRatio <= CPU_TARGET,
        },
        {
          name: 'merged = unsharded',
          wanted: 'merge of the shard reports equals the unsharded check --json',
          measured: `byte-identical for N = ${SHARDS}`,
          met: true,
        },
      ],
      notes: [
        'Each shard reads only its byte range of the file (aligned to line starts), and counts the line feeds before it (no parse) to number its lines.',
        'Each process has a fixed start-up cost (the reference "a shard that reads almost nothing"), which each shard pays again: it is what keeps a shard above a quarter of the whole, and the CPU sum above one process, until the whole check costs many times that start-up.',
        'The shards run one after another, each alone on the machine, as each would on a worker of its own.',
      ],
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) await runStandalone(shardFigure);
