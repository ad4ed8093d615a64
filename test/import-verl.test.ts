// verl agent-loop outputs (JSONL) and verl's rollout_data_dir dump (text only): every fixture
// through the importer harness (detection, model integrity, file snapshot, native round trip),
// then field by field, planted faults at their tokens, malformed records by file, line and field.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { analyzeTrajectory, checkPaths } from '../server/pipeline.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { VERL_DUMP_LIMITATION } from '../server/import/verl-dump.ts';
import { loadFile } from '../server/import/index.ts';
import { padRuns } from '../server/analysis/vision-spans.ts';
import {
  FIXTURES,
  MODEL,
  SAMPLE_NAMES,
  VERL_MAX_PIXELS,
  plantedFindings,
  type Fault,
} from './fixtures/generate-trainers.ts';
import { jsonlRecords } from './support/jsonl.ts';
import { checkImporterSnapshot, importerRun } from './support/importer-harness.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const DIR = path.join(FIXTURES, 'verl');
const rel = (f: string) => path.relative(process.cwd(), f);
const records = jsonlRecords;
/** The file as `loadFile` reads it (loaded and checked once, shared with the harness). */
const load = async (file: string) => (await importerRun(file)).loaded;
/** The pipeline's analysis of a loaded trajectory, from the same run. */
const analyze = async (t: Trajectory) => (await importerRun(t.source.file)).byId(t.id);

describe('every verl fixture through the importer harness', () => {
  it.each([
    ['agent_loop.jsonl', 'verl'],
    [path.join('rollout_data', '12.jsonl'), 'verl-dump'],
    ['malformed.jsonl', 'verl'],
  ] as const)('%s', async (name, format) => {
    await checkImporterSnapshot(rel(path.join(DIR, name)), { format });
  });
});

