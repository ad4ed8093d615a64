// The streaming Parquet row writer (server/export/parquet.ts) shreds rows into column buffers as
// they arrive and encodes each leaf itself. Its file must be byte for byte what hyparquet-writer's
// generic `ParquetWriter.write` makes from the same rows as objects (the writer the batch format
// was defined with): same levels, same dictionary decisions, same pages, same footer.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ByteWriter, ParquetWriter, type ColumnSource } from 'hyparquet-writer';
import { PARQUET_SCHEMA, ParquetRowWriter, readParquetRows, shredRow } from '../server/export/parquet.ts';
import { EXPORT_SCHEMA_VERSION, type ExportRow } from '../server/export/row-schema.ts';
import { dictionaryTooLarge, rejectionSize } from '../server/export/parquet-column.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-parquet-writer-'));
/** Files written, numbered in order (each test's file its own). */
let written = 0;
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A deterministic pseudo-random source, so a failure reproduces. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const png = (n: number, fill: number) => Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(n, fill)]);

/** Rows that cover every shape the schema allows: empty and null lists, optional leaves, pixel values. */
function rows(
  count: number,
  seed: number,
  opts: { tokens: number; vocab: number; logprobLevels?: number },
): ExportRow[] {
  const r = rng(seed);
  const images = [png(300, 1), png(500, 2), png(40, 3)];
  const out: ExportRow[] = [];
  for (let k = 0; k < count; k++) {
    const n = k % 11 === 5 ? 0 : 1 + Math.floor(r() * opts.tokens);
    const tokens = Array.from({ length: n }, () => Math.floor(r() * opts.vocab));
    const response = k % 7 === 3 ? 0 : Math.floor(n / 2);
    const nImages = k % 4;
    const imgs = Array.from({ length: nImages }, (_, i) => {
      const b = images[(k + i) % images.length]!;
      const mode = (k + i) % 3;
      return {
        sha256: String((k + i) % images.length).repeat(64),
        width: 28 + i,
        height: 56,
        min_pixels: 3136,
        max_pixels: 12845056,
        bytes: mode === 0 ? b.toString('base64') : null,
        path: mode === 1 ? `img/${i}.png` : null,
        ...(mode === 2 ? { uri: `images/${i}.png` } : k % 2 ? { uri: null } : {}),
      };
    });
    out.push({
      schema_version: EXPORT_SCHEMA_VERSION,
      id: `t${k}`,
      source: { file: `run-${k % 2}.jsonl`, line: k + 1, format: 'native' },
      model: k % 3 ? 'qwen2.5-vl' : 'Qwen/Qwen2-VL-7B-Instruct',
      group: k % 5 === 0 ? null : `g${Math.floor(k / 8)}`,
      tokens,
      response_length: response,
      loss_mask: Array.from({ length: response }, (_, i) => (i % 9 < 6 ? 1 : 0)),
      rollout_log_probs:
        k % 6 === 2
          ? null
          : Array.from({ length: response }, (_, i) =>
              // Few levels: a dictionary, keyed as a Map keys numbers (0 and -0 alike).
              opts.logprobLevels ? (i % 2 ? 0 : -Math.floor(r() * opts.logprobLevels) / 4) : -r() * 3,
            ),
      reward: k % 4 === 1 ? null : r(),
      status: k % 9 === 0 ? 'truncated' : 'completed',
      images: imgs,
      image_grid_thw: imgs.map((_, i) => [1, 2 + i, 4]),
      placeholder_ranges: imgs.map((_, i) => ({ offset: i * 10, length: 2 + i })),
      mm_token_type_ids: tokens.map((t) => (t % 13 === 0 ? 1 : 0)),
      position_ids: k % 13 === 7 ? [] : [0, 1, 2].map((d) => tokens.map((_, i) => i + d * (k % 3))),
      pixel_values:
        k % 10 === 4
          ? { dtype: 'float32', shape: [4, 1176], data: Buffer.alloc(64, k).toString('base64') }
          : k % 10 === 8
            ? { dtype: 'float32', shape: [0, 1176], data: '' }
            : null,
    } as ExportRow);
  }
  return out;
}

