// What the benchmark scripts share: the figure format (printed as text and as JSON), the
// machine they ran on, timing of child processes with their peak memory, and the runs they
// measure (generated once per size and reused by every figure).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { generateRun, progressPrinter, type GeneratedRun, type GenerateOptions } from './generate.ts';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const ROLLSCOPE = path.join(REPO, 'bin', 'rollscope.js');

/** One measured quantity. */
export const Measure = z.object({
  name: z.string(),
  value: z.number().nullable(),
  unit: z.string(),
  note: z.string().optional(),
});
export type Measure = z.infer<typeof Measure>;

export const Target = z.object({
  name: z.string(),
  /** What the issue asks, as a sentence. */
  wanted: z.string(),
  measured: z.string(),
  /** null: not measured (the reason is in `measured`). */
  met: z.boolean().nullable(),
});
export type Target = z.infer<typeof Target>;

export const Figure = z.object({
  figure: z.string(),
  title: z.string(),
  status: z.enum(['measured', 'not-measured', 'partly-measured']),
  /** What was measured on (file, size, trajectories...). */
  data: z.record(z.string(), z.unknown()),
  /** rollscope's own figures. */
  results: z.array(Measure),
  /** The references, measured on the same data in the same run. */
  references: z.array(Measure),
  targets: z.array(Target),
  notes: z.array(z.string()),
});
export type Figure = z.infer<typeof Figure>;

export interface Machine {
  date: string;
  nproc: number;
  cpu: string;
  ramGB: number;
  node: string;
  platform: string;
  /** 1-minute load average when the figures started and ended: other work on the machine skews them. */
  loadAverage: { start: number; end?: number };
}

export function machine(): Machine {
  return {
    date: new Date().toISOString(),
    nproc: os.availableParallelism?.() ?? os.cpus().length,
    cpu: os.cpus()[0]?.model ?? 'unknown',
    ramGB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    loadAverage: { start: round(os.loadavg()[0]!, 2) },
  };
}

export const round = (x: number, digits = 1): number => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};

export function fmt(m: Measure): string {
  if (m.value === null) return `${m.name}: not measured${m.note ? ` (${m.note})` : ''}`;
  const v = Math.abs(m.value) >= 100 ? Math.round(m.value).toLocaleString('en-US') : String(round(m.value, 2));
  return `${m.name}: ${v} ${m.unit}${m.note ? `  (${m.note})` : ''}`;
}

/** The figure as text, for people. */
export function printFigure(f: Figure, out: NodeJS.WritableStream = process.stdout): void {
  out.write(`\n== ${f.title} [${f.status}]\n`);
  const data = Object.entries(f.data)
    .map(([k, v]) => `${k}=${typeof v === 'number' ? round(v, 2) : String(v)}`)
    .join(', ');
  if (data) out.write(`   data: ${data}\n`);
  for (const m of f.results) out.write(`   ${fmt(m)}\n`);
  for (const m of f.references) out.write(`   reference · ${fmt(m)}\n`);
  for (const t of f.targets)
    out.write(
      `   target ${t.met === null ? '·' : t.met ? '✓' : '✗'} ${t.name}: ${t.wanted} — measured ${t.measured}\n`,
    );
  for (const n of f.notes) out.write(`   note: ${n}\n`);
}

/** The figures as Markdown (bench/README.md keeps the latest between its figures markers). */
export function figuresMarkdown(doc: { machine: Machine; seconds: number; figures: Figure[] }): string {
  const m = doc.machine;
  const cell = (x: Measure) =>
    x.value === null ? `not measured${x.note ? ` (${x.note})` : ''}` : `${fmt({ ...x, name: '' }).replace(/^: /, '')}`;
  const esc = (t: string) => t.replace(/\|/g, '\\|');
  const out: string[] = [
    `Measured ${m.date.slice(0, 10)} on ${m.nproc} cores (${m.cpu}), ${m.ramGB} GB RAM, node ${m.node}, ${m.platform}; ` +
      `1-minute load average ${m.loadAverage.start} at the start and ${m.loadAverage.end ?? '?'} at the end (other work shared the machine); ${Math.round(doc.seconds / 60)} min in all. ` +
      'Raw figures: [results.json](results.json).',
    '',
  ];
  for (const f of doc.figures) {
    out.push(`### ${f.title}${f.status === 'measured' ? '' : ` (${f.status})`}`, '');
    const data = Object.entries(f.data).map(([k, v]) => `${k} ${typeof v === 'number' ? round(v, 2) : String(v)}`);
    if (data.length) out.push(`Data: ${data.join(', ')}.`, '');
    out.push('| | measured |', '|---|---|');
    for (const x of f.results) out.push(`| ${esc(x.name)} | ${esc(cell(x))} |`);
    for (const x of f.references) out.push(`| reference: ${esc(x.name)} | ${esc(cell(x))} |`);
    out.push('');
    for (const t of f.targets)
      out.push(`- ${t.met === null ? '·' : t.met ? '**met**' : '**missed**'}: ${t.wanted} — ${t.measured}.`);
    for (const n of f.notes) out.push(`- ${n}`);
    out.push('');
  }
  return out.join('\n');
}

