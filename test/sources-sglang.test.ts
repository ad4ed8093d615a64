// SGLang as a format of its own: /generate logs ({"text", "output_ids", "meta_info"}) and
// OpenAI-compatible logs (token ids per choice), grouped like vLLM's; planted faults found at
// their index; SGLang-shaped but incomplete lines named as SGLang output with what is missing.
// Fixtures: test/fixtures/generate-sources.ts.
import { fileContext } from '../server/import/importer.ts';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { sglangImporter } from '../server/import/sglang.ts';
import { sglangOpenAiImporter } from '../server/import/sglang-openai.ts';
import { vllmImporter } from '../server/import/vllm.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { FIXTURES } from './fixtures/generate-vllm.ts';
import { PLANTED_FILE, type Planted } from './fixtures/generate-sources.ts';

const planted = JSON.parse(fs.readFileSync(PLANTED_FILE, 'utf8')) as Planted[];
const fixture = (rel: string) => path.join(FIXTURES, rel);
const lines = (rel: string) =>
  fs
    .readFileSync(fixture(rel), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l.replace(/\bNaN\b/g, 'null')) as Record<string, unknown>);

async function check(rel: string) {
  const loaded = await loadFile(fixture(rel));
  return {
    loaded,
    checked: await Promise.all(loaded.trajectories.map((t) => analyzeTrajectory(t, {}, [path.dirname(fixture(rel))]))),
  };
}

describe('every planted fault is found at its index, and nothing else of its kind', () => {
  for (const file of [...new Set(planted.map((p) => p.file))].filter((f) => f.startsWith('sglang/'))) {
    it(file, async () => {
      const { loaded, checked } = await check(file);
      expect(loaded.errors).toEqual([]);
      for (const p of planted.filter((x) => x.file === file))
        expect(checked.map((c) => c.trajectory.id)).toContain(p.trajectory);
      for (const c of checked) {
        const want = planted.filter((p) => p.file === file && p.trajectory === c.trajectory.id);
        const kinds = new Set(want.map((p) => p.kind));
        const got = c.findings.filter((f) => kinds.has(f.kind));
        expect(
          got.map((f) => ({ kind: f.kind, turn: f.turn, index: f.index })),
          c.trajectory.id,
        ).toEqual(want.map((p) => ({ kind: p.kind, turn: p.turn, index: p.index })));
        want.forEach((p, i) => {
          if (p.expected !== undefined) expect(got[i]!.expected).toEqual(p.expected);
          if (p.actual !== undefined) expect(got[i]!.actual).toEqual(p.actual);
        });
      }
    });
  }
});

