// Zero-filled logprobs: a turn whose generated logprobs are all exactly 0.0, or a long unbroken run
// of exact zeros, is `invalid_value` with cause `zero_filled_logprobs` at the run's first token, in
// every format that carries logprobs; a single 0.0 on a token (a near-certain one) or a short run
// is not. Export rejects the zero-filled trajectory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import type { Finding } from '../server/model/finding.ts';
import { ZERO_RUN_MIN_TOKENS } from '../server/analysis/zero-logprobs.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';
import { canonicalSample, trainingSampleFields, wire } from './fixtures/generate-prime-rl.ts';
import { jsonlRecords } from './support/jsonl.ts';

const profile = loadProfile('qwen2.5-vl');
const FIX = path.join('test', 'fixtures');
let dir = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-zero-'));
  fs.cpSync(path.join(FIX, 'slime', 'images'), path.join(dir, 'images'), { recursive: true });
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Runs of 1s of a mask, in the mask's own positions (found here, independently of the importers). */
function onesRuns(mask: readonly number[]): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < mask.length; i++) {
    if (mask[i] !== 1) continue;
    let j = i;
    while (j < mask.length && mask[j] === 1) j++;
    out.push([i, j]);
    i = j;
  }
  return out;
}

type Plant = 'whole-turn' | 'run' | 'single' | 'short-run';
const PLANTS: Plant[] = ['whole-turn', 'run', 'single', 'short-run'];

/**
 * The logprobs with zeros planted (positions in the array's own coordinates), and the array
 * position the finding must point at (undefined: no finding).
 */
function plant(
  lps: readonly number[],
  mask: readonly number[],
  what: Plant,
): { lps: number[]; at?: number; turn?: number } {
  const out = lps.slice();
  const runs = onesRuns(mask);
  const long = runs.findIndex(([s, e]) => e - s >= ZERO_RUN_MIN_TOKENS + 4);
  switch (what) {
    case 'whole-turn': {
      const [s, e] = runs[0]!;
      for (let i = s; i < e; i++) out[i] = 0;
      return { lps: out, at: s, turn: 0 };
    }
    case 'run': {
      const [s] = runs[long]!;
      for (let i = s + 2; i < s + 2 + ZERO_RUN_MIN_TOKENS; i++) out[i] = 0;
      return { lps: out, at: s + 2, turn: long };
    }
    case 'single':
      for (const [s] of runs) out[s + 1] = 0;
      return { lps: out };
    case 'short-run': {
      const [s] = runs[long]!;
      for (let i = s + 2; i < s + 1 + ZERO_RUN_MIN_TOKENS; i++) out[i] = 0;
      return { lps: out };
    }
  }
}

async function zeroFindings(file: string, format: string): Promise<Finding[][]> {
  const loaded = await loadFile(file);
  expect(loaded.errors).toEqual([]);
  expect(loaded.format).toBe(format);
  const out: Finding[][] = [];
  for (const t of loaded.trajectories) {
    const { findings } = await analyzeTrajectory(t, {}, [dir]);
    expect(
      findings.filter((f) => f.cause !== 'zero_filled_logprobs' && f.severity === 'error'),
      t.id,
    ).toEqual([]);
    out.push(findings.filter((f) => f.cause === 'zero_filled_logprobs'));
  }
  return out;
}

function expectPlanted(found: Finding[][], wants: { at?: number; turn?: number }[], stream: Finding['stream']): void {
  expect(found).toHaveLength(wants.length);
  wants.forEach((w, i) => {
    if (w.at === undefined) expect(found[i], PLANTS[i]).toEqual([]);
    else
      expect(found[i], PLANTS[i]).toEqual([
        expect.objectContaining({ kind: 'invalid_value', severity: 'error', stream, index: w.at, turn: w.turn }),
      ]);
  });
}

