// Property-based fuzzing of the importers: random and mutated records thrown into a
// file among valid ones. For every case: loading never throws; every hostile line ends as an
// error naming that line or as a valid trajectory from that line; no error points at a valid
// line; no message is a stack trace; and the valid records are unaffected:
// - a trajectory made only of valid lines is one the valid lines make on their own (same lines,
//   same content; ids compared without line numbers and ` #2` suffixes, which a hostile record
//   with the same id or an extra line legitimately shifts);
// - every trajectory the valid lines make on their own is still there, unless a hostile record
//   joined its group (grouping formats, vLLM and Agent Lightning, combine records: a mutated call
//   that still carries the conversation's id, or still extends its prefix, belongs to it);
// - no valid line is lost: each is in some trajectory.
// For per-record formats the last two mean: each valid line loads exactly as alone.
// And every trajectory a hostile record loads as is analyzed: no step of its analysis may raise
// out of it (a failure is an `analysis_failed` finding on the trajectory, never a read error).
//
// One line per importer in TARGETS adds it to the fuzzing: a format name, the file name it is
// read under, and valid records of that format (each line one record). The binary prime-rl
// format is fuzzed by mutating the bytes of its fixtures (BINARY_TARGETS): no crash, and every
// micro-batch before the first damaged byte loads as before.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { encode } from '@msgpack/msgpack';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { parseJson } from '../server/import/read/json.ts';
import { msgpackValueEnd } from '../server/import/read/msgpack.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import type { FormatName, Trajectory } from '../server/model/trajectory.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { analyzeTrajectory } from '../server/pipeline/analyze.ts';
import { checkPaths } from '../server/pipeline.ts';
import { Finding } from '../server/model/finding.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';
import { replayingOneCase } from './support/property-seed.ts';

interface FuzzTarget {
  /** Shown in the test name and the printed figures (a format may be fuzzed on several layouts). */
  label: string;
  format: FormatName;
  fileName: string;
  validRecords(): Promise<unknown[]>;
}

const profile = loadProfile('qwen2.5-vl');
const asRecord = (t: Trajectory): unknown => JSON.parse(JSON.stringify(t));
const FIXTURES = path.join(path.dirname(new URL(import.meta.url).pathname), 'fixtures');

/** The records of a committed fixture: each JSONL line, or each item of a whole-file JSON list. */
function fixtureRecords(rel: string): unknown[] {
  const text = fs.readFileSync(path.join(FIXTURES, rel), 'utf8');
  if (rel.endsWith('.json')) {
    const doc = parseJson(text);
    return Array.isArray(doc) ? doc : [doc];
  }
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => parseJson(l));
}

/** Rows `rollscope export` writes for the slime fixture (the rows it accepts; inline image bytes). */
async function exportedRows(): Promise<unknown[]> {
  const out = path.join(dir, 'export-source', 'batch.jsonl');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  await exportRun([path.join(FIXTURES, 'slime', 'samples.jsonl')], { out, workers: 0, force: true });
  return fixtureRecords(path.relative(FIXTURES, out));
}

