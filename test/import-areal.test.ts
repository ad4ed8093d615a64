// AReaL trajectory tensors (whole-file JSON array of [1, L] nested lists) and AReaL's rollout dump:
// every fixture through the importer harness (detection, model integrity, file snapshot, native
// round trip), then field by field, planted faults at their tokens, malformed records.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AREAL_DUMP_LIMITATION, imagePadRuns } from '../server/import/areal-dump.ts';
import { loadProfile, visionIdsOf } from '../server/profiles/profile.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import { analyzeTrajectory } from '../server/pipeline/analyze.ts';
import { padRuns } from '../server/analysis/vision-spans.ts';
import {
  FIXTURES,
  SAMPLE_NAMES,
  WRAPPER_SAMPLES,
  plantedFindings,
  type Fault,
  type SampleName,
} from './fixtures/generate-trainers.ts';
import { checkImporterSnapshot, importerRun } from './support/importer-harness.ts';
import { checkPaths } from '../server/pipeline.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const DIR = path.join(FIXTURES, 'areal');
const rel = (f: string) => path.relative(process.cwd(), f);
/** The file as `loadFile` reads it (loaded and checked once, shared with the harness). */
const load = async (file: string) => (await importerRun(file)).loaded;
/** The pipeline's analysis of a loaded trajectory, from the same run. */
const analyze = async (t: Trajectory) => (await importerRun(t.source.file)).byId(t.id);
type Rows = number[][];

describe('every AReaL fixture through the importer harness', () => {
  it.each([
    ['trajectories.json', 'areal'],
    [path.join('rollout', '4', '17.jsonl'), 'areal-dump'],
    [path.join('rollout', '3', '18.jsonl'), 'areal-dump'],
    ['malformed.jsonl', 'areal'],
  ] as const)('%s', async (name, format) => {
    await checkImporterSnapshot(rel(path.join(DIR, name)), { format });
  });
});