describe('verl agent-loop output', () => {
  const file = path.join(DIR, 'agent_loop.jsonl');

  it('imports every record field by field', async () => {
    const loaded = await load(rel(file));
    const raw = records(file);
    expect(loaded.trajectories.map((t) => t.id)).toEqual(SAMPLE_NAMES.map((n) => `req-${n}`));
    loaded.trajectories.forEach((t, i) => {
      const r = raw[i]!;
      const promptIds = r.prompt_ids as number[];
      const responseIds = r.response_ids as number[];
      expect(t.source).toEqual({ file: rel(file), line: i + 1, format: 'verl' });
      expect(t.model).toBe(MODEL);
      expect(t.sample).toEqual({
        tokens: [...promptIds, ...responseIds],
        responseLength: responseIds.length,
        lossMask: r.response_mask,
        logprobs: r.response_logprobs,
        maskScope: 'response',
        imageGridThw: (r.multi_modal_inputs as { image_grid_thw: unknown }).image_grid_thw,
      });
      expect(t.reward).toBe(r.reward_score);
      expect(t.turns[0]!.messages).toEqual((r.extra_fields as { raw_prompt: unknown }).raw_prompt);
      expect(t.meta).toMatchObject({
        num_turns: r.num_turns,
        metrics: r.metrics,
        extra_fields: { request_id: `req-${SAMPLE_NAMES[i]}`, model: MODEL },
      });
      expect(t.meta!.extra_fields).not.toHaveProperty('raw_prompt');
      // qwen-vl-utils image dicts keep their per-image processor settings; HF `bytes` become a data: URL.
      expect(t.images[0]).toEqual({ url: 'images/right-triangle.png', minPixels: 3136, maxPixels: VERL_MAX_PIXELS });
      if (SAMPLE_NAMES[i] !== 'clean-single') {
        expect(t.images[1]!.url!.startsWith('data:image/png;base64,')).toBe(true);
        expect(t.images[1]).toMatchObject({ minPixels: 3136, maxPixels: VERL_MAX_PIXELS });
      }
    });
  });

  it('turns come from response_mask: prompt_ids is turn 0, generated runs carry their logprobs', async () => {
    const loaded = await load(rel(file));
    const raw = records(file);
    const multi = loaded.trajectories[0]!;
    const r = raw[0]!;
    expect(multi.turns).toHaveLength(3);
    expect(multi.turns[0]!.promptIds).toEqual(r.prompt_ids);
    const mask = r.response_mask as number[];
    const lps = r.response_logprobs as number[];
    const response = r.response_ids as number[];
    expect(multi.turns.flatMap((t) => t.generatedIds)).toEqual(response.filter((_, i) => mask[i] === 1));
    expect(multi.turns.flatMap((t) => t.generatedLogprobs)).toEqual(lps.filter((_, i) => mask[i] === 1));
    expect(multi.turns.flatMap((t) => t.observationIds ?? [])).toEqual(response.filter((_, i) => mask[i] === 0));
    // verl gives tool tokens logprob 0.0 and mask 0.
    expect(lps.filter((_, i) => mask[i] === 0).every((lp) => lp === 0)).toBe(true);
    for (let k = 1; k < multi.turns.length; k++) {
      const prev = multi.turns[k - 1]!;
      expect(multi.turns[k]!.promptIds).toEqual([...prev.promptIds!, ...prev.generatedIds!, ...prev.observationIds!]);
    }
  });

  it('clean records check clean; every planted fault is found with its kind, cause and index', async () => {
    const loaded = await load(rel(file));
    for (const [i, name] of SAMPLE_NAMES.entries()) {
      const t = loaded.trajectories[i]!;
      const { findings, trajectory } = await analyze(t);
      expect(trajectory.images[0]).toMatchObject({ width: 640, height: 480, sizeFrom: 'bytes' });
      if (name === 'clean-multi' || name === 'clean-single') {
        expect(findings, name).toEqual([]);
        continue;
      }
      for (const want of plantedFindings(
        name as Fault,
        t.sample!,
        'response',
        qwenNamed(profile.ids),
        t.sample!.imageGridThw![0],
        profile.vision.mergeSize,
      )) {
        expect(findings, name).toContainEqual(expect.objectContaining({ ...want, severity: 'error' }));
      }
    }
  });

  it("the images' own max_pixels are what make the pad runs right", async () => {
    const clean = (await load(rel(file))).trajectories[1]!;
    const pads = padRuns(clean.sample!.tokens, profile.ids);
    expect(pads.map((p) => p.length)).toEqual([234]); // 640×480 under max_pixels 200704
    const withoutSettings = Trajectory.parse({ ...clean, images: clean.images.map((img) => ({ url: img.url })) });
    const { findings } = await analyzeTrajectory(withoutSettings, { workers: 0 }, [DIR]);
    // The model default (391 pads) disagrees with the run; the stored grid agrees with it, so a warning.
    expect(findings).toContainEqual(
      expect.objectContaining({
        kind: 'placeholder_count',
        severity: 'warning',
        expected: 391,
        actual: 234,
        index: pads[0]!.offset,
      }),
    );
  });
});

describe("verl's rollout_data_dir dump", () => {
  const file = path.join(DIR, 'rollout_data', '12.jsonl');

  it('loads as text with its limitations stated; no check can run and none pretends to', async () => {
    const loaded = await load(rel(file));
    const raw = records(file);
    expect(loaded.trajectories).toHaveLength(SAMPLE_NAMES.length);
    for (const [i, t] of loaded.trajectories.entries()) {
      const r = raw[i]!;
      // The dump really has the special tokens stripped.
      expect(r.input).not.toMatch(/<\|im_start\|>|<\|image_pad\|>/);
      expect(t.id).toBe(`step-12:${i + 1}`);
      expect(t.source).toEqual({ file: rel(file), line: i + 1, format: 'verl-dump' });
      expect(t.turns).toEqual([{ generatedText: r.output }]);
      expect(t.reward).toBe(r.score);
      expect(t.sample).toBeUndefined();
      expect(t.images).toEqual([]);
      expect(t.meta).toEqual({ step: 12, input: r.input, gts: '10', acc: r.acc });
      expect(t.limitations).toEqual([VERL_DUMP_LIMITATION]);
      expect(t.limitations[0]).toMatch(
        /^special tokens were stripped by verl's rollout_data_dir dump.*no token ids, loss mask, logprobs, images/,
      );
      const { findings, alignment } = await analyze(t);
      expect(findings).toEqual([]);
      expect(alignment.promptFrom).toBe('none');
    }
  });

  it('the dump is the decoded agent-loop output: same text, no ids', async () => {
    const dump = (await load(rel(file))).trajectories;
    const full = (await load(rel(path.join(DIR, 'agent_loop.jsonl')))).trajectories;
    for (const [i, t] of full.entries()) {
      const responseIds = t.sample!.tokens.slice(t.sample!.tokens.length - t.sample!.responseLength!);
      expect(dump[i]!.turns[0]!.generatedText).toBe(await profile.tokenizer.decode(responseIds, true));
    }
  });
});