const TARGETS: FuzzTarget[] = [
  {
    label: 'native',
    format: 'native',
    fileName: 'fuzz.rollscope.jsonl',
    validRecords: async () => [
      asRecord(await buildTrajectory(profile, geometryScript('fuzz-canonical'), 'canonical')),
      asRecord(await buildTrajectory(profile, geometryScript('fuzz-legacy'), 'legacy')),
      asRecord(
        await buildTrajectory(
          profile,
          { ...geometryScript('fuzz-one-turn'), turns: [{ answer: 'AC = 5.' }] },
          'canonical',
        ),
      ),
    ],
  },
  {
    label: 'vllm (calls grouped by id)',
    format: 'vllm',
    fileName: 'fuzz-vllm-by-id.jsonl',
    validRecords: async () => fixtureRecords('vllm/chat-by-id.jsonl'),
  },
  {
    label: 'vllm (calls chained by prefix)',
    format: 'vllm',
    fileName: 'fuzz-vllm-chained.jsonl',
    validRecords: async () => fixtureRecords('vllm/chat-chained.jsonl'),
  },
  {
    label: 'vllm (token-in/token-out)',
    format: 'vllm',
    fileName: 'fuzz-vllm-tito.jsonl',
    validRecords: async () => fixtureRecords('vllm/tito.jsonl'),
  },
  {
    label: 'vllm (completions)',
    format: 'vllm',
    fileName: 'fuzz-vllm-completions.jsonl',
    validRecords: async () => [
      ...fixtureRecords('vllm/completions.jsonl'),
      ...fixtureRecords('vllm/token-ids-as-strings.jsonl'),
    ],
  },
  {
    label: 'slime',
    format: 'slime',
    fileName: 'fuzz-slime.jsonl',
    validRecords: async () => fixtureRecords('slime/samples.jsonl'),
  },
  {
    label: 'verl',
    format: 'verl',
    fileName: 'fuzz-verl.jsonl',
    validRecords: async () => fixtureRecords('verl/agent_loop.jsonl'),
  },
  {
    label: 'verl-dump',
    format: 'verl-dump',
    fileName: 'fuzz-verl-dump.jsonl',
    validRecords: async () => fixtureRecords('verl/rollout_data/12.jsonl'),
  },
  {
    label: 'areal',
    format: 'areal',
    fileName: 'fuzz-areal.jsonl',
    validRecords: async () => fixtureRecords('areal/trajectories.json'),
  },
  {
    label: 'areal-dump',
    format: 'areal-dump',
    fileName: 'fuzz-areal-dump.jsonl',
    validRecords: async () => [
      ...fixtureRecords('areal/rollout/4/17.jsonl'),
      ...fixtureRecords('areal/rollout/3/18.jsonl'),
    ],
  },
  {
    label: 'agent-lightning (triplets grouped by rollout)',
    format: 'agent-lightning',
    fileName: 'fuzz-agl-triplets.jsonl',
    validRecords: async () => fixtureRecords('agent-lightning/triplets-v02.jsonl'),
  },
  {
    label: 'agent-lightning (rollouts)',
    format: 'agent-lightning',
    fileName: 'fuzz-agl-rollouts.jsonl',
    validRecords: async () => fixtureRecords('agent-lightning/completed-rollouts.jsonl'),
  },
  {
    label: 'sglang (/generate)',
    format: 'sglang',
    fileName: 'fuzz-sglang.jsonl',
    validRecords: async () => fixtureRecords('sglang/generate.jsonl'),
  },
  {
    label: 'sglang-openai',
    format: 'sglang-openai',
    fileName: 'fuzz-sglang-openai.jsonl',
    validRecords: async () => fixtureRecords('sglang/openai.jsonl'),
  },
  { label: 'export rows', format: 'export', fileName: 'fuzz-export.jsonl', validRecords: exportedRows },
];

const RUNS_PER_TARGET = Number(process.env.ROLLSCOPE_FUZZ_RUNS ?? 250);
/** A target's cases take tens of seconds on a loaded 2-core machine, minutes under `npm run fuzz`: a hang bound, not a budget. */
const FUZZ_TIMEOUT_MS = 30 * 60_000;
/** Trajectories made from hostile records that are analyzed per target (analysis costs more than loading). */
const ANALYSES_PER_TARGET = Number(process.env.ROLLSCOPE_FUZZ_ANALYSES ?? 60);

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-fuzz-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// ---- hostile lines ------------------------------------------------------------------------

/** JSON text that may hold bare NaN/Infinity, as Python's json.dumps writes them. */
function pythonJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    typeof v === 'number' && !Number.isFinite(v) ? `__nonfinite_${String(v)}__` : v,
  ).replace(/"__nonfinite_(NaN|Infinity|-Infinity)__"/g, '$1');
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

/**
 * A place in a line or file, as a fraction in [0, 1) spread evenly: fc.double is uniform over
 * the doubles, so nearly all of its values are tiny and "a place in the line" would be byte 0.
 */
