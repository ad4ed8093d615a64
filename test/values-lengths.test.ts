// A per-token array one short or one long (logprobs, loss mask) is reported once, as
// `length_mismatch` at the first token without a partner: offset + min(array length, what it
// covers), in every format that carries such arrays. The importers pass the arrays through as
// written (no truncating, no padding), so the checks see the real lengths.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';
import { canonicalSample, textScript, trainingSampleFields, wire } from './fixtures/generate-prime-rl.ts';
import { jsonlRecords } from './support/jsonl.ts';
import { textExportRow } from './support/export-row.ts';

const profile = loadProfile('qwen2.5-vl');
const FIX = path.join('test', 'fixtures');
let dir = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-lengths-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** One entry fewer, or one more (a copy of the last one). */
const CHANGES = [
  { name: 'one short', apply: <T>(a: T[]): T[] => a.slice(0, -1) },
  { name: 'one long', apply: <T>(a: T[]): T[] => [...a, a[a.length - 1]!] },
];

async function lengthFindings(file: string) {
  const loaded = await loadFile(file);
  expect(loaded.errors).toEqual([]);
  const out = [];
  for (const t of loaded.trajectories) {
    const { findings } = await analyzeTrajectory(t, {}, [dir]);
    out.push(findings.filter((f) => f.kind === 'length_mismatch'));
  }
  return out;
}

describe('length_mismatch points at the first token without a partner', () => {
  it('slime: rollout_log_probs and loss_mask, one short and one long', async () => {
    const rec = jsonlRecords(path.join(FIX, 'slime', 'samples.jsonl'))[1]!;
    const total = (rec.tokens as number[]).length;
    const r = rec.response_length as number;
    const lines: string[] = [];
    const want: number[] = [];
    for (const key of ['rollout_log_probs', 'loss_mask'])
      for (const c of CHANGES) {
        const arr = c.apply(rec[key] as number[]);
        lines.push(JSON.stringify({ ...rec, index: lines.length, [key]: arr }));
        want.push(total - r + Math.min(arr.length, r));
      }
    const file = path.join(dir, 'slime.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const found = await lengthFindings(file);
    found.forEach((f, i) => {
      expect(f, `case ${i}`).toEqual([expect.objectContaining({ stream: 'sample', index: want[i] })]);
    });
  });

  it('verl: response_logprobs and response_mask, one short and one long', async () => {
    const rec = jsonlRecords(path.join(FIX, 'verl', 'agent_loop.jsonl'))[1]!;
    const p = (rec.prompt_ids as number[]).length;
    const r = (rec.response_ids as number[]).length;
    const lines: string[] = [];
    const want: number[] = [];
    for (const key of ['response_logprobs', 'response_mask'])
      for (const c of CHANGES) {
        const arr = c.apply(rec[key] as number[]);
        lines.push(JSON.stringify({ ...rec, request_id: `r${lines.length}`, [key]: arr }));
        want.push(p + Math.min(arr.length, r));
      }
    const file = path.join(dir, 'verl.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const found = await lengthFindings(file);
    found.forEach((f, i) => {
      expect(f, `case ${i}`).toEqual([expect.objectContaining({ stream: 'sample', index: want[i] })]);
    });
  });

  it('AReaL: logprobs and loss_mask rows, one short and one long (not cut to the attention mask)', async () => {
    const recs = JSON.parse(fs.readFileSync(path.join(FIX, 'areal', 'trajectories.json'), 'utf8')) as Record<
      string,
      unknown
    >[];
    const rec = recs[1]!;
    const total = (rec.input_ids as number[][])[0]!.length;
    const out: string[] = [];
    const want: number[] = [];
    for (const key of ['logprobs', 'loss_mask'])
      for (const c of CHANGES) {
        const arr = c.apply((rec[key] as number[][])[0]!);
        out.push(JSON.stringify({ ...rec, task_id: 200 + out.length, [key]: [arr] }));
        want.push(Math.min(arr.length, total));
      }
    const file = path.join(dir, 'areal.json');
    fs.writeFileSync(file, `[\n${out.join(',\n')}\n]\n`);
    const found = await lengthFindings(file);
    found.forEach((f, i) => {
      expect(f, `case ${i}`).toEqual([expect.objectContaining({ stream: 'sample', index: want[i] })]);
    });
  });

  it('prime-rl: TrainingSample logprobs and mask, one short and one long', async () => {
    const s = await canonicalSample(profile, textScript('prime-len'));
    const structs: Uint8Array[] = [];
    const want: number[] = [];
    for (const field of [2, 1])
      for (const c of CHANGES) {
        const f = trainingSampleFields(s);
        const arr = c.apply(field === 2 ? s.logprobs : s.mask);
        f[field] = field === 2 ? wire.floats(arr) : wire.bools(arr);
        structs.push(wire.struct(f));
        want.push(Math.min(arr.length, s.tokens.length));
      }
    const file = path.join(dir, 'prime', 'rank_0.bin');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, wire.list(structs));
    const found = await lengthFindings(file);
    found.forEach((f, i) => {
      expect(f, `case ${i}`).toEqual([expect.objectContaining({ stream: 'sample', index: want[i] })]);
    });
  });

  // The turns extend each other, so each turn's generation starts in the canonical stream where its prompt ends.
  it('native: a turn with one logprob too few or too many, on canonical at prompt length + min', async () => {
    const t = await buildTrajectory(profile, geometryScript('native-len'), 'canonical');
    const lines: string[] = [];
    const want: number[] = [];
    for (const k of [0, 1])
      for (const c of CHANGES) {
        const copy = structuredClone(t);
        const turn = copy.turns[k]!;
        turn.generatedLogprobs = c.apply(turn.generatedLogprobs!);
        lines.push(JSON.stringify({ ...copy, id: `n${lines.length}` }));
        want.push(turn.promptIds!.length + Math.min(turn.generatedLogprobs.length, turn.generatedIds!.length));
      }
    const file = path.join(dir, 'len.rollscope.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const found = await lengthFindings(file);
    found.forEach((f, i) => {
      expect(f, `case ${i}`).toEqual([
        expect.objectContaining({ stream: 'canonical', turn: i < 2 ? 0 : 1, index: want[i] }),
      ]);
    });
  });

  it('export rows read back: loss_mask and rollout_log_probs, one short and one long', async () => {
    const s = await canonicalSample(profile, textScript('row-len'));
    const p = s.mask.indexOf(1);
    const row = textExportRow(s, p);
    const lines: string[] = [];
    const want: number[] = [];
    for (const key of ['rollout_log_probs', 'loss_mask'] as const)
      for (const c of CHANGES) {
        const arr = c.apply(row[key]);
        lines.push(JSON.stringify({ ...row, id: `row-${lines.length}`, [key]: arr }));
        want.push(p + Math.min(arr.length, row.response_length));
      }
    const file = path.join(dir, 'batch.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const found = await lengthFindings(file);
    found.forEach((f, i) => {
      expect(f, `case ${i}`).toEqual([expect.objectContaining({ stream: 'sample', index: want[i] })]);
    });
  });
});