describe('/generate logs', () => {
  it('are their own format, grouped by session_params.id or by prefix chaining, with every field read', async () => {
    const { loaded, checked } = await check('sglang/generate.jsonl');
    expect(loaded.format).toBe('sglang');
    expect(loaded.trajectories.map((t) => [t.id, t.source.lines, t.meta?.groupedBy])).toEqual([
      ['sess-clean', [1, 4], 'request.session_params.id'],
      ['line 2', [2, 5], 'prefix chain'],
      ['sg-nan', [3, 6], 'trajectory_id'],
      ['sg-prompt-tokens', undefined, 'trajectory_id'],
      ['sg-short', undefined, 'trajectory_id'],
    ]);
    const raw = lines('sglang/generate.jsonl')[0]! as {
      request: { input_ids: number[] };
      response: {
        output_ids: number[];
        meta_info: { output_token_logprobs: [number, number, null][]; prompt_tokens: number };
      };
    };
    const turn = loaded.trajectories[0]!.turns[0]!;
    expect(turn.promptIds).toEqual(raw.request.input_ids);
    expect(turn.generatedIds).toEqual(raw.response.output_ids);
    expect(turn.generatedLogprobs).toEqual(raw.response.meta_info.output_token_logprobs.map((t) => t[0]));
    expect(turn.finishReason).toBe('stop');
    expect(turn.statedPromptTokens).toBe(raw.response.meta_info.prompt_tokens);
    expect(checked[0]!.findings).toEqual([]);
  });

  it('ids come from the logprob triples when output_ids is absent', () => {
    const value = lines('sglang/generate.jsonl')[0]! as { response: Record<string, unknown> };
    const ids = value.response.output_ids;
    delete value.response.output_ids;
    const r = sglangImporter.importRecords([{ line: 1, offset: 0, length: 1, value }], fileContext('x.jsonl'));
    expect(r.errors).toEqual([]);
    expect(r.trajectories[0]!.turns[0]!.generatedIds).toEqual(ids);
  });

  it('SGLang-shaped but incomplete: errors say it is SGLang output and what is missing; the good line loads', async () => {
    const { loaded } = await check('sglang/incomplete.jsonl');
    expect(loaded.format).toBe('sglang');
    expect(loaded.trajectories.map((t) => t.id)).toEqual(['sg-good']);
    expect(loaded.errors.map((e) => [e.line, e.field])).toEqual([
      [2, 'response'],
      [3, 'response'],
      [4, 'response'],
    ]);
    expect(loaded.errors[0]!.message).toMatch(
      /SGLang \/generate output with no generated token ids.*output_ids.*output_token_logprobs/,
    );
    expect(loaded.errors[1]!.message).toMatch(/SGLang \/generate request without its output/);
    expect(loaded.errors[2]!.message).toMatch(/SGLang \/generate output without "meta_info"/);
  });
});

describe('/generate with n > 1', () => {
  it('the outputs for one prompt are samples of one group named by the request’s rid; a session’s later calls go to the branch they continue', async () => {
    const { loaded, checked } = await check('sglang/n-samples.jsonl');
    expect(loaded.errors).toEqual([]);
    const raw = lines('sglang/n-samples.jsonl') as {
      request: { rid: string; input_ids: number[] };
      response: unknown;
    }[];
    expect(
      loaded.trajectories.map((t) => [t.id, t.source.lines ?? [t.source.line], t.group, t.reward ?? null]),
    ).toEqual([
      ['line 1#0', [1], raw[0]!.request.rid, 1],
      ['line 1#1', [1], raw[0]!.request.rid, 1],
      // The second calls came in the order b, a: each is on the branch whose answer its prompt holds.
      ['sess-samples#0', [2, 4], 'sess-samples call 0', null],
      ['sess-samples#1', [2, 3], 'sess-samples call 0', null],
    ]);
    for (const t of loaded.trajectories) expect(t.turns[0]!.promptIds, t.id).toEqual(raw[0]!.request.input_ids);
    for (const c of checked) expect(c.findings, c.trajectory.id).toEqual([]);
  });
});

describe('OpenAI-compatible logs', () => {
  it('are told from vLLM by SGLang-only fields, read with ids per choice', async () => {
    const { loaded } = await check('sglang/openai.jsonl');
    expect(loaded.format).toBe('sglang-openai');
    expect(loaded.trajectories.map((t) => [t.id, t.source.lines, t.source.format])).toEqual([
      ['line 1', [1, 3], 'sglang-openai'],
      ['line 2', undefined, 'sglang-openai'],
    ]);
    const raw = lines('sglang/openai.jsonl')[0]! as {
      response: { choices: { prompt_token_ids: number[]; token_ids: number[] }[] };
    };
    expect(loaded.trajectories[0]!.turns[0]!.promptIds).toEqual(raw.response.choices[0]!.prompt_token_ids);
    expect(loaded.trajectories[0]!.turns[0]!.generatedIds).toEqual(raw.response.choices[0]!.token_ids);
  });

  it('vLLM logs stay vLLM, SGLang logs are not vLLM', () => {
    for (const rel of ['vllm/chat-chained.jsonl', 'vllm/completions.jsonl', 'vllm/tito.jsonl']) {
      const first = JSON.parse(fs.readFileSync(fixture(rel), 'utf8').split('\n')[0]!);
      expect(sglangOpenAiImporter.sniff(first), rel).not.toBe(true);
      expect(sglangImporter.sniff(first), rel).not.toBe(true);
    }
    expect(sglangOpenAiImporter.sniff(lines('sglang/openai.jsonl')[0]!)).toBe(true);
    expect(vllmImporter.sniff(lines('sglang/generate.jsonl')[0]!)).not.toBe(true);
  });
});