export const FIGURES_START = '<!-- figures:start (written by npm run bench) -->';
export const FIGURES_END = '<!-- figures:end -->';

/** Replace the figures section of bench/README.md (between the markers) with `markdown`. */
export function writeReadmeFigures(markdown: string): void {
  const file = path.join(REPO, 'bench', 'README.md');
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const a = text.indexOf(FIGURES_START);
  const b = text.indexOf(FIGURES_END);
  if (a < 0 || b < a) throw new Error(`${file}: no figures markers`);
  fs.writeFileSync(file, `${text.slice(0, a + FIGURES_START.length)}\n${markdown}\n${text.slice(b)}`);
  // The tables are written unaligned; the project's formatter aligns them, as `npm test` requires.
  try {
    execFileSync(path.join(REPO, 'node_modules', '.bin', 'biome'), ['format', '--write', file], { stdio: 'ignore' });
  } catch {
    process.stderr.write(`${file}: written, but not formatted (run npx biome format --write ${file})\n`);
  }
}

export interface ProcessRun {
  wallSeconds: number;
  userSeconds: number;
  systemSeconds: number;
  /** Peak resident set size of the process (threads included), from the kernel's accounting. */
  peakRssMB: number;
  code: number | null;
  stdout: string;
  stderr: string;
}

const TIME = '/usr/bin/time';

/**
 * Run a command to completion and measure it: wall time, CPU time and peak RSS. With GNU time
 * (`/usr/bin/time`) the kernel's rusage gives all three; without it, VmHWM is polled from /proc.
 * `pin` restricts the process to the first N cores (taskset), to measure "on 1 core".
 */
export async function measureProcess(
  cmd: string,
  args: string[],
  opts: { pin?: number; env?: NodeJS.ProcessEnv; stdoutFile?: string } = {},
): Promise<ProcessRun> {
  const useTime = fs.existsSync(TIME);
  let argv = [cmd, ...args];
  if (opts.pin !== undefined)
    argv = ['taskset', '-c', Array.from({ length: opts.pin }, (_, i) => i).join(','), ...argv];
  const marker = '__rollscope_bench_time__';
  if (useTime) argv = [TIME, '-f', `${marker} %e %U %S %M`, ...argv];
  const t0 = performance.now();
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: REPO,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', opts.stdoutFile ? fs.openSync(opts.stdoutFile, 'w') : 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => {
    if (stdout.length < 64 * 1024 * 1024) stdout += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  let polledHwmKB = 0;
  const poll = useTime
    ? undefined
    : setInterval(() => {
        try {
          const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'));
          if (m) polledHwmKB = Math.max(polledHwmKB, Number(m[1]));
        } catch {
          /* exited */
        }
      }, 50);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  if (poll) clearInterval(poll);
  const wall = (performance.now() - t0) / 1000;
  if (useTime) {
    const line = stderr.split('\n').find((l) => l.startsWith(marker));
    stderr = stderr
      .split('\n')
      .filter((l) => !l.startsWith(marker) && !l.startsWith('Command exited with non-zero status'))
      .join('\n');
    const [, e, u, s, m] = (line ?? '').split(' ').map(Number);
    return {
      wallSeconds: e ?? wall,
      userSeconds: u ?? NaN,
      systemSeconds: s ?? NaN,
      peakRssMB: (m ?? NaN) / 1024,
      code,
      stdout,
      stderr,
    };
  }
  return {
    wallSeconds: wall,
    userSeconds: NaN,
    systemSeconds: NaN,
    peakRssMB: polledHwmKB / 1024,
    code,
    stdout,
    stderr,
  };
}

