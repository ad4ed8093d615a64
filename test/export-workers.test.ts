// An export whose input is read by threads (pipeline/units.ts: each reads its units, builds,
// re-checks and encodes their rows, RunOptions `exportRows`) writes the batch, rejects and
// manifest an export on the main thread alone writes, byte for byte, on 1 and 3 threads with
// units small enough that the files are cut: over the importer fixtures of every format and generated runs (slime with inline
// images in GRPO groups; rollscope JSONL with image files), as Parquet and JSONL. The manifest's
// only time is `created_at`, fixed here by SOURCE_DATE_EPOCH, so no field is removed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { generateRun, STANDARD_RUN } from '../bench/generate.ts';
import { checkPaths } from '../server/pipeline.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { rowSpecFor } from '../server/export/run.ts';
import { readParquetRows } from '../server/export/parquet.ts';
import { ExportRow } from '../server/export/row.ts';

let dir = '';
let slimeRun = '';
let nativeRun = '';

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-export-workers-'));
  vi.stubEnv('SOURCE_DATE_EPOCH', '1700000000');
  slimeRun = path.join(dir, 'standard', 'run.jsonl');
  await generateRun({ ...STANDARD_RUN, out: slimeRun, trajectories: 48, groupSize: 8, seed: 3 });
  nativeRun = path.join(dir, 'native', 'run.rollscope.jsonl');
  await generateRun({ out: nativeRun, trajectories: 24, groupSize: 4, seed: 5, faultyShare: 0.25 });
}, 240_000);

afterAll(() => {
  vi.unstubAllEnvs();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The three files of an export, as bytes. */
function exported(out: string, manifestFile: string, rejectsFile: string) {
  return {
    batch: fs.readFileSync(out),
    manifest: fs.readFileSync(manifestFile),
    rejects: fs.readFileSync(rejectsFile),
  };
}

/** Read units of 16 KiB: every file larger than that is cut, so the threads read parts of one file. */
const UNIT_BYTES = 16 * 1024;

async function exportWith(input: string, name: string, workers: number, images?: 'embed' | 'ref') {
  const out = path.join(dir, `w${workers}`, name);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const r = await exportRun([input], {
    out,
    workers,
    force: true,
    unitBytes: UNIT_BYTES,
    ...(images ? { images } : {}),
  });
  return { ...exported(r.out, r.manifestFile, r.rejectsFile), result: r };
}

const inputs = () => [
  { name: 'fixtures', path: path.join('test', 'fixtures') },
  { name: 'slime', path: slimeRun },
  { name: 'native', path: nativeRun },
];

describe('an export built on the analysis workers', () => {
  it('writes the batch, rejects and manifest the main thread alone writes, on 1 and 3 threads, in Parquet and JSONL', async () => {
    for (const input of inputs()) {
      for (const file of [`${input.name}.parquet`, `${input.name}.jsonl`]) {
        const alone = await exportWith(input.path, file, 0);
        expect(alone.result.manifest.counts.exported, file).toBeGreaterThan(0);
        for (const workers of [1, 3]) {
          const pooled = await exportWith(input.path, file, workers);
          expect(pooled.batch.equals(alone.batch), `${file} on ${workers}: batch`).toBe(true);
          expect(pooled.rejects.equals(alone.rejects), `${file} on ${workers}: rejects`).toBe(true);
          expect(pooled.manifest.toString(), `${file} on ${workers}: manifest`).toBe(alone.manifest.toString());
        }
      }
    }
  }, 900_000);

  it('writes the same image files and rows by reference', async () => {
    const alone = await exportWith(nativeRun, 'ref.parquet', 0, 'ref');
    const pooled = await exportWith(nativeRun, 'ref.parquet', 2, 'ref');
    expect(pooled.batch.equals(alone.batch)).toBe(true);
    const images = (w: number) => fs.readdirSync(path.join(dir, `w${w}`, 'images')).sort();
    expect(images(2)).toEqual(images(0));
    expect(images(0).length).toBeGreaterThan(0);
  }, 300_000);

  it('reads back, with hyparquet and DuckDB, as the rows of the JSONL batch', async () => {
    const parquet = await exportWith(slimeRun, 'readback.parquet', 2);
    const jsonl = await exportWith(slimeRun, 'readback.jsonl', 2);
    const lines = jsonl.batch
      .toString()
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => ExportRow.parse(JSON.parse(l)));
    const rows = (await readParquetRows(parquet.batch)).map((r) => ExportRow.parse(r));
    expect(rows.length).toBe(lines.length);
    expect(rows.length).toBeGreaterThan(0);
    // Parquet stores logprobs as float32.
    const f32 = (r: ExportRow) => ({ ...r, rollout_log_probs: r.rollout_log_probs?.map(Math.fround) ?? null });
    expect(rows.map(f32)).toEqual(lines.map(f32));

    const inst = await DuckDBInstance.create(':memory:');
    const con = await inst.connect();
    try {
      const file = parquet.result.out.replace(/'/g, "''");
      const got = await con.runAndReadAll(
        `SELECT count(*)::INTEGER AS n, sum(len(tokens))::INTEGER AS tokens, sum(len(images))::INTEGER AS images,
                count(DISTINCT id)::INTEGER AS ids FROM read_parquet('${file}')`,
      );
      expect(got.getRowObjects()[0]).toEqual({
        n: lines.length,
        tokens: lines.reduce((n, r) => n + r.tokens.length, 0),
        images: lines.reduce((n, r) => n + r.images.length, 0),
        ids: new Set(lines.map((r) => r.id)).size,
      });
    } finally {
      con.closeSync();
      inst.closeSync();
    }
  }, 300_000);

  it("hands the writer each row encoded, and the trajectory without its streams (the workers' own part)", async () => {
    const spec = rowSpecFor({ out: path.join(dir, 'unused.parquet'), roots: [path.dirname(slimeRun)] });
    let trajectories = 0;
    for await (const ev of checkPaths([slimeRun], { workers: 1, exportRows: spec })) {
      if (ev.type !== 'trajectory') continue;
      trajectories++;
      const exportedRow = (ev as { exported?: { kind: string } }).exported;
      expect(exportedRow?.kind, ev.checked.trajectory.id).toMatch(/^(row|rejected)$/);
      expect(ev.checked.alignment.tokens).toEqual([]);
      expect(ev.checked.trajectory.sample?.tokens ?? []).toEqual([]);
      expect(ev.checked.trajectory.images.every((im) => !im.url || im.url === 'data:')).toBe(true);
    }
    expect(trajectories).toBe(48);
  }, 300_000);
});