describe('AReaL trajectories', () => {
  const file = path.join(DIR, 'trajectories.json');
  const raw = () => JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>[];

  it('imports every [1, L] tensor field by field, masks and logprobs over the full sequence', async () => {
    const loaded = await load(rel(file));
    const rs = raw();
    // Samples of one task are numbered in order, as the rollout dump's sample_idx.
    expect(loaded.trajectories.map((t) => t.id)).toEqual([
      'task-17/0',
      'task-18/0',
      'task-17/1',
      'task-17/2',
      'task-17/3',
      'task-17/4',
    ]);
    loaded.trajectories.forEach((t, i) => {
      const r = rs[i]!;
      expect(t.source).toEqual({ file: rel(file), line: 1, format: 'areal' });
      expect(t.sample).toEqual({
        tokens: (r.input_ids as Rows)[0],
        lossMask: (r.loss_mask as Rows)[0],
        logprobs: (r.logprobs as Rows)[0],
        maskScope: 'full',
        imageGridThw: (r.multi_modal_input as { image_grid_thw: unknown }[])[0]!.image_grid_thw,
        mmTokenTypeIds: (r.mm_token_type_ids as Rows)[0],
      });
      expect(t.sample!.responseLength).toBeUndefined();
      expect(t.reward).toBe((r.rewards as number[])[0]);
      expect(t.group).toBe(String(r.task_id));
      expect(t.images).toEqual([]);
      expect(t.limitations).toEqual([expect.stringContaining('not the images')]);
      const versions = (r.versions as Rows)[0]!.filter((v) => v >= 0);
      expect(t.meta).toEqual({
        task_id: r.task_id,
        policy_versions: { min: Math.min(...versions), max: Math.max(...versions) },
      });
    });
    expect(loaded.trajectories[0]!.meta).toMatchObject({ policy_versions: { min: 3, max: 4 } });
  });

  it('turn 0 is everything before the first trained token; observations are the zero runs between', async () => {
    const [multi] = (await load(rel(file))).trajectories;
    const mask = multi!.sample!.lossMask!;
    const tokens = multi!.sample!.tokens;
    expect(multi!.turns).toHaveLength(3);
    expect(multi!.turns[0]!.promptIds).toEqual(tokens.slice(0, mask.indexOf(1)));
    expect(await profile.tokenizer.decode(multi!.turns[0]!.promptIds!)).toMatch(/<\|im_start\|>assistant\n$/);
    expect(multi!.turns.flatMap((t) => t.generatedIds)).toEqual(tokens.filter((_, i) => mask[i] === 1));
    expect(multi!.turns.flatMap((t) => t.generatedLogprobs)).toEqual(
      multi!.sample!.logprobs!.filter((_, i) => mask[i] === 1),
    );
    expect(multi!.turns[2]!.observationIds).toBeUndefined();
  });

  it('mm_token_type_ids runs cover the pad runs; clean samples check clean; every planted fault is found', async () => {
    const loaded = await load(rel(file));
    for (const [i, name] of SAMPLE_NAMES.entries()) {
      const t = loaded.trajectories[i]!;
      const types = t.sample!.mmTokenTypeIds!;
      expect(padRuns(t.sample!.tokens, profile.ids).reduce((n, r) => n + r.length, 0)).toBe(
        types.filter((x) => x === 1).length,
      );
      const { findings } = await analyze(t);
      if (name === 'clean-multi' || name === 'clean-single') {
        expect(findings, name).toEqual([]);
        continue;
      }
      for (const want of plantedFindings(
        name as Fault,
        t.sample!,
        'full',
        qwenNamed(profile.ids),
        t.sample!.imageGridThw![0],
        profile.vision.mergeSize,
      )) {
        expect(findings, name).toContainEqual(expect.objectContaining({ ...want, severity: 'error' }));
      }
    }
  });

  it('a batch of two rows becomes two trajectories, each cut to its attention_mask', async () => {
    const [a, b] = raw();
    const rowA = (a!.input_ids as Rows)[0]!;
    const rowB = (b!.input_ids as Rows)[0]!;
    const width = Math.max(rowA.length, rowB.length);
    const pad = (row: number[], v: number) => [...row, ...new Array<number>(width - row.length).fill(v)];
    const two = {
      input_ids: [pad(rowA, 151643), pad(rowB, 151643)],
      loss_mask: [pad((a!.loss_mask as Rows)[0]!, 0), pad((b!.loss_mask as Rows)[0]!, 0)],
      attention_mask: [
        pad(
          rowA.map(() => 1),
          0,
        ),
        pad(
          rowB.map(() => 1),
          0,
        ),
      ],
      rewards: [1, 0.5],
      multi_modal_input: [(a!.multi_modal_input as unknown[])[0], (b!.multi_modal_input as unknown[])[0]],
    };
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-areal-'));
    const f = path.join(tmp, 'batch.jsonl');
    fs.writeFileSync(f, `${JSON.stringify(two)}\n`);
    // Ids of records without a task_id come from the file name.
    const { loaded } = await checkImporterSnapshot(f, {
      format: 'areal',
      name: 'areal/two-row-batch.jsonl',
      fromName: ['id'],
    });
    expect(loaded.errors).toEqual([]);
    expect(loaded.trajectories.map((t) => [t.id, t.sample!.tokens.length, t.reward, t.meta?.row])).toEqual([
      ['batch:1/0', rowA.length, 1, 0],
      ['batch:1/1', rowB.length, 0.5, 1],
    ]);
    expect(loaded.trajectories[1]!.sample!.imageGridThw).toEqual(
      (b!.multi_modal_input as { image_grid_thw: unknown }[])[0]!.image_grid_thw,
    );
  });
});

describe("AReaL's rollout dump", () => {
  it('loads as text with its limitations; seqlen, prompt_len and versions recorded as stated', async () => {
    const file = path.join(DIR, 'rollout', '4', '17.jsonl');
    const loaded = await load(rel(file));
    const lines = fs
      .readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(loaded.trajectories.map((t) => t.id)).toEqual(['task-17/0', 'task-17/1']);
    for (const [i, t] of loaded.trajectories.entries()) {
      const r = lines[i]!;
      // Decoded WITH special tokens.
      expect(r.prompt).toMatch(/^<\|im_start\|>system\n/);
      expect(t.turns).toEqual([{ generatedText: r.completion }]);
      expect(t.group).toBe('17');
      expect(t.reward).toBe(r.reward);
      expect(t.meta).toMatchObject({
        task_id: 17,
        sample_idx: i,
        seqlen: r.seqlen,
        prompt_len: r.prompt_len,
        head_version: -1,
        tail_version: 4,
        prompt: r.prompt,
      });
      expect(t.limitations).toEqual([AREAL_DUMP_LIMITATION]);
      const { findings } = await analyze(t);
      expect(findings).toEqual([]);
    }
  });

  it('agrees with the trajectories it was dumped from: seqlen, prompt_len = seqlen − sum(mask), pad runs', async () => {
    const dump = (await load(rel(path.join(DIR, 'rollout', '4', '17.jsonl')))).trajectories;
    const single = (await load(rel(path.join(DIR, 'rollout', '3', '18.jsonl')))).trajectories;
    const full = (await load(rel(path.join(DIR, 'trajectories.json')))).trajectories;
    const byName = new Map(SAMPLE_NAMES.map((n, i) => [n, full[i]!]));
    const dumped = [...dump, ...single];
    // rollout/4/17.jsonl holds task 17's samples in order, rollout/3/18.jsonl the single-turn one.
    const names: SampleName[] = [...WRAPPER_SAMPLES.filter((n) => n !== 'clean-single'), 'clean-single'];
    for (const [i, name] of names.entries()) {
      const s = byName.get(name)!.sample!;
      const meta = dumped[i]!.meta!;
      expect(meta.seqlen).toBe(s.tokens.length);
      expect(meta.prompt_len).toBe(s.tokens.length - s.lossMask!.reduce((a, b) => a + b, 0));
      expect(meta.image_pad_runs).toEqual(padRuns(s.tokens, profile.ids).map((r) => r.length));
    }
    expect(
      imagePadRuns(
        '<|vision_start|><|image_pad|><|image_pad|><|vision_end|>x<|vision_start|><|image_pad|><|vision_end|>',
        visionIdsOf(loadProfile('qwen2.5-vl'))!.imageText,
      ),
    ).toEqual([2, 1]);
  });
});

