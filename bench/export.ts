// Figure "export": rows/s of `rollscope export --format parquet` (canonical re-alignment, the
// checks again on each row, images embedded, manifest and rejects), against DuckDB's
// `COPY (SELECT * FROM read_json_auto(...)) TO ... (FORMAT parquet)` from the same JSONL (a
// straight conversion: no checks, no re-alignment, images left as paths).
// `node bin/tsx.js bench/export.ts [--quick] [--keep]`
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
} from './lib.ts';
import { prefixRun } from './check.ts';

/** The part of the manifest this figure reads (docs/export-format.md). */
const ManifestCounts = z.object({ counts: z.object({ read: z.number(), exported: z.number(), rejected: z.number() }) });

async function runExport(
  file: string,
  out: string,
  workers: number,
  pin: number | undefined,
  reps: number,
): Promise<ProcessRun & { exported: number; read: number; bytes: number }> {
  const best = await bestOf(reps, async () => {
    for (const f of [out, `${out}.manifest.json`, `${out}.rejects.jsonl`]) fs.rmSync(f, { force: true });
    fs.rmSync(`${out}.images`, { recursive: true, force: true });
    return measureProcess(
      process.execPath,
      [ROLLSCOPE, 'export', file, '--out', out, '--format', 'parquet', '--json', '--workers', String(workers)],
      pin ? { pin } : {},
    );
  });
  if (best.code !== 0) throw new Error(`rollscope export exited with ${best.code}: ${best.stderr.slice(0, 2000)}`);
  const m = ManifestCounts.parse(JSON.parse(best.stdout.trim().split('\n').pop()!));
  return { ...best, exported: m.counts.exported, read: m.counts.read, bytes: fs.statSync(out).size };
}

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
  const run = await benchRun(quick ? 'quick' : 'medium');
  const reps = quick ? 1 : 2;
  const dir = path.dirname(run.file);
  const part = path.join(dir, 'export-part.rollscope.jsonl');
  const partRun = prefixRun(run.file, Math.max(1, Math.floor(run.trajectories / 3)), part);
  const out = path.join(dir, 'export.parquet');

  const configs = [
    { name: '1 core (taskset -c 0, --workers 0)', workers: 0, pin: 1 },
    { name: '2 cores (--workers 2)', workers: 2, pin: undefined },
  ];
  const results: Measure[] = [];
  for (const c of configs) {
    const small = await runExport(part, out, c.workers, c.pin, reps);
    const full = await runExport(run.file, out, c.workers, c.pin, reps);
    if (full.read !== run.trajectories || small.read !== partRun.trajectories)
      throw new Error(
        `export read ${full.read} of ${run.trajectories} (part: ${small.read} of ${partRun.trajectories})`,
      );
    const rate = (full.read - small.read) / Math.max(1e-6, full.wallSeconds - small.wallSeconds);
    const exportedShare = full.exported / full.read;
    results.push(
      {
        name: c.name,
        value: rate,
        unit: 'trajectories/s',
        note: `marginal; ${round(full.wallSeconds)} s wall for all ${full.read}`,
      },
      {
        name: c.name,
        value: rate * exportedShare,
        unit: 'rows/s',
        note: `${full.exported} rows written, ${full.read - full.exported} rejected with their findings`,
      },
      { name: `${c.name} peak RSS`, value: full.peakRssMB, unit: 'MB' },
      { name: `${c.name} Parquet size`, value: full.bytes / 1e6, unit: 'MB', note: 'images embedded' },
    );
  }
  for (const f of [out, `${out}.manifest.json`, `${out}.rejects.jsonl`, part]) fs.rmSync(f, { force: true });

  const inst = await DuckDBInstance.create(':memory:');
  const con = await inst.connect();
  const duckOut = path.join(dir, 'duckdb.parquet');
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
  return {
    figure: 'export',
    title: 'export: rows/s to Parquet',
    status: 'measured',
    data: { file: `${run.size} run`, MB: round(run.bytes / 1e6), trajectories: run.trajectories },
    results,
    references: [
      {
        name: 'DuckDB COPY (SELECT * FROM read_json_auto) TO parquet, 2 cores',
        value: run.trajectories / duckSeconds,
        unit: 'rows/s',
        note: 'every record as it is, no checks',
      },
      { name: 'DuckDB Parquet size', value: duckBytes / 1e6, unit: 'MB', note: 'images as paths' },
    ],
    targets: [],
    notes: [
      'rollscope writes only the rows that pass the checks again after re-alignment; DuckDB converts every record unchecked.',
    ],
  };
}

if (isMain(import.meta.url)) await runStandalone(exportFigure);
