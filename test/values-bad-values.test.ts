// One bad value never makes a trajectory disappear: a logprob written as "NaN", null, NaN or a
// positive number, a generated id of -100, past the vocabulary or fractional, a loss-mask value
// other than 0/1 — planted at a known token in a clean record of every format that carries the
// field. The file loads without a read error, the trajectory is there, the checks report
// `invalid_value` at exactly that token (stream, index, field), and export rejects it for it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encode } from '@msgpack/msgpack';
import { loadProfile } from '../server/profiles/profile.ts';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory, streamTokens } from '../server/pipeline.ts';
import { tokenStream } from '../server/http/views.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { RejectEntry } from '../server/export/manifest.ts';
import type { Finding } from '../server/model/finding.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';
import { canonicalSample, textScript, trainingSampleFields, wire } from './fixtures/generate-prime-rl.ts';
import { jsonlRecords as readJsonl } from './support/jsonl.ts';
import { textExportRow } from './support/export-row.ts';

const profile = loadProfile('qwen2.5-vl');
const VOCAB = profile.tokenizer.vocabSize;
const FIX = path.join('test', 'fixtures');
let dir = '';

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-values-'));
  fs.cpSync(path.join(FIX, 'slime', 'images'), path.join(dir, 'images'), { recursive: true });
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A bad value, how JSON writes it (`raw`), and what the finding's `actual` must say. */
interface Bad {
  name: string;
  field: 'logprob' | 'id' | 'mask';
  raw: string;
  actual: unknown;
}
const BAD: Bad[] = [
  { name: 'logprob "NaN"', field: 'logprob', raw: '"NaN"', actual: 'NaN' },
  { name: 'logprob null', field: 'logprob', raw: 'null', actual: null },
  { name: 'logprob bare NaN', field: 'logprob', raw: 'NaN', actual: 'NaN' },
  { name: 'logprob positive', field: 'logprob', raw: '0.75', actual: 0.75 },
  { name: 'id -100', field: 'id', raw: '-100', actual: -100 },
  { name: 'id past the vocabulary', field: 'id', raw: String(VOCAB + 7), actual: VOCAB + 7 },
  { name: 'id fractional', field: 'id', raw: '151.5', actual: 151.5 },
  { name: 'mask 2', field: 'mask', raw: '2', actual: 2 },
];

/** JSON text of `record` with the entry `at` of the array at `keyPath` written as `raw` (bare NaN included). */
function plantJson(record: unknown, keyPath: (string | number)[], at: number, raw: string): string {
  const copy = structuredClone(record) as Record<string, unknown>;
  let arr: unknown = copy;
  for (const k of keyPath) arr = (arr as Record<string | number, unknown>)[k];
  const marker = '__PLANTED__';
  (arr as unknown[])[at] = marker;
  return JSON.stringify(copy).replace(`"${marker}"`, raw);
}

interface Expect {
  stream: Finding['stream'];
  index: number;
  field: string;
  turn: number;
}

async function verifyFile(
  file: string,
  cases: { bad: Bad; expect: Expect }[],
  format: string,
  exportable = true,
): Promise<void> {
  const loaded = await loadFile(file);
  expect(loaded.errors, `${format}: no read error`).toEqual([]);
  expect(loaded.format).toBe(format);
  expect(loaded.trajectories).toHaveLength(cases.length);
  for (const [i, c] of cases.entries()) {
    const t = loaded.trajectories[i]!;
    const checked = await analyzeTrajectory(t, {}, [dir]);
    const f = checked.findings.filter((x) => x.kind === 'invalid_value');
    expect(f, `${format} ${c.bad.name}: one invalid_value`).toHaveLength(1);
    expect(f[0], `${format} ${c.bad.name}`).toMatchObject({ severity: 'error', actual: c.bad.actual, ...c.expect });
    // The stream the browser opens for the finding holds the bad value at `index`.
    const ids = streamTokens(checked, f[0]!.stream, f[0]!.turn)!;
    const view = tokenStream(checked, f[0]!.stream!, f[0]!.turn, {});
    if (c.bad.field === 'id') expect(Object.is(ids[c.expect.index], Number(c.bad.raw))).toBe(true);
    else if (c.bad.field === 'mask') expect(view.lossMask?.[c.expect.index]).toBe(Number(c.bad.raw));
    else if (c.bad.actual === null) expect(view.logprobs?.[c.expect.index]).toBeNull();
    else expect(view.badLogprobs).toContain(c.expect.index);
  }
  if (!exportable) return;
  const r = await exportRun([file], {
    out: path.join(dir, `${path.basename(file)}.out.jsonl`),
    workers: 0,
    force: true,
  });
  expect(r.manifest.counts.read).toBe(cases.length);
  expect(r.manifest.counts.exported).toBe(0);
  const rejects = readJsonl(r.rejectsFile).map((x) => RejectEntry.parse(x));
  expect(rejects).toHaveLength(cases.length);
  for (const rej of rejects) {
    expect(rej.reasons).toContain('unfixable_finding');
    expect(rej.messages.some((m) => m.startsWith('invalid_value:'))).toBe(true);
  }
}

