// slime / vime Sample records: every fixture through the importer harness (detection, model
// integrity, file snapshot, native round trip); then JSONL, the debug-dump wrapper and malformed
// lines field by field; and the sniffing of all five trainer formats (slime, verl, verl-dump,
// AReaL, AReaL dump) against each other.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadFile, IMPORTERS } from '../server/import/index.ts';
import { checkPaths } from '../server/pipeline.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import { turnsFromMask } from '../server/import/turns-from-mask.ts';
import {
  FIXTURES,
  MODEL,
  SAMPLE_NAMES,
  WRAPPER_SAMPLES,
  plantedFindings,
  type Fault,
} from './fixtures/generate-trainers.ts';
import { jsonlRecords } from './support/jsonl.ts';
import { checkImporterSnapshot, importerRun } from './support/importer-harness.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const DIR = path.join(FIXTURES, 'slime');
const rel = (f: string) => path.relative(process.cwd(), f);
const records = jsonlRecords;

/** The file as `loadFile` reads it (loaded and checked once, shared with the harness). */
const load = async (file: string) => (await importerRun(file)).loaded;
/** The pipeline's analysis of a loaded trajectory, from the same run. */
const analyze = async (t: Trajectory) => (await importerRun(t.source.file)).byId(t.id);

describe('every slime fixture through the importer harness', () => {
  it.each(['samples.jsonl', path.join('rollout_data', '3.json'), 'malformed.jsonl'])('%s', async (name) => {
    await checkImporterSnapshot(rel(path.join(DIR, name)), { format: 'slime' });
  });
});

/** Every token of a turn stream is accounted for once: prompts extend one another, the last turn ends the sample. */
function expectTurnsCover(t: Trajectory, mask: readonly number[], logprobs: readonly number[]) {
  const tokens = t.sample!.tokens;
  const offset = tokens.length - (t.sample!.responseLength ?? tokens.length);
  t.turns.forEach((turn, k) => {
    const start = turn.promptIds!.length;
    const end = start + turn.generatedIds!.length;
    expect(turn.promptIds).toEqual(tokens.slice(0, start));
    expect(turn.generatedIds).toEqual(tokens.slice(start, end));
    for (let i = start; i < end; i++) expect(mask[i - offset]).toBe(1);
    expect(turn.generatedLogprobs).toEqual(logprobs.slice(start - offset, end - offset));
    const next = t.turns[k + 1];
    const obsEnd = next ? next.promptIds!.length : tokens.length;
    expect(turn.observationIds ?? []).toEqual(tokens.slice(end, obsEnd));
    for (let i = end; i < obsEnd; i++) expect(mask[i - offset]).toBe(0);
  });
}

describe('turnsFromMask', () => {
  it('splits at the mask runs; a response that starts unmasked joins the prompt; a short mask repeats its last value', () => {
    const tokens = [10, 11, 12, 20, 21, 30, 31, 40];
    const turns = turnsFromMask({
      tokens,
      scope: 'response',
      responseLength: 5,
      mask: [1, 1, 0, 0, 1],
      logprobs: [-1, -2, 0, 0, -3],
    });
    expect(turns).toEqual([
      { promptIds: [10, 11, 12], generatedIds: [20, 21], generatedLogprobs: [-1, -2], observationIds: [30, 31] },
      { promptIds: [10, 11, 12, 20, 21, 30, 31], generatedIds: [40], generatedLogprobs: [-3] },
    ]);
    expect(turnsFromMask({ tokens, scope: 'response', responseLength: 5, mask: [0, 1, 1, 0] })).toEqual([
      { promptIds: [10, 11, 12, 20], generatedIds: [21, 30], observationIds: [31, 40] },
    ]);
    expect(turnsFromMask({ tokens, scope: 'response', responseLength: 5, mask: [1, 0] })[1]).toBeUndefined();
    expect(
      turnsFromMask({ tokens, scope: 'response', responseLength: 5, mask: [1, 0, 0, 1] }).map((t) => t.generatedIds),
    ).toEqual([[20], [31, 40]]);
    expect(turnsFromMask({ tokens, scope: 'full', mask: [0, 0, 0, 1, 1, 0, 0, 1] }).map((t) => t.generatedIds)).toEqual(
      [[20, 21], [40]],
    );
    expect(turnsFromMask({ tokens, scope: 'response', responseLength: 2 })).toEqual([
      { promptIds: tokens.slice(0, 6), generatedIds: [31, 40] },
    ]);
    expect(turnsFromMask({ tokens, scope: 'full', mask: tokens.map(() => 0) })).toEqual([
      { promptIds: tokens, generatedIds: [] },
    ]);
    // A response_length past the tokens (a length_mismatch for the checks) reads every token as response.
    expect(turnsFromMask({ tokens, scope: 'response', responseLength: 20 })).toEqual([
      { promptIds: [], generatedIds: tokens },
    ]);
  });
});

