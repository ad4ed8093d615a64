// Agent Lightning triplets and events: every fixture through the importer harness (detection,
// model integrity, file snapshot, native round trip); both generations' shapes imported and
// checked field by field against the generator's conversations (real tokenizer and template),
// aggregated by the strict prefix rule with breaks kept, planted faults found, bad records reported.
import { fileContext } from '../server/import/importer.ts';
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { agentLightningImporter } from '../server/import/agent-lightning.ts';
import { padRuns } from '../server/analysis/vision-spans.ts';
import { parseJson } from '../server/import/read/json.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { type Message, Trajectory } from '../server/model/trajectory.ts';
import {
  AGL_DIR,
  buildConversations,
  dataUrl,
  fixtureImages,
  IMAGE_SIZES,
  MODEL,
  resolveUrls,
  type Conversation,
  type ConversationName,
  type ImageName,
} from './fixtures/generate-vllm.ts';
import { checkImporterSnapshot, importerRun } from './support/importer-harness.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const { eos: EOS } = qwenNamed(profile.ids);
const FILE_URLS: Record<ImageName, string> = { triangle: 'images/triangle.png', isosceles: 'images/isosceles.png' };
let conv: Record<ConversationName, Conversation>;
let dataUrls: Record<ImageName, string>;

beforeAll(async () => {
  conv = await buildConversations(profile);
  const images = await fixtureImages();
  dataUrls = { triangle: dataUrl(images.triangle), isosceles: dataUrl(images.isosceles) };
}, 60_000);

const fixture = (name: string) => path.join(AGL_DIR, name);
/** The file as `loadFile` reads it (loaded and checked once, shared with the harness). */
const load = async (name: string) => (await importerRun(fixture(name))).loaded;
const byId = (ts: readonly Trajectory[], id: string) => {
  const t = ts.find((x) => x.id === id);
  if (!t) throw new Error(`no trajectory "${id}" among ${ts.map((x) => x.id).join(', ')}`);
  return t;
};
/** The pipeline's analysis of a loaded trajectory, from the same run. */
const analyze = async (t: Trajectory) => (await importerRun(t.source.file)).byId(t.id);
const boundaryAt = (t: Trajectory) => t.turns[0]!.promptIds!.length + t.turns[0]!.generatedIds!.length;

function expectTurns(
  t: Trajectory,
  c: Conversation,
  opts: { messages?: boolean; text?: boolean; finishReasons?: boolean } = {},
) {
  expect(t.turns).toHaveLength(c.trajectory.turns.length);
  t.turns.forEach((turn, k) => {
    const want = c.trajectory.turns[k]!;
    expect(turn.promptIds).toEqual(want.promptIds);
    expect(turn.generatedIds).toEqual(want.generatedIds);
    expect(turn.generatedLogprobs).toEqual(want.generatedLogprobs);
    expect(turn.finishReason).toBe((opts.finishReasons ?? true) ? want.finishReason : undefined);
    expect(turn.generatedText).toBe((opts.text ?? true) ? c.answers[k] : undefined);
    if (opts.messages ?? true) expect(turn.messages).toEqual(resolveUrls(want.messages as Message[], FILE_URLS));
    else expect(turn.messages).toBeUndefined();
  });
}

describe('every Agent Lightning fixture through the importer harness', () => {
  it.each([
    'triplets-v02.jsonl',
    'triplets.json',
    'rollout-v02.json',
    'events-triplet.json',
    'completed-rollouts.jsonl',
    'grouped-rollouts.jsonl',
    'retried-rollout.jsonl',
    'malformed.jsonl',
  ])('%s', async (name) => {
    await checkImporterSnapshot(fixture(name), { format: 'agent-lightning' });
  });
});

