// Figure "serve": `rollscope serve` on a run: time until the run is indexed and checked (the API
// stops saying `loading`), the overview's API answers after that, and peak RSS. Targets (issue):
// a 2 GB run listed with peak RSS under 600 MB, the overview within 3 s of the index.
// The server is killed when its RSS passes a cap (default 4 GB, ROLLSCOPE_BENCH_RSS_CAP_MB) or
// the time limit passes, and the figure says so: a server that holds the run would otherwise
// take the machine with it.
// `node bin/tsx.js bench/serve.ts [--quick] [--keep]`
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import {
  benchRun,
  isMain,
  REPO,
  round,
  ROLLSCOPE,
  runStandalone,
  type BenchRun,
  type Figure,
  type Measure,
  type SizeName,
} from './lib.ts';

const RunInfoHead = z.object({ trajectories: z.number(), loading: z.boolean() });
const ListHead = z.object({ total: z.number(), items: z.array(z.unknown()) });

interface ServeResult {
  outcome: 'ready' | 'rss-cap' | 'time-limit' | 'exited';
  indexSeconds?: number;
  overviewSeconds?: number;
  listed?: number;
  peakRssMB: number;
  message?: string;
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

async function measureServe(run: BenchRun, capMB: number, limitSeconds: number): Promise<ServeResult> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [ROLLSCOPE, 'serve', '--no-open', '--port', '0', run.file], {
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
          const info = RunInfoHead.parse(await (await fetch(`${url}api/run`)).json());
          if (!info.loading) break;
        } catch {
          /* not answering yet */
        }
      }
      await new Promise((res) => setTimeout(res, 100));
    }
    const indexSeconds = elapsed();
    const t1 = performance.now();
    RunInfoHead.parse(await (await fetch(`${url}api/run`)).json());
    const list = ListHead.parse(await (await fetch(`${url}api/trajectories?limit=500`)).json());
    const overviewSeconds = (performance.now() - t1) / 1000;
    sample();
    return { outcome: 'ready', indexSeconds, overviewSeconds, listed: list.total, peakRssMB: peak };
  } finally {
    await stop();
  }
}

export async function serveFigure(quick: boolean): Promise<Figure> {
  const title = 'serve: listing a run';
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
  const sizes: SizeName[] = quick ? ['quick'] : ['medium', 'large'];
  const results: Measure[] = [];
  const notes: string[] = [];
  let large: ServeResult | undefined;
  for (const size of sizes) {
    const run = await benchRun(size);
    const r = await measureServe(run, capMB, quick ? 120 : 900);
    const label = `${round(run.bytes / 1e6)} MB run (${run.trajectories} trajectories)`;
    if (r.outcome === 'ready') {
      if (r.listed !== run.trajectories) throw new Error(`serve listed ${r.listed} of ${run.trajectories}`);
      results.push(
        {
          name: `serve ${label}: until indexed and checked`,
          value: r.indexSeconds!,
          unit: 's',
          note: `${round(run.trajectories / r.indexSeconds!)} trajectories/s`,
        },
        {
          name: `serve ${label}: overview (GET /api/run + first 500 rows) after that`,
          value: r.overviewSeconds!,
          unit: 's',
        },
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
    if (size === 'large' || quick) large = r;
  }
  const met = (ok: boolean | undefined) => (quick ? null : ok === undefined ? false : ok);
  return {
    figure: 'serve',
    title,
    status: results.some((m) => m.value === null) ? 'partly-measured' : 'measured',
    data: { sizes: sizes.join(', '), 'RSS cap': `${capMB} MB` },
    results,
    references: [],
    targets: [
      {
        name: 'serve memory',
        wanted: 'serve lists a 2 GB run with peak RSS under 600 MB',
        measured: large ? `${round(large.peakRssMB)} MB peak (${large.outcome})` : 'not run',
        met: met(large?.outcome === 'ready' ? large.peakRssMB < 600 : undefined),
      },
      {
        name: 'overview',
        wanted: 'the overview appears in under 3 s after the index is built',
        measured:
          large?.overviewSeconds !== undefined
            ? `${round(large.overviewSeconds, 2)} s (API)`
            : `not reached (${large?.outcome ?? 'not run'})`,
        met: met(large?.overviewSeconds !== undefined ? large.overviewSeconds < 3 : undefined),
      },
    ],
    notes,
  };
}

if (isMain(import.meta.url)) await runStandalone(serveFigure);