const anyPosition = fc.noBias(fc.integer({ min: 0, max: 1_000_000 })).map((x) => x / 1_000_001);

const oddNumber = fc.constantFrom(NaN, Infinity, -Infinity, -1, 1.5, -0, 2 ** 53, 1e308, 151_643, 10_000_000, 0.1);
const replacement = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  oddNumber,
  fc.constantFrom(null, '', '151643', [], {}, true),
);

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
  return Object.assign(h, {
    [fc.toStringMethod]: () =>
      `${h.how} (${h.bytes.length} bytes): ${JSON.stringify(head)}${h.bytes.length > 160 ? '…' : ''}`,
  });
}

function hostileLine(valid: readonly unknown[]): fc.Arbitrary<Hostile> {
  return hostileLineRaw(valid).map(described);
}

function hostileLineRaw(valid: readonly unknown[]): fc.Arbitrary<Hostile> {
  const base = fc.nat({ max: valid.length - 1 }).map((i) => valid[i]!);
  const textOf = (r: unknown) => pythonJson(r);
  return fc.oneof(
    fc.jsonValue({ maxDepth: 4 }).map((v) => ({ how: 'random JSON', bytes: Buffer.from(JSON.stringify(v) ?? 'null') })),
    fc.tuple(base, fc.array(mutation, { minLength: 1, maxLength: 4 })).map(([r, ms]) => ({
      how: `mutated ${ms.map((m) => m.kind).join('+')}`,
      bytes: Buffer.from(pythonJson(mutate(r, ms))),
    })),
    fc
      .tuple(
        base,
        anyPosition.map((x) => 0.01 + 0.98 * x),
      )
      .map(([r, at]) => {
        const t = textOf(r);
        return { how: 'truncated', bytes: Buffer.from(t.slice(0, Math.floor(t.length * at))) };
      }),
    fc.tuple(base, anyPosition, fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([r, at, junk]) => {
      const t = Buffer.from(textOf(r));
      const p = Math.floor(t.length * at);
      return {
        how: 'bytes inserted',
        bytes: noNewline(Buffer.concat([t.subarray(0, p), Buffer.from(junk), t.subarray(p)])),
      };
    }),
    fc
      .tuple(
        base,
        anyPosition,
        fc.constantFrom('NaN', '-Infinity', '[', '{', '}', ']', ',', '"', '\\', ':', 'null', '1e999', '\u00ff'),
      )
      .map(([r, at, token]) => {
        const t = textOf(r);
        const p = Math.floor(t.length * at);
        return {
          how: `token ${JSON.stringify(token)} inserted`,
          bytes: Buffer.from(t.slice(0, p) + token + t.slice(p)),
        };
      }),
    fc.tuple(base, fc.integer({ min: 1, max: 3000 })).map(([r, depth]) => ({
      how: `wrapped ${depth} deep`,
      bytes: Buffer.from('['.repeat(depth) + textOf(r) + ']'.repeat(depth)),
    })),
    fc.tuple(base, fc.integer({ min: 200, max: 100_000 })).map(([r, depth]) => {
      const t = textOf(r);
      return {
        how: `meta nested ${depth} deep`,
        bytes: Buffer.from(`${t.slice(0, -1)}, "meta": {"x": ${'['.repeat(depth)}${']'.repeat(depth)}}}`),
      };
    }),
  );
}

// ---- the property --------------------------------------------------------------------------

/** Lines a trajectory was read from (grouping formats name every call). */
// Lines its findings name count too: a call that made the grouping ambiguous, a rollout's other chain.
const linesOf = (t: Trajectory): number[] =>
  [
    ...new Set([t.source.line, ...(t.source.lines ?? []), ...((t.meta?.relatedLines as number[] | undefined) ?? [])]),
  ].sort((a, b) => a - b);
/**
 * Ids without the line numbers some importers build them from, without ` #2` de-duplication
 * suffixes, and without Agent Lightning's ` (chain 1 of 2)` (a hostile record with the rollout's
 * id adds a chain to it).
 */