describe('slime Sample JSONL', () => {
  const file = path.join(DIR, 'samples.jsonl');

  it('imports every sample field by field', async () => {
    const loaded = await load(rel(file));
    const raw = records(file);
    expect(loaded.trajectories.map((t) => t.id)).toEqual(SAMPLE_NAMES.map((_, i) => `sample-${i}`));
    loaded.trajectories.forEach((t, i) => {
      const r = raw[i]!;
      expect(t.source).toEqual({ file: rel(file), line: i + 1, format: 'slime' });
      expect(t.model).toBe(MODEL);
      expect(t.sample).toEqual({
        tokens: r.tokens,
        responseLength: r.response_length,
        lossMask: r.loss_mask,
        logprobs: r.rollout_log_probs,
        maskScope: 'response',
        imageGridThw: (r.multimodal_train_inputs as { image_grid_thw: unknown }).image_grid_thw,
      });
      expect(t.reward).toBe(r.reward);
      expect(t.status).toBe('completed');
      expect(t.group).toBe(String(r.group_index));
      expect(t.turns[0]!.messages).toEqual(r.prompt);
      expect(t.turns[t.turns.length - 1]!.finishReason).toBe('stop');
      expect(t.images.map((img) => img.url)).toEqual((r.multimodal_inputs as { images: string[] }).images);
      expect(t.meta).toMatchObject({
        index: i,
        label: '10',
        weight_versions: ['3', '4'],
        metadata: { fixture: SAMPLE_NAMES[i] },
      });
      expect(t.limitations).toEqual([]);
    });
  });

  it('derives the turns from the mask runs: prompts, generated ids with their logprobs, observations', async () => {
    const loaded = await load(rel(file));
    const [multi, single] = loaded.trajectories;
    const raw = records(file);
    expect(multi!.turns).toHaveLength(3);
    expectTurnsCover(multi!, raw[0]!.loss_mask as number[], raw[0]!.rollout_log_probs as number[]);
    expect(multi!.turns[0]!.promptIds).toHaveLength(
      (raw[0]!.tokens as number[]).length - (raw[0]!.response_length as number),
    );
    expect(await profile.tokenizer.decode(multi!.turns[0]!.generatedIds!)).toMatch(
      /^x is the hypotenuse[\s\S]*<\/tool_call><\|im_end\|>$/,
    );
    expect(await profile.tokenizer.decode(multi!.turns[0]!.observationIds!)).toBe(
      '\n<|im_start|>tool\n10.0<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(await profile.tokenizer.decode(multi!.turns[1]!.observationIds!)).toMatch(
      /^\n<\|im_start\|>user\n<\|vision_start\|>(<\|image_pad\|>)+<\|vision_end\|>Here is the corner at B\.<\|im_end\|>\n<\|im_start\|>assistant\n$/,
    );
    expect(single!.turns).toHaveLength(1);
    expectTurnsCover(single!, raw[1]!.loss_mask as number[], raw[1]!.rollout_log_probs as number[]);
    // One generation: slime's decoded `response` is that turn's text.
    expect(single!.turns[0]!.generatedText).toBe(raw[1]!.response);
    expect(single!.turns[0]!.generatedText).toBe(await profile.tokenizer.decode(single!.turns[0]!.generatedIds!, true));
    expect(multi!.turns.every((t) => t.generatedText === undefined)).toBe(true);
  });

  it('clean samples check clean; every planted fault is found with its kind, cause and index', async () => {
    const loaded = await load(rel(file));
    for (const [i, name] of SAMPLE_NAMES.entries()) {
      const t = loaded.trajectories[i]!;
      const { findings, trajectory } = await analyze(t);
      // The images are real: sizes come from the PNG file and the data: URL.
      expect(trajectory.images.map((img) => [img.width, img.height, img.sizeFrom])).toEqual(
        name === 'clean-single'
          ? [[640, 480, 'bytes']]
          : [
              [640, 480, 'bytes'],
              [320, 240, 'bytes'],
            ],
      );
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
});

describe('slime debug-dump wrapper {"rollout_id", "samples"}', () => {
  const file = path.join(DIR, 'rollout_data', '3.json');

  it('reads the whole-file JSON, keeps the rollout id, takes a string prompt as text only', async () => {
    const loaded = await load(rel(file));
    const wrapper = JSON.parse(fs.readFileSync(file, 'utf8')) as {
      rollout_id: number;
      samples: Record<string, unknown>[];
    };
    expect(loaded.trajectories.map((t) => t.id)).toEqual(WRAPPER_SAMPLES.map((_, i) => `rollout-3/sample-${i}`));
    loaded.trajectories.forEach((t, i) => {
      const s = wrapper.samples[i]!;
      expect(typeof s.prompt).toBe('string');
      expect(t.source.line).toBe(1);
      expect(t.meta).toMatchObject({ rollout_id: wrapper.rollout_id });
      expect(t.sample!.tokens).toEqual(s.tokens);
      expect(t.turns[0]!.messages).toBeUndefined();
    });
    // The rendered prompt text is the decoded prompt ids (special tokens kept).
    const first = loaded.trajectories[0]!;
    expect(await profile.tokenizer.decode(first.turns[0]!.promptIds!)).toBe(wrapper.samples[0]!.prompt);
  });

  it('finds the duplicated <|im_end|> in the wrapped sample, and nothing in the clean ones', async () => {
    const loaded = await load(rel(file));
    for (const [i, name] of WRAPPER_SAMPLES.entries()) {
      const t = loaded.trajectories[i]!;
      const { findings } = await analyze(t);
      if (name !== 'duplicated-eos') expect(findings, name).toEqual([]);
      else
        for (const want of plantedFindings(name, t.sample!, 'response', qwenNamed(profile.ids), undefined, 2))
          expect(findings).toContainEqual(expect.objectContaining(want));
    }
  });
});

describe('malformed slime records', () => {
  it('name the file, line and field; the readable records load; a truncated last line is reported', async () => {
    const file = rel(path.join(DIR, 'malformed.jsonl'));
    const loaded = await load(file);
    // A bad value (a mask entry "x", a negative token id) is a finding on a record that loads.
    expect(loaded.trajectories.map((t) => [t.id, t.source.line])).toEqual([
      ['sample-0', 1],
      ['sample-2', 3],
      ['sample-4', 5],
      ['sample-5', 6],
    ]);
    const byLine = new Map(loaded.errors.map((e) => [e.line, e]));
    expect(loaded.errors.every((e) => e.file === file)).toBe(true);
    expect(byLine.get(2)?.message).toMatch(/^not valid JSON/);
    expect(byLine.get(4)).toMatchObject({
      field: 'multimodal_train_inputs',
      message: expect.stringContaining('image_grid_thw'),
    });
    expect(byLine.get(7)?.message).toMatch(/last line is incomplete/);
    expect([...byLine.keys()].sort()).toEqual([2, 4, 7]);
    const invalid = async (id: string) =>
      (await analyze(loaded.trajectories.find((t) => t.id === id)!)).findings.filter((f) => f.kind === 'invalid_value');
    const mask = (await invalid('sample-2'))[0]!;
    const tokens = loaded.trajectories.find((t) => t.id === 'sample-2')!.sample!.tokens;
    const responseLength = loaded.trajectories.find((t) => t.id === 'sample-2')!.sample!.responseLength!;
    expect(mask).toMatchObject({
      field: 'sample.lossMask',
      stream: 'sample',
      index: tokens.length - responseLength + 1,
    });
    expect((await invalid('sample-4'))[0]).toMatchObject({
      field: 'sample.tokens',
      stream: 'sample',
      index: 1,
      actual: -5,
    });
  });

  it('a wrapped sample that cannot be read names its place in "samples"', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-slime-'));
    const good = records(path.join(DIR, 'samples.jsonl'))[1]!;
    const file = path.join(tmp, 'dump.json');
    fs.writeFileSync(
      file,
      `{\n"rollout_id": "eval_2",\n"samples": [${JSON.stringify(good)}, ${JSON.stringify({ ...good, response_length: 'long' })}]\n}\n`,
    );
    const loaded = await loadFile(file);
    expect(loaded.trajectories.map((t) => t.id)).toEqual(['rollout-eval_2/sample-1']);
    expect(loaded.errors).toEqual([expect.objectContaining({ file, line: 1, field: 'samples.1.response_length' })]);
  });
});

describe('trainer formats are told apart by structure', () => {
  const firstRecord = (file: string): unknown => {
    const text = fs.readFileSync(file, 'utf8');
    if (text.startsWith('[')) return (JSON.parse(text) as unknown[])[0];
    if (text.startsWith('{\n')) return JSON.parse(text);
    return JSON.parse(text.split('\n')[0]!);
  };
  const fixtures: Record<string, string> = {
    slime: path.join(DIR, 'samples.jsonl'),
    'slime-wrapper': path.join(DIR, 'rollout_data', '3.json'),
    verl: path.join(FIXTURES, 'verl', 'agent_loop.jsonl'),
    'verl-dump': path.join(FIXTURES, 'verl', 'rollout_data', '12.jsonl'),
    areal: path.join(FIXTURES, 'areal', 'trajectories.json'),
    'areal-dump': path.join(FIXTURES, 'areal', 'rollout', '4', '17.jsonl'),
  };
  const formats = ['slime', 'verl', 'verl-dump', 'areal', 'areal-dump'] as const;

  it('each sniff accepts its own records and gives a reason for every other', () => {
    for (const [name, file] of Object.entries(fixtures)) {
      const own = name.replace('-wrapper', '');
      const record = firstRecord(file);
      for (const format of formats) {
        const verdict = IMPORTERS.find((i) => i.format === format)!.sniff(record);
        if (format === own) expect(verdict, `${format} on ${name}`).toBe(true);
        else expect(typeof verdict, `${format} on ${name}`).toBe('string');
      }
    }
  });

  // That detection picks each of these formats by structure, under a neutral file name, is the harness's check.
  it('a file of none of the formats lists why each did not match', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-sniff-'));
    const file = path.join(tmp, 'other.jsonl');
    fs.writeFileSync(file, `${JSON.stringify({ prompt_ids: [1], response_ids: [2], image_urls: [] })}\n`);
    const loaded = await loadFile(file);
    expect(loaded.trajectories).toEqual([]);
    const message = loaded.errors[0]!.message;
    expect(message).toContain('no known format matched');
    expect(message).toContain('slime: no "tokens" array');
    expect(message).toContain('verl: has "prompt_ids"/"response_ids" but no "response_mask"');
    expect(message).toContain('areal: no "input_ids" and "loss_mask"');
    expect(message).toContain('verl-dump: no string "input" and "output"');
    expect(message).toContain('areal-dump: no "task_id"');
  });

  it('--format overrides detection, and records of another shape become read errors', async () => {
    const loaded = await loadFile(fixtures.verl!, { format: 'slime' });
    expect(loaded.format).toBe('slime');
    expect(loaded.trajectories).toEqual([]);
    expect(loaded.errors[0]).toMatchObject({ line: 1, field: 'tokens' });
  });

  it('rollscope check over the folder: every file detected, the malformed one reported, the rest checked', async () => {
    const files: { file: string; format?: string; count: number }[] = [];
    const errors: { line: number }[] = [];
    let trajectories = 0;
    for await (const ev of checkPaths([DIR], { workers: 0 })) {
      if (ev.type === 'file') files.push({ file: path.relative(DIR, ev.file), format: ev.format, count: ev.count });
      else if (ev.type === 'error') errors.push(ev.error);
      else trajectories++;
    }
    expect(files).toEqual([
      { file: 'malformed.jsonl', format: 'slime', count: 4 },
      { file: path.join('rollout_data', '3.json'), format: 'slime', count: WRAPPER_SAMPLES.length },
      { file: 'samples.jsonl', format: 'slime', count: SAMPLE_NAMES.length },
    ]);
    expect(errors).toHaveLength(3);
    expect(trajectories).toBe(4 + WRAPPER_SAMPLES.length + SAMPLE_NAMES.length);
  });
});

describe('shapes slime writes that the fixtures do not hold', () => {
  const lines = fs.readFileSync(path.join(DIR, 'samples.jsonl'), 'utf8').trim().split('\n');
  /** Samples written to a temporary folder beside copies of the fixture images (the samples name them relatively). */
  const writeTemp = (name: string, text: string): string => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-slime-'));
    fs.cpSync(path.join(DIR, 'images'), path.join(dir, 'images'), { recursive: true });
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    return file;
  };
  const findingsOf = async (file: string) => {
    const out: { id: string; kinds: string[] }[] = [];
    for await (const ev of checkPaths([file], { workers: 0 }))
      if (ev.type === 'trajectory')
        out.push({ id: ev.checked.trajectory.id, kinds: ev.checked.findings.map((f) => f.kind) });
    return out;
  };

  it('a JSON array on one line without a line feed (json.dump(samples, f)) is read as the array', async () => {
    const samples = lines.slice(0, 2).map((l) => JSON.parse(l) as Record<string, unknown>);
    const file = writeTemp('samples.json', JSON.stringify(samples));
    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([]);
    expect(loaded.format).toBe('slime');
    expect(loaded.trajectories.map((t) => t.sample!.tokens)).toEqual(samples.map((s) => s.tokens));
  });

  it("in a dump the dump's rollout_id is the step and the id; a Sample's own rollout_id is kept beside it", async () => {
    // tests/test_rollout_data_utils.py saves Sample(index=1, rollout_id=3) under the dump's
    // rollout_id; compact rollouts give sibling samples one rollout_id of their own
    // (slime/ray/rollout.py numbers the unset ones 0, 1, ...), which is not the training step.
    const sample = { ...(JSON.parse(lines[1]!) as Record<string, unknown>), index: 0, rollout_id: 2 };
    const file = writeTemp('5.json', JSON.stringify({ rollout_id: 5, samples: [sample] }));
    const [t] = (await loadFile(file)).trajectories;
    expect([t!.id, t!.step, t!.meta?.rollout_id, t!.meta?.sample_rollout_id]).toEqual(['rollout-5/sample-0', 5, 5, 2]);
  });

  it('without an index, a dumped Sample and its train-dump sample share one id: its place in the rollout dump', async () => {
    // _build_dump_payload keeps `partition` as `rollout_position` and orders by it when
    // `sample_indices` are None (tests/test_train_data_utils.py); the rollout dump holds the same order.
    const samples = lines
      .slice(0, 2)
      .map((l) => ({ ...(JSON.parse(l) as Record<string, unknown>), index: null }) as Record<string, unknown>);
    const rollout = writeTemp('1.json', JSON.stringify({ rollout_id: 1, samples }));
    const train = samples.map((s, position) => ({
      data_parallel_rank: 0,
      sample_index: null,
      rollout_position: position,
      tokens: s.tokens,
      response_lengths: s.response_length,
      loss_masks: s.loss_mask,
      log_probs: s.rollout_log_probs,
    }));
    const trained = writeTemp(
      'train-1.json',
      JSON.stringify({ format_version: 2, rollout_id: 1, rank: 0, samples: train.reverse() }),
    );
    const tokensById = async (file: string) =>
      Object.fromEntries((await loadFile(file)).trajectories.map((t) => [t.id, t.sample!.tokens]));
    const rolloutSide = await tokensById(rollout);
    expect(Object.keys(rolloutSide)).toEqual(['rollout-1/position-0', 'rollout-1/position-1']);
    expect(await tokensById(trained)).toEqual(rolloutSide);
  });

  it('a sample that generated nothing (aborted, pending, truncated at max_new_tokens) has no re-render or image finding', async () => {
    // slime/rollout/sglang_rollout.py: an abort or an exhausted budget returns the Sample with
    // response_length 0 and an empty response; its prompt still re-renders to its tokens.
    const clean = JSON.parse(lines[1]!) as { tokens: number[]; response_length: number };
    const promptIds = clean.tokens.slice(0, clean.tokens.length - clean.response_length);
    const empty = ['aborted', 'pending', 'truncated'].map((status, index) => ({
      ...clean,
      index,
      tokens: promptIds,
      response: '',
      response_length: 0,
      loss_mask: [],
      rollout_log_probs: [],
      status,
    }));
    // Aborted before `generate` ran (generate_and_rm's `state.aborted`): no tokens at all, the images still stated.
    empty.push({ ...empty[0]!, index: 3, tokens: [] });
    const file = writeTemp('empty.jsonl', `${empty.map((s) => JSON.stringify(s)).join('\n')}\n`);
    expect(await findingsOf(file)).toEqual(empty.map((_, i) => ({ id: `sample-${i}`, kinds: [] })));
  });
});
