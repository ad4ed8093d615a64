// Hostile and broken records (docs/security.md §Records): each gets a clear error naming
// file, line and field — or, for values the schema admits but the model cannot (ids beyond the
// vocabulary, NaN logprobs), a finding from the checks — within bounded memory, and every other
// record of the same file still loads.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFile, type LoadedFile } from '../server/import/index.ts';
import { DEFAULT_LIMITS } from '../server/import/read/limits.ts';
import { firstInvalidUtf8 } from '../server/import/read/utf8.ts';
import { fieldAt, parseJson, scanJson } from '../server/import/read/json.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';

const profile = loadProfile('qwen2.5-vl');
let dir: string;
let valid: Trajectory[];
let validLines: string[];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-security-records-'));
  valid = await Promise.all(
    ['good-a', 'good-b', 'good-c'].map((id) => buildTrajectory(profile, geometryScript(id), 'canonical')),
  );
  validLines = valid.map((t) => JSON.stringify(t));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A file of the valid records with `hostile` as line 2 (bytes or text). */
function fileWith(name: string, hostile: string | Buffer): string {
  const file = path.join(dir, name);
  fs.writeFileSync(
    file,
    Buffer.concat([
      Buffer.from(`${validLines[0]}\n`),
      Buffer.from(hostile),
      Buffer.from(`\n${validLines[1]}\n${validLines[2]}\n`),
    ]),
  );
  return file;
}

/** Writes line 2 in pieces straight to disk: the test never holds the hostile line itself. */
function streamedFileWith(name: string, pieces: Iterable<string>): string {
  const file = path.join(dir, name);
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, `${validLines[0]}\n`);
    for (const p of pieces) fs.writeSync(fd, p);
    fs.writeSync(fd, `\n${validLines[1]}\n${validLines[2]}\n`);
  } finally {
    fs.closeSync(fd);
  }
  return file;
}

function expectOthersLoad(loaded: LoadedFile, lines = [1, 3, 4]): void {
  expect(loaded.trajectories.map((t) => [t.id, t.source.line])).toEqual(valid.map((t, i) => [t.id, lines[i]]));
  // The records that loaded are the records that were written.
  loaded.trajectories.forEach((t, i) => expect(t.turns).toEqual(valid[i]!.turns));
}

function onlyError(loaded: LoadedFile) {
  expect(loaded.errors).toHaveLength(1);
  const e = loaded.errors[0]!;
  expect(e.file).toBe(loaded.file);
  return e;
}

/** Peak growth of live memory (JS heap + Buffers) while `run` runs, sampled between the reader's chunks. */
async function measured<T>(label: string, run: () => Promise<T>): Promise<{ result: T; peakMb: number }> {
  const live = () => {
    const m = process.memoryUsage();
    return m.heapUsed + m.external;
  };
  const base = live();
  let peak = base;
  const timer = setInterval(() => (peak = Math.max(peak, live())), 5);
  const started = performance.now();
  try {
    const result = await run();
    peak = Math.max(peak, live());
    const peakMb = Math.round((peak - base) / 1e6);
    console.log(
      `[security] ${label}: ${Math.round(performance.now() - started)} ms, peak live memory +${peakMb} MB, RSS ${Math.round(process.memoryUsage().rss / 1e6)} MB`,
    );
    return { result, peakMb };
  } finally {
    clearInterval(timer);
  }
}

function* repeat(piece: string, times: number): Generator<string> {
  for (let i = 0; i < times; i++) yield piece;
}