const idShape = (id: string) =>
  id
    .replace(/ \(chain \d+ of \d+\)/, '')
    .replace(/ ?#\d+$/, '')
    .replace(/\d+/g, 'N');

/** A trajectory as comparable across files: lines as positions among the valid records, id by shape. */
function comparable(t: Trajectory, validIndexOf: (line: number) => number | undefined): unknown {
  const at = (line: number) => validIndexOf(line) ?? -line;
  return {
    ...t,
    id: idShape(t.id),
    source: {
      ...t.source,
      file: '',
      line: at(t.source.line),
      ...(t.source.lines ? { lines: t.source.lines.map(at) } : {}),
    },
  };
}

describe.each(TARGETS)('fuzzing the $label importer', (target) => {
  it(
    'random and mutated records: no crash, an error or a trajectory per record, valid records unaffected',
    async () => {
      const valid = await target.validRecords();
      expect(valid.length).toBeGreaterThan(0);
      const validText = valid.map((r) => pythonJson(r));
      // What the valid records load as on their own.
      const alone = path.join(dir, `alone-${target.fileName}`);
      fs.writeFileSync(alone, `${validText.join('\n')}\n`);
      const baseline = await loadFile(alone, { format: target.format });
      expect(baseline.errors).toEqual([]);
      expect(baseline.trajectories.length).toBeGreaterThan(0);
      const baselineComparable = baseline.trajectories.map((t) => ({
        lines: linesOf(t).map((l) => l - 1),
        value: comparable(t, (l) => l - 1),
      }));
      // Every valid record yields or joins a trajectory.
      expect(new Set(baselineComparable.flatMap((b) => b.lines)).size).toBe(valid.length);

      let cases = 0;
      let hostileRecords = 0;
      let analyzed = 0;
      let failedSteps = 0;
      const outcomes = { error: 0, trajectory: 0, blank: 0, joinedValid: 0, regrouped: 0 };
      const file = path.join(dir, target.fileName);
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.tuple(hostileLine(valid), fc.nat()), { minLength: 1, maxLength: 4 }),
          fc.boolean(),
          async (hostile, endWithNewline) => {
            cases++;
            // Interleave: each hostile line goes before a valid line of its choosing (or at the end).
            const lines: { bytes: Buffer; valid?: number; how?: string }[] = validText.map((t, i) => ({
              bytes: Buffer.from(t),
              valid: i,
            }));
            for (const [h, where] of hostile)
              lines.splice(where % (lines.length + 1), 0, { bytes: h.bytes, how: h.how });
            const body = Buffer.concat(
              lines.flatMap((l, i) =>
                i < lines.length - 1 || endWithNewline ? [l.bytes, Buffer.from('\n')] : [l.bytes],
              ),
            );
            fs.writeFileSync(file, body);

            const loaded = await loadFile(file, { format: target.format });

            const lineOf = (i: number) => i + 1;
            const validIndexOf = (line: number) => lines[line - 1]?.valid;
            const context = () =>
              `next to ${lines
                .filter((x) => x.how)
                .map((x) => x.how)
                .join(', ')}`;
            const validLines = new Set(lines.flatMap((l, i) => (l.valid !== undefined ? [lineOf(i)] : [])));
            for (const e of loaded.errors) {
              expect(e.file).toBe(file);
              expect(e.message.length).toBeGreaterThan(0);
              expect(e.message).not.toMatch(/\n\s+at .+:\d+:\d+/); // never a stack trace
              expect(validLines.has(e.line), `error on valid line ${e.line}: ${e.message} (${context()})`).toBe(false);
            }

            // Valid records unaffected (see the header). Valid records are linked when a trajectory
            // holds both, alone or mixed; a link group that holds a record a hostile one joined may be
            // regrouped (a duplicated call can take another's place in a chain, and that one a third's).
            // Every other group must load exactly as alone.
            const parent = valid.map((_, i) => i);
            const find = (i: number): number => (parent[i] === i ? i : (parent[i] = find(parent[i]!)));
            const link = (xs: readonly number[]) => xs.forEach((x) => (parent[find(x)] = find(xs[0]!)));
            const validIndices = (t: Trajectory) =>
              linesOf(t).flatMap((l) => (validLines.has(l) ? [validIndexOf(l)!] : []));
            for (const b of baselineComparable) link(b.lines);
            for (const t of loaded.trajectories) link(validIndices(t));
            const joined = loaded.trajectories
              .filter((t) => linesOf(t).some((l) => !validLines.has(l)))
              .flatMap(validIndices);
            const tainted = new Set(joined.map(find));
            const untainted = (xs: readonly number[]) => xs.every((x) => !tainted.has(find(x)));
            outcomes.joinedValid += new Set(joined).size;
            outcomes.regrouped += valid.filter((_, i) => tainted.has(find(i))).length;
            const validOnly = loaded.trajectories.filter((t) => linesOf(t).every((l) => validLines.has(l)));
            const mixedComparable = validOnly.map((t) => comparable(t, validIndexOf));
            validOnly.forEach((t, k) => {
              if (!untainted(validIndices(t))) return;
              expect(
                baselineComparable.map((b) => b.value),
                `a trajectory of valid records only that they do not make alone (${context()})`,
              ).toContainEqual(mixedComparable[k]);
            });
            for (const b of baselineComparable) {
              if (!untainted(b.lines)) continue;
              expect(mixedComparable, `valid records ${b.lines.join(',')} (${context()})`).toContainEqual(b.value);
            }
            const covered = new Set(loaded.trajectories.flatMap((t) => linesOf(t)));
            for (const l of validLines) expect(covered.has(l), `valid line ${l} lost (${context()})`).toBe(true);

            // Analysis: what the hostile records load as checks without raising (spread over the cases).
            for (const t of loaded.trajectories) {
              if (cases % 4 !== 0 || analyzed >= ANALYSES_PER_TARGET || linesOf(t).every((l) => validLines.has(l)))
                continue;
              analyzed++;
              const checked = await analyzeTrajectory(t, {}, [dir]);
              for (const f of checked.findings) expect(Finding.safeParse(f).success, JSON.stringify(f)).toBe(true);
              failedSteps += checked.findings.filter((f) => f.kind === 'analysis_failed').length;
            }

            lines.forEach((l, i) => {
              if (l.valid !== undefined) return;
              const line = lineOf(i);
              hostileRecords++;
              const from = loaded.trajectories.filter((t) => linesOf(t).includes(line));
              const errors = loaded.errors.filter((e) => e.line === line);
              if (l.bytes.toString('latin1').trim() === '') outcomes.blank++;
              else if (errors.length > 0) outcomes.error++;
              else {
                expect(
                  from.length,
                  `hostile line ${line} (${l.how}) neither failed nor loaded; errors: ${JSON.stringify(loaded.errors)}`,
                ).toBeGreaterThan(0);
                outcomes.trajectory++;
              }
            });
          },
        ),
        { numRuns: RUNS_PER_TARGET },
      );
      console.log(
        `[fuzz] ${target.label}: ${cases} cases, ${hostileRecords} hostile records (${outcomes.error} errors, ${outcomes.trajectory} still valid trajectories, ${outcomes.blank} blank); valid records: ${outcomes.joinedValid} joined by a hostile one, ${outcomes.regrouped} in a group one joined; ${analyzed} hostile trajectories analyzed, ${failedSteps} analysis_failed findings`,
      );
      if (!replayingOneCase) expect(cases).toBeGreaterThanOrEqual(RUNS_PER_TARGET);
    },
    FUZZ_TIMEOUT_MS,
  );
});

