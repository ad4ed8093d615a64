// Figure "export": rows/s of `rollscope export --format parquet` (canonical re-alignment, the
// checks again on each row, images embedded, manifest and rejects), against DuckDB's
// `COPY (SELECT * FROM read_json_auto(...)) TO ... (FORMAT parquet)` from the same JSONL (a
// straight conversion: no checks, no re-alignment, images left as paths). On one core the run is
// also only checked (`rollscope check --json --workers 0`, the pipeline every exported row goes
// through first), so the export's time splits into that shared check and the export's own part
// (re-alignment, the re-check of the row, images, Parquet encoding). Peak RSS at two run sizes.
// `node bin/tsx.js bench/export.ts [--quick] [--keep] [--file RUN.jsonl] [--reps N]`
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { DuckDBInstance } from '@duckdb/node-api';
import {
  benchRun,
  bestOf,
  isMain,
  measureProcess,
  round,
  ROLLSCOPE,
  runStandalone,
  timeBest,
  type Figure,
  type Measure,
  type ProcessRun,
  type Target,
} from './lib.ts';
import { prefixRun } from './check.ts';

/** The part of the manifest this figure reads (docs/export-format.md). */
const ManifestCounts = z.object({ counts: z.object({ read: z.number(), exported: z.number(), rejected: z.number() }) });

async function runExport(
  file: string,
  out: string,
  workers: number | undefined,
  pin: number | undefined,
  reps: number,
): Promise<ProcessRun & { exported: number; read: number; bytes: number }> {
  const best = await bestOf(reps, async () => {
    for (const f of [out, `${out}.manifest.json`, `${out}.rejects.jsonl`]) fs.rmSync(f, { force: true });
    fs.rmSync(`${out}.images`, { recursive: true, force: true });
    return measureProcess(
      process.execPath,
      [
        ROLLSCOPE,
        'export',
        file,
        '--out',
        out,
        '--format',
        'parquet',
        '--json',
        ...(workers === undefined ? [] : ['--workers', String(workers)]),
      ],
      pin ? { pin } : {},
    );
  });
  if (best.code !== 0) throw new Error(`rollscope export exited with ${best.code}: ${best.stderr.slice(0, 2000)}`);
  const m = ManifestCounts.parse(JSON.parse(best.stdout.trim().split('\n').pop()!));
  return { ...best, exported: m.counts.exported, read: m.counts.read, bytes: fs.statSync(out).size };
}

/** `rollscope check --json` of the same file: the shared part of an export (exit 1 = findings, as planted). */
async function runCheck(
  file: string,
  workers: number | undefined,
  pin: number | undefined,
  reps: number,
): Promise<ProcessRun> {
  const out = path.join(path.dirname(file), 'export-check.json');
  const workerArgs = workers === undefined ? [] : ['--workers', String(workers)];
  const best = await bestOf(reps, () =>
    measureProcess(process.execPath, [ROLLSCOPE, 'check', file, '--json', ...workerArgs], {
      ...(pin ? { pin } : {}),
      stdoutFile: out,
    }),
  );
  fs.rmSync(out, { force: true });
  if (best.code !== 0 && best.code !== 1)
    throw new Error(`rollscope check exited with ${best.code}: ${best.stderr.slice(0, 2000)}`);
  return best;
}

/** A run given on the command line (`--file`), else the generator's medium run (quick: its quick run). */
async function exportRun(
  quick: boolean,
): Promise<{ file: string; label: string; bytes: number; trajectories: number }> {
  const at = process.argv.indexOf('--file');
  const given = at >= 0 ? process.argv[at + 1] : undefined;
  if (given) {
    const file = path.resolve(given);
    return { file, label: path.basename(file), bytes: fs.statSync(file).size, trajectories: countLines(file) };
  }
  const run = await benchRun(quick ? 'quick' : 'medium');
  return { file: run.file, label: `${run.size} run`, bytes: run.bytes, trajectories: run.trajectories };
}