describe('oversized and deep records', () => {
  it('a line of 200 MB is skipped while streaming, naming the field it was in when it crossed the limit', async () => {
    const chunk = 'a'.repeat(1 << 20);
    const file = streamedFileWith(
      'huge-line.rollscope.jsonl',
      (function* () {
        yield '{"id": "huge", "turns": [{"generatedText": "';
        yield* repeat(chunk, 200);
        yield '"}]}';
      })(),
    );
    expect(fs.statSync(file).size).toBeGreaterThan(200 * (1 << 20));
    const { result: loaded, peakMb } = await measured('200 MB line', () => loadFile(file));
    const e = onlyError(loaded);
    expect(e).toMatchObject({ line: 2, field: 'turns.0.generatedText' });
    expect(e.message).toMatch(new RegExp(`record is \\d+ bytes, over the ${DEFAULT_LIMITS.maxLineBytes}-byte limit`));
    expectOthersLoad(loaded);
    // Never the whole line: at most the accepted prefix (the limit) plus read-ahead.
    expect(peakMb).toBeLessThan(DEFAULT_LIMITS.maxLineBytes / 1e6 + 250);
    fs.rmSync(file);
  });

  it('nesting 100,000 deep (arrays and objects) is refused before parsing, naming the field', async () => {
    const arrays = fileWith(
      'deep-arrays.rollscope.jsonl',
      `{"id": "deep", "turns": [], "meta": {"x": ${'['.repeat(100_000)}${']'.repeat(100_000)}}}`,
    );
    const loaded = await loadFile(arrays);
    const e = onlyError(loaded);
    expect(e.line).toBe(2);
    expect(e.field).toMatch(/^meta\.x\.0\.0\./);
    expect(e.message).toMatch(/nested more than 256 levels deep/);
    expectOthersLoad(loaded);

    // Objects, with a bare NaN in the record: the NaN path (a reviver, which recurses) is behind the depth check too.
    const objects = fileWith(
      'deep-objects.rollscope.jsonl',
      `{"id": "deep", "reward": NaN, "turns": [], "meta": ${'{"k": '.repeat(100_000)}1${'}'.repeat(100_000)}}`,
    );
    const loaded2 = await loadFile(objects);
    const e2 = onlyError(loaded2);
    expect(e2.line).toBe(2);
    expect(e2.field).toMatch(/^meta\.k\.k\./);
    expectOthersLoad(loaded2);
  });

  it('a token list of 10 million entries is refused at the array limit before JSON.parse allocates it', async () => {
    const file = streamedFileWith(
      'ten-million.rollscope.jsonl',
      (function* () {
        yield '{"id": "long", "turns": [{"generatedIds": [0';
        const block = Array.from({ length: 100_000 }, (_, i) => `,${(i * 7919) % 151_000}`).join('');
        yield* repeat(block, 100);
        yield ']}]}';
      })(),
    );
    const { result: loaded, peakMb } = await measured('10 M token ids', () => loadFile(file));
    const e = onlyError(loaded);
    expect(e).toMatchObject({ line: 2, field: 'turns.0.generatedIds' });
    expect(e.message).toMatch(/more than 4194304 entries/);
    expectOthersLoad(loaded);
    expect(peakMb).toBeLessThan(800);
    fs.rmSync(file);
  });

  it('a long list of wrong-typed token ids under the array limit neither crashes nor loses the file', async () => {
    // 300 k floats: one finding for the field (not one issue per entry), the other records intact.
    const file = streamedFileWith(
      'many-floats.rollscope.jsonl',
      (function* () {
        yield '{"id": "floats", "turns": [{"generatedIds": [0.5';
        yield* repeat(',1.5'.repeat(1000), 300);
        yield ']}]}';
      })(),
    );
    const { result: loaded } = await measured('300 k float token ids', () => loadFile(file));
    expect(loaded.errors).toEqual([]);
    const floats = loaded.trajectories.find((t) => t.id === 'floats')!;
    expect(floats.source.line).toBe(2);
    const f = (await analyzeTrajectory(floats, {}, [dir])).findings.filter((x) => x.kind === 'invalid_value');
    expect(f).toHaveLength(1);
    expect(f[0]).toMatchObject({ index: 0, field: 'turns.0.generatedIds', actual: 0.5 });
    expect(f[0]!.message).toMatch(/300000 more invalid values/);
    expectOthersLoad({ ...loaded, trajectories: loaded.trajectories.filter((t) => t.id !== 'floats') });
  });
});