// ---- messages as agents send them ----------------------------------------------------------

/**
 * Values a message's `content` (or a part, or a tool call) takes in the conversations agents send:
 * what OpenAI clients write after a tool call, every part type vLLM reads or refuses, and junk.
 */
const oddContent = fc.constantFrom<unknown>(
  null,
  '',
  [],
  {},
  5,
  ['a bare string part'],
  [{ type: 'text', text: null }],
  [{ type: 'text' }],
  [
    { type: 'input_text', text: 'x' },
    { type: 'refusal', refusal: 'no' },
  ],
  [{ type: 'image' }],
  [{ type: 'image_url', image_url: 'not-an-object' }],
  [{ type: 'input_image', image_url: 'data:image/png;base64,AAAA' }],
  [{ type: 'video_url', video_url: { url: 'file:///v.mp4' } }],
  [{ type: 'audio_url', audio_url: { url: 'a.wav' } }],
  [{ type: 'unknown_kind', data: 1 }],
  [{}],
  [null],
  [[{ type: 'text', text: 'nested' }]],
);
const oddToolCalls = fc.constantFrom<unknown>(
  null,
  [],
  [{ type: 'function', function: { name: 'f', arguments: null } }],
  [{ type: 'function', function: { name: 'f', arguments: '{bad' } }],
  [{ type: 'function', function: { name: 'f', arguments: 5 } }],
  [{ type: 'function', function: { name: 'f', arguments: { nested: [1, { x: null }] } } }],
  [{ name: 'f', arguments: {} }],
  ['x'],
  [{ type: 'custom', function: { name: 'f' } }],
);