describe('slime: one bad value loads as invalid_value on the sample', () => {
  it('logprobs, generated ids and mask values, at their exact token', async () => {
    const rec = readJsonl(path.join(FIX, 'slime', 'samples.jsonl'))[1] as Record<string, unknown>;
    const tokens = rec.tokens as number[];
    const p = tokens.length - (rec.response_length as number);
    const j = 5; // a generated token of turn 0
    const lines: string[] = [];
    const cases: { bad: Bad; expect: Expect }[] = [];
    for (const bad of BAD) {
      const [key, at, field] =
        bad.field === 'logprob'
          ? ['rollout_log_probs', j, 'sample.logprobs']
          : bad.field === 'id'
            ? ['tokens', p + j, 'sample.tokens']
            : ['loss_mask', j, 'sample.lossMask'];
      lines.push(plantJson({ ...rec, index: lines.length }, [key], at, bad.raw));
      cases.push({ bad, expect: { stream: 'sample', index: p + j, field, turn: 0 } });
    }
    const file = path.join(dir, 'slime.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    await verifyFile(file, cases, 'slime');
  });
});

describe('verl: one bad value loads as invalid_value on the sample', () => {
  it('response logprobs, response ids and response_mask values, at their exact token', async () => {
    const rec = readJsonl(path.join(FIX, 'verl', 'agent_loop.jsonl'))[1] as Record<string, unknown>;
    const p = (rec.prompt_ids as number[]).length;
    const j = 3;
    const lines: string[] = [];
    const cases: { bad: Bad; expect: Expect }[] = [];
    for (const bad of BAD) {
      const [key, field] =
        bad.field === 'logprob'
          ? ['response_logprobs', 'sample.logprobs']
          : bad.field === 'id'
            ? ['response_ids', 'sample.tokens']
            : ['response_mask', 'sample.lossMask'];
      lines.push(plantJson({ ...rec, request_id: `r${lines.length}` }, [key], j, bad.raw));
      cases.push({ bad, expect: { stream: 'sample', index: p + j, field, turn: 0 } });
    }
    const file = path.join(dir, 'verl.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    await verifyFile(file, cases, 'verl');
  });
});

describe('AReaL: one bad value loads as invalid_value on the sample (full scope)', () => {
  it('logprobs, input_ids and loss_mask values, at their exact token', async () => {
    const recs = JSON.parse(fs.readFileSync(path.join(FIX, 'areal', 'trajectories.json'), 'utf8')) as Record<
      string,
      unknown
    >[];
    const rec = recs[1]!;
    const mask = (rec.loss_mask as number[][])[0]!;
    const at = mask.indexOf(1) + 4;
    const out: string[] = [];
    const cases: { bad: Bad; expect: Expect }[] = [];
    for (const bad of BAD) {
      const [key, field] =
        bad.field === 'logprob'
          ? ['logprobs', 'sample.logprobs']
          : bad.field === 'id'
            ? ['input_ids', 'sample.tokens']
            : ['loss_mask', 'sample.lossMask'];
      out.push(plantJson({ ...rec, task_id: 100 + out.length }, [key, 0], at, bad.raw));
      cases.push({ bad, expect: { stream: 'sample', index: at, field, turn: 0 } });
    }
    const file = path.join(dir, 'areal.json');
    fs.writeFileSync(file, `[\n${out.join(',\n')}\n]\n`);
    await verifyFile(file, cases, 'areal');
  });
});

describe('native: one bad value loads as invalid_value on the turn that holds it', () => {
  // The turns extend each other, so turn 1's generation starts in the canonical stream where its prompt ends.
  it('generated logprobs and generated ids, on canonical at prompt length + position', async () => {
    const t = await buildTrajectory(profile, geometryScript('native-bad'), 'canonical');
    const rec = JSON.parse(JSON.stringify(t)) as Record<string, unknown>;
    const turn1 = t.turns[1]!;
    const p = turn1.promptIds!.length;
    const j = 2;
    const lines: string[] = [];
    const cases: { bad: Bad; expect: Expect }[] = [];
    for (const bad of BAD.filter((b) => b.field !== 'mask')) {
      const [key, field] =
        bad.field === 'logprob'
          ? ['generatedLogprobs', 'turns.1.generatedLogprobs']
          : ['generatedIds', 'turns.1.generatedIds'];
      lines.push(plantJson({ ...rec, id: `native-${lines.length}` }, ['turns', 1, key], j, bad.raw));
      cases.push({ bad, expect: { stream: 'canonical', index: p + j, field, turn: 1 } });
    }
    const file = path.join(dir, 'bad.rollscope.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    await verifyFile(file, cases, 'native');
  });
});

describe('prime-rl: one bad value in a TrainingSample loads as invalid_value', () => {
  it('nil / NaN / positive logprobs, a -100 token id, at their exact token', async () => {
    const s = await canonicalSample(profile, textScript('prime-bad'));
    const at = s.mask.indexOf(1) + 2;
    const floatOf = (v: number) => wire.floats([v]).subarray(1); // one float64, without the list header
    const variants: { bad: Bad; fields: Uint8Array[] }[] = [];
    const fieldsWith = (index: number, value: Uint8Array) => {
      const f = trainingSampleFields(s);
      f[index] = value;
      return f;
    };
    const lps = (v: Uint8Array) => wire.list(s.logprobs.map((x, i) => (i === at ? v : floatOf(x))));
    variants.push({ bad: BAD[1]!, fields: fieldsWith(2, lps(wire.nil())) });
    variants.push({ bad: BAD[2]!, fields: fieldsWith(2, lps(floatOf(NaN))) });
    variants.push({ bad: BAD[3]!, fields: fieldsWith(2, lps(floatOf(0.75))) });
    variants.push({ bad: BAD[4]!, fields: fieldsWith(0, encode(s.tokens.map((x, i) => (i === at ? -100 : x)))) });
    const file = path.join(dir, 'prime', 'rank_0.bin');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, wire.list(variants.map((v) => wire.struct(v.fields))));
    await verifyFile(
      file,
      variants.map((v) => ({
        bad: v.bad,
        expect: {
          stream: 'sample',
          index: at,
          field: v.bad.field === 'id' ? 'sample.tokens' : 'sample.logprobs',
          turn: 0,
        },
      })),
      'prime-rl',
    );
  });
});

describe('export rows read back: one bad value loads as invalid_value', () => {
  it('rollout_log_probs, tokens and loss_mask of a row, at their exact token', async () => {
    const s = await canonicalSample(profile, textScript('row-bad'));
    const p = s.mask.indexOf(1) - 3; // the assistant header is part of the response in a row
    const row = textExportRow(s, p);
    const j = 3 + 4; // a generated token
    const lines: string[] = [];
    const cases: { bad: Bad; expect: Expect }[] = [];
    for (const bad of BAD) {
      const [key, at, field] =
        bad.field === 'logprob'
          ? ['rollout_log_probs', j, 'sample.logprobs']
          : bad.field === 'id'
            ? ['tokens', p + j, 'sample.tokens']
            : ['loss_mask', j, 'sample.lossMask'];
      lines.push(plantJson({ ...row, id: `row-${lines.length}` }, [key], at, bad.raw));
      cases.push({ bad, expect: { stream: 'sample', index: p + j, field, turn: 0 } });
    }
    const file = path.join(dir, 'batch.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    await verifyFile(file, cases, 'export', false);
  });
});