// biome-ignore lint/suspicious/noExplicitAny: a parsed JSON record, changed field by field to plant a fault
type JsonRecord = Record<string, any>;

describe('wrong values', () => {
  function mutated(mutate: (t: JsonRecord) => void): string {
    const t = JSON.parse(validLines[0]!) as JsonRecord;
    t.id = 'mutated';
    mutate(t);
    return JSON.stringify(t);
  }

  it.each([
    ['a float', 7.5, 7.5, /is not an integer/],
    ['a string', '151643', 'NaN', /is not a number/],
    ['negative', -3, -3, /is negative/],
    ['the ignore index -100', -100, -100, /ignore index/],
  ])('a token id that is %s loads and is an invalid_value finding at its token', async (_name, bad, actual, why) => {
    const file = fileWith(
      `bad-id-${typeof bad}-${String(bad)}.rollscope.jsonl`,
      mutated((t) => (t.turns[1].generatedIds[4] = bad)),
    );
    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([]);
    const t = loaded.trajectories.find((x) => x.id === 'mutated')!;
    const f = (await analyzeTrajectory(t, {}, [dir])).findings.filter((x) => x.kind === 'invalid_value');
    // A call's own value, on the canonical stream: turn 1's generation starts there where its prompt ends.
    expect(f).toEqual([
      expect.objectContaining({
        stream: 'canonical',
        turn: 1,
        index: t.turns[1]!.promptIds!.length + 4,
        field: 'turns.1.generatedIds',
        actual,
      }),
    ]);
    expect(f[0]!.message).toMatch(why);
    expectOthersLoad({ ...loaded, trajectories: loaded.trajectories.filter((x) => x.id !== 'mutated') });
  });

  it('a token id beyond the vocabulary loads and is an invalid_value finding at its index', async () => {
    const file = fileWith(
      'beyond-vocab.rollscope.jsonl',
      mutated((t) => (t.turns[0].generatedIds[2] = 10_000_000)),
    );
    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([]);
    const t = loaded.trajectories.find((x) => x.id === 'mutated')!;
    const checked = await analyzeTrajectory(t, {}, [dir]);
    const f = checked.findings.find((x) => x.kind === 'invalid_value');
    expect(f).toMatchObject({ severity: 'error', turn: 0, index: t.turns[0]!.promptIds!.length + 2 });
    expect(f!.message).toMatch(
      /token id 10000000 at token \d+ \(turns\.0\.generatedIds\[2\]\) is outside the vocabulary/,
    );
    expect(loaded.trajectories.filter((x) => x.id !== 'mutated').map((x) => x.id)).toEqual(valid.map((x) => x.id));
  });

  it("Python's bare NaN and -Infinity logprobs load and are invalid_value findings", async () => {
    const nanLine = mutated((t) => (t.turns[0].generatedLogprobs[3] = 12345.5)).replace('12345.5', 'NaN');
    const nan = await loadFile(fileWith('nan-logprob.rollscope.jsonl', nanLine));
    expect(nan.errors).toEqual([]);
    const t = nan.trajectories.find((x) => x.id === 'mutated')!;
    expect(Number.isNaN(t.turns[0]!.generatedLogprobs![3])).toBe(true);
    const findings = (await analyzeTrajectory(t, {}, [dir])).findings.filter((f) => f.kind === 'invalid_value');
    expect(findings[0]!.message).toMatch(/logprob NaN at token \d+ \(turns\.0\.generatedLogprobs\[3\]\) is NaN/);

    const infLine = mutated((t) => (t.turns[0].generatedLogprobs[3] = 12345.5)).replace('12345.5', '-Infinity');
    const inf = await loadFile(fileWith('inf-logprob.rollscope.jsonl', infLine));
    expect(inf.errors).toEqual([]);
    const loadedInf = inf.trajectories.find((x) => x.id === 'mutated')!;
    const f = (await analyzeTrajectory(loadedInf, {}, [dir])).findings.filter((x) => x.kind === 'invalid_value');
    expect(f[0]!.message).toMatch(/logprob -Infinity at token \d+ \(turns\.0\.generatedLogprobs\[3\]\) is -Infinity/);
    expect(inf.trajectories.filter((x) => x.id !== 'mutated').map((x) => x.id)).toEqual(valid.map((x) => x.id));
  });

  it('a JSON syntax error names the field it broke in', async () => {
    const broken = mutated(() => undefined).replace(/"generatedIds":\[(\d+),(\d+),/, '"generatedIds":[$1,$2 ');
    const loaded = await loadFile(fileWith('syntax.rollscope.jsonl', broken));
    const e = onlyError(loaded);
    expect(e).toMatchObject({ line: 2, field: 'turns.0.generatedIds.1' });
    expect(e.message).toMatch(/not valid JSON in turns\.0\.generatedIds\.1: Expected ',' or ']'/);
    expectOthersLoad(loaded);
  });
});

describe('encoding', () => {
  it.each([
    ['a stray 0xFF byte', [0xff]],
    ['an overlong encoding of "/"', [0xc0, 0xaf]],
    ['a UTF-16 surrogate', [0xed, 0xa0, 0x80]],
    ['a lead byte without its continuation', [0xe4, 0x41]],
  ])('invalid UTF-8 (%s) is an error naming line, byte offset and field; nothing is guessed', async (_name, bytes) => {
    const line = mutated0('generatedText');
    const at = line.indexOf('"generatedText":"') + '"generatedText":"'.length + 4;
    const hostile = Buffer.concat([Buffer.from(line.slice(0, at)), Buffer.from(bytes), Buffer.from(line.slice(at))]);
    const loaded = await loadFile(fileWith(`utf8-${bytes.join('-')}.rollscope.jsonl`, hostile));
    const e = onlyError(loaded);
    expect(e).toMatchObject({ line: 2, field: 'turns.0.generatedText' });
    const lineStart = Buffer.byteLength(`${validLines[0]}\n`);
    expect(e.message).toContain(
      `invalid byte at byte ${Buffer.byteLength(line.slice(0, at))} of the line (byte ${lineStart + Buffer.byteLength(line.slice(0, at))} of the file)`,
    );
    expectOthersLoad(loaded);
  });

  it('valid multi-byte text (CJK, emoji, U+FFFD itself) is not mistaken for invalid UTF-8', () => {
    for (const s of ['几何题', '🙂 done', '\ufffd', 'é\u0301'])
      expect(firstInvalidUtf8(Buffer.from(s))).toBeUndefined();
    expect(firstInvalidUtf8(Buffer.from([0x61, 0xf0, 0x9f]))).toEqual({ at: 1, incompleteAtEnd: true });
  });

  function mutated0(field: 'generatedText'): string {
    const t = JSON.parse(validLines[0]!) as JsonRecord;
    t.id = 'mutated';
    t.turns[0][field] = 'The answer is five.';
    return JSON.stringify(t);
  }
});

describe('truncated files', () => {
  it('a file cut mid-line: the last line is reported as incomplete with the field it stopped in, the rest loads', async () => {
    const file = path.join(dir, 'truncated.rollscope.jsonl');
    const cutAt = validLines[2]!.indexOf('"generatedIds":[') + '"generatedIds":['.length + 20;
    fs.writeFileSync(file, `${validLines[0]}\n${validLines[1]}\n${validLines[2]!.slice(0, cutAt)}`);
    const loaded = await loadFile(file);
    const e = onlyError(loaded);
    expect(e.line).toBe(3);
    expect(e.field).toMatch(/^turns\.0\.generatedIds\.\d+$/);
    expect(e.message).toMatch(/last line is incomplete \(file truncated or still being written\)/);
    expect(loaded.trajectories.map((t) => t.id)).toEqual(['good-a', 'good-b']);
  });

  it('a file cut inside a multi-byte character is a truncation, not an encoding error', async () => {
    const file = path.join(dir, 'truncated-utf8.rollscope.jsonl');
    const t = JSON.parse(validLines[2]!) as JsonRecord;
    t.turns[0].generatedText = '答案是五';
    const bytes = Buffer.from(JSON.stringify(t));
    const cut = bytes.indexOf(Buffer.from('答案')) + 4; // the second character's first byte only
    fs.writeFileSync(
      file,
      Buffer.concat([Buffer.from(`${validLines[0]}\n${validLines[1]}\n`), bytes.subarray(0, cut)]),
    );
    const loaded = await loadFile(file);
    const e = onlyError(loaded);
    expect(e).toMatchObject({ line: 3, field: 'turns.0.generatedText' });
    expect(e.message).toMatch(/incomplete/);
    expect(loaded.trajectories).toHaveLength(2);
  });
});

describe('gzip input', () => {
  it('a .jsonl.gz file loads exactly as the uncompressed file (offsets count decompressed bytes)', async () => {
    const plain = path.join(dir, 'run.rollscope.jsonl');
    fs.writeFileSync(plain, `${validLines.join('\n')}\n`);
    const gz = path.join(dir, 'run.rollscope.jsonl.gz');
    fs.writeFileSync(gz, zlib.gzipSync(fs.readFileSync(plain)));
    const a = await loadFile(plain);
    const b = await loadFile(gz);
    expect(b.errors).toEqual([]);
    expect(b.format).toBe('native');
    expect(b.trajectories.map((t) => ({ ...t, source: { ...t.source, file: '' } }))).toEqual(
      a.trajectories.map((t) => ({ ...t, source: { ...t.source, file: '' } })),
    );
  });

  it('a gzip bomb stops at the decompressed-size limit with a clear error; the records before it load', async () => {
    const file = path.join(dir, 'bomb.rollscope.jsonl.gz');
    // Concatenated gzip members are one stream: 1 GiB of zeros from ~1 MB on disk.
    const zeros = zlib.gzipSync(Buffer.alloc(16 << 20), { level: 9 });
    const fd = fs.openSync(file, 'w');
    fs.writeSync(fd, zlib.gzipSync(Buffer.from(`${validLines[0]}\n${validLines[1]}\n`)));
    for (let i = 0; i < 64; i++) fs.writeSync(fd, zeros);
    fs.closeSync(fd);
    const size = fs.statSync(file).size;
    expect(size).toBeLessThan(2 << 20);
    const { result: loaded, peakMb } = await measured('gzip bomb (1 GiB from ~1 MB)', () => loadFile(file));
    const e = onlyError(loaded);
    expect(e.line).toBe(3);
    const limit = Math.max(DEFAULT_LIMITS.minGzipAllowance, DEFAULT_LIMITS.maxGzipRatio * size);
    expect(e.message).toBe(
      `decompressed data exceeds ${limit} bytes (200× the compressed file, a gzip bomb?); stopped reading here`,
    );
    expect(loaded.trajectories.map((t) => t.id)).toEqual(['good-a', 'good-b']);
    expect(peakMb).toBeLessThan(600);
  });

  it('a truncated or corrupt .gz file: the records before the damage load, then one error', async () => {
    const whole = zlib.gzipSync(Buffer.from(`${validLines.join('\n')}\n`));
    const cut = path.join(dir, 'cut.rollscope.jsonl.gz');
    fs.writeFileSync(cut, whole.subarray(0, Math.floor(whole.length * 0.8)));
    const loaded = await loadFile(cut);
    expect(loaded.errors.at(-1)!.message).toMatch(/compressed data ends early \(file truncated\?\)/);
    expect(loaded.errors.every((e) => e.file === cut && e.line >= 1)).toBe(true);
    expect(loaded.trajectories.map((t) => t.id)).toEqual(valid.slice(0, loaded.trajectories.length).map((t) => t.id));

    const corrupt = Buffer.from(whole);
    corrupt.fill(0x55, 40, 80);
    const bad = path.join(dir, 'corrupt.rollscope.jsonl.gz');
    fs.writeFileSync(bad, corrupt);
    const loaded2 = await loadFile(bad);
    expect(loaded2.errors.length).toBeGreaterThan(0);
    expect(loaded2.errors.every((e) => e.file === bad && e.line >= 1 && !/at .*\.ts:\d+/.test(e.message))).toBe(true);
  });
});

describe('whole-file JSON and the pieces', () => {
  it('a JSONL file whose first line is longer than any sniffing window is read line by line, not whole', async () => {
    const file = path.join(dir, 'long-first.rollscope.jsonl');
    fs.writeFileSync(file, `${validLines.join('\n')}\n`);
    expect(validLines[0]!.length).toBeGreaterThan(4096);
    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([]);
    expect(loaded.trajectories.map((t) => t.source.line)).toEqual([1, 2, 3]);
  });

  it('a whole-file JSON array loads; a broken one is one error naming its line and field', async () => {
    const file = path.join(dir, 'array.json');
    fs.writeFileSync(file, JSON.stringify(valid, null, 1));
    const loaded = await loadFile(file, { format: 'native' });
    expect(loaded.errors).toEqual([]);
    expect(loaded.trajectories.map((t) => t.id)).toEqual(valid.map((t) => t.id));
    const text = JSON.stringify(valid, null, 1);
    const brokenAt = text.indexOf('"generatedIds"', text.indexOf('good-b'));
    const broken = path.join(dir, 'broken-array.json');
    fs.writeFileSync(
      broken,
      `${text.slice(0, brokenAt)}"generatedIds" [${text.slice(brokenAt + '"generatedIds": ['.length)}`,
    );
    const loaded2 = await loadFile(broken, { format: 'native' });
    const e = onlyError(loaded2);
    expect(e.line).toBe(text.slice(0, brokenAt).split('\n').length);
    expect(e.field).toMatch(/^1\.turns\.0$/);
  });

  it('scanJson/parseJson: limits hold inside strings-with-escapes and NaN never collides with data', () => {
    expect(() => scanJson('{"s": "\\\\\\"[[[[", "a": [1, 2, 3]}', { maxDepth: 2, maxArrayEntries: 3 })).not.toThrow();
    expect(() => scanJson('[1, 2, 3, 4]', { maxDepth: 2, maxArrayEntries: 3 })).toThrow(/more than 3 entries/);
    const v = parseJson('{"a": NaN, "b": [-Infinity, Infinity, -NaN], "s": "NaN -Infinity \\u0000rollscope:NaN"}') as {
      a: number;
      b: number[];
      s: string;
    };
    expect(v.a).toBeNaN();
    expect(v.b.slice(0, 2)).toEqual([-Infinity, Infinity]);
    expect(v.s).toBe('NaN -Infinity \u0000rollscope:NaN');
    // A string of 50 M characters with escapes and a NaN elsewhere: linear, no regex stack overflow.
    const long = `{"a": NaN, "s": "${'x\\"'.repeat(2e6)}"}`;
    expect((parseJson(long) as { s: string }).s).toHaveLength(4e6);
    expect(fieldAt(Buffer.from('{"turns": [{"generatedIds": [1, 2, "x'))).toBe('turns.0.generatedIds.2');
    expect(fieldAt(Buffer.from('{"a\\"b": {"c": ['))).toBe('a"b.c.0');
  });
});