describe('malformed verl records', () => {
  const file = rel(path.join(DIR, 'malformed.jsonl'));

  it('name the file, line and field; the readable records load', async () => {
    const loaded = await load(file);
    expect(loaded.trajectories[0]!.source.line).toBe(1);
    const broken = loaded.errors.filter((e) => e.line !== 5);
    expect(broken).toEqual([
      expect.objectContaining({
        file,
        line: 3,
        field: 'multi_modal_data.images.0',
        message: expect.stringContaining('none of "image", "bytes"'),
      }),
      expect.objectContaining({ file, line: 4, field: 'response_mask' }),
    ]);
  });

  it("Python's NaN logprob (json.dumps writes it bare) loads and is an invalid_value finding, not a read error", async () => {
    const loaded = await load(file);
    expect(loaded.errors.filter((e) => e.line === 5)).toEqual([]);
    expect(loaded.trajectories.map((t) => t.source.line)).toEqual([1, 2, 5]);
    // A logprob written as a string that is no number ("NaN?") loads too, as NaN at its token.
    const text = loaded.trajectories[1]!;
    const textPrompt = text.sample!.tokens.length - text.sample!.responseLength!;
    expect((await analyze(text)).findings).toContainEqual(
      expect.objectContaining({
        kind: 'invalid_value',
        stream: 'sample',
        index: textPrompt + 3,
        field: 'sample.logprobs',
      }),
    );
    const nan = loaded.trajectories[2]!;
    const promptLength = nan.sample!.tokens.length - nan.sample!.responseLength!;
    const { findings } = await analyze(nan);
    expect(findings).toContainEqual(
      expect.objectContaining({ kind: 'invalid_value', stream: 'sample', index: promptLength, actual: 'NaN' }),
    );
  });
});

