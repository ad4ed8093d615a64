// A loss mask of 0 over a generated token — the `<|im_end|>` that ended a turn, or a token inside
// the generation — is reported (`mask_mismatch` at that token) and repaired by the canonical
// re-alignment: the token's own logprob (the sampler's, not the 0.0 frameworks write for tokens
// they append) says it was generated. Export never writes a row whose mask leaves it out.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { ExportRow } from '../server/export/row.ts';
import type { Finding } from '../server/model/finding.ts';
import { buildTrajectory, geometryScript, trainingSample } from './support/build.ts';
import { canonicalSample, trainingSampleFields, wire } from './fixtures/generate-prime-rl.ts';
import { jsonlRecords } from './support/jsonl.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const EOS = qwenNamed(profile.ids).eos;
const FIX = path.join('test', 'fixtures');
let dir = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-masks-'));
  fs.cpSync(path.join(FIX, 'slime', 'images'), path.join(dir, 'images'), { recursive: true });
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Positions (in full-token coordinates) of the planted faults: each turn-closing <|im_end|> with mask 1, and one token inside turn 0. */
function plantSites(tokens: readonly number[], fullMask: readonly number[]): { name: string; at: number }[] {
  const ends = tokens.map((t, i) => (t === EOS && fullMask[i] === 1 ? i : -1)).filter((i) => i >= 0);
  const first = fullMask.indexOf(1);
  return [
    { name: "turn 0's generated <|im_end|>", at: ends[0]! },
    { name: 'the final generated <|im_end|>', at: ends[ends.length - 1]! },
    { name: 'a token inside turn 0', at: first + 3 },
  ];
}

async function verify(file: string, format: string, sites: { name: string; at: number }[], exportable: boolean) {
  const loaded = await loadFile(file);
  expect(loaded.errors).toEqual([]);
  expect(loaded.format).toBe(format);
  expect(loaded.trajectories).toHaveLength(sites.length);
  for (const [i, t] of loaded.trajectories.entries()) {
    const { findings } = await analyzeTrajectory(t, {}, [dir]);
    const masks = findings.filter((f: Finding) => f.kind === 'mask_mismatch');
    expect(masks, `${format}: ${sites[i]!.name}`).toEqual([
      expect.objectContaining({ stream: 'sample', index: sites[i]!.at, expected: 1, actual: 0 }),
    ]);
  }
  const r = await exportRun([file], {
    out: path.join(dir, `${path.basename(file)}.out.jsonl`),
    workers: 0,
    force: true,
  });
  const rows = jsonlRecords(r.out).map((x) => ExportRow.parse(x));
  if (exportable) expect(rows, `${format}: the repaired rows are written`).toHaveLength(sites.length);
  for (const row of rows) {
    const site = sites[Number(row.id.replace(/^.*?(\d+)$/, '$1'))]!;
    const p = row.tokens.length - row.response_length;
    expect(row.loss_mask[site.at - p], `${format} ${row.id}: ${site.name} trained`).toBe(1);
  }
}

describe('a loss mask of 0 over a generated token is reported and repaired', () => {
  it('slime', async () => {
    const rec = jsonlRecords(path.join(FIX, 'slime', 'samples.jsonl'))[0]!;
    const tokens = rec.tokens as number[];
    const p = tokens.length - (rec.response_length as number);
    const full = [...tokens.slice(0, p).map(() => 0), ...(rec.loss_mask as number[])];
    const sites = plantSites(tokens, full);
    const lines = sites.map((s, i) => {
      const mask = (rec.loss_mask as number[]).slice();
      mask[s.at - p] = 0;
      return JSON.stringify({ ...rec, index: i, loss_mask: mask });
    });
    const file = path.join(dir, 'slime.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    await verify(file, 'slime', sites, true);
  });

  it('verl', async () => {
    const rec = jsonlRecords(path.join(FIX, 'verl', 'agent_loop.jsonl'))[0]!;
    const prompt = rec.prompt_ids as number[];
    const tokens = [...prompt, ...(rec.response_ids as number[])];
    const full = [...prompt.map(() => 0), ...(rec.response_mask as number[])];
    const sites = plantSites(tokens, full);
    const lines = sites.map((s, i) => {
      const mask = (rec.response_mask as number[]).slice();
      mask[s.at - prompt.length] = 0;
      return JSON.stringify({ ...rec, request_id: `v${i}`, response_mask: mask });
    });
    const file = path.join(dir, 'verl.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    await verify(file, 'verl', sites, true);
  });

  it('AReaL', async () => {
    const rec = (
      JSON.parse(fs.readFileSync(path.join(FIX, 'areal', 'trajectories.json'), 'utf8')) as Record<string, unknown>[]
    )[0]!;
    const tokens = (rec.input_ids as number[][])[0]!;
    const sites = plantSites(tokens, (rec.loss_mask as number[][])[0]!);
    const out = sites.map((s, i) => {
      const mask = (rec.loss_mask as number[][])[0]!.slice();
      mask[s.at] = 0;
      return JSON.stringify({ ...rec, task_id: 400 + i, loss_mask: [mask] });
    });
    const file = path.join(dir, 'areal.json');
    fs.writeFileSync(file, `[\n${out.join(',\n')}\n]\n`);
    await verify(file, 'areal', sites, false);
  });

  it('prime-rl', async () => {
    const s = await canonicalSample(profile, geometryScript('prime-mask'));
    const sites = plantSites(s.tokens, s.mask);
    const structs = sites.map((site) => {
      const f = trainingSampleFields(s);
      f[1] = wire.bools(s.mask.map((m, i) => (i === site.at ? 0 : m)));
      return wire.struct(f);
    });
    const file = path.join(dir, 'prime', 'rank_0.bin');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, wire.list(structs));
    await verify(file, 'prime-rl', sites, false);
  });

  it('native (turns and a stored sample whose mask leaves the generated token out)', async () => {
    const t = await buildTrajectory(profile, geometryScript('native-mask'), 'canonical');
    const sample = trainingSample(t, profile);
    const tokens = sample.tokens;
    const p = tokens.length - sample.responseLength!;
    const full = [...tokens.slice(0, p).map(() => 0), ...sample.lossMask!];
    const sites = plantSites(tokens, full);
    const lines = sites.map((site, i) => {
      const mask = sample.lossMask!.slice();
      mask[site.at - p] = 0;
      return JSON.stringify({ ...t, id: `n${i}`, sample: { ...sample, lossMask: mask } });
    });
    const file = path.join(dir, 'mask.rollscope.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    await verify(file, 'native', sites, false);
  });
});
