// Figure "serve": `rollscope serve` on a run, against `rollscope check` on the same file: time
// until the first batch is listed and the overview's answers then (GET /api/run + the first 500
// rows, as the app asks for them), the slowest overview answer while the run is being checked,
// time until indexed and checked (the API stops saying `loading`), and peak RSS.
// Targets (issue 24): serve's load (until indexed and checked) ≤ 1.05× `check --json`'s wall on
// the same run, the first overview within 1 s of the first batch, judged on the largest run
// measured; peak RSS under 600 MB on a 2 GB run. CPU time is stated beside the wall ratio (the
// machine is shared).
// The server is killed when its RSS passes a cap (default 4 GB, ROLLSCOPE_BENCH_RSS_CAP_MB) or
// the time limit passes, and the figure says so: a server that holds the run would otherwise
// take the machine with it.
// `node bin/tsx.js bench/serve.ts [--quick] [--keep] [--size 300MB[,2GB...]] [--standard] [--no-check]`
// (`--size` replaces the standard sizes, 200 MB and 2 GB; runs are kept in ROLLSCOPE_BENCH_DIR when set.)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { generateRun, parseSize, progressPrinter, STANDARD_RUN, type GeneratedRun } from './generate.ts';
import {
  benchDir,
  benchRun,
  isMain,
  measureProcess,
  REPO,
  round,
  ROLLSCOPE,
  runStandalone,
  type Figure,
  type Measure,
} from './lib.ts';

const RunInfoHead = z.object({ trajectories: z.number(), loading: z.boolean() });
const ListHead = z.object({ total: z.number(), items: z.array(z.unknown()) });
/** What the overview asks for first (app/stores/run.ts: sorted by findings, worst first). */
const OVERVIEW_LIST = 'api/trajectories?sort=findings&order=desc&offset=0&limit=500';
/** Serve's load against check's wall (issue 24, lever 5). */
const SERVE_OVER_CHECK = 1.05;
/** How often the overview is asked for while the run is being checked (the app polls every second). */
const OVERVIEW_POLL_MS = 1000;

interface ServeResult {
  outcome: 'ready' | 'rss-cap' | 'time-limit' | 'exited';
  /** Start → the API lists the first trajectories. */
  firstBatchSeconds?: number;
  /** The overview's answers right after that. */
  firstOverviewSeconds?: number;
  /** The slowest overview answer while the run was being checked, and how many were asked. */
  slowestOverviewSeconds?: number;
  overviewsWhileLoading?: number;
  indexSeconds?: number;
  /** CPU seconds of the server (all threads) until indexed and checked. */
  cpuSeconds?: number;
  overviewSeconds?: number;
  listed?: number;
  peakRssMB: number;
  message?: string;
}

/** CPU seconds (user + system, all threads) the process has used so far. */
function cpuSecondsOf(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime (fields 14 and 15 of proc(5)), in clock ticks of 1/100 s on Linux.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

function rssOf(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(s)?.[1] ?? 0);
    return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
  } catch {
    return undefined;
  }
}

/** GET /api/run and the overview's first rows, timed. */
async function overview(
  url: string,
): Promise<{ seconds: number; trajectories: number; loading: boolean; listed: number }> {
  const t0 = performance.now();
  const [info, list] = await Promise.all([
    fetch(`${url}api/run`).then(async (r) => RunInfoHead.parse(await r.json())),
    fetch(`${url}${OVERVIEW_LIST}`).then(async (r) => ListHead.parse(await r.json())),
  ]);
  return { seconds: (performance.now() - t0) / 1000, ...info, listed: list.total };
}