describe('v0.2 triplets, one per line', () => {
  it('chains the interleaved triplets of two conversations by the strict prefix rule', async () => {
    const { trajectories: ts } = await load('triplets-v02.jsonl');
    expect(ts.map((t) => [t.id, t.source.lines, t.meta?.groupedBy, t.reward])).toEqual([
      ['line 1', [1, 3, 5], 'strict prefix chain', 1.0],
      ['line 2', [2, 4], 'strict prefix chain', 0.0],
    ]);
    for (const t of ts) expect([t.model, t.source.format]).toEqual([MODEL, 'agent-lightning']);
  });

  it('reads raw_content messages (JSON-string content parsed back), image_urls once each, logprobs entries, finish reasons', async () => {
    const { trajectories: ts } = await load('triplets-v02.jsonl');
    const clean = byId(ts, 'line 1');
    expectTurns(clean, conv.clean);
    expect(clean.images.map((i) => i.url)).toEqual([FILE_URLS.triangle, FILE_URLS.isosceles]);
    expectTurns(byId(ts, 'line 2'), conv['duplicated-eos']);
  });

  it('clean has no findings and image sizes come from the files beside the data; the duplicated <|im_end|> is found', async () => {
    const { trajectories: ts } = await load('triplets-v02.jsonl');
    const clean = await analyze(byId(ts, 'line 1'));
    expect(clean.findings).toEqual([]);
    expect(clean.trajectory.images.map((i) => [i.width, i.height, i.sizeFrom])).toEqual([
      [IMAGE_SIZES.triangle.width, IMAGE_SIZES.triangle.height, 'bytes'],
      [IMAGE_SIZES.isosceles.width, IMAGE_SIZES.isosceles.height, 'bytes'],
    ]);
    const dup = byId(ts, 'line 2');
    const at = boundaryAt(dup);
    expect(dup.turns[1]!.promptIds!.slice(at - 1, at + 1)).toEqual([EOS, EOS]);
    expect((await analyze(dup)).findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'duplicated_eos',
      turn: 1,
      index: at,
    });
  });
});

describe('a JSON array of triplets', () => {
  it('is one trajectory; the missing newline after <|im_end|> is found', async () => {
    const { trajectories: ts } = await load('triplets.json');
    expect(ts.map((t) => [t.id, t.turns.length, t.reward])).toEqual([['line 1', 2, 0.5]]);
    expectTurns(ts[0]!, conv['missing-newline']);
    const at = boundaryAt(ts[0]!);
    expect((await analyze(ts[0]!)).findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'missing_newline',
      turn: 1,
      index: at,
    });
  });
});

describe('a v0.2 rollout object with triplets', () => {
  it('takes the rollout id and final reward; the wrong pad count breaks the chain, is attached and found', async () => {
    const { trajectories: ts } = await load('rollout-v02.json');
    expect(ts.map((t) => [t.id, t.reward, t.meta?.groupedBy, t.meta?.attachedAfterBreak])).toEqual([
      ['ro-wrong-pads', 0.0, 'rollout, then strict prefix chain', [1]],
    ]);
    const t = ts[0]!;
    expectTurns(t, conv['wrong-pads']);
    const [run0] = padRuns(t.turns[0]!.promptIds!, profile.ids);
    const [run1] = padRuns(t.turns[1]!.promptIds!, profile.ids);
    const findings = (await analyze(t)).findings;
    expect(findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'image_tokens_changed',
      turn: 1,
      index: run1!.offset + run1!.length,
    });
    // No processor settings in the record: the model defaults give 80 pads, the second prompt holds 35.
    expect(findings.find((f) => f.kind === 'placeholder_count')).toMatchObject({
      image: 0,
      expected: run0!.length,
      actual: run1!.length,
      index: run1!.offset,
    });
    expect([run0!.length, run1!.length]).toEqual([80, 35]);
  });
});

describe('GET /rollouts/{id}/events?format=triplet', () => {
  it('reads the trimmed model_request events, ignores other events, takes the reward event', async () => {
    const { trajectories: ts } = await load('events-triplet.json');
    expect(ts.map((t) => [t.id, t.reward, t.model])).toEqual([['ro-42', 1.0, MODEL]]);
    const t = ts[0]!;
    // The trimmed events carry token ids and logprobs only.
    expectTurns(t, conv.clean, { messages: false, text: false, finishReasons: false });
    expect(t.images).toEqual([]);
    expect(t.limitations.join(' ')).toContain('no messages');
    expect((await analyze(t)).findings).toEqual([]);
  });

  it('keeps only the last model_request per identical prompt, as the endpoint does', () => {
    const events = parseJson(fs.readFileSync(fixture('events-triplet.json'), 'utf8')) as {
      event_type: string;
      data: Record<string, unknown>;
    }[];
    const retried = structuredClone(events[0]!);
    retried.data.response_token_ids = conv['choice-b'].trajectory.turns[0]!.generatedIds;
    retried.data.response_log_probs = conv['choice-b'].trajectory.turns[0]!.generatedLogprobs;
    // The first call and then its retry with the same prompt: the first answer is dropped.
    const records = [events[0], retried, ...events.slice(1)].map((value) => ({ line: 1, offset: 0, length: 0, value }));
    const { trajectories, errors } = agentLightningImporter.importRecords(records, fileContext('events.json'));
    expect(errors).toEqual([]);
    expect(trajectories.map((x) => x.turns[0]!.generatedIds)).toContainEqual(
      conv['choice-b'].trajectory.turns[0]!.generatedIds,
    );
    expect(trajectories.flatMap((x) => x.turns.map((turn) => turn.generatedIds))).not.toContainEqual(
      conv.clean.trajectory.turns[0]!.generatedIds,
    );
  });
});