/** The rows through hyparquet-writer's generic path: row objects per column, one `write` per row group. */
function reference(all: ExportRow[], groupRows: number, groupBytes: number): Uint8Array {
  const out = new ByteWriter();
  const writer = new ParquetWriter({
    writer: out,
    schema: PARQUET_SCHEMA,
    createdBy: 'test',
    statistics: false,
    kvMetadata: [{ key: 'rollscope.schema_version', value: String(EXPORT_SCHEMA_VERSION) }],
  });
  const names = PARQUET_SCHEMA.slice(1)
    .filter((_, i, els) => isTopLevel(els, i))
    .map((e) => e.name);
  const value = (row: ExportRow, name: string): unknown => {
    if (name === 'images')
      return row.images.map((img) => ({
        ...img,
        bytes: img.bytes === null ? null : Buffer.from(img.bytes, 'base64'),
        uri: img.uri ?? null,
      }));
    if (name === 'pixel_values')
      return row.pixel_values ? { ...row.pixel_values, data: Buffer.from(row.pixel_values.data, 'base64') } : null;
    return row[name as keyof ExportRow];
  };
  let group: ExportRow[] = [];
  let bytes = 0;
  const flush = () => {
    if (group.length === 0) return;
    const columnData: ColumnSource[] = names.map((name) => ({ name, data: group.map((r) => value(r, name)) }));
    void writer.write({ columnData, rowGroupSize: group.length });
    group = [];
    bytes = 0;
  };
  for (const row of all) {
    group.push(row);
    bytes +=
      row.tokens.length * 4 * (4 + row.position_ids.length) +
      row.images.reduce((n, i) => n + (i.bytes?.length ?? 0), 0);
    if (group.length >= groupRows || bytes >= groupBytes) flush();
  }
  flush();
  void writer.finish();
  return out.getBytes().slice();
}

/** Whether flattened schema element `i` (of the elements after the root) is a column of the root. */
function isTopLevel(els: typeof PARQUET_SCHEMA, i: number): boolean {
  let at = 0;
  while (at < i) at = skip(els, at);
  return at === i;
}
function skip(els: typeof PARQUET_SCHEMA, i: number): number {
  let next = i + 1;
  for (let c = 0; c < (els[i]!.num_children ?? 0); c++) next = skip(els, next);
  return next;
}

function streamed(all: ExportRow[], groupRows: number, groupBytes: number): Uint8Array {
  const file = path.join(dir, `${groupRows}-${groupBytes}-${all.length}-${++written}.parquet`);
  const w = ParquetRowWriter.create(file, { createdBy: 'test', rowGroupRows: groupRows, rowGroupBytes: groupBytes });
  for (const row of all) w.write(row);
  w.close();
  return fs.readFileSync(file);
}

/** The rows shredded where they were built (an analysis worker) and sent across threads, then written under their ids. */
function shreddedAcrossThreads(all: ExportRow[], groupRows: number, groupBytes: number): Uint8Array {
  const file = path.join(dir, `shredded-${groupRows}-${++written}.parquet`);
  const w = ParquetRowWriter.create(file, { createdBy: 'test', rowGroupRows: groupRows, rowGroupBytes: groupBytes });
  // Built under a stated id the writing thread replaces by the run-wide key (pipeline.ts keyed).
  for (const row of all) w.writeShredded(structuredClone(shredRow({ ...row, id: 'stated' })), row.id);
  w.close();
  return fs.readFileSync(file);
}