async function measureServe(file: string, capMB: number, limitSeconds: number): Promise<ServeResult> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [ROLLSCOPE, 'serve', '--no-open', '--port', '0', file], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  let exited = false;
  child.once('exit', () => (exited = true));
  let peak = 0;
  const sample = () => {
    const r = child.pid ? rssOf(child.pid) : undefined;
    if (r) peak = Math.max(peak, r.hwm, r.rss);
    return r;
  };
  const stop = async () => {
    sample();
    if (!exited) {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
  };
  const elapsed = () => (performance.now() - t0) / 1000;
  const result: Partial<ServeResult> = {};
  let slowest = 0;
  let asked = 0;
  let lastAsked = 0;
  try {
    let url: string | undefined;
    for (;;) {
      const r = sample();
      if (exited) return { outcome: 'exited', peakRssMB: peak, message: err.slice(0, 500) || out.slice(0, 500) };
      if (r && r.rss > capMB)
        return { outcome: 'rss-cap', peakRssMB: peak, message: `RSS passed ${capMB} MB after ${round(elapsed())} s` };
      if (elapsed() > limitSeconds)
        return { outcome: 'time-limit', peakRssMB: peak, message: `not ready after ${limitSeconds} s` };
      url ??= /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)?.[1];
      if (url) {
        try {
          if (result.firstBatchSeconds === undefined) {
            const info = RunInfoHead.parse(await (await fetch(`${url}api/run`)).json());
            if (info.trajectories > 0 || !info.loading) {
              result.firstBatchSeconds = elapsed();
              result.firstOverviewSeconds = (await overview(url)).seconds;
              lastAsked = performance.now();
            }
            if (!info.loading) break;
          } else if (performance.now() - lastAsked >= OVERVIEW_POLL_MS) {
            lastAsked = performance.now();
            const o = await overview(url);
            if (!o.loading) break;
            slowest = Math.max(slowest, o.seconds);
            asked++;
          }
        } catch {
          /* not answering yet */
        }
      }
      await new Promise((res) => setTimeout(res, 100));
    }
    const indexSeconds = elapsed();
    const cpuSeconds = child.pid ? cpuSecondsOf(child.pid) : undefined;
    const o = await overview(url!);
    sample();
    return {
      outcome: 'ready',
      ...result,
      slowestOverviewSeconds: slowest,
      overviewsWhileLoading: asked,
      indexSeconds,
      cpuSeconds,
      overviewSeconds: o.seconds,
      listed: o.listed,
      peakRssMB: peak,
    };
  } finally {
    await stop();
  }
}

/** A generated run of about `bytes` (kept beside the bench's other runs, reused while its sidecar says so). */
async function runOfBytes(bytes: number, standard: boolean): Promise<GeneratedRun> {
  const name = `serve-${standard ? 'standard-' : ''}${Math.round(bytes / 1e6)}MB`;
  const dir = path.join(benchDir(), name);
  const out = path.join(dir, `${name}.jsonl`);
  const sidecar = `${out}.bench.json`;
  if (fs.existsSync(sidecar) && fs.existsSync(out)) return JSON.parse(fs.readFileSync(sidecar, 'utf8')) as GeneratedRun;
  process.stderr.write(`generating ${name} in ${dir}...\n`);
  const run = await generateRun({ out, targetBytes: bytes, ...(standard ? STANDARD_RUN : {}) }, progressPrinter());
  if (process.stderr.isTTY) process.stderr.write('\n');
  fs.writeFileSync(sidecar, JSON.stringify(run));
  return run;
}