describe('zero-filled logprobs are found at the first zero of the run, in every format', () => {
  it('slime (rollout_log_probs per response token)', async () => {
    const rec = jsonlRecords(path.join(FIX, 'slime', 'samples.jsonl'))[0]!;
    const p = (rec.tokens as number[]).length - (rec.response_length as number);
    const wants: { at?: number; turn?: number }[] = [];
    const lines = PLANTS.map((what, i) => {
      const r = plant(rec.rollout_log_probs as number[], rec.loss_mask as number[], what);
      wants.push({ at: r.at === undefined ? undefined : p + r.at, turn: r.turn });
      return JSON.stringify({ ...rec, index: i, rollout_log_probs: r.lps });
    });
    const file = path.join(dir, 'slime.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    expectPlanted(await zeroFindings(file, 'slime'), wants, 'sample');
    const r = await exportRun([file], { out: path.join(dir, 'slime-out.jsonl'), workers: 0, force: true });
    expect(r.manifest.counts.exported).toBe(2); // the single zero and the short run are clean
    expect(r.manifest.counts.byReason.unfixable_finding).toBe(2);
  });

  it('verl (response_logprobs)', async () => {
    const rec = jsonlRecords(path.join(FIX, 'verl', 'agent_loop.jsonl'))[0]!;
    const p = (rec.prompt_ids as number[]).length;
    const wants: { at?: number; turn?: number }[] = [];
    const lines = PLANTS.map((what, i) => {
      const r = plant(rec.response_logprobs as number[], rec.response_mask as number[], what);
      wants.push({ at: r.at === undefined ? undefined : p + r.at, turn: r.turn });
      return JSON.stringify({ ...rec, request_id: `z${i}`, response_logprobs: r.lps });
    });
    const file = path.join(dir, 'verl.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    expectPlanted(await zeroFindings(file, 'verl'), wants, 'sample');
  });

  it('AReaL (logprobs over every token)', async () => {
    const rec = (
      JSON.parse(fs.readFileSync(path.join(FIX, 'areal', 'trajectories.json'), 'utf8')) as Record<string, unknown>[]
    )[0]!;
    const wants: { at?: number; turn?: number }[] = [];
    const out = PLANTS.map((what, i) => {
      const r = plant((rec.logprobs as number[][])[0]!, (rec.loss_mask as number[][])[0]!, what);
      wants.push({ at: r.at, turn: r.turn });
      return JSON.stringify({ ...rec, task_id: 300 + i, logprobs: [r.lps] });
    });
    const file = path.join(dir, 'areal.json');
    fs.writeFileSync(file, `[\n${out.join(',\n')}\n]\n`);
    expectPlanted(await zeroFindings(file, 'areal'), wants, 'sample');
  });

  it('prime-rl (TrainingSample logprobs)', async () => {
    const s = await canonicalSample(profile, geometryScript('prime-zero'));
    const wants: { at?: number; turn?: number }[] = [];
    const structs = PLANTS.map((what) => {
      const r = plant(s.logprobs, s.mask, what);
      wants.push({ at: r.at, turn: r.turn });
      const f = trainingSampleFields(s);
      f[2] = wire.floats(r.lps);
      return wire.struct(f);
    });
    const file = path.join(dir, 'prime', 'rank_0.bin');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, wire.list(structs));
    expectPlanted(await zeroFindings(file, 'prime-rl'), wants, 'sample');
  });

  // The turns extend each other, so each turn's generation starts in the canonical stream where its prompt ends.
  it('native (the generatedLogprobs of a turn), on canonical at prompt length + position', async () => {
    const t = await buildTrajectory(profile, geometryScript('native-zero'), 'canonical');
    const wants: { at?: number; turn?: number }[] = [];
    const lines = PLANTS.map((what, i) => {
      const copy = structuredClone(t);
      // The turns as one stream of generated logprobs with a mask, so `plant` finds the turns.
      const mask = copy.turns.flatMap((u, k) => [
        ...(u.generatedIds ?? []).map(() => 1),
        ...(k < copy.turns.length - 1 ? [0] : []),
      ]);
      const flat = copy.turns.flatMap((u, k) => [
        ...(u.generatedLogprobs as number[]),
        ...(k < copy.turns.length - 1 ? [-1] : []),
      ]);
      const r = plant(flat, mask, what);
      let at = 0;
      copy.turns.forEach((u, k) => {
        const n = u.generatedIds!.length;
        u.generatedLogprobs = r.lps.slice(at, at + n);
        if (r.at !== undefined && r.at >= at && r.at < at + n)
          wants.push({ at: u.promptIds!.length + r.at - at, turn: k });
        at += n + 1;
      });
      if (r.at === undefined) wants.push({});
      return JSON.stringify({ ...copy, id: `z${i}` });
    });
    const file = path.join(dir, 'zero.rollscope.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    expectPlanted(await zeroFindings(file, 'native'), wants, 'canonical');
  });

  it('vLLM chat logs (choices[].logprobs.content[].logprob)', async () => {
    const recs = jsonlRecords(path.join(FIX, 'vllm', 'chat-by-id.jsonl')).filter(
      (r) => r.trajectory_id === 'geo-clean',
    );
    expect(recs.length).toBeGreaterThan(0);
    // Every call of the conversation answered with zero-filled logprobs: each turn is found.
    const zeroed = recs.map((r) => {
      const copy = structuredClone(r) as { response: { choices: { logprobs: { content: { logprob: number }[] } }[] } };
      for (const c of copy.response.choices) for (const e of c.logprobs.content) e.logprob = 0;
      return copy;
    });
    const file = path.join(dir, 'calls.jsonl');
    fs.writeFileSync(file, `${zeroed.map((r) => JSON.stringify(r)).join('\n')}\n`);
    const loaded = await loadFile(file);
    expect(loaded.format).toBe('vllm');
    const t = loaded.trajectories[0]!;
    const { findings } = await analyzeTrajectory(t, {}, [dir]);
    const zero = findings.filter((f) => f.cause === 'zero_filled_logprobs');
    expect(zero).toEqual(
      t.turns.map((u, k) => expect.objectContaining({ stream: 'canonical', turn: k, index: u.promptIds!.length })),
    );
  });
});