/** Non-empty lines of a JSONL file, read in chunks. */
function countLines(file: string): number {
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.alloc(8 << 20);
  let lines = 0;
  let inLine = false;
  try {
    for (let got = fs.readSync(fd, buf); got > 0; got = fs.readSync(fd, buf)) {
      for (let i = 0; i < got; i++) {
        const b = buf[i]!;
        if (b === 0x0a) {
          if (inLine) lines++;
          inLine = false;
        } else if (b !== 0x20 && b !== 0x0d && b !== 0x09) inLine = true;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return lines + (inLine ? 1 : 0);
}

const cpu = (r: ProcessRun) => r.userSeconds + r.systemSeconds;

const MB = (x: number) => `${Math.round(x).toLocaleString('en-US')} MB`;

export async function exportFigure(quick: boolean): Promise<Figure> {
  if (!fs.existsSync(path.join(path.dirname(ROLLSCOPE), '..', 'server', 'cli', 'commands', 'export.ts'))) {
    return {
      figure: 'export',
      title: 'export: rows/s to Parquet',
      status: 'not-measured',
      data: {},
      results: [
        {
          name: 'rollscope export --format parquet',
          value: null,
          unit: 'rows/s',
          note: 'TODO: `rollscope export` is not in this build',
        },
      ],
      references: [],
      targets: [],
      notes: [],
    };
  }
  const run = await exportRun(quick);
  const repsAt = process.argv.indexOf('--reps');
  const reps = repsAt >= 0 ? Number(process.argv[repsAt + 1]) : quick ? 1 : 2;
  const dir = fs.mkdtempSync(path.join(path.dirname(run.file), 'export-bench-'));
  const part = path.join(dir, 'export-part.rollscope.jsonl');
  const partRun = prefixRun(run.file, Math.max(1, Math.floor(run.trajectories / 3)), part);
  const out = path.join(dir, 'export.parquet');

  const configs = [
    { name: '1 core (taskset -c 0, --workers 0)', workers: 0, pin: 1 },
    { name: '2 cores (--workers 2)', workers: 2, pin: undefined },
  ];
  const results: Measure[] = [];
  const targets: Target[] = [];
  const notes: string[] = [];
  const peaks: { config: string; small: number; full: number }[] = [];
  let oneCoreRows = 0;
  let bestRows = 0;
  for (const c of configs) {
    const small = await runExport(part, out, c.workers, c.pin, reps);
    const full = await runExport(run.file, out, c.workers, c.pin, reps);
    if (full.read !== run.trajectories || small.read !== partRun.trajectories)
      throw new Error(
        `export read ${full.read} of ${run.trajectories} (part: ${small.read} of ${partRun.trajectories})`,
      );
    const seconds = Math.max(1e-6, full.wallSeconds - small.wallSeconds);
    const rate = (full.read - small.read) / seconds;
    const exportedShare = full.exported / full.read;
    const rowsPerSecond = rate * exportedShare;
    bestRows = Math.max(bestRows, rowsPerSecond);
    peaks.push({ config: c.name, small: small.peakRssMB, full: full.peakRssMB });
    results.push(
      {
        name: c.name,
        value: rate,
        unit: 'trajectories/s',
        note: `marginal; ${round(full.wallSeconds)} s wall for all ${full.read}`,
      },
      {
        name: c.name,
        value: rowsPerSecond,
        unit: 'rows/s',
        note: `${full.exported} rows written, ${full.read - full.exported} rejected with their findings`,
      },
      {
        name: `${c.name} peak RSS, ${partRun.trajectories} trajectories (${round(fs.statSync(part).size / 1e6)} MB)`,
        value: small.peakRssMB,
        unit: 'MB',
      },
      {
        name: `${c.name} peak RSS, ${run.trajectories} trajectories (${round(run.bytes / 1e6)} MB)`,
        value: full.peakRssMB,
        unit: 'MB',
      },
      { name: `${c.name} Parquet size`, value: full.bytes / 1e6, unit: 'MB', note: 'images embedded' },
    );
    if (c.workers !== 0) continue;
    oneCoreRows = rowsPerSecond;
    // The split: the same files only checked, on the same core.
    const checkSmall = await runCheck(part, c.workers, c.pin, reps);
    const checkFull = await runCheck(run.file, c.workers, c.pin, reps);
    const checkSeconds = Math.max(1e-6, checkFull.wallSeconds - checkSmall.wallSeconds);
    const checkRate = (full.read - small.read) / checkSeconds;
    const share = Math.min(1, checkSeconds / seconds);
    results.push(
      {
        name: `${c.name} check only (rollscope check --json)`,
        value: checkRate,
        unit: 'trajectories/s',
        note: `marginal; ${round(checkFull.wallSeconds)} s wall for all; the floor an export sits on`,
      },
      {
        name: `${c.name} check only: peak RSS, ${partRun.trajectories} → ${run.trajectories} trajectories`,
        value: checkFull.peakRssMB,
        unit: 'MB',
        note: `${MB(checkSmall.peakRssMB)} → ${MB(checkFull.peakRssMB)}: the export's memory floor`,
      },
      {
        name: `${c.name} export time: the shared check`,
        value: share * 100,
        unit: '%',
        note: `${round(checkSeconds, 2)} s of ${round(seconds, 2)} s (marginal, ${full.read - small.read} trajectories)`,
      },
      {
        name: `${c.name} export time: export's own (re-alignment, re-check, images, Parquet)`,
        value: (1 - share) * 100,
        unit: '%',
        note: `${round(Math.max(0, seconds - checkSeconds), 2)} s; ${round((Math.max(0, seconds - checkSeconds) / (full.read - small.read)) * 1000, 2)} ms a trajectory`,
      },
    );
    notes.push(
      `On 1 core the shared check takes ${Math.round(share * 100)} % of the export's time: an export cannot be faster than \`check\` (${Math.round(checkRate)} trajectories/s here); its own part is ${Math.round((1 - share) * 100)} %.`,
    );
  }
  // Default settings (the workers export and check choose for the run), the two interleaved so
  // other work on the machine weighs on both alike: the best of `reps` each.
  let exportDefault: Awaited<ReturnType<typeof runExport>> | undefined;
  let checkDefault: ProcessRun | undefined;
  for (let i = 0; i < reps; i++) {
    const e = await runExport(run.file, out, undefined, undefined, 1);
    const k = await runCheck(run.file, undefined, undefined, 1);
    if (!exportDefault || e.wallSeconds < exportDefault.wallSeconds) exportDefault = e;
    if (!checkDefault || k.wallSeconds < checkDefault.wallSeconds) checkDefault = k;
  }
  const exportWall = exportDefault!.wallSeconds;
  const checkWall = checkDefault!.wallSeconds;
  results.push(
    {
      name: 'default settings: export --format parquet',
      value: exportWall,
      unit: 's',
      note: `best of ${reps}, interleaved with check; ${round(cpu(exportDefault!))} s CPU, peak RSS ${MB(exportDefault!.peakRssMB)}`,
    },
    {
      name: 'default settings: check --json (the same run)',
      value: checkWall,
      unit: 's',
      note: `${round(cpu(checkDefault!))} s CPU, peak RSS ${MB(checkDefault!.peakRssMB)}`,
    },
    {
      name: 'default settings: export ÷ check',
      value: exportWall / checkWall,
      unit: '×',
      note: `wall; CPU ${round(cpu(exportDefault!) / cpu(checkDefault!), 2)}×`,
    },
  );
  fs.rmSync(dir, { recursive: true, force: true });

  const inst = await DuckDBInstance.create(':memory:');
  const con = await inst.connect();
  const duckOut = path.join(path.dirname(run.file), `duckdb-${process.pid}.parquet`);
  const q = (s: string) => `'${s.replace(/'/g, "''")}'`;
  let duckBytes = 0;
  const duckSeconds = await timeBest(reps, async () => {
    fs.rmSync(duckOut, { force: true });
    await con.run(
      `COPY (SELECT * FROM read_json_auto(${q(run.file)}, format='newline_delimited')) TO ${q(duckOut)} (FORMAT parquet)`,
    );
    duckBytes = fs.statSync(duckOut).size;
  });
  con.closeSync();
  inst.closeSync();
  fs.rmSync(duckOut, { force: true });
  const duckRows = run.trajectories / duckSeconds;
  const flatAndLow = peaks.every((p) => Math.max(p.small, p.full) < 600 && p.full / p.small <= 1.1);
  targets.push(
    {
      name: 'export within 1.3× check',
      wanted: '`export --format parquet` wall ≤ 1.3× `check --json` wall on the same run, default settings (issue 24)',
      measured: `${round(exportWall / checkWall, 2)}× (${round(exportWall)} s vs ${round(checkWall)} s); DuckDB COPY of the same run ${round(duckSeconds, 2)} s: export at ${round(duckSeconds / exportWall, 2)}× DuckDB's speed`,
      met: quick ? null : exportWall <= 1.3 * checkWall,
    },
    {
      name: 'export at least as fast as DuckDB COPY',
      wanted: "rollscope export's rows/s ≥ DuckDB's COPY (SELECT * FROM read_json_auto) TO parquet of the same JSONL",
      measured: `${Math.round(bestRows)} rows/s (1 core: ${Math.round(oneCoreRows)}) against ${Math.round(duckRows)} rows/s: ${round(bestRows / duckRows, 2)}×`,
      met: bestRows >= duckRows,
    },
    {
      name: 'export peak RSS flat and below 600 MB',
      wanted: 'peak RSS below 600 MB, the same (±10 %) at both run sizes',
      measured: peaks
        .map((p) => `${p.config}: ${MB(p.small)} → ${MB(p.full)} (${round(p.full / p.small, 2)}×)`)
        .join('; '),
      met: flatAndLow,
    },
  );
  return {
    figure: 'export',
    title: 'export: rows/s to Parquet',
    status: 'measured',
    data: { file: run.label, MB: round(run.bytes / 1e6), trajectories: run.trajectories },
    results,
    references: [
      {
        name: 'DuckDB COPY (SELECT * FROM read_json_auto) TO parquet, 2 cores',
        value: duckRows,
        unit: 'rows/s',
        note: 'every record as it is, no checks',
      },
      { name: 'DuckDB Parquet size', value: duckBytes / 1e6, unit: 'MB', note: 'images as paths' },
    ],
    targets,
    notes: [
      ...notes,
      'rollscope writes only the rows that pass the checks again after re-alignment; DuckDB converts every record unchecked.',
    ],
  };
}

if (isMain(import.meta.url)) await runStandalone(exportFigure);