describe('a NaN or infinite reward (json.dumps writes the float bare)', () => {
  // verl's _dump_generations writes `token_level_scores.sum(-1).tolist()` with json.dumps, and
  // AgentLoopOutput.reward_score is an Optional[float]: a reward function's NaN reaches the file
  // as a bare NaN. The record loads with the reward as written, and the reward is an
  // invalid_value finding (as for slime and AReaL records): it would make its group's advantages NaN.
  const write = (name: string, lines: string[]) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-verl-reward-'));
    const file = path.join(dir, name);
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    return file;
  };
  const rewardFindings = async (file: string) => {
    const out: { line: number; reward: unknown; findings: unknown[] }[] = [];
    for await (const ev of checkPaths([file], { workers: 0 }))
      if (ev.type === 'trajectory')
        out.push({
          line: ev.checked.trajectory.source.line,
          reward: ev.checked.trajectory.reward,
          findings: ev.checked.findings.filter((f) => f.field === 'reward').map((f) => [f.kind, f.severity, f.actual]),
        });
      else if (ev.type === 'error') out.push({ line: ev.error.line, reward: 'unreadable', findings: [ev.error.field] });
    return out;
  };

  it('rollout_data_dir dump: the record loads, the score is an invalid_value finding', async () => {
    const file = write('7.jsonl', [
      '{"input": "q", "output": "a", "gts": "1", "score": 1.0, "step": 7}',
      '{"input": "q", "output": "", "gts": null, "score": NaN, "step": 7, "acc": false}',
      '{"input": "q", "output": "b", "gts": ["1", "2"], "score": -Infinity, "step": 7}',
    ]);
    const loaded = await loadFile(file);
    expect(loaded.format).toBe('verl-dump');
    expect(loaded.errors).toEqual([]);
    expect(loaded.trajectories[1]!.turns).toEqual([{ generatedText: '' }]);
    expect(await rewardFindings(file)).toEqual([
      { line: 1, reward: 1, findings: [] },
      { line: 2, reward: NaN, findings: [['invalid_value', 'error', 'NaN']] },
      { line: 3, reward: -Infinity, findings: [['invalid_value', 'error', '-Infinity']] },
    ]);
  });

  it('agent-loop output: the sample loads and is checked, reward_score is an invalid_value finding', async () => {
    const clean = fs.readFileSync(path.join(DIR, 'agent_loop.jsonl'), 'utf8').split('\n')[1]!;
    const nan = clean.replace(/"reward_score":[^,]+,/, '"reward_score":NaN,');
    expect(nan).not.toBe(clean);
    const file = write('agent_loop.jsonl', [nan]);
    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([]);
    expect(loaded.trajectories).toHaveLength(1);
    expect(loaded.trajectories[0]!.sample!.tokens.length).toBeGreaterThan(0);
    expect(await rewardFindings(file)).toEqual([
      { line: 1, reward: NaN, findings: [['invalid_value', 'error', 'NaN']] },
    ]);
  });
});

describe("Hugging Face datasets' image dicts, the unused side None", () => {
  // The Image feature stores `{"bytes": ..., "path": None}` or `{"bytes": None, "path": ...}`, and
  // verl's process_image takes such dicts as they come (verl/utils/dataset/vision_utils.py).
  it('{"bytes": base64, "path": null} and {"bytes": null, "path": ...} load and check clean', async () => {
    const clean = JSON.parse(fs.readFileSync(path.join(DIR, 'agent_loop.jsonl'), 'utf8').split('\n')[1]!);
    const image = clean.multi_modal_data.images[0];
    expect(image).toMatchObject({ image: 'images/right-triangle.png' });
    const settings = { min_pixels: image.min_pixels, max_pixels: image.max_pixels };
    const png = fs.readFileSync(path.join(DIR, 'images', 'right-triangle.png')).toString('base64');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-verl-hf-image-'));
    fs.cpSync(path.join(DIR, 'images'), path.join(dir, 'images'), { recursive: true });
    const file = path.join(dir, 'agent_loop.jsonl');
    const withImage = (entry: unknown, id: string) =>
      JSON.stringify({ ...clean, request_id: id, multi_modal_data: { images: [entry] } });
    fs.writeFileSync(
      file,
      `${[
        withImage({ bytes: png, path: null, ...settings }, 'hf-bytes'),
        withImage({ bytes: null, path: 'images/right-triangle.png', ...settings }, 'hf-path'),
        withImage({ bytes: null, path: null }, 'hf-neither'),
      ].join('\n')}\n`,
    );
    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([expect.objectContaining({ file, line: 3, field: 'multi_modal_data.images.0' })]);
    expect(loaded.trajectories.map((t) => t.id)).toEqual(['hf-bytes', 'hf-path']);
    expect(loaded.trajectories[0]!.images[0]!.url).toBe(`data:image/png;base64,${png}`);
    expect(loaded.trajectories[1]!.images[0]).toEqual({
      url: 'images/right-triangle.png',
      minPixels: image.min_pixels,
      maxPixels: image.max_pixels,
    });
    for (const t of loaded.trajectories)
      expect((await analyzeTrajectory(t, { workers: 0 }, [dir])).findings, t.id).toEqual([]);
  });
});
