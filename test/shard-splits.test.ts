// A shard reads only its share of the input (docs/distributed.md, docs/reference/input-splits.md):
// the split plan gives every byte of the run to exactly one shard, a cut inside a JSONL file
// moves to the next line start so every line is read once, and `merge` completes what crosses a
// cut (a GRPO group's samples, duplicate ids, the order of entries) into the report an unsharded
// `check --json` gives, byte for byte.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { mergeCheckReports, MergeError } from '../server/report/merge.ts';
import { planInputSplits, rangeStart, type PlannedFile } from '../server/pipeline/shard.ts';
import { lineStartAtOrAfter, readLines } from '../server/import/read/lines.ts';
import { readFileChunks, splitsAtLines } from '../server/import/stream.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURES = path.join(ROOT, 'test', 'fixtures');

let tmp: string;
/** One slime JSONL file: GRPO groups interleaved over every line, a malformed line, a blank one, duplicate ids. */
let oneFile: string;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-splits-'));
  const samples = fs
    .readFileSync(path.join(FIXTURES, 'slime', 'samples.jsonl'), 'utf8')
    .trim()
    .split('\n');
  const lines = Array.from({ length: 40 }, (_, i) => {
    const s = JSON.parse(samples[i % samples.length]!) as Record<string, unknown>;
    // Lines 30 and 31 state the same sample index: the second is `ID#2` run-wide, whichever shard reads it.
    return JSON.stringify({ ...s, index: i === 31 ? 30 : i, group_index: i % 3 });
  });
  lines.splice(12, 0, '{"index": 99, "broken": ');
  lines.splice(20, 0, '');
  oneFile = path.join(tmp, 'groups.jsonl');
  fs.writeFileSync(oneFile, `${lines.join('\n')}\n`);
});