describe('malformed AReaL records', () => {
  it('name the file, line and field; the readable records load', async () => {
    const file = rel(path.join(DIR, 'malformed.jsonl'));
    const loaded = await load(file);
    // A token id written as a string loads: an invalid_value at its token, not a read error.
    expect(loaded.trajectories.map((t) => [t.id, t.source.line])).toEqual([
      ['task-18/0', 1],
      ['task-18/1', 4],
    ]);
    expect(loaded.errors).toEqual([
      expect.objectContaining({ file, line: 2, field: 'loss_mask', message: 'loss_mask: 2 rows but input_ids has 1' }),
      expect.objectContaining({ file, line: 3, field: 'multi_modal_input.0.image_grid_thw' }),
    ]);
    const { findings } = await analyzeTrajectory(loaded.trajectories[1]!, { workers: 0 }, [DIR]);
    expect(findings.filter((f) => f.kind === 'invalid_value')).toEqual([
      expect.objectContaining({ stream: 'sample', index: 7, field: 'sample.tokens', actual: 'NaN' }),
    ]);
  });
});

describe('a reward AReaL writes as NaN or ±Infinity', () => {
  // `_dump_trajectory` writes `rewards[i].item()` with json.dumps, which spells a failed float
  // reward NaN / -Infinity (inclusionAI/AReaL: areal/infra/workflow_executor.py); the trajectory
  // dict's `rewards` tensor holds the same float.
  const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-areal-'));
  const rewardFindings = async (file: string) => {
    const out: { reward: unknown; findings: unknown[] }[] = [];
    for await (const ev of checkPaths([file], { workers: 0 }))
      if (ev.type === 'trajectory')
        out.push({
          reward: ev.checked.trajectory.reward,
          findings: ev.checked.findings.filter((f) => f.field === 'reward').map((f) => [f.kind, f.severity, f.actual]),
        });
      else if (ev.type === 'error') out.push({ reward: 'unreadable', findings: [ev.error.field] });
    return out;
  };

  it('the dump record loads, and the reward is an invalid_value', async () => {
    const dir = path.join(tmp(), 'rollout', '4');
    fs.mkdirSync(dir, { recursive: true });
    const record = (sample_idx: number, reward: string) =>
      `{"task_id": 3, "sample_idx": ${sample_idx}, "seqlen": 9, "prompt_len": 6, "head_version": -1, "tail_version": 4, "reward": ${reward}, "prompt": "<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n", "completion": "ok<|im_end|>"}`;
    const file = path.join(dir, '3.jsonl');
    fs.writeFileSync(file, `${[record(0, 'NaN'), record(1, '-Infinity'), record(2, '1.0')].join('\n')}\n`);
    expect(await rewardFindings(file)).toEqual([
      { reward: NaN, findings: [['invalid_value', 'error', 'NaN']] },
      { reward: -Infinity, findings: [['invalid_value', 'error', '-Infinity']] },
      { reward: 1, findings: [] },
    ]);
  });

  it('the trajectory dict loads with its rewards as written', async () => {
    const [a] = JSON.parse(fs.readFileSync(path.join(DIR, 'trajectories.json'), 'utf8')) as Record<string, unknown>[];
    const file = path.join(tmp(), 'nan.jsonl');
    fs.writeFileSync(file, `${JSON.stringify({ ...a, rewards: [1] }).replace('"rewards":[1]', '"rewards":[NaN]')}\n`);
    expect(await rewardFindings(file)).toEqual([{ reward: NaN, findings: [['invalid_value', 'error', 'NaN']] }]);
  });
});