type MessageMutation = { record: number; message: number; what: 'content' | 'tool_calls' | 'role'; value: unknown };
const messageMutation: fc.Arbitrary<MessageMutation> = fc.oneof(
  fc.record({ record: fc.nat(), message: fc.nat(), what: fc.constant('content' as const), value: oddContent }),
  fc.record({ record: fc.nat(), message: fc.nat(), what: fc.constant('tool_calls' as const), value: oddToolCalls }),
  fc.record({
    record: fc.nat(),
    message: fc.nat(),
    what: fc.constant('role' as const),
    value: fc.constantFrom('tool', 'assistant', 'developer', 'function', ''),
  }),
);

const MESSAGE_TARGETS = [
  { label: 'vllm', format: 'vllm' as const, fixture: 'vllm/chat-by-id.jsonl' },
  { label: 'vllm tool calls', format: 'vllm' as const, fixture: 'vllm/tool-calls.jsonl' },
  { label: 'sglang-openai', format: 'sglang-openai' as const, fixture: 'sglang/openai.jsonl' },
];

describe.each(MESSAGE_TARGETS)('messages as agents send them: $label', (target) => {
  it(
    'every record that loads is checked as a trajectory; the analysis adds no read error',
    async () => {
      const valid = fixtureRecords(target.fixture) as { request?: { messages?: Record<string, unknown>[] } }[];
      const file = path.join(dir, `messages-${target.label.replace(/\W+/g, '-')}.jsonl`);
      let failed = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(messageMutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
          const records = structuredClone(valid);
          for (const m of mutations) {
            const messages = records[m.record % records.length]!.request?.messages;
            if (!messages || messages.length === 0) continue;
            messages[m.message % messages.length]![m.what] = m.value;
          }
          fs.writeFileSync(file, `${records.map((r) => pythonJson(r)).join('\n')}\n`);
          const loaded = await loadFile(file, { format: target.format });
          const readErrors = new Set(loaded.errors.map((e) => `${e.line}\u0000${e.message}`));
          let trajectories = 0;
          for await (const ev of checkPaths([file], { format: target.format, workers: 0 })) {
            if (ev.type === 'error')
              expect(readErrors.has(`${ev.error.line}\u0000${ev.error.message}`), ev.error.message).toBe(true);
            if (ev.type !== 'trajectory') continue;
            trajectories++;
            failed += ev.checked.findings.filter((f) => f.kind === 'analysis_failed').length;
          }
          expect(trajectories).toBe(loaded.trajectories.length);
        }),
        { numRuns: Number(process.env.ROLLSCOPE_FUZZ_MESSAGE_RUNS ?? 40) },
      );
      console.log(`[fuzz] messages ${target.label}: ${failed} analysis_failed findings (none lost)`);
    },
    FUZZ_TIMEOUT_MS,
  );
});

// ---- binary: prime-rl ----------------------------------------------------------------------