describe('a batched /generate answer', () => {
  it('that is an empty list is a read error naming the field, not a record that vanishes', () => {
    const value = { request: { input_ids: [1, 2, 3], rid: 'r' }, response: [] };
    const { trajectories, errors } = sglangImporter.importRecords(
      [{ line: 1, offset: 0, length: 0, value }],
      fileContext('empty.jsonl'),
    );
    expect(trajectories).toEqual([]);
    expect(errors).toEqual([expect.objectContaining({ line: 1, field: 'response' })]);
  });
});

describe('image_data as SGLang loads it (load_image in python/sglang/srt/utils)', () => {
  // A prompt whose ids hold the triangle's expanded pads, and its answer (the Agent Lightning fixture's first call).
  const call = (
    JSON.parse(fs.readFileSync(fixture('agent-lightning/completed-rollouts.jsonl'), 'utf8').split('\n')[0]!) as {
      triplets: { prompt: { token_ids: number[] }; response: { token_ids: number[] } }[];
    }
  ).triplets[0]!;
  const triangle = fs.readFileSync(fixture('agent-lightning/images/triangle.png')).toString('base64');
  const output = {
    text: 'x',
    output_ids: call.response.token_ids,
    meta_info: { id: 'r', finish_reason: { type: 'stop', matched: 151645 } },
  };
  const line = (request: Record<string, unknown>, response: unknown = output) => ({
    request: { input_ids: call.prompt.token_ids, sampling_params: {}, return_logprob: true, ...request },
    response,
  });
  const run = async (values: unknown[]) => {
    const r = sglangImporter.importRecords(
      values.map((value, i) => ({ line: i + 1, offset: 0, length: 0, value })),
      fileContext(fixture('sglang/images.jsonl')),
    );
    expect(r.errors).toEqual([]);
    return Promise.all(r.trajectories.map((t) => analyzeTrajectory(Trajectory.parse(t), {}, [FIXTURES])));
  };

  it('plain base64 bytes and ImageData dicts ({"url"}) are the image, its size read from the bytes', async () => {
    const checked = await run([
      line({ image_data: [triangle] }),
      line({ image_data: triangle }),
      line({ image_data: [{ url: `data:image/png;base64,${triangle}`, detail: 'auto' }] }),
    ]);
    for (const c of checked) {
      expect(c.trajectory.images, c.trajectory.id).toHaveLength(1);
      expect(c.trajectory.images[0]!.url).toBe(`data:image/png;base64,${triangle}`);
      expect(c.trajectory.images[0]).toMatchObject({ width: expect.any(Number), height: expect.any(Number) });
      expect(c.trajectory.images[0]!.unavailable).toBeUndefined();
      expect(c.findings, c.trajectory.id).toEqual([]);
    }
  });

  it('a batch holds one image list per prompt: each prompt keeps its own, not the whole batch’s', async () => {
    // Two questions about the one image: the second prompt has another word near its end.
    const other = call.prompt.token_ids.with(-8, 5787);
    const prompts = [call.prompt.token_ids, other];
    const checked = await run([
      line({ input_ids: prompts, image_data: [[triangle], [triangle]], rid: ['a', 'b'] }, [output, output]),
    ]);
    expect(checked.map((c) => c.trajectory.images.length)).toEqual([1, 1]);
    for (const c of checked)
      expect(
        c.findings.filter((f) => f.kind === 'image_count'),
        c.trajectory.id,
      ).toEqual([]);
  });
});
