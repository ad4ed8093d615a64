// Figure "serve-load" ("Under load"): 50 concurrent clients hammer the API of a served
// run for a bounded time, from loopback. Printed: requests, failures, p50/p99 latency (all and per
// route), the server's RSS when the load starts, at its peak and at the end, and whether the UI
// (GET / and /api/run) answered during the load and after it.
//
// The server is the real CLI as a child process (`rollscope serve --no-open --port 0 RUN` on
// 127.0.0.1, as a user starts it); its memory is read from /proc. Clients browse as the app does:
// pages of the overview with other sorts and filters, then a trajectory opened (detail, one of its
// streams, one of its diffs, an image preview), the run info, the app's page and script.
// A request fails when it errors, times out (30 s) or answers anything but 200.
//
// Full: a generated ~1 GB run (bench/generate.ts) and 60 s. `--quick`: a 400-trajectory run and
// 10 s (test/load.test.ts runs it). The server is killed if its RSS passes a cap (default 6 GB,
// ROLLSCOPE_BENCH_RSS_CAP_MB), and the figure says so, rather than take the machine with it.
// `node bin/tsx.js bench/serve-load.ts [--quick] [--seconds N] [--clients N] [--keep]`
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { z } from 'zod';
import { generateRun } from './generate.ts';
import { HEAD_TOKENS } from '../app/stores/trajectory.ts';
import { benchDir, isMain, REPO, removeBenchRuns, round, ROLLSCOPE, printFigure, type Figure } from './lib.ts';

const RunHead = z.object({ trajectories: z.number(), loading: z.boolean() });
const ListHead = z.object({ total: z.number(), items: z.array(z.object({ id: z.string(), images: z.number() })) });
const DetailHead = z.object({
  streams: z.array(z.object({ name: z.string(), turn: z.number(), length: z.number() })),
  diffs: z.array(z.object({ a: z.string(), b: z.string(), turn: z.number() })),
  images: z.array(z.object({ hasPreview: z.boolean() })),
});

const SORTS = ['findings', 'id', 'tokens', 'turns', 'reward', 'file'] as const;
const FILTERS = [
  'status=error',
  'status=ok',
  'kind=prefix_break',
  'severity=warning',
  'kind=invalid_value',
  'q=step1',
  'q=151657',
];
const REQUEST_TIMEOUT_MS = 30_000;

export interface ServeLoadOptions {
  /** The run file to serve. */
  file: string;
  clients: number;
  seconds: number;
  /** Longest wait for the run to finish loading before the load starts. */
  readySeconds: number;
  rssCapMB: number;
}

export interface RouteFigures {
  requests: number;
  failures: number;
  p50: number;
  p99: number;
}

export interface ServeLoadResult {
  outcome: 'done' | 'rss-cap' | 'not-ready' | 'exited';
  message?: string;
  trajectories: number;
  indexSeconds: number;
  requests: number;
  failures: number;
  /** The first few failures, as "route: why". */
  failureSamples: string[];
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  requestsPerSecond: number;
  byRoute: Record<string, RouteFigures>;
  rssAtStartMB: number;
  peakRssMB: number;
  rssAtEndMB: number;
  /** Highest RSS in the first and in the last quarter of the load: growth between them would not stop. */
  rssFirstQuarterMB: number;
  rssLastQuarterMB: number;
  /** GET / and GET /api/run from a separate client every second during the load: answered / asked. */
  uiDuring: { answered: number; asked: number };
  uiAfter: boolean;
}

// ---- HTTP on loopback ----------------------------------------------------------------------

interface Answer {
  status: number;
  body: Buffer;
  ms: number;
}