/** The committed prime-rl fixtures: list[MicroBatch] with mm_kwargs, with mm_refs, and list[TrainingSample]. */
const BINARY_TARGETS = [
  'prime-rl/rollouts/step_0/rank_0.bin',
  'prime-rl/mm-refs/rollouts/step_0/rank_0.bin',
  'prime-rl/mm-refs-unclear/rollouts/step_0/rank_0.bin',
  'prime-rl/training-samples/rank_0.bin',
];

/** Where each element of the top-level msgpack list ends. */
function elementEnds(bytes: Uint8Array): number[] {
  const t = bytes[0]!;
  const count = t >= 0x90 && t <= 0x9f ? t & 0x0f : (bytes[1]! << 8) | bytes[2]!;
  let pos = t >= 0x90 && t <= 0x9f ? 1 : 3;
  const ends: number[] = [];
  for (let i = 0; i < count; i++) ends.push((pos = msgpackValueEnd(bytes, pos)));
  return ends;
}

type ByteMutation = { how: string; apply(b: Buffer): { bytes: Buffer; from: number } };

const byteMutation: fc.Arbitrary<ByteMutation> = fc.oneof(
  fc.tuple(anyPosition, fc.integer({ min: 0, max: 255 })).map(([at, v]) => ({
    how: `byte set to ${v}`,
    apply: (b: Buffer) => {
      const p = Math.min(b.length - 1, Math.floor(at * b.length));
      const out = Buffer.from(b);
      out[p] = v;
      return { bytes: out, from: p };
    },
  })),
  fc.tuple(anyPosition, fc.integer({ min: 0, max: 7 })).map(([at, bit]) => ({
    how: `bit ${bit} flipped`,
    apply: (b: Buffer) => {
      const p = Math.min(b.length - 1, Math.floor(at * b.length));
      const out = Buffer.from(b);
      out[p] = out[p]! ^ (1 << bit);
      return { bytes: out, from: p };
    },
  })),
  anyPosition.map((at) => ({
    how: 'cut short',
    apply: (b: Buffer) => {
      const p = Math.floor(at * b.length);
      return { bytes: b.subarray(0, p), from: p };
    },
  })),
  fc.tuple(anyPosition, fc.uint8Array({ minLength: 1, maxLength: 16 })).map(([at, junk]) => ({
    how: `${junk.length} bytes inserted`,
    apply: (b: Buffer) => {
      const p = Math.floor(at * b.length);
      return { bytes: Buffer.concat([b.subarray(0, p), Buffer.from(junk), b.subarray(p)]), from: p };
    },
  })),
  fc.tuple(anyPosition, fc.integer({ min: 1, max: 64 })).map(([at, n]) => ({
    how: `${n} bytes deleted`,
    apply: (b: Buffer) => {
      const p = Math.floor(at * b.length);
      return { bytes: Buffer.concat([b.subarray(0, p), b.subarray(p + n)]), from: p };
    },
  })),
  // A header that claims far more than the file holds (a count or length field of 2^32 - 1).
  anyPosition.map((at) => ({
    how: 'array32 header with 2^32-1 entries',
    apply: (b: Buffer) => {
      const p = Math.floor(at * b.length);
      return {
        bytes: Buffer.concat([b.subarray(0, p), Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff]), b.subarray(p + 1)]),
        from: p,
      };
    },
  })),
);

/** Whole files that are not a batch at all: random bytes, other msgpack values. */
const foreignFile: fc.Arbitrary<{ how: string; bytes: Buffer }> = fc.oneof(
  fc.uint8Array({ minLength: 0, maxLength: 256 }).map((b) => ({ how: 'random bytes', bytes: Buffer.from(b) })),
  fc.jsonValue({ maxDepth: 4 }).map((v) => ({ how: 'msgpack of random JSON', bytes: Buffer.from(encode(v)) })),
);

