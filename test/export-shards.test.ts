// `export --shard K/N` reads only its input splits, as `check --shard` does (docs/distributed.md):
// a run of small JSONL files read whole and one large one cut at line starts, with ids repeated
// within and across files and shards, and unreadable lines. The shards' rows keep the ids their
// data states and `merge` gives the run-wide keys (cli/merge-keys.ts), after which the rows and
// reject entries of N shards are those of one unsharded export, line for line; the bytes each
// shard reads (the kernel's count, /proc/self/io) are its own share, not the run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportRun } from '../server/pipeline/export-run.ts';
import { mergeExport } from '../server/cli/merge.ts';
import { readParquetRows } from '../server/export/parquet.ts';
import { planInputSplits } from '../server/pipeline/shard.ts';
import { lineFeedsBefore } from '../server/import/read/lines.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const EPOCH = '1767225600';

let tmp: string;
let run: string;
/** The run's files in input order, and the one that is cut. */
let files: string[];
let big: string;

const lines = (file: string) => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
const sha = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

beforeAll(async () => {
  process.env.SOURCE_DATE_EPOCH = EPOCH;
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-export-shards-'));
  run = path.join(tmp, 'run');
  fs.mkdirSync(run);
  // The images the samples name, beside them.
  fs.cpSync(path.join(ROOT, 'test', 'fixtures', 'slime', 'images'), path.join(run, 'images'), { recursive: true });
  const samples = fs
    .readFileSync(path.join(ROOT, 'test', 'fixtures', 'slime', 'samples.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const sample = (i: number, index: number) =>
    JSON.stringify({ ...samples[i % samples.length]!, index, group_index: i % 7 });
  // Small files state indices 0…9 each: their ids repeat across files, so across shards.
  for (let f = 0; f < 3; f++)
    fs.writeFileSync(
      path.join(run, `a-small-${f}.jsonl`),
      `${Array.from({ length: 10 }, (_, i) => sample(i + f, i)).join('\n')}\n`,
    );
  // The large file repeats indices within itself too, and holds two lines that cannot be read.
  const rows = Array.from({ length: 240 }, (_, i) => sample(i, i % 90));
  rows.splice(50, 0, '{"index": 7, "broken": ');
  rows.splice(200, 0, 'not json');
  big = path.join(run, 'big.jsonl');
  fs.writeFileSync(big, `${rows.join('\n')}\n`);
  files = ['a-small-0.jsonl', 'a-small-1.jsonl', 'a-small-2.jsonl', 'big.jsonl'].map((f) => path.join(run, f));
}, 60_000);

afterAll(() => {
  delete process.env.SOURCE_DATE_EPOCH;
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function shardExports(count: number, dir: string, opts: { partition?: boolean } = {}) {
  fs.mkdirSync(dir, { recursive: true });
  const docs: { name: string; doc: unknown }[] = [];
  for (let index = 0; index < count; index++) {
    const r = await exportRun([run], {
      out: opts.partition ? path.join(dir, 'dataset') : path.join(dir, `batch-${index}.jsonl`),
      workers: 0,
      shard: { index, count },
      ...(opts.partition ? { partition: { keys: ['step', 'rank'], part: index } } : {}),
    });
    docs.push({ name: r.manifestFile, doc: JSON.parse(fs.readFileSync(r.manifestFile, 'utf8')) });
  }
  return docs;
}

describe('export --shard K/N over input splits, keyed by merge', () => {
  let whole: Awaited<ReturnType<typeof exportRun>>;

  beforeAll(async () => {
    whole = await exportRun([run], { out: path.join(tmp, 'whole.jsonl'), workers: 0 });
  }, 120_000);

  it.each([2, 3, 5])(
    'N = %i: after merge, the rows and reject entries are the unsharded ones, line for line',
    async (count) => {
      const dir = path.join(tmp, `jsonl-${count}`);
      const docs = await shardExports(count, dir);
      const stated = Array.from({ length: count }, (_, k) => lines(path.join(dir, `batch-${k}.jsonl`))).flat();
      const merged = await mergeExport(docs, dir);
      const rows = Array.from({ length: count }, (_, k) => lines(path.join(dir, `batch-${k}.jsonl`))).flat();
      const rejects = Array.from({ length: count }, (_, k) => lines(path.join(dir, `batch-${k}.jsonl.rejects.jsonl`)));
      expect(rows.sort()).toEqual(lines(whole.out).sort());
      expect(rejects.flat().sort()).toEqual(lines(whole.rejectsFile).sort());
      expect(merged.counts).toEqual(whole.manifest.counts);
      // The run repeats ids across shards: some rows were written under the stated id and keyed by merge.
      const ids = (l: string[]) => l.map((x) => (JSON.parse(x) as { id: string }).id);
      expect(rows.length).toBeGreaterThan(100);
      expect(ids(rows).filter((id) => id.includes('#')).length).toBeGreaterThan(10);
      expect(new Set(ids(stated)).size).toBeLessThan(stated.length);
      // The large file is cut: each shard hashed the range it read, and the ranges tile it.
      const perFile = new Map<string, number>();
      for (const i of merged.inputs) perFile.set(i.file, (perFile.get(i.file) ?? 0) + i.trajectories);
      expect([...perFile]).toEqual(whole.manifest.inputs.map((i) => [i.file, i.trajectories]));
      const ranges = merged.inputs.filter((i) => i.file === big).map((i) => i.range);
      expect(ranges.length).toBe(count);
      expect(ranges[0]!.start).toBe(0);
      expect(ranges.at(-1)!.end).toBe(fs.statSync(big).size);
      // Merge again: everything already holds its key, nothing is rewritten.
      const before = fs.readdirSync(dir).map((f) => [f, sha(path.join(dir, f))]);
      expect(await mergeExport(docs, dir)).toEqual(merged);
      expect(fs.readdirSync(dir).map((f) => [f, sha(path.join(dir, f))])).toEqual(before);
    },
    180_000,
  );

  it('N = 3, partitioned Parquet: after merge, the parts hold the rows of the unsharded Parquet export', async () => {
    const single = await exportRun([run], { out: path.join(tmp, 'whole.parquet'), workers: 0 });
    const dir = path.join(tmp, 'parquet-3');
    const docs = await shardExports(3, dir, { partition: true });
    const merged = await mergeExport(docs, dir);
    const read = async (file: string) => (await readParquetRows(fs.readFileSync(file))).map((r) => JSON.stringify(r));
    const parts = (await Promise.all(merged.parts.map((p) => read(path.join(dir, p.file))))).flat();
    expect(parts.sort()).toEqual((await read(single.out)).sort());
    for (const p of merged.parts) expect(sha(path.join(dir, p.file))).toBe(p.sha256);
  }, 180_000);
});

describe('export --shard K/N reads only its share', () => {
  /** Bytes this process has read (every read(2), from disk or cache: the kernel's rchar). */
  const rchar = () => Number(/^rchar: (\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'))![1]);

  it.skipIf(!fs.existsSync('/proc/self/io') && !process.env.CI)(
    'each of 4 shards reads its own files and byte range, and the line feeds before the range (no other file)',
    async () => {
      // Modules, the tokenizer and the Parquet writer loaded first: what is counted below is the input.
      await exportRun([files[0]!], { out: path.join(tmp, 'warm.parquet'), workers: 0, force: true });
      const count = 4;
      const sizes = files.map((f) => fs.statSync(f).size);
      const total = sizes.reduce((a, b) => a + b, 0);
      const planned = files.map((file, i) => ({ file, bytes: sizes[i]!, splittable: file === big }));
      const dir = path.join(tmp, 'reads');
      fs.mkdirSync(dir);
      const reads: number[] = [];
      for (let index = 0; index < count; index++) {
        const splits = planInputSplits(planned, index, count);
        const own = splits.reduce((n, s) => n + (s.end - s.start), 0);
        // Line numbers of a range inside a file count its line feeds before it (a scan, no decoding).
        const scan = splits.filter((s) => !s.whole && s.start > 0).reduce((n, s) => n + s.start, 0);
        const before = rchar();
        await exportRun([run], { out: path.join(dir, `batch-${index}.parquet`), workers: 0, shard: { index, count } });
        const read = rchar() - before;
        reads.push(read);
        // Its share is read (to import it, then to hash it for the manifest), its first records to
        // tell its format, a line's worth past each cut: and nothing else.
        expect(read, `shard ${index}`).toBeGreaterThanOrEqual(own);
        expect(read, `shard ${index}`).toBeLessThanOrEqual(2 * own + scan + splits.length * 256 * 1024 + 256 * 1024);
        expect(lineFeedsBefore(big, 0)).toBe(0);
      }
      // Against the run read whole by each (what a shard did before it read its splits).
      expect(Math.min(...reads)).toBeLessThan(total);
      const before = rchar();
      await exportRun([run], { out: path.join(dir, 'all.parquet'), workers: 0 });
      expect(rchar() - before).toBeGreaterThanOrEqual(2 * total);
    },
    180_000,
  );
});