describe('the streaming Parquet row writer', () => {
  it('writes the same bytes from rows shredded on another thread as from the rows themselves', () => {
    const all = rows(60, 1, { tokens: 300, vocab: 2000 });
    for (const [groupRows, groupBytes] of [
      [1, 64 << 20],
      [7, 64 << 20],
      [512, 64 << 20],
      [512, 40_000],
    ] as const) {
      const mine = shreddedAcrossThreads(all, groupRows, groupBytes);
      expect(Buffer.from(mine).equals(Buffer.from(streamed(all, groupRows, groupBytes)))).toBe(true);
    }
  });

  it('writes the bytes the generic writer makes from row objects, for every row shape', async () => {
    const all = rows(60, 1, { tokens: 300, vocab: 2000 });
    for (const groupRows of [1, 7, 512]) {
      const mine = streamed(all, groupRows, 64 << 20);
      expect(Buffer.from(mine).equals(Buffer.from(reference(all, groupRows, 64 << 20)))).toBe(true);
    }
    // And it reads back as the rows it was given.
    const back = await readParquetRows(streamed(all, 7, 64 << 20));
    // (a null uri reads back as no uri, as `--images embed` and `path` rows have none)
    expect(back.map((r) => r.images)).toEqual(
      all.map((r) => r.images.map(({ uri, ...i }) => (uri === null || uri === undefined ? i : { ...i, uri }))),
    );
    expect(back.map((r) => r.position_ids)).toEqual(all.map((r) => r.position_ids));
    expect(back.map((r) => r.rollout_log_probs)).toEqual(
      all.map((r) => (r.rollout_log_probs === null ? null : r.rollout_log_probs.map(Math.fround))),
    );
  });

  it('writes the same bytes for pages past the page size (offset indexes) and row groups cut by size', () => {
    // ~400k tokens a row group: several 1 MiB pages per column, page breaks only at row starts.
    const all = rows(40, 2, { tokens: 30000, vocab: 150000 });
    const mine = streamed(all, 512, 8 << 20);
    expect(Buffer.from(mine).equals(Buffer.from(reference(all, 512, 8 << 20)))).toBe(true);
  });

  it('writes the same bytes when one value repeats (dictionary) and when values are all distinct (plain)', () => {
    const few = rows(30, 3, { tokens: 2000, vocab: 3, logprobLevels: 3 });
    expect(Buffer.from(streamed(few, 10, 64 << 20)).equals(Buffer.from(reference(few, 10, 64 << 20)))).toBe(true);
    const many = rows(30, 4, { tokens: 2000, vocab: 2 ** 31 - 1 });
    expect(Buffer.from(streamed(many, 10, 64 << 20)).equals(Buffer.from(reference(many, 10, 64 << 20)))).toBe(true);
  });

  it('writes the same bytes when a dictionary passes the sample and is refused only once built', () => {
    // Half the logprobs 0, half all but distinct: the sample sees few distinct values, the whole
    // chunk too many for a dictionary to halve it (the build stops early, parquet-column.ts).
    const late = rows(30, 6, { tokens: 2000, vocab: 50, logprobLevels: 2 ** 30 });
    expect(Buffer.from(streamed(late, 10, 64 << 20)).equals(Buffer.from(reference(late, 10, 64 << 20)))).toBe(true);
  });

  it('stops a dictionary build exactly where the size rule would refuse it at the end', () => {
    for (const present of [1, 2, 3, 7, 8, 9, 100, 999, 1000, 1024, 4097, 65_536, 1_000_003]) {
      const at = rejectionSize(present);
      // The rule only grows with the size, so the first size it refuses is where a build may stop.
      for (let size = Math.max(1, at - 3000); size <= Math.min(present + 1, at + 3000); size++)
        expect(dictionaryTooLarge(size, present)).toBe(size >= at);
    }
  });

  it('refuses a value that is not an INT32, as the generic writer does', () => {
    const [row] = rows(1, 5, { tokens: 10, vocab: 100 });
    const file = path.join(dir, 'bad.parquet');
    const w = ParquetRowWriter.create(file, { createdBy: 'test' });
    expect(() => w.write({ ...row!, tokens: [1, 2.5, 3] })).toThrow(
      /tokens\.list\.element: parquet expected int32 value, got 2\.5/,
    );
    w.abandon();
  });
});