describe('raw model_request events (the gateway stores the vLLM request and response)', () => {
  it('are read like vLLM log lines: messages and images too; failed calls are skipped', () => {
    // The vLLM fixture's calls of one conversation, wrapped as the gateway records them.
    const lines = fs
      .readFileSync(path.join(AGL_DIR, '../vllm/chat-by-id.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => parseJson(l) as Record<string, unknown>);
    const calls = lines.filter((l) => l.trajectory_id === 'geo-clean');
    const event = (data: Record<string, unknown>, i: number) => ({
      event_type: 'model_request',
      rollout_id: 'ro-raw',
      attempt_id: '0',
      timestamp: 1764400000 + i,
      data,
    });
    const values = [
      ...calls.map((c, i) =>
        event({ model: MODEL, request: c.request, response: c.response, http_status: 200, status: 'ok' }, i),
      ),
      event(
        {
          model: MODEL,
          request: calls[0]!.request,
          response: { error: { message: 'overloaded' } },
          http_status: 503,
          status: 'error',
        },
        9,
      ),
      { event_type: 'reward', rollout_id: 'ro-raw', attempt_id: '0', timestamp: 1764400010, data: { value: 1.0 } },
    ];
    const records = values.map((value, i) => ({ line: i + 1, offset: 0, length: 0, value }));
    const { trajectories, errors } = agentLightningImporter.importRecords(records, fileContext('events.jsonl'));
    expect(errors).toEqual([]);
    expect(trajectories.map((t) => [t.id, t.turns.length, t.reward, t.source.lines])).toEqual([
      ['ro-raw', 3, 1.0, [1, 2, 3]],
    ]);
    const t = trajectories[0]!;
    t.turns.forEach((turn, k) => {
      expect(turn.promptIds).toEqual(conv.clean.trajectory.turns[k]!.promptIds);
      expect(turn.generatedIds).toEqual(conv.clean.trajectory.turns[k]!.generatedIds);
      expect(turn.messages).toEqual(resolveUrls(conv.clean.trajectory.turns[k]!.messages as Message[], dataUrls));
    });
    expect(t.images?.map((i) => i.url)).toEqual([dataUrls.triangle, dataUrls.isosceles]);
  });
});

describe('model_request events as the gateway stored them before it assembled streams', () => {
  /** A vLLM chat response as the chunks a streamed call sends (`ChatCompletionStreamResponse`): ids and logprobs split, usage last. */
  const chunksOf = (response: Record<string, unknown>) => {
    const { prompt_token_ids, choices, usage, id, model } = response as {
      prompt_token_ids: number[];
      choices: {
        token_ids: number[];
        message: { content: string };
        logprobs: { content: unknown[] };
        finish_reason: string;
      }[];
      usage: unknown;
      id: string;
      model: string;
    };
    const c = choices[0]!;
    const cut = Math.floor(c.token_ids.length / 2);
    const part = (from: number, to: number, last: boolean) => ({
      index: 0,
      delta: { content: from === 0 ? c.message.content : '' },
      logprobs: { content: c.logprobs.content.slice(from, to) },
      token_ids: c.token_ids.slice(from, to),
      finish_reason: last ? c.finish_reason : null,
    });
    return [
      {
        id,
        model,
        object: 'chat.completion.chunk',
        prompt_token_ids,
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, token_ids: null }],
      },
      { id, model, object: 'chat.completion.chunk', choices: [part(0, cut, false)] },
      { id, model, object: 'chat.completion.chunk', choices: [part(cut, c.token_ids.length, true)] },
      { id, model, object: 'chat.completion.chunk', choices: [], usage },
    ];
  };
  const geoClean = () =>
    fs
      .readFileSync(path.join(AGL_DIR, '../vllm/chat-by-id.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => parseJson(l) as Record<string, unknown>)
      .filter((l) => l.trajectory_id === 'geo-clean');
  const event = (data: Record<string, unknown>, i: number) => ({
    event_type: 'model_request',
    rollout_id: 'ro-stream',
    attempt_id: '0',
    timestamp: 1764400000 + i,
    data,
  });

  it('a response that is the list of a streamed call’s chunks is read as the call it adds up to (events.py "legacy raw-chunk format")', () => {
    const values = geoClean().map((c, i) =>
      event(
        {
          model: MODEL,
          request: c.request,
          response: chunksOf(c.response as Record<string, unknown>),
          http_status: 200,
          status: 'ok',
        },
        i,
      ),
    );
    const records = values.map((value, i) => ({ line: i + 1, offset: 0, length: 0, value }));
    const { trajectories, errors } = agentLightningImporter.importRecords(records, fileContext('events.jsonl'));
    expect(errors).toEqual([]);
    expect(trajectories.map((t) => [t.id, t.turns.length])).toEqual([['ro-stream', 3]]);
    trajectories[0]!.turns.forEach((turn, k) => {
      const want = conv.clean.trajectory.turns[k]!;
      expect(turn.promptIds).toEqual(want.promptIds);
      expect(turn.generatedIds).toEqual(want.generatedIds);
      expect(turn.generatedLogprobs).toEqual(want.generatedLogprobs);
      expect(turn.finishReason).toBe(want.finishReason);
    });
  });

  it('a trimmed call without token ids is no sample (the rollout manager skips it): a read error, not a turn that splits the rollout', async () => {
    const events = parseJson(fs.readFileSync(fixture('events-triplet.json'), 'utf8')) as Record<string, unknown>[];
    // A call answered without return_token_ids, trimmed to empty lists, before the rollout's calls.
    const empty = {
      event_type: 'model_request',
      rollout_id: 'ro-42',
      attempt_id: '0',
      timestamp: 1764399999,
      data: {
        prompt_token_ids: [],
        response_token_ids: [],
        response_log_probs: null,
        server: { model: MODEL, version: 3 },
      },
    };
    const records = [empty, ...events].map((value, i) => ({ line: i + 1, offset: 0, length: 0, value }));
    const { trajectories, errors } = agentLightningImporter.importRecords(records, fileContext('events.jsonl'));
    expect(errors).toEqual([expect.objectContaining({ line: 1, field: 'data.response_token_ids' })]);
    expect(errors[0]!.message).toMatch(/empty.*return_token_ids/);
    expect(trajectories.map((t) => t.id)).toEqual(['ro-42']);
    expectTurns(Trajectory.parse(trajectories[0]!), conv.clean, { messages: false, text: false, finishReasons: false });
    expect(trajectories[0]!.sourceFindings ?? []).toEqual([]);
  });
});

describe('raw model_request events of an agent that sends tools', () => {
  it('keep the request’s tools on the turn (the chat template renders them), as vLLM logs do', async () => {
    const file = path.join(AGL_DIR, '../vllm/tool-calls.jsonl');
    const lines = fs
      .readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => parseJson(l) as { trajectory_id?: string; request: Record<string, unknown>; response: unknown })
      .filter((l) => l.trajectory_id === 'tools-qwen2.5-vl');
    const values = lines.map((l, i) => ({
      event_type: 'model_request',
      rollout_id: 'ro-tools',
      attempt_id: '0',
      timestamp: 1764400000 + i,
      data: { model: l.request.model, request: l.request, response: l.response, http_status: 200, status: 'ok' },
    }));
    const records = values.map((value, i) => ({ line: i + 1, offset: 0, length: 0, value }));
    const { trajectories, errors } = agentLightningImporter.importRecords(records, fileContext('events.jsonl'));
    expect(errors).toEqual([]);
    expect(trajectories[0]!.turns.map((t) => t.tools)).toEqual(lines.map((l) => l.request.tools));
    // The same calls as a vLLM log check the same.
    const asVllm = (await importerRun(file)).loaded.trajectories.find((t) => t.id === 'tools-qwen2.5-vl')!;
    const [mine, theirs] = await Promise.all(
      [Trajectory.parse(trajectories[0]!), asVllm].map((t) => analyzeTrajectory(t, {}, [path.dirname(file)])),
    );
    expect(mine!.findings.map((f) => f.kind)).toEqual(theirs!.findings.map((f) => f.kind));
  });
});

describe('CompletedRollout lines (current generation)', () => {
  it('one trajectory per rollout, image_urls once each, final reward; the retokenized sibling is attached by tokens alone and found', async () => {
    const { trajectories: ts } = await load('completed-rollouts.jsonl');
    expect(ts.map((t) => [t.id, t.source.line, t.reward, t.meta?.attachedAfterBreak])).toEqual([
      ['ro-clean', 1, 1.0, undefined],
      ['ro-sibling', 2, 0.0, [1]],
    ]);
    const clean = byId(ts, 'ro-clean');
    expectTurns(clean, conv.clean, { messages: false, text: false });
    expect(clean.model).toBe(MODEL);
    expect(clean.images.map((i) => i.url)).toEqual([dataUrls.triangle, dataUrls.isosceles]);
    expect((await analyze(clean)).findings).toEqual([]);

    const sibling = byId(ts, 'ro-sibling');
    expectTurns(sibling, conv['sibling-retokenized'], { messages: false, text: false });
    const t0 = sibling.turns[0]!;
    const context = [...t0.promptIds!, ...t0.generatedIds!];
    const at = sibling.turns[1]!.promptIds!.findIndex((id, i) => i < context.length && id !== context[i]);
    expect(at).toBeGreaterThanOrEqual(t0.promptIds!.length);
    expect((await analyze(sibling)).findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'retokenized',
      turn: 1,
      index: at,
    });
  });
});

