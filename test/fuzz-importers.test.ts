// Property-based fuzzing of the importers (issue 7): random and mutated records thrown into a
// file among valid ones. For every case: loading never throws; every hostile line ends as an
// error naming that line or as a valid trajectory from that line; the valid records of the same
// file load exactly as they do alone; no error points at a valid line; no message is a stack trace.
//
// One line per importer in TARGETS adds it to the fuzzing: a format name, the file name it is
// read under, and valid records of that format (each one trajectory on its own line).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import type { FormatName, Trajectory } from '../server/model/trajectory.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';

interface FuzzTarget {
  format: FormatName;
  fileName: string;
  validRecords(): Promise<unknown[]>;
}

const profile = loadProfile('qwen2.5-vl');
const asRecord = (t: Trajectory): unknown => JSON.parse(JSON.stringify(t));

const TARGETS: FuzzTarget[] = [
  {
    format: 'native',
    fileName: 'fuzz.rollscope.jsonl',
    validRecords: async () => [
      asRecord(await buildTrajectory(profile, geometryScript('fuzz-canonical'), 'canonical')),
      asRecord(await buildTrajectory(profile, geometryScript('fuzz-legacy'), 'legacy')),
      asRecord(await buildTrajectory(profile, { ...geometryScript('fuzz-one-turn'), turns: [{ answer: 'AC = 5.' }] }, 'canonical')),
    ],
  },
];

const RUNS_PER_TARGET = Number(process.env.ROLLSCOPE_FUZZ_RUNS ?? 250);

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-fuzz-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// ---- hostile lines ------------------------------------------------------------------------

/** JSON text that may hold bare NaN/Infinity, as Python's json.dumps writes them. */
function pythonJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? `__nonfinite_${String(v)}__` : v)).replace(/"__nonfinite_(NaN|Infinity|-Infinity)__"/g, '$1');
}

/** Every path into a record (arrays sampled at both ends), for mutations to aim at. */
function pathsOf(value: unknown): (string | number)[][] {
  const out: (string | number)[][] = [];
  const walk = (v: unknown, at: (string | number)[]) => {
    out.push(at);
    if (at.length > 10 || typeof v !== 'object' || v === null) return;
    if (Array.isArray(v)) {
      const picks = v.length <= 6 ? v.map((_, i) => i) : [0, 1, 2, v.length - 2, v.length - 1];
      for (const i of picks) walk(v[i], [...at, i]);
    } else for (const [k, c] of Object.entries(v)) walk(c, [...at, k]);
  };
  walk(value, []);
  return out;
}

const oddNumber = fc.constantFrom(NaN, Infinity, -Infinity, -1, 1.5, -0, 2 ** 53, 1e308, 151_643, 10_000_000, 0.1);
const replacement = fc.oneof(fc.jsonValue({ maxDepth: 3 }), oddNumber, fc.constantFrom(null, '', '151643', [], {}, true));

type Mutation = { kind: 'delete' | 'replace' | 'wrap' | 'truncate' | 'duplicate'; pick: number; with: unknown };
const mutation: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom('delete', 'replace', 'replace', 'replace', 'wrap', 'truncate', 'duplicate'),
  pick: fc.nat(),
  with: replacement,
});