describe.each(BINARY_TARGETS)('fuzzing the prime-rl importer on mutated bytes of %s', (rel) => {
  it(
    'no crash, clear errors, and every micro-batch before the first damaged byte loads as before',
    async () => {
      // The fixture's elements three times over: more micro-batches for damage to land between.
      const fixture = fs.readFileSync(path.join(FIXTURES, rel));
      const fixtureEnds = elementEnds(fixture);
      const bodyStart = fixture[0]! >= 0x90 && fixture[0]! <= 0x9f ? 1 : 3;
      const count = fixtureEnds.length * 3;
      const header = count < 16 ? Buffer.from([0x90 | count]) : Buffer.from([0xdc, count >> 8, count & 0xff]);
      const body = fixture.subarray(bodyStart, fixtureEnds.at(-1));
      const original = Buffer.concat([header, body, body, body]);
      // The file name identifies the format (rank_<r>.bin); one folder per fixture keeps them apart.
      const folder = path.join(dir, 'prime-rl', rel.replace(/[/.]/g, '_'), 'rollouts', 'step_0');
      fs.mkdirSync(folder, { recursive: true });
      const file = path.join(folder, 'rank_0.bin');
      fs.writeFileSync(file, original);
      const baseline = await loadFile(file);
      expect(baseline.format).toBe('prime-rl');
      expect(baseline.errors).toEqual([]);
      const ends = elementEnds(original);
      // Trajectories read from the first k elements: line ordinals count samples, so a file cut after element k-1 says.
      const before: number[] = [0];
      for (let k = 1; k <= ends.length; k++) {
        fs.writeFileSync(file, original.subarray(0, ends[k - 1]));
        before.push((await loadFile(file)).trajectories.length);
      }
      expect(before.at(-1)).toBe(baseline.trajectories.length);

      let cases = 0;
      const outcomes = { clean: 0, partial: 0, nothing: 0, keptBeforeDamage: 0 };
      const check = (loaded: Awaited<ReturnType<typeof loadFile>>) => {
        for (const e of loaded.errors) {
          expect(e.message.length).toBeGreaterThan(0);
          expect(e.message).not.toMatch(/\n\s+at .+:\d+:\d+/);
          expect(e.file).toBe(file);
        }
      };
      await fc.assert(
        fc.asyncProperty(fc.array(byteMutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
          cases++;
          let bytes: Buffer = Buffer.from(original);
          let from = bytes.length;
          for (const m of mutations) {
            const r = m.apply(bytes);
            bytes = r.bytes;
            from = Math.min(from, r.from);
          }
          fs.writeFileSync(file, bytes);
          const loaded = await loadFile(file);
          check(loaded);
          // Elements that end before the first changed byte are untouched: their samples load as before.
          const intact = ends.filter((e) => e <= from).length;
          const keep = before[intact]!;
          expect(
            loaded.trajectories.length,
            `${mutations.map((m) => m.how).join(', ')} from byte ${from}`,
          ).toBeGreaterThanOrEqual(keep);
          expect(loaded.trajectories.slice(0, keep)).toEqual(baseline.trajectories.slice(0, keep));
          outcomes.keptBeforeDamage += keep;
          if (loaded.errors.length === 0) outcomes.clean++;
          else if (loaded.trajectories.length > 0) outcomes.partial++;
          else outcomes.nothing++;
        }),
        { numRuns: RUNS_PER_TARGET },
      );
      let foreign = 0;
      await fc.assert(
        fc.asyncProperty(foreignFile, async ({ bytes }) => {
          foreign++;
          fs.writeFileSync(file, bytes);
          const loaded = await loadFile(file);
          check(loaded);
          if (loaded.trajectories.length === 0) expect(loaded.errors.length).toBeGreaterThan(0);
        }),
        { numRuns: Math.ceil(RUNS_PER_TARGET / 2) },
      );
      console.log(
        `[fuzz] prime-rl ${rel}: ${cases} mutated files (${outcomes.clean} still clean, ${outcomes.partial} partly read with errors, ${outcomes.nothing} nothing read), ${outcomes.keptBeforeDamage} samples before the damage kept; ${foreign} foreign files`,
      );
      if (!replayingOneCase) expect(cases).toBeGreaterThanOrEqual(RUNS_PER_TARGET);
    },
    FUZZ_TIMEOUT_MS,
  );
});
