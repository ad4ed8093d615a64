// The format registry (server/import/formats.ts): one list of formats, one set of extensions,
// one detection path for loading, streaming and folder scans.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expandPaths, loadFile } from '../server/import/index.ts';
import { formatNames, IMPORTERS, isRunFileName, planRead, sniffRecords } from '../server/import/formats.ts';
import { readFileChunks } from '../server/import/stream.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-formats-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('format registry', () => {
  it('a folder scan picks up every extension a format reads (.mpk included) and skips side files', () => {
    const names = [
      'a.jsonl',
      'b.json.gz',
      'c.jsonl.gz',
      'rank_0.bin',
      'd.msgpack',
      'e.mpk',
      'f.parquet',
      'g.txt',
      'h.bin.gz',
      'batch.manifest.json',
      'batch.rejects.jsonl',
    ];
    for (const n of names) fs.writeFileSync(path.join(dir, n), '');
    fs.mkdirSync(path.join(dir, '.hidden'));
    fs.writeFileSync(path.join(dir, '.hidden', 'y.jsonl'), '');
    const { files } = expandPaths([dir]);
    expect(files.map((f) => path.basename(f))).toEqual([
      'a.jsonl',
      'b.json.gz',
      'c.jsonl.gz',
      'd.msgpack',
      'e.mpk',
      'f.parquet',
      'rank_0.bin',
    ]);
    expect(isRunFileName('x.MPK')).toBe(true);
  });

  it('plans a read from --format, the file name, then a byte extension', () => {
    const plan = (file: string, format?: string) => {
      const p = planRead(file, format);
      return p.read === 'none' ? p.message : `${p.read}:${p.importer?.format ?? '?'}`;
    };
    expect(plan('run/step_3/rank_0.bin')).toBe('bytes:prime-rl');
    expect(plan('dump.mpk')).toBe('bytes:prime-rl');
    expect(plan('batch.parquet')).toBe('bytes:export');
    expect(plan('steps.rollscope.jsonl.gz')).toBe('text:native');
    expect(plan('samples.jsonl')).toBe('text:?');
    expect(plan('batch.jsonl', 'export')).toBe('text:export');
    expect(plan('whatever.jsonl', 'prime-rl')).toBe('bytes:prime-rl');
    expect(plan('x.jsonl', 'nope')).toBe(`unknown format "nope"; known: ${formatNames().join(', ')}`);
  });

  it('detects by structure in priority order: an export row is read as export, not as the slime Sample it also is', () => {
    const row = {
      schema_version: 1,
      tokens: [1, 2],
      response_length: 1,
      loss_mask: [1],
      reward: 0,
      status: 'completed',
    };
    expect(sniffRecords([row]).importer?.format).toBe('export');
    expect(IMPORTERS.findIndex((i) => i.format === 'export')).toBeLessThan(
      IMPORTERS.findIndex((i) => i.format === 'slime'),
    );
  });

  it('"no known format matched" names every format tried and why; the streamer reports the same', async () => {
    const file = path.join(dir, 'unknown.jsonl');
    fs.writeFileSync(file, '{"hello": 1}\n{"hello": 2}\n');
    const loaded = await loadFile(file);
    expect(loaded.trajectories).toEqual([]);
    expect(loaded.errors).toHaveLength(1);
    const message = loaded.errors[0]!.message;
    expect(message).toMatch(/^no known format matched\. Tried: /);
    for (const f of formatNames()) expect(message).toContain(`${f}: `);
    expect(message).toContain('prime-rl: binary format, file name must match');
    const chunks = [];
    for await (const c of readFileChunks(file)) chunks.push(c);
    expect(chunks).toEqual([{ kind: 'loaded', loaded }]);
  });
});