function mutate(record: unknown, mutations: readonly Mutation[]): unknown {
  let root: unknown = structuredClone(record);
  for (const m of mutations) {
    const paths = pathsOf(root);
    const at = paths[m.pick % paths.length]!;
    if (at.length === 0) {
      root = m.kind === 'wrap' ? [root] : m.kind === 'replace' ? m.with : root;
      continue;
    }
    let parent = root as Record<string | number, unknown>;
    for (const k of at.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
    const key = at.at(-1)!;
    const current = parent[key];
    switch (m.kind) {
      case 'delete':
        if (Array.isArray(parent)) parent.splice(Number(key), 1);
        else delete parent[key];
        break;
      case 'replace':
        parent[key] = m.with;
        break;
      case 'wrap':
        parent[key] = [current];
        break;
      case 'truncate':
        if (Array.isArray(current)) parent[key] = current.slice(0, current.length >> 1);
        else if (typeof current === 'string') parent[key] = current.slice(0, current.length >> 1);
        break;
      case 'duplicate':
        if (Array.isArray(current) && current.length > 0) parent[key] = [...current, current[current.length - 1]];
        break;
    }
  }
  return root;
}

/** Bytes of one line: never a newline inside (that would be two lines). */
const noNewline = (b: Buffer) => Buffer.from(b.filter((x) => x !== 0x0a && x !== 0x0d));

type Hostile = { how: string; bytes: Buffer };

/** Counterexamples print as what was done and the start of the line, not as megabytes of byte values. */
function described(h: Hostile): Hostile {
  const head = h.bytes.subarray(0, 160).toString('utf8');
  return Object.assign(h, { [fc.toStringMethod]: () => `${h.how} (${h.bytes.length} bytes): ${JSON.stringify(head)}${h.bytes.length > 160 ? '…' : ''}` });
}

function hostileLine(valid: readonly unknown[]): fc.Arbitrary<Hostile> {
  return hostileLineRaw(valid).map(described);
}

function hostileLineRaw(valid: readonly unknown[]): fc.Arbitrary<Hostile> {
  const base = fc.nat({ max: valid.length - 1 }).map((i) => valid[i]!);
  const textOf = (r: unknown) => pythonJson(r);
  return fc.oneof(
    fc.jsonValue({ maxDepth: 4 }).map((v) => ({ how: 'random JSON', bytes: Buffer.from(JSON.stringify(v) ?? 'null') })),
    fc.tuple(base, fc.array(mutation, { minLength: 1, maxLength: 4 })).map(([r, ms]) => ({ how: `mutated ${ms.map((m) => m.kind).join('+')}`, bytes: Buffer.from(pythonJson(mutate(r, ms))) })),
    fc.tuple(base, fc.double({ min: 0.01, max: 0.99, noNaN: true })).map(([r, at]) => {
      const t = textOf(r);
      return { how: 'truncated', bytes: Buffer.from(t.slice(0, Math.floor(t.length * at))) };
    }),
    fc.tuple(base, fc.double({ min: 0, max: 1, noNaN: true }), fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([r, at, junk]) => {
      const t = Buffer.from(textOf(r));
      const p = Math.floor(t.length * at);
      return { how: 'bytes inserted', bytes: noNewline(Buffer.concat([t.subarray(0, p), Buffer.from(junk), t.subarray(p)])) };
    }),
    fc.tuple(base, fc.double({ min: 0, max: 1, noNaN: true }), fc.constantFrom('NaN', '-Infinity', '[', '{', '}', ']', ',', '"', '\\', ':', 'null', '1e999', '\u00ff')).map(([r, at, token]) => {
      const t = textOf(r);
      const p = Math.floor(t.length * at);
      return { how: `token ${JSON.stringify(token)} inserted`, bytes: Buffer.from(t.slice(0, p) + token + t.slice(p)) };
    }),
    fc.tuple(base, fc.integer({ min: 1, max: 3000 })).map(([r, depth]) => ({ how: `wrapped ${depth} deep`, bytes: Buffer.from('['.repeat(depth) + textOf(r) + ']'.repeat(depth)) })),
    fc.tuple(base, fc.integer({ min: 200, max: 100_000 })).map(([r, depth]) => {
      const t = textOf(r);
      return { how: `meta nested ${depth} deep`, bytes: Buffer.from(`${t.slice(0, -1)}, "meta": {"x": ${'['.repeat(depth)}${']'.repeat(depth)}}}`) };
    }),
  );
}

// ---- the property --------------------------------------------------------------------------

const comparable = (t: Trajectory) => ({ ...t, source: { ...t.source, file: '', line: 0 } });

describe.each(TARGETS)('fuzzing the $format importer', (target) => {
  it('random and mutated records: no crash, an error or a trajectory per record, valid records unaffected', async () => {
    const valid = await target.validRecords();
    const validText = valid.map((r) => pythonJson(r));
    // What the valid records load as on their own.
    const alone = path.join(dir, `alone-${target.fileName}`);
    fs.writeFileSync(alone, validText.join('\n') + '\n');
    const baseline = await loadFile(alone, { format: target.format });
    expect(baseline.errors).toEqual([]);
    expect(baseline.trajectories).toHaveLength(valid.length);

    let cases = 0;
    let hostileRecords = 0;
    const outcomes = { error: 0, trajectory: 0, blank: 0 };
    const file = path.join(dir, target.fileName);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(hostileLine(valid), fc.nat()), { minLength: 1, maxLength: 4 }), fc.boolean(), async (hostile, endWithNewline) => {
        cases++;
        // Interleave: each hostile line goes before a valid line of its choosing (or at the end).
        const lines: { bytes: Buffer; valid?: number; how?: string }[] = validText.map((t, i) => ({ bytes: Buffer.from(t), valid: i }));
        for (const [h, where] of hostile) lines.splice(where % (lines.length + 1), 0, { bytes: h.bytes, how: h.how });
        const body = Buffer.concat(lines.flatMap((l, i) => (i < lines.length - 1 || endWithNewline ? [l.bytes, Buffer.from('\n')] : [l.bytes])));
        fs.writeFileSync(file, body);

        const loaded = await loadFile(file, { format: target.format });

        const lineOf = (i: number) => i + 1;
        const validLines = new Set(lines.flatMap((l, i) => (l.valid !== undefined ? [lineOf(i)] : [])));
        for (const e of loaded.errors) {
          expect(e.file).toBe(file);
          expect(e.message.length).toBeGreaterThan(0);
          expect(e.message).not.toMatch(/\n\s+at .+:\d+:\d+/); // never a stack trace
          expect(validLines.has(e.line), `error on valid line ${e.line}: ${e.message}`).toBe(false);
        }
        lines.forEach((l, i) => {
          const line = lineOf(i);
          const from = loaded.trajectories.filter((t) => t.source.line === line || t.source.lines?.includes(line));
          if (l.valid !== undefined) {
            expect(from.map(comparable), `valid line ${line} (next to ${lines.filter((x) => x.how).map((x) => x.how).join(', ')})`).toEqual([comparable(baseline.trajectories[l.valid]!)]);
            return;
          }
          hostileRecords++;
          const errors = loaded.errors.filter((e) => e.line === line);
          if (l.bytes.toString('latin1').trim() === '') outcomes.blank++;
          else if (errors.length > 0) outcomes.error++;
          else {
            expect(from.length, `hostile line ${line} (${l.how}) neither failed nor loaded; errors: ${JSON.stringify(loaded.errors)}`).toBeGreaterThan(0);
            outcomes.trajectory++;
          }
        });
      }),
      { numRuns: RUNS_PER_TARGET },
    );
    console.log(`[fuzz] ${target.format}: ${cases} cases, ${hostileRecords} hostile records (${outcomes.error} errors, ${outcomes.trajectory} still valid trajectories, ${outcomes.blank} blank)`);
    expect(cases).toBeGreaterThanOrEqual(RUNS_PER_TARGET);
  });
});