afterAll(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** `check --json` of `paths` (shard K/N when given), in process on this thread, as text. */
async function check(paths: string[], shard?: { index: number; count: number }): Promise<string> {
  const out: string[] = [];
  await runCheck(paths, { json: true, workers: 0, ...(shard ? { shard } : {}) }, { write: (s) => out.push(s) });
  return out.join('');
}

async function shards(paths: string[], count: number): Promise<{ name: string; doc: unknown }[]> {
  const docs = [];
  for (let index = 0; index < count; index++)
    docs.push({ name: `shard-${index}.json`, doc: JSON.parse(await check(paths, { index, count })) });
  return docs;
}

describe('the split plan', () => {
  const files = (sizes: [number, boolean][]): PlannedFile[] =>
    sizes.map(([bytes, splittable], i) => ({ file: `f${i}`, bytes, splittable }));

  it('gives every byte of the run to exactly one shard, cutting only splittable files larger than a share', () => {
    const run = files([
      [1000, true],
      [10, true],
      [500, false],
      [3, true],
      [0, true],
      [2500, true],
    ]);
    for (const count of [1, 2, 3, 4, 7, 50]) {
      const read = run.map((f) => new Array<number>(Math.max(1, f.bytes)).fill(0));
      for (let index = 0; index < count; index++)
        for (const s of planInputSplits(run, index, count)) {
          expect(s.file).toBe(run[s.order]!.file);
          if (s.whole) expect([s.start, s.end]).toEqual([0, s.bytes]);
          for (let b = s.start; b < Math.max(s.end, s.whole ? 1 : 0); b++) read[s.order]![b]!++;
        }
      for (const [i, counts] of read.entries())
        expect(new Set(counts), `N = ${count}, file ${i}`).toEqual(new Set([1]));
      const total = run.reduce((n, f) => n + f.bytes, 0);
      for (let index = 0; index < count; index++)
        for (const s of planInputSplits(run, index, count)) {
          // A file no larger than a share, or one that cannot be cut, is read whole by one shard.
          if (!run[s.order]!.splittable || run[s.order]!.bytes * count <= total) expect(s.whole).toBe(true);
        }
    }
    // Four shards over one splittable file: four equal byte ranges.
    const one = files([[4000, true]]);
    expect([0, 1, 2, 3].map((k) => planInputSplits(one, k, 4).map((s) => [s.start, s.end]))).toEqual([
      [[0, 1000]],
      [[1000, 2000]],
      [[2000, 3000]],
      [[3000, 4000]],
    ]);
    expect(rangeStart(4, 4, 4000)).toBe(4000);
  });

  it('cuts only uncompressed record-local JSONL (slime lines), never a vLLM session log, gzip or a binary dump', async () => {
    expect(await splitsAtLines(oneFile)).toBe(true);
    expect(await splitsAtLines(path.join(FIXTURES, 'sglang', 'generate.jsonl'))).toBe(false);
    expect(await splitsAtLines(path.join(FIXTURES, 'vllm', 'sessions.jsonl'))).toBe(false);
    expect(await splitsAtLines(path.join(FIXTURES, 'agent-lightning'))).toBe(false);
    const torch = fs.readdirSync(path.join(FIXTURES, 'torch')).find((f) => f.endsWith('.pt'))!;
    expect(await splitsAtLines(path.join(FIXTURES, 'torch', torch))).toBe(false);
    const gz = path.join(tmp, 'groups.jsonl.gz');
    fs.writeFileSync(gz, (await import('node:zlib')).gzipSync(fs.readFileSync(oneFile)));
    expect(await splitsAtLines(gz)).toBe(false);
  });
});

describe('a cut inside a JSONL file', () => {
  it('moves to the next line start, so the lines of any set of cuts are every line once, with their numbers', async () => {
    const file = path.join(tmp, 'lines.jsonl');
    // CRLF, a blank line, a long line and an unterminated last line.
    fs.writeFileSync(file, `{"a":1}\r\n\n{"b":22}\n{"c":"${'x'.repeat(300)}"}\n{"d":4}\n{"e":5}`);
    const all: string[] = [];
    for await (const l of readLines(file)) all.push(`${l.line}:${l.offset}:${l.text}:${l.problem ?? ''}`);
    const size = fs.statSync(file).size;
    expect(lineStartAtOrAfter(file, 0)).toBe(0);
    expect(lineStartAtOrAfter(file, 1)).toBe(9);
    expect(lineStartAtOrAfter(file, 9)).toBe(9);
    expect(lineStartAtOrAfter(file, size)).toBe(size);
    for (const cuts of [[5], [9], [10, 11], [3, 30, 200, 330], Array.from({ length: size }, (_, i) => i + 1)]) {
      const bounds = [0, ...cuts, size];
      const seen: string[] = [];
      for (let i = 0; i + 1 < bounds.length; i++)
        for await (const chunk of readFileChunks(file, {
          format: 'slime',
          range: { start: bounds[i]!, end: bounds[i + 1]! },
        })) {
          expect(chunk.kind).toBe('lines');
          if (chunk.kind === 'lines')
            for (const l of chunk.lines) seen.push(`${l.line}:${l.offset}:${l.text}:${l.problem ?? ''}`);
        }
      expect(seen, `cuts ${cuts.join(',')}`).toEqual(all);
    }
  });
});

describe('check --shard K/N of one JSONL file, folded by merge', () => {
  it.each([2, 3, 7])(
    'N = %i: groups and duplicate ids straddle the cuts, each shard reads about 1/N of the bytes, and merge gives the unsharded bytes',
    async (count) => {
      const whole = await check([oneFile]);
      const docs = await shards([oneFile], count);
      const size = fs.statSync(oneFile).size;
      const ranges: number[] = [];
      const groupsPerShard: Set<string>[] = [];
      for (const { doc } of docs) {
        const r = CheckReport.parse(doc);
        const s = r.shard!;
        expect(s.splits).toHaveLength(1);
        expect(s.splits[0]!.end - s.splits[0]!.start).toBeLessThanOrEqual(Math.ceil(size / count));
        ranges.push(s.splits[0]!.start);
        // What crosses a cut goes to merge: no group findings or group list in a shard.
        expect(r.groups).toEqual([]);
        groupsPerShard.push(new Set(r.trajectories.map((t) => t.group!)));
      }
      expect(ranges).toEqual(Array.from({ length: count }, (_, k) => rangeStart(k, count, size)));
      // Every group has samples in more than one shard.
      for (const g of ['0', '1', '2']) expect(groupsPerShard.filter((s) => s.has(g)).length).toBeGreaterThan(1);
      const merged = `${JSON.stringify(mergeCheckReports(docs))}\n`;
      expect(merged).toBe(whole);
      const report = CheckReport.parse(JSON.parse(whole));
      expect(report.trajectories.some((t) => t.id.endsWith('#2'))).toBe(true);
      expect(report.errors).toHaveLength(1);
      expect(report.errors[0]!.line).toBe(13);
      expect(report.groups.length).toBe(3);
    },
    120_000,
  );

  it('errors of different kinds on both sides of a cut keep the unsharded order', async () => {
    const file = path.join(tmp, 'errors.jsonl');
    const lines = fs.readFileSync(oneFile, 'utf8').trim().split('\n');
    // A record slime's schema refuses (line 6), then a line that is not JSON (line 9), in one batch of the whole run.
    lines.splice(5, 0, '{"index": 1000, "tokens": "not a list", "response_length": "x"}');
    lines.splice(8, 0, '{"index": 1001,');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const whole = await check([file]);
    const errors = CheckReport.parse(JSON.parse(whole)).errors.map((e) => e.line);
    expect(errors.lastIndexOf(6)).toBeLessThan(errors.indexOf(9));
    const cut = Buffer.byteLength(`${lines.slice(0, 7).join('\n')}\n`);
    const size = fs.statSync(file).size;
    const count = Math.floor(size / cut);
    const docs = await shards([file], count);
    expect(CheckReport.parse(docs[0]!.doc).errors.map((e) => e.line)).toEqual(errors.filter((l) => l === 6));
    expect(CheckReport.parse(docs[1]!.doc).errors[0]!.line).toBe(9);
    expect(`${JSON.stringify(mergeCheckReports(docs))}\n`).toBe(whole);
  }, 120_000);

  it('more shards than lines: most read nothing, and merge still gives the unsharded bytes', async () => {
    const whole = await check([oneFile]);
    const lines = fs.readFileSync(oneFile, 'utf8').split('\n').length;
    const count = lines + 5;
    const docs = await shards([oneFile], count);
    const empty = docs.filter(({ doc }) => CheckReport.parse(doc).trajectories.length === 0).length;
    expect(empty).toBeGreaterThan(0);
    expect(`${JSON.stringify(mergeCheckReports(docs))}\n`).toBe(whole);
  }, 240_000);

  it('a run of several formats: whole files where they cannot be cut, byte ranges where they can', async () => {
    const dir = path.join(tmp, 'mixed');
    for (const f of ['sglang', 'vllm'])
      fs.cpSync(path.join(FIXTURES, f), path.join(dir, f), { recursive: true, filter: (p) => !p.endsWith('.py') });
    fs.copyFileSync(oneFile, path.join(dir, 'slime-groups.jsonl'));
    const whole = await check([dir]);
    for (const count of [3, 5]) {
      const docs = await shards([dir], count);
      const cut = docs.flatMap(({ doc }) => CheckReport.parse(doc).shard!.splits.filter((s) => s.start > 0));
      expect(cut.length).toBeGreaterThan(0);
      expect(`${JSON.stringify(mergeCheckReports(docs))}\n`).toBe(whole);
    }
  }, 240_000);

  it('merge refuses shards whose splits leave a gap, overlap, or read another run, naming the bytes', async () => {
    const docs = await shards([oneFile], 3);
    const withSplits = (i: number, splits: unknown) => {
      const d = structuredClone(docs[i]!.doc) as { shard: { splits: unknown } };
      d.shard.splits = splits;
      return { name: docs[i]!.name, doc: d };
    };
    const s1 = (docs[1]!.doc as { shard: { splits: { start: number; end: number; bytes: number }[] } }).shard
      .splits[0]!;
    const gap = withSplits(1, [{ ...s1, order: 0, start: s1.start + 10 }]);
    expect(() => mergeCheckReports([docs[0]!, gap, docs[2]!])).toThrow(
      new RegExp(`bytes ${s1.start}–${s1.start + 10} of file 0 were read by no shard`),
    );
    const overlap = withSplits(1, [{ ...s1, order: 0, start: s1.start - 10 }]);
    expect(() => mergeCheckReports([docs[0]!, overlap, docs[2]!])).toThrow(/read twice/);
    const other = structuredClone(docs[2]!.doc) as { shard: { run: string } };
    other.shard.run = 'another';
    expect(() => mergeCheckReports([docs[0]!, docs[1]!, { name: 'x', doc: other }])).toThrow(MergeError);
  }, 120_000);
});