function get(agent: http.Agent, port: number, target: string): Promise<Answer> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: target,
        agent,
        headers: { 'Accept-Encoding': 'identity' },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), ms: performance.now() - t0 }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer in ${REQUEST_TIMEOUT_MS / 1000} s`)));
    req.on('error', reject);
    req.end();
  });
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

/** The server's last words, without V8's native stack frames. */
function whyExited(stderr: string): string {
  if (/heap out of memory|Allocation failed/i.test(stderr)) return 'the server ran out of memory (V8 heap limit)';
  return stderr
    .split('\n')
    .filter((l) => !/^\s*\d+: 0x/.test(l))
    .join('\n')
    .slice(-500);
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

// ---- the load ------------------------------------------------------------------------------

async function startServe(file: string): Promise<{ child: ChildProcess; port: number; stderr: () => string }> {
  const child = spawn(process.execPath, [ROLLSCOPE, 'serve', '--no-open', '--port', '0', file], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`rollscope serve exited with ${code}: ${err || out}`)));
  });
  return { child, port, stderr: () => err };
}

export async function serveLoad(opts: ServeLoadOptions): Promise<ServeLoadResult> {
  const t0 = performance.now();
  const { child, port, stderr } = await startServe(opts.file);
  let exited = false;
  child.once('exit', () => (exited = true));
  const pid = child.pid!;
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.clients + 4 });
  const uiAgent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  let capped = false;
  const samples: { t: number; rss: number }[] = [];
  let peak = 0;
  const sampler = setInterval(() => {
    const r = rssOf(pid);
    if (!r) return;
    samples.push({ t: performance.now(), rss: r.rss });
    peak = Math.max(peak, r.hwm, r.rss);
    if (r.rss > opts.rssCapMB && !capped) {
      capped = true;
      child.kill('SIGKILL');
    }
  }, 200);
  const result: ServeLoadResult = {
    outcome: 'done',
    trajectories: 0,
    indexSeconds: NaN,
    requests: 0,
    failures: 0,
    failureSamples: [],
    p50Ms: NaN,
    p99Ms: NaN,
    maxMs: NaN,
    requestsPerSecond: 0,
    byRoute: {},
    rssAtStartMB: NaN,
    peakRssMB: NaN,
    rssAtEndMB: NaN,
    rssFirstQuarterMB: NaN,
    rssLastQuarterMB: NaN,
    uiDuring: { answered: 0, asked: 0 },
    uiAfter: false,
  };
  try {
    // Until the run is indexed and checked (the load is on a served run, not on its loading).
    for (;;) {
      if (exited)
        return Object.assign(result, {
          outcome: capped ? 'rss-cap' : 'exited',
          message: capped ? `RSS passed ${opts.rssCapMB} MB while loading` : whyExited(stderr()),
        });
      const a = await get(uiAgent, port, '/api/run').catch(() => undefined);
      if (a?.status === 200) {
        const head = RunHead.parse(JSON.parse(a.body.toString()));
        result.trajectories = head.trajectories;
        if (!head.loading) break;
      }
      if ((performance.now() - t0) / 1000 > opts.readySeconds)
        return Object.assign(result, {
          outcome: 'not-ready' as const,
          message: `still loading after ${opts.readySeconds} s (${result.trajectories} trajectories read)`,
        });
      await new Promise((r) => setTimeout(r, 250));
    }
    result.indexSeconds = (performance.now() - t0) / 1000;
    const all = ListHead.parse(
      JSON.parse((await get(uiAgent, port, '/api/trajectories?sort=id&order=asc&limit=100000')).body.toString()),
    ).items;
    if (all.length === 0) throw new Error('the served run has no trajectories');
    const index = await get(uiAgent, port, '/');
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(index.body.toString())?.[1] ?? '/';

    const latencies: number[] = [];
    const routes = new Map<string, number[]>();
    const routeFailures = new Map<string, number>();
    const record = (route: string, a: Answer | Error): Answer | undefined => {
      result.requests++;
      if (a instanceof Error || a.status !== 200) {
        result.failures++;
        routeFailures.set(route, (routeFailures.get(route) ?? 0) + 1);
        if (result.failureSamples.length < 10)
          result.failureSamples.push(
            `${route}: ${a instanceof Error ? a.message : `${a.status} ${a.body.toString().slice(0, 200)}`}`,
          );
        return undefined;
      }
      latencies.push(a.ms);
      let list = routes.get(route);
      if (!list) routes.set(route, (list = []));
      list.push(a.ms);
      return a;
    };
    const ask = async (route: string, target: string) =>
      record(route, await get(agent, port, target).catch((e: Error) => e));
    const enc = encodeURIComponent;

    /** One step of a client: what a person does in the app, drawn at random. */
    const step = async () => {
      const r = Math.random();
      if (r < 0.3) {
        const offset = Math.floor(Math.random() * Math.max(1, all.length - 100));
        await ask(
          'list page',
          `/api/trajectories?sort=${pick(SORTS)}&order=${pick(['asc', 'desc'])}&offset=${offset}&limit=100`,
        );
      } else if (r < 0.4) {
        await ask('list filtered', `/api/trajectories?${pick(FILTERS)}&limit=500`);
      } else if (r < 0.5) {
        await ask('run info', '/api/run');
      } else if (r < 0.55) {
        await ask('app page', '/');
        await ask('app script', script);
      } else {
        // Open a trajectory as the inspector does: detail, a stream, a diff, an image preview.
        const t = pick(all);
        const d = await ask('detail', `/api/trajectories/${enc(t.id)}`);
        if (!d) return;
        const detail = DetailHead.parse(JSON.parse(d.body.toString()));
        const s = detail.streams[0];
        if (s) {
          const url = `/api/trajectories/${enc(t.id)}/stream?name=${enc(s.name)}&turn=${s.turn}`;
          // A long stream comes head first, as the app asks for it (app/stores/trajectory.ts).
          if (s.length > 2 * HEAD_TOKENS) await ask('stream head', `${url}&head=${HEAD_TOKENS}`);
          await ask('stream', url);
        }
        const diff = detail.diffs[0];
        if (diff)
          await ask('diff', `/api/trajectories/${enc(t.id)}/diff?a=${enc(diff.a)}&b=${enc(diff.b)}&turn=${diff.turn}`);
        const k = detail.images.findIndex((i) => i.hasPreview);
        if (k >= 0)
          await ask('image preview', `/api/trajectories/${enc(t.id)}/images/${k}/preview?w=${pick([160, 320, 640])}`);
      }
    };

    result.rssAtStartMB = rssOf(pid)?.rss ?? NaN;
    const loadStart = performance.now();
    const deadline = loadStart + opts.seconds * 1000;
    const clients = Array.from({ length: opts.clients }, async () => {
      while (performance.now() < deadline && !exited) await step();
    });
    // The UI, asked apart from the load: does a person still get the page and the run?
    const ui = (async () => {
      while (performance.now() < deadline && !exited) {
        result.uiDuring.asked++;
        const [page, run] = await Promise.all([
          get(uiAgent, port, '/').catch(() => undefined),
          get(uiAgent, port, '/api/run').catch(() => undefined),
        ]);
        if (page?.status === 200 && run?.status === 200) result.uiDuring.answered++;
        await new Promise((r) => setTimeout(r, 1000));
      }
    })();
    await Promise.all([...clients, ui]);
    const loadEnd = performance.now();
    result.rssAtEndMB = rssOf(pid)?.rss ?? NaN;
    const [page, run] = await Promise.all([
      get(uiAgent, port, '/').catch(() => undefined),
      get(uiAgent, port, '/api/run').catch(() => undefined),
    ]);
    result.uiAfter = page?.status === 200 && run?.status === 200;

    const sorted = latencies.sort((a, b) => a - b);
    result.p50Ms = percentile(sorted, 50);
    result.p99Ms = percentile(sorted, 99);
    result.maxMs = sorted.at(-1) ?? NaN;
    result.requestsPerSecond = result.requests / ((loadEnd - loadStart) / 1000);
    for (const [route, ms] of routes) {
      ms.sort((a, b) => a - b);
      result.byRoute[route] = {
        requests: ms.length + (routeFailures.get(route) ?? 0),
        failures: routeFailures.get(route) ?? 0,
        p50: percentile(ms, 50),
        p99: percentile(ms, 99),
      };
    }
    for (const [route, n] of routeFailures) result.byRoute[route] ??= { requests: n, failures: n, p50: NaN, p99: NaN };
    const quarter = (loadEnd - loadStart) / 4;
    const maxIn = (from: number, to: number) => {
      const rss = samples.filter((s) => s.t >= from && s.t <= to).map((s) => s.rss);
      return rss.length > 0 ? Math.max(...rss) : NaN;
    };
    result.rssFirstQuarterMB = maxIn(loadStart, loadStart + quarter);
    result.rssLastQuarterMB = maxIn(loadEnd - quarter, loadEnd);
    if (exited)
      return Object.assign(result, {
        outcome: capped ? 'rss-cap' : 'exited',
        message: capped ? `RSS passed ${opts.rssCapMB} MB under load` : whyExited(stderr()),
      });
    return result;
  } finally {
    clearInterval(sampler);
    result.peakRssMB = peak;
    agent.destroy();
    uiAgent.destroy();
    if (!exited) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  }
}

// ---- the figure ----------------------------------------------------------------------------

export const QUICK = { trajectories: 400, distinct: 32, clients: 50, seconds: 10 } as const;
export const FULL = { targetBytes: 1e9, clients: 50, seconds: 60 } as const;

/** The run to serve: generated once per size into the bench folder and reused. */
export async function loadRun(
  quick: boolean,
  dir = path.join(benchDir(), quick ? 'serve-load-quick' : 'serve-load-1GB'),
): Promise<{ file: string; bytes: number; trajectories: number }> {
  const file = path.join(dir, 'run.rollscope.jsonl');
  const sidecar = `${file}.bench.json`;
  if (fs.existsSync(sidecar) && fs.existsSync(file))
    return JSON.parse(fs.readFileSync(sidecar, 'utf8')) as { file: string; bytes: number; trajectories: number };
  process.stderr.write(`generating the ${quick ? 'quick' : '~1 GB'} run in ${dir}...\n`);
  const run = await generateRun(
    {
      out: file,
      ...(quick ? { trajectories: QUICK.trajectories, distinct: QUICK.distinct } : { targetBytes: FULL.targetBytes }),
    },
    (w) => process.stderr.write(`\r  ${w.trajectories} trajectories, ${Math.round(w.bytes / 1e6)} MB`),
  );
  process.stderr.write('\n');
  fs.writeFileSync(sidecar, JSON.stringify(run));
  return run;
}

export function serveLoadFigure(
  run: { bytes: number; trajectories: number },
  o: ServeLoadOptions,
  r: ServeLoadResult,
): Figure {
  const ms = (name: string, value: number, note?: string) => ({
    name,
    value: Number.isFinite(value) ? round(value) : null,
    unit: 'ms',
    ...(note ? { note } : {}),
  });
  const mb = (name: string, value: number) => ({
    name,
    value: Number.isFinite(value) ? round(value) : null,
    unit: 'MB',
  });
  return {
    figure: 'serve-load',
    title: `serve under load: ${o.clients} clients for ${o.seconds} s on loopback`,
    status: r.outcome === 'done' ? 'measured' : 'partly-measured',
    data: {
      MB: round(run.bytes / 1e6),
      trajectories: run.trajectories,
      clients: o.clients,
      seconds: o.seconds,
      'index seconds': round(r.indexSeconds),
    },
    results: [
      { name: 'requests', value: r.requests, unit: '' },
      { name: 'failed requests', value: r.failures, unit: '' },
      { name: 'throughput', value: round(r.requestsPerSecond), unit: 'requests/s' },
      ms('latency p50', r.p50Ms),
      ms('latency p99', r.p99Ms),
      ms('latency max', r.maxMs),
      ...Object.entries(r.byRoute).map(([route, f]) =>
        ms(`  ${route} p99`, f.p99, `${f.requests} requests, ${f.failures} failed, p50 ${round(f.p50)} ms`),
      ),
      mb('server RSS when the load starts', r.rssAtStartMB),
      mb('server peak RSS (from its start, loading included)', r.peakRssMB),
      mb('server RSS at the end of the load', r.rssAtEndMB),
      mb('server RSS, highest in the first quarter of the load', r.rssFirstQuarterMB),
      mb('server RSS, highest in the last quarter of the load', r.rssLastQuarterMB),
      {
        name: 'UI (GET / and /api/run) answered during the load',
        value: r.uiDuring.answered,
        unit: `of ${r.uiDuring.asked}`,
      },
      { name: 'UI answered after the load', value: r.uiAfter ? 1 : 0, unit: '(1 = yes)' },
    ],
    references: [],
    targets: [
      {
        name: 'no failed request',
        wanted: 'no failed request under load',
        measured: `${r.failures} of ${r.requests}`,
        met: r.outcome === 'done' ? r.failures === 0 : false,
      },
      {
        name: 'bounded memory',
        wanted: 'memory does not grow unboundedly under load',
        measured: `RSS ${round(r.rssFirstQuarterMB)} MB (first quarter) → ${round(r.rssLastQuarterMB)} MB (last quarter), peak ${round(r.peakRssMB)} MB`,
        met: r.outcome === 'done' ? r.rssLastQuarterMB <= r.rssFirstQuarterMB * 1.5 + 64 : false,
      },
      {
        name: 'UI answers',
        wanted: 'the server still answers the UI during and after the load',
        measured: `${r.uiDuring.answered}/${r.uiDuring.asked} during, ${r.uiAfter ? 'yes' : 'no'} after`,
        met: r.uiDuring.answered === r.uiDuring.asked && r.uiAfter,
      },
    ],
    notes: [...(r.message ? [`${r.outcome}: ${r.message}`] : []), ...r.failureSamples.map((f) => `failure: ${f}`)],
  };
}

function numberArg(argv: string[], name: string): number | undefined {
  const at = argv.indexOf(name);
  return at >= 0 && argv[at + 1] ? Number(argv[at + 1]) : undefined;
}

if (isMain(import.meta.url)) {
  const argv = process.argv.slice(2);
  const quick = argv.includes('--quick');
  const keep = argv.includes('--keep');
  try {
    const run = await loadRun(quick);
    const o: ServeLoadOptions = {
      file: run.file,
      clients: numberArg(argv, '--clients') ?? (quick ? QUICK.clients : FULL.clients),
      seconds: numberArg(argv, '--seconds') ?? (quick ? QUICK.seconds : FULL.seconds),
      readySeconds: quick ? 300 : 3600,
      rssCapMB: Number(process.env.ROLLSCOPE_BENCH_RSS_CAP_MB ?? 6144),
    };
    const r = await serveLoad(o);
    const f = serveLoadFigure(run, o, r);
    printFigure(f);
    process.stdout.write(`${JSON.stringify(f)}\n`);
  } finally {
    if (!keep && !process.env.ROLLSCOPE_BENCH_DIR) removeBenchRuns();
  }
}