describe('a CompletedRollout as the rollout manager writes it: token-only triplets, raw events beside them', () => {
  /** `_build_completed_rollout`: triplets of ids only, `events` the raw model_request events of the attempt. */
  const rolloutOf = (swapImages = false) => {
    const calls = fs
      .readFileSync(path.join(AGL_DIR, '../vllm/chat-by-id.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map(
        (l) =>
          parseJson(l) as {
            trajectory_id: string;
            request: Record<string, unknown>;
            response: Record<string, unknown>;
          },
      )
      .filter((l) => l.trajectory_id === 'geo-clean');
    const text = (v: unknown) => JSON.stringify(v);
    const events = calls.map((c, i) => ({
      event_type: 'model_request',
      rollout_id: 'ro-real',
      attempt_id: 'a0',
      timestamp: 1764400000 + i,
      data: {
        model: MODEL,
        // The isosceles in place of the triangle: images of other sizes than the pads were expanded for.
        request: swapImages ? JSON.parse(text(c.request).replaceAll(dataUrls.triangle, dataUrls.isosceles)) : c.request,
        response: c.response,
        server: { model: MODEL, version: 3 },
        http_status: 200,
        status: 'ok',
      },
    }));
    const triplets = conv.clean.trajectory.turns.map((t, k) => ({
      prompt: { token_ids: t.promptIds },
      response: { token_ids: t.generatedIds, log_probs: t.generatedLogprobs },
      reward: k === conv.clean.trajectory.turns.length - 1 ? 1 : null,
      metadata: { server: { model: MODEL, version: 3 } },
    }));
    return { rollout_id: 'ro-real', data_id: 'd-1', step: 3, final_reward: 1, triplets, events, triplet_events: [] };
  };
  const read = (value: unknown) =>
    agentLightningImporter.importRecords(
      [{ line: 1, offset: 0, length: 0, value }],
      fileContext(fixture('real.jsonl')),
    );

  it('each triplet takes the messages (so the images) of its own call’s event; the conversation checks clean', async () => {
    const { trajectories, errors } = read(rolloutOf());
    expect(errors).toEqual([]);
    const t = Trajectory.parse(trajectories[0]!);
    t.turns.forEach((turn, k) => {
      const want = conv.clean.trajectory.turns[k]!;
      expect(turn.promptIds).toEqual(want.promptIds);
      expect(turn.generatedIds).toEqual(want.generatedIds);
      expect(turn.messages).toEqual(resolveUrls(want.messages as Message[], dataUrls));
    });
    expect(t.images.map((i) => i.url)).toEqual([dataUrls.triangle, dataUrls.isosceles]);
    const checked = await analyzeTrajectory(t, {}, [AGL_DIR]);
    expect(checked.findings).toEqual([]);
  });

  it('so an image that is not the one the pads were expanded for is found', async () => {
    const t = Trajectory.parse(read(rolloutOf(true)).trajectories[0]!);
    const checked = await analyzeTrajectory(t, {}, [AGL_DIR]);
    expect(checked.findings.map((f) => f.kind)).toContain('placeholder_count');
  });
});

describe('GRPO groups and attempts', () => {
  it('a rollout carries the data_id its sample’s rollouts share, and a CompletedRollout its step', async () => {
    const { trajectories: ts } = await load('completed-rollouts.jsonl');
    expect(ts.map((t) => [t.id, t.group, t.step])).toEqual([
      ['ro-clean', 'geo-1', 7],
      ['ro-sibling', 'geo-1', 7],
    ]);
    const grouped = await load('grouped-rollouts.jsonl');
    expect(grouped.errors).toEqual([]);
    expect(grouped.trajectories.map((t) => [t.id, t.group, t.step ?? null, t.reward])).toEqual([
      ['ro-a0', 'task-a', 7, 1],
      ['ro-a1', 'task-a', 7, 1],
      ['ro-a2', 'task-a', 7, 1],
      ['ro-b0', 'task-b', 7, 1],
      ['ro-b1', 'task-b', 7, 0],
      // v0.2 rollouts: the task's metadata (and input) hold it; no step is stated.
      ['ro-c0', 'task-c', null, 0.5],
      ['ro-c1', 'task-c', null, 0.5],
    ]);
    expectTurns(byId(grouped.trajectories, 'ro-a1'), conv['grpo-b'], { messages: false, text: false });
    expectTurns(byId(grouped.trajectories, 'ro-c1'), conv['fork-b']);
  });

  it('a retried rollout: each attempt is a trajectory of its own, only the last one (the one trained) in the group', async () => {
    const { trajectories: ts, errors } = await load('retried-rollout.jsonl');
    expect(errors).toEqual([]);
    expect(ts.map((t) => [t.id, t.group ?? null, t.turns.length, t.meta?.attempt ?? null])).toEqual([
      ['ro-retry (attempt attempt-0)', null, 1, 'attempt-0'],
      ['ro-retry (attempt attempt-1)', 'task-r', 2, 'attempt-1'],
      ['ro-sibling-r', 'task-r', 2, null],
    ]);
    const first = byId(ts, 'ro-retry (attempt attempt-0)');
    expect(first.limitations).toContainEqual(
      expect.stringContaining('attempt attempt-0 of rollout ro-retry was retried'),
    );
    // Two attempts are two episodes: the retry's first call is no chain split of the first attempt.
    for (const t of ts) expect((await analyze(t)).findings, t.id).toEqual([]);
    expectTurns(byId(ts, 'ro-retry (attempt attempt-1)'), conv['fork-a'], {
      messages: false,
      text: false,
      finishReasons: false,
    });
  });
});

describe('malformed records', () => {
  it('name the file, line and field; the rest loads', async () => {
    const file = fixture('malformed.jsonl');
    const { trajectories: ts, errors } = await load('malformed.jsonl');
    // Ids written as strings are bad values (invalid_value at their index), not read errors.
    expect(errors.map((e) => [e.file, e.line])).toEqual([2, 4].map((line) => [file, line]));
    expect(errors.slice(1).map((e) => e.field)).toEqual(['response']);
    expect(errors[0]!.message).toMatch(/not valid JSON/);
    expect(errors[1]!.message).toMatch(/missing/);
    // The rollout with a bad id keeps both triplets; the trimmed event of the last line loads too.
    expect(ts.map((t) => [t.id, t.turns.length])).toEqual([
      ['line 1', 1],
      ['line 3', 1],
      ['ro-bad', 2],
      ['line 6', 1],
    ]);
    expect(Number.isNaN(byId(ts, 'line 3').turns[0]!.promptIds![2])).toBe(true);
    expect(byId(ts, 'line 6').turns[0]!.generatedIds).toEqual(conv['choice-b'].trajectory.turns[0]!.generatedIds);
  });

  it('a file in another format is not taken for Agent Lightning', () => {
    expect(agentLightningImporter.sniff({ request: {}, response: { choices: [] } })).not.toBe(true);
    expect(agentLightningImporter.sniff({ tokens: [1], response_length: 1 })).not.toBe(true);
  });
});