/** Best (shortest) of `n` runs: other work on the machine only ever makes a run slower. */
export async function bestOf<T extends { wallSeconds: number }>(n: number, run: () => Promise<T>): Promise<T> {
  let best: T | undefined;
  for (let i = 0; i < n; i++) {
    const r = await run();
    if (!best || r.wallSeconds < best.wallSeconds) best = r;
  }
  return best!;
}

/** Time an in-process piece of work, best of `n`. */
export async function timeBest(n: number, work: () => Promise<unknown> | unknown): Promise<number> {
  let best = Infinity;
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await work();
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  return best;
}

// --- runs -----------------------------------------------------------------------------------

export const SIZES = {
  /** CI: checks the scripts run; figures at this size say little. */
  quick: { trajectories: 240 },
  /** CI's stand-in for the large run (4× quick). */
  quickLarge: { trajectories: 960 },
  /** The check and export figures (a few minutes each configuration on 2 cores). */
  medium: { targetBytes: 200e6 },
  /** The memory figure's large run. */
  large: { targetBytes: 2e9 },
} as const;
export type SizeName = keyof typeof SIZES;

export interface BenchRun extends GeneratedRun {
  size: SizeName;
}

/** Where generated runs live (deleted by run.ts unless --keep). */
export function benchDir(): string {
  return process.env.ROLLSCOPE_BENCH_DIR ?? path.join(os.tmpdir(), 'rollscope-bench');
}

const cache = new Map<SizeName, Promise<BenchRun>>();

/** Where the run of this size is (or will be) generated. */
function benchRunFile(size: SizeName): string {
  return path.join(benchDir(), size, `run-${size}.rollscope.jsonl`);
}

/** Whether the run of this size is already generated (by this script or an earlier one): it needs no more disk. */
export function hasBenchRun(size: SizeName): boolean {
  const out = benchRunFile(size);
  return cache.has(size) || (fs.existsSync(`${out}.bench.json`) && fs.existsSync(out));
}

/** The run of this size: generated on first use, reused afterwards (also across scripts, via its `.json` sidecar). */
export function benchRun(size: SizeName, extra: Partial<GenerateOptions> = {}): Promise<BenchRun> {
  let p = cache.get(size);
  if (!p) {
    p = (async () => {
      const out = benchRunFile(size);
      const dir = path.dirname(out);
      const sidecar = `${out}.bench.json`;
      if (fs.existsSync(sidecar) && fs.existsSync(out))
        return { ...(JSON.parse(fs.readFileSync(sidecar, 'utf8')) as GeneratedRun), size };
      process.stderr.write(`generating the ${size} run in ${dir}...\n`);
      const run = await generateRun({ out, ...SIZES[size], ...extra }, progressPrinter());
      if (process.stderr.isTTY) process.stderr.write('\n');
      fs.writeFileSync(sidecar, JSON.stringify(run));
      return { ...run, size };
    })();
    cache.set(size, p);
  }
  return p;
}

export function removeBenchRuns(): void {
  fs.rmSync(benchDir(), { recursive: true, force: true });
}

/** Free space on the file system that holds `dir`, in bytes (statfs). */
export function freeBytes(dir: string): number {
  fs.mkdirSync(dir, { recursive: true });
  const s = fs.statfsSync(dir);
  return s.bavail * s.bsize;
}

/** `--quick`, `--size NAME`, `--keep` and the like, shared by every script. */
export function benchArgs(argv: string[] = process.argv.slice(2)): {
  quick: boolean;
  keep: boolean;
  only?: string[];
  json?: string;
} {
  const quick = argv.includes('--quick');
  const keep = argv.includes('--keep');
  const onlyAt = argv.indexOf('--only');
  const jsonAt = argv.indexOf('--json');
  return {
    quick,
    keep,
    ...(onlyAt >= 0 && argv[onlyAt + 1] ? { only: argv[onlyAt + 1]!.split(',') } : {}),
    ...(jsonAt >= 0 && argv[jsonAt + 1] ? { json: argv[jsonAt + 1] } : {}),
  };
}

export function isMain(metaUrl: string): boolean {
  return process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(metaUrl);
}

/** Run one figure script on its own: print it, and its JSON on the last line. */
export async function runStandalone(make: (quick: boolean) => Promise<Figure>): Promise<void> {
  const { quick, keep } = benchArgs();
  try {
    const f = await make(quick);
    printFigure(f);
    process.stdout.write(`${JSON.stringify(f)}\n`);
  } finally {
    if (!keep && !process.env.ROLLSCOPE_BENCH_DIR) removeBenchRuns();
  }
}