function argValue(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

export async function serveFigure(quick: boolean): Promise<Figure> {
  const title = 'serve: listing and checking a run';
  if (!fs.existsSync(path.join(REPO, 'dist', 'app', 'index.html'))) {
    return {
      figure: 'serve',
      title,
      status: 'not-measured',
      data: {},
      results: [{ name: 'serve', value: null, unit: 's', note: 'the app is not built (npm run build)' }],
      references: [],
      targets: [],
      notes: [],
    };
  }
  const capMB = Number(process.env.ROLLSCOPE_BENCH_RSS_CAP_MB ?? 4096);
  const standard = process.argv.includes('--standard');
  const withCheck = !process.argv.includes('--no-check');
  const sizes = argValue('--size')?.split(',').map(parseSize);
  const runs: GeneratedRun[] = sizes
    ? await Promise.all(sizes.map((b) => runOfBytes(b, standard)))
    : quick
      ? [await benchRun('quick')]
      : [await benchRun('medium'), await benchRun('large')];
  const results: Measure[] = [];
  const references: Measure[] = [];
  const notes: string[] = [];
  let largest: { run: GeneratedRun; serve: ServeResult; checkSeconds?: number; checkCpu?: number } | undefined;
  for (const run of runs) {
    const r = await measureServe(run.file, capMB, quick ? 120 : 1800);
    const label = `${round(run.bytes / 1e6)} MB run (${run.trajectories} trajectories)`;
    if (r.outcome === 'ready') {
      if (r.listed !== run.trajectories) throw new Error(`serve listed ${r.listed} of ${run.trajectories}`);
      results.push(
        { name: `serve ${label}: until the first batch is listed`, value: r.firstBatchSeconds!, unit: 's' },
        {
          name: `serve ${label}: overview (GET /api/run + first 500 rows) right after the first batch`,
          value: r.firstOverviewSeconds!,
          unit: 's',
        },
        {
          name: `serve ${label}: slowest overview answer while checking`,
          value: r.slowestOverviewSeconds!,
          unit: 's',
          note: `${r.overviewsWhileLoading} asked, one a second`,
        },
        {
          name: `serve ${label}: until indexed and checked`,
          value: r.indexSeconds!,
          unit: 's',
          note: `${round(run.trajectories / r.indexSeconds!)} trajectories/s; ${round(r.cpuSeconds ?? Number.NaN)} s CPU`,
        },
        { name: `serve ${label}: overview after that`, value: r.overviewSeconds!, unit: 's' },
        { name: `serve ${label}: peak RSS`, value: r.peakRssMB, unit: 'MB' },
      );
    } else {
      results.push({
        name: `serve ${label}`,
        value: null,
        unit: 's',
        note: `${r.outcome}: ${r.message ?? ''}; peak RSS seen ${round(r.peakRssMB)} MB`,
      });
      notes.push(`On the ${label} the server did not finish: ${r.outcome} (${r.message ?? ''}).`);
    }
    let checkSeconds: number | undefined;
    let checkCpu: number | undefined;
    if (withCheck) {
      // The reference: `check` on the same file with its default workers, as a user runs it.
      const c = await measureProcess(process.execPath, [ROLLSCOPE, 'check', '--json', run.file], {
        stdoutFile: os.devNull,
      });
      checkSeconds = c.wallSeconds;
      checkCpu = c.userSeconds + c.systemSeconds;
      references.push(
        {
          name: `check --json ${label}: wall`,
          value: c.wallSeconds,
          unit: 's',
          note: `${round(run.trajectories / c.wallSeconds)} trajectories/s; ${round(c.userSeconds + c.systemSeconds)} s CPU`,
        },
        { name: `check --json ${label}: peak RSS`, value: c.peakRssMB, unit: 'MB' },
      );
    }
    if (!largest || run.bytes > largest.run.bytes) largest = { run, serve: r, checkSeconds, checkCpu };
  }
  const judged = !quick && largest !== undefined && largest.run.bytes >= 1.5e9;
  const met = (ok: boolean | undefined) => (judged ? (ok ?? false) : null);
  /** The speed and overview targets hold at any size: judged on the largest run unless quick. */
  const metAtAnySize = (ok: boolean | undefined) => (quick || !largest ? null : (ok ?? false));
  const big = largest?.serve;
  const ratio =
    big?.indexSeconds !== undefined && largest?.checkSeconds !== undefined
      ? big.indexSeconds / largest.checkSeconds
      : undefined;
  const cpuRatio =
    big?.cpuSeconds !== undefined && largest?.checkCpu !== undefined ? big.cpuSeconds / largest.checkCpu : undefined;
  if (!judged && !quick)
    notes.push(
      'The memory target is judged on a run of 2 GB; this run was smaller (the speed and overview targets hold at any size).',
    );
  return {
    figure: 'serve',
    title,
    status: results.some((m) => m.value === null) ? 'partly-measured' : 'measured',
    data: {
      sizes: runs.map((r) => `${round(r.bytes / 1e6)} MB`).join(', '),
      shape: standard ? 'standard run (slime, inline images)' : 'generator default',
      'RSS cap': `${capMB} MB`,
    },
    results,
    references,
    targets: [
      {
        name: 'serve memory',
        wanted: 'serve indexes and checks a 2 GB run with peak RSS under 600 MB',
        measured: big ? `${round(big.peakRssMB)} MB peak (${big.outcome})` : 'not run',
        met: met(big?.outcome === 'ready' ? big.peakRssMB < 600 : undefined),
      },
      {
        name: 'overview after the first batch',
        wanted:
          'the first overview within 1 s of the first batch, and every overview under 1 s while the rest is checked',
        measured:
          big?.firstOverviewSeconds !== undefined
            ? `${round(big.firstOverviewSeconds, 2)} s after the first batch, ${round(big.slowestOverviewSeconds ?? 0, 2)} s slowest while checking`
            : `not reached (${big?.outcome ?? 'not run'})`,
        met: metAtAnySize(
          big?.firstOverviewSeconds !== undefined
            ? big.firstOverviewSeconds < 1 && (big.slowestOverviewSeconds ?? 0) < 1
            : undefined,
        ),
      },
      {
        name: "serve at check's speed",
        wanted: `serve's load (until indexed and checked) ≤ ${SERVE_OVER_CHECK}× check --json's wall on the same run`,
        measured:
          ratio !== undefined
            ? `${round(ratio, 2)}× check's wall, ${round(cpuRatio ?? Number.NaN, 2)}× its CPU time`
            : 'not measured',
        met: metAtAnySize(ratio !== undefined ? ratio <= SERVE_OVER_CHECK : undefined),
      },
    ],
    notes,
  };
}

if (isMain(import.meta.url)) await runStandalone(serveFigure);
