// vLLM call logs: every fixture through the importer harness (detection, model integrity, file
// snapshot, native round trip), then imported and checked field by field against the
// conversations the generator built with the real tokenizer and template; the planted faults
// found by the core checks at the right token; bad lines reported by file, line and field.
import fs from 'node:fs';
import { fileContext } from '../server/import/importer.ts';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { padRuns } from '../server/analysis/vision-spans.ts';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { chainCalls } from '../server/import/chain.ts';
import { vllmImporter } from '../server/import/vllm.ts';
import type { Message, Trajectory } from '../server/model/trajectory.ts';
import {
  buildConversations,
  dataUrl,
  fixtureImages,
  IMAGE_SIZES,
  resolveUrls,
  SMALL_MAX_PIXELS,
  VLLM_DIR,
  type Conversation,
  type ConversationName,
  type ImageName,
} from './fixtures/generate-vllm.ts';
import { checkImporterSnapshot, importerRun } from './support/importer-harness.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const { eos: EOS, imStart: IM_START, imagePad: PAD } = qwenNamed(profile.ids);
let conv: Record<ConversationName, Conversation>;
let urls: Record<ImageName, string>;

beforeAll(async () => {
  conv = await buildConversations(profile);
  const images = await fixtureImages();
  urls = { triangle: dataUrl(images.triangle), isosceles: dataUrl(images.isosceles) };
}, 60_000);

const fixture = (name: string) => path.join(VLLM_DIR, name);
/** The file as `loadFile` reads it (loaded and checked once, shared with the harness). */
const load = async (name: string) => (await importerRun(fixture(name))).loaded;
const byId = (ts: readonly Trajectory[], id: string) => {
  const t = ts.find((x) => x.id === id);
  if (!t) throw new Error(`no trajectory "${id}" among ${ts.map((x) => x.id).join(', ')}`);
  return t;
};
/** The pipeline's analysis of a loaded trajectory, from the same run. */
const analyze = async (t: Trajectory) => (await importerRun(t.source.file)).byId(t.id);

describe('every vLLM fixture through the importer harness', () => {
  it.each([
    'chat-by-id.jsonl',
    'chat-chained.jsonl',
    'completions.jsonl',
    'token-ids-as-strings.jsonl',
    'tito.jsonl',
    'n-samples.jsonl',
    'malformed.jsonl',
    'tool-calls.jsonl',
  ])('%s', async (name) => {
    await checkImporterSnapshot(fixture(name), { format: 'vllm' });
  });
});

/** Imported turns against the generator's: ids, logprobs, finish reasons, answer text, messages. */
function expectTurns(
  t: Trajectory,
  c: Conversation,
  opts: { prompts?: boolean; messages?: boolean; text?: boolean } = {},
) {
  expect(t.turns).toHaveLength(c.trajectory.turns.length);
  t.turns.forEach((turn, k) => {
    const want = c.trajectory.turns[k]!;
    if (opts.prompts ?? true) expect(turn.promptIds).toEqual(want.promptIds);
    else expect(turn.promptIds).toBeUndefined();
    expect(turn.generatedIds).toEqual(want.generatedIds);
    expect(turn.generatedLogprobs).toEqual(want.generatedLogprobs);
    expect(turn.finishReason).toBe(want.finishReason);
    expect(turn.generatedText).toBe((opts.text ?? true) ? c.answers[k] : undefined);
    if (opts.messages ?? true) expect(turn.messages).toEqual(resolveUrls(want.messages as Message[], urls));
    else expect(turn.messages).toBeUndefined();
  });
}

/** First token after turn 0's prompt ⧺ generated ids: where the boundary to turn 1 starts. */
const boundaryAt = (t: Trajectory) => t.turns[0]!.promptIds!.length + t.turns[0]!.generatedIds!.length;

describe('chat completions grouped by the ids the logger added', () => {
  it('three interleaved conversations become three trajectories, each by its own id field', async () => {
    const { trajectories: ts } = await load('chat-by-id.jsonl');
    expect(ts.map((t) => [t.id, t.source.line, t.source.lines, t.meta?.groupedBy])).toEqual([
      ['geo-clean', 1, [1, 4, 7], 'trajectory_id'],
      ['sess-dup-eos', 2, [2, 5], 'request.metadata.session_id'],
      ['ro-wrong-pads', 3, [3, 6], 'request.extra_body.rollout_id'],
    ]);
    for (const t of ts) {
      expect(t.source).toMatchObject({ file: fixture('chat-by-id.jsonl'), format: 'vllm' });
      expect(t.model).toBe('Qwen/Qwen2.5-VL-7B-Instruct');
    }
  });

  it('reads prompt ids, generated ids, logprobs, finish reasons, text and messages; images once each, in order', async () => {
    const { trajectories: ts } = await load('chat-by-id.jsonl');
    const clean = byId(ts, 'geo-clean');
    expectTurns(clean, conv.clean);
    // Turn 2's messages repeat both images; the trajectory holds each once.
    expect(
      clean.turns[2]!.messages!.flatMap((m) =>
        Array.isArray(m.content) ? m.content.filter((p) => typeof p !== 'string' && p.type === 'image_url') : [],
      ),
    ).toHaveLength(2);
    expect(clean.images.map((i) => i.url)).toEqual([urls.triangle, urls.isosceles]);
    expectTurns(byId(ts, 'sess-dup-eos'), conv['duplicated-eos']);
    expectTurns(byId(ts, 'ro-wrong-pads'), conv['wrong-pads']);
  });

  it('mm_processor_kwargs becomes the turn processor', async () => {
    const { trajectories: ts } = await load('chat-by-id.jsonl');
    const pads = byId(ts, 'ro-wrong-pads');
    expect(pads.turns[0]!.processor).toBeUndefined();
    expect(pads.turns[1]!.processor).toEqual({ maxPixels: SMALL_MAX_PIXELS });
  });

  it('clean has no findings; the duplicated <|im_end|> and the wrong pad count are prefix breaks at the token where they start', async () => {
    const { trajectories: ts } = await load('chat-by-id.jsonl');
    const clean = await analyze(byId(ts, 'geo-clean'));
    expect(clean.findings).toEqual([]);
    // Sizes come from the PNG bytes behind the data: URLs.
    expect(clean.trajectory.images.map((i) => [i.width, i.height, i.sizeFrom])).toEqual([
      [IMAGE_SIZES.triangle.width, IMAGE_SIZES.triangle.height, 'bytes'],
      [IMAGE_SIZES.isosceles.width, IMAGE_SIZES.isosceles.height, 'bytes'],
    ]);

    const dup = byId(ts, 'sess-dup-eos');
    const at = boundaryAt(dup);
    const p1 = dup.turns[1]!.promptIds!;
    expect([p1[at - 1], p1[at]]).toEqual([EOS, EOS]);
    const dupFindings = (await analyze(dup)).findings;
    expect(dupFindings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'duplicated_eos',
      severity: 'error',
      turn: 1,
      index: at,
      stream: 'prompt',
    });

    const pads = byId(ts, 'ro-wrong-pads');
    const [run0] = padRuns(pads.turns[0]!.promptIds!, profile.ids);
    const [run1] = padRuns(pads.turns[1]!.promptIds!, profile.ids);
    expect([run0!.length, run1!.length]).toEqual([80, 35]);
    expect(run1!.offset).toBe(run0!.offset);
    const padFindings = (await analyze(pads)).findings;
    expect(padFindings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'image_tokens_changed',
      turn: 1,
      index: run1!.offset + 35,
    });
  });
});

describe('chat completions without ids: prefix chaining', () => {
  it('chains calls whose prompt extends an earlier prompt ⧺ generation; n = 2 gives one trajectory per choice', async () => {
    const { trajectories: ts } = await load('chat-chained.jsonl');
    expect(ts.map((t) => [t.id, t.source.lines ?? [t.source.line], t.turns.length, t.meta?.groupedBy])).toEqual([
      ['line 1', [1, 6, 8], 3, 'prefix chain'],
      ['line 2', [2, 4], 2, 'prefix chain'],
      ['line 3', [3, 7], 2, 'prefix chain'],
      ['line 5#0', [5], 1, 'single call'],
      ['line 5#1', [5], 1, 'single call'],
    ]);
    expectTurns(byId(ts, 'line 1'), conv.clean);
    expectTurns(byId(ts, 'line 2'), conv['sibling-retokenized']);
    expectTurns(byId(ts, 'line 3'), conv['missing-newline']);
    expectTurns(byId(ts, 'line 5#0'), conv['choice-a']);
    expectTurns(byId(ts, 'line 5#1'), conv['choice-b']);
  });

  it('attaches the GRPO sibling whose second prompt breaks the chain, to its own first call, and the check reports the break', async () => {
    const { trajectories: ts } = await load('chat-chained.jsonl');
    const sibling = byId(ts, 'line 2');
    // The sibling shares the initial prompt with "line 1", and its second call came while both chains were open.
    expect(sibling.turns[0]!.promptIds).toEqual(byId(ts, 'line 1').turns[0]!.promptIds);
    expect(sibling.meta?.attachedAfterBreak).toEqual([1]);
    const t0 = sibling.turns[0]!;
    const p1 = sibling.turns[1]!.promptIds!;
    const contextLength = t0.promptIds!.length + t0.generatedIds!.length;
    const at = p1.findIndex((id, i) => i < contextLength && id !== [...t0.promptIds!, ...t0.generatedIds!][i]);
    expect(at).toBeGreaterThanOrEqual(t0.promptIds!.length);
    const findings = (await analyze(sibling)).findings;
    expect(findings.find((f) => f.kind === 'prefix_break')).toMatchObject({ cause: 'retokenized', turn: 1, index: at });

    const newline = byId(ts, 'line 3');
    const nAt = boundaryAt(newline);
    expect(newline.meta?.attachedAfterBreak).toBeUndefined(); // Agent Lightning's strict rule still holds here.
    expect(newline.turns[1]!.promptIds!.slice(nAt - 1, nAt + 1)).toEqual([EOS, IM_START]);
    expect((await analyze(newline)).findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'missing_newline',
      turn: 1,
      index: nAt,
    });

    for (const id of ['line 1', 'line 5#0', 'line 5#1']) expect((await analyze(byId(ts, id))).findings).toEqual([]);
  });

  it('`rollscope check --json` on the log keeps the documented contract', () => {
    const r = spawnSync(process.execPath, ['bin/rollscope.js', 'check', fixture('chat-chained.jsonl'), '--json'], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(1);
    const report = CheckReport.parse(JSON.parse(r.stdout));
    expect(report.trajectories.map((t) => [t.id, t.format, t.profile])).toEqual(
      ['line 1', 'line 2', 'line 3', 'line 5#0', 'line 5#1'].map((id) => [id, 'vllm', 'qwen2.5-vl']),
    );
    expect(report.errors).toEqual([]);
    expect(report.summary).toMatchObject({ trajectories: 5, clean: 3, withErrors: 2, unreadableRecords: 0 });
    expect(report.summary.findingsByKind.prefix_break).toBe(2);
    expect(report.trajectories[1]!.findings).toContainEqual(
      expect.objectContaining({ kind: 'prefix_break', cause: 'retokenized', turn: 1 }),
    );
  });
});

describe('n > 1: the choices of one request are samples of one group', () => {
  it('a session forked at its first call: one trajectory per choice, each later call on the branch whose answer it continues', async () => {
    const { trajectories: ts } = await load('n-samples.jsonl');
    const session = ts.filter((t) => t.id.startsWith('sess-grpo'));
    // The second calls came in the order b, a, c (lines 2, 3, 4).
    expect(session.map((t) => [t.id, t.source.lines, t.group, t.reward])).toEqual([
      ['sess-grpo#0', [1, 3], 'sess-grpo call 0', 1],
      ['sess-grpo#1', [1, 2], 'sess-grpo call 0', 0],
      ['sess-grpo#2', [1, 4], 'sess-grpo call 0', 1],
    ]);
    expectTurns(byId(ts, 'sess-grpo#0'), conv['grpo-a']);
    expectTurns(byId(ts, 'sess-grpo#1'), conv['grpo-b']);
    expectTurns(byId(ts, 'sess-grpo#2'), conv['grpo-c']);
    for (const t of session) expect((await analyze(t)).findings, t.id).toEqual([]);
  });

  it('without a session: the request’s id is the group; a fork at a later call gives each sample the history', async () => {
    const { trajectories: ts } = await load('n-samples.jsonl');
    const lines = fs
      .readFileSync(fixture('n-samples.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { response: { id: string } });
    expect(['line 5#0', 'line 5#1'].map((id) => byId(ts, id).group)).toEqual([
      lines[4]!.response.id,
      lines[4]!.response.id,
    ]);
    expectTurns(byId(ts, 'line 5#0'), conv['choice-a']);
    expectTurns(byId(ts, 'line 5#1'), conv['choice-b']);
    // Forked at its second call (line 7): both samples hold the first call (line 6).
    expect(['line 6#0', 'line 6#1'].map((id) => [byId(ts, id).source.lines, byId(ts, id).group])).toEqual([
      [[6, 7], lines[6]!.response.id],
      [[6, 7], lines[6]!.response.id],
    ]);
    expectTurns(byId(ts, 'line 6#0'), conv['fork-a']);
    expectTurns(byId(ts, 'line 6#1'), conv['fork-b']);
    // A completions batch answers two prompts: no group, and its usage (both prompts) is no one call's.
    for (const id of ['line 8#0', 'line 8#1']) {
      expect(byId(ts, id).group, id).toBeUndefined();
      expect(byId(ts, id).turns[0]!.statedPromptTokens, id).toBeUndefined();
      expect((await analyze(byId(ts, id))).findings, id).toEqual([]);
    }
  });

  it('identical samples: a later call that continues several equally goes to the first and each candidate says so', () => {
    const [fork, , a] = fs
      .readFileSync(fixture('n-samples.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { response: { choices: Record<string, unknown>[] } });
    const twins = structuredClone(fork!);
    twins.response.choices = [0, 1].map((index) => ({ ...fork!.response.choices[0]!, index }));
    const { trajectories: ts, errors } = vllmImporter.importRecords(
      [twins, a].map((value, i) => ({ line: i + 1, offset: 0, length: 0, value })),
      fileContext('twins.jsonl'),
    );
    expect(errors).toEqual([]);
    expect(ts.map((t) => [t.id, t.source.lines ?? [t.source.line]])).toEqual([
      ['sess-grpo#0', [1, 2]],
      ['sess-grpo#1', [1]],
    ]);
    expect(ts.map((t) => t.sourceFindings?.map((f) => [f.kind, f.turn, f.actual]))).toEqual([
      [['grouping_ambiguous', 1, { line: 2, alsoContinues: [1] }]],
      [['grouping_ambiguous', 0, { line: 2, alsoContinues: [1] }]],
    ]);
    expect(ts[1]!.sourceFindings![0]!.message).toContain('continues this sample and sample 0 of the request on line 1');
  });

  // Issue 30's counterexample (fuzz seed 196499190): a copy of ro-wrong-pads' first call with its
  // choice duplicated (n = 2) written before the rollout. The fork used to leave the rollout's own
  // calls continuing no branch, each a one-turn trajectory: the planted pad break vanished.
  it('a resampled first call with the rollout’s id: the rollout keeps its turns and its break is still found', async () => {
    const text = fs.readFileSync(fixture('chat-by-id.jsonl'), 'utf8').trim().split('\n');
    const first = JSON.parse(text[2]!) as { response: { choices: unknown[] } };
    first.response.choices = [first.response.choices[0], first.response.choices[0]];
    const lines = [JSON.stringify(first), ...text];
    const { trajectories: ts, errors } = vllmImporter.importRecords(
      lines.map((l, i) => ({ line: i + 1, offset: 0, length: 0, value: JSON.parse(l) })),
      fileContext('resampled.jsonl'),
    );
    expect(errors).toEqual([]);
    const rollout = ts.filter((t) => t.id.startsWith('ro-wrong-pads'));
    // Lines 4 and 7 are the rollout's own two calls: the second stays on a branch with a first call.
    const second = rollout.find((t) => (t.source.lines ?? [t.source.line]).includes(7))!;
    expect(second.turns).toHaveLength(2);
    expect(rollout.every((t) => t.turns.length >= 1 && t.source.line !== 7)).toBe(true);
    // Its break is still checked: the second prompt has 35 pads where the first had 80.
    const { analyzeTrajectory } = await import('../server/pipeline/analyze.ts');
    const checked = await analyzeTrajectory(second as Trajectory, {}, [VLLM_DIR]);
    expect(checked.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'image_tokens_changed',
      turn: 1,
    });
    // The resampled call's own copy of the rollout's first prompt starts a branch beside it.
    expect(rollout.map((t) => t.source.lines ?? [t.source.line])).toEqual([[1, 7], [1], [4]]);
  });

  it('check --json: the group of two samples with the same reward is flagged, on the group and on both samples', async () => {
    let text = '';
    const status = await runCheck(
      [fixture('n-samples.jsonl')],
      { json: true, workers: 0 },
      { write: (t) => (text += t) },
    );
    expect(status).toBe(0);
    const report = CheckReport.parse(JSON.parse(text));
    const flagged = report.groups.filter((g) => g.findings.length > 0);
    expect(flagged.map((g) => [g.size, g.degenerate, g.findings.map((f) => (f as { field: string }).field)])).toEqual([
      [2, true, ['reward']],
    ]);
    expect(report.trajectories.filter((t) => t.findings.length > 0).map((t) => t.id)).toEqual(['line 5#0', 'line 5#1']);
    expect(report.groups.map((g) => g.size)).toEqual([3, 2, 2]);
  });
});

describe('completions', () => {
  it('reads prompt and generated ids inside each choice and the legacy logprobs; chained, clean', async () => {
    const { trajectories: ts } = await load('completions.jsonl');
    expect(ts).toHaveLength(1);
    expect(ts[0]!.source.lines).toEqual([1, 2]);
    expectTurns(ts[0]!, conv.text, { messages: false });
    expect(ts[0]!.images).toEqual([]);
    expect((await analyze(ts[0]!)).findings).toEqual([]);
  });
});

describe('streamed calls (stream: true): the response is the list of chunks', () => {
  it('a completions stream adds up per choice index: ids, logprobs, text, the last finish_reason', () => {
    const lines = fs
      .readFileSync(path.join(VLLM_DIR, 'completions.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { request: unknown; response: { choices: Record<string, unknown>[] } });
    // Each completions choice as two chunks (`CompletionStreamResponse`), interleaved with a second
    // choice (n = 2) whose chunks carry the same pieces: the index keeps them apart.
    const stream = (choice: Record<string, unknown>) => {
      const ids = choice.token_ids as number[];
      const lp = choice.logprobs as { tokens: string[]; token_logprobs: number[] };
      const cut = Math.floor(ids.length / 2);
      const piece = (index: number, from: number, to: number, last: boolean) => ({
        index,
        text: from === 0 ? choice.text : '',
        ...(from === 0 ? { prompt_token_ids: choice.prompt_token_ids } : {}),
        token_ids: ids.slice(from, to),
        logprobs: { tokens: lp.tokens.slice(from, to), token_logprobs: lp.token_logprobs.slice(from, to) },
        finish_reason: last ? choice.finish_reason : null,
      });
      return [
        { id: 'cmpl-s', object: 'text_completion', choices: [piece(0, 0, cut, false), piece(1, 0, cut, false)] },
        { id: 'cmpl-s', object: 'text_completion', choices: [piece(1, cut, ids.length, true)] },
        { id: 'cmpl-s', object: 'text_completion', choices: [piece(0, cut, ids.length, true)] },
        { id: 'cmpl-s', object: 'text_completion', choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } },
      ];
    };
    const value = { request: lines[0]!.request, response: stream(lines[0]!.response.choices[0]!) };
    expect(vllmImporter.sniff(value)).toBe(true);
    const { trajectories, errors } = vllmImporter.importRecords(
      [{ line: 1, offset: 0, length: 0, value }],
      fileContext('stream.jsonl'),
    );
    expect(errors).toEqual([]);
    const want = conv.text.trajectory.turns[0]!;
    expect(trajectories).toHaveLength(2);
    for (const t of trajectories) {
      expect(t.turns[0]!.promptIds).toEqual(want.promptIds);
      expect(t.turns[0]!.generatedIds).toEqual(want.generatedIds);
      expect(t.turns[0]!.generatedLogprobs).toEqual(want.generatedLogprobs);
      expect(t.turns[0]!.finishReason).toBe(lines[0]!.response.choices[0]!.finish_reason);
    }
  });
});

describe('return_tokens_as_token_ids', () => {
  it('takes the generated ids from "token_id:N" logprob tokens; no prompt ids, so the prompt is rendered with the stated max_pixels', async () => {
    const { trajectories: ts } = await load('token-ids-as-strings.jsonl');
    expect(ts.map((t) => [t.id, t.meta?.groupedBy])).toEqual([['ro-token-strings', 'metadata.rollout_id']]);
    const t = ts[0]!;
    expectTurns(t, conv.truncated, { prompts: false });
    expect(t.turns.map((x) => x.processor)).toEqual([{ maxPixels: SMALL_MAX_PIXELS }, { maxPixels: SMALL_MAX_PIXELS }]);
    expect(t.turns[0]!.finishReason).toBe('length');
    expect(t.turns[0]!.generatedIds!.at(-1)).not.toBe(EOS);
    expect(t.limitations.join(' ')).toContain('prompt_token_ids');
    const checked = await analyze(t);
    expect(checked.findings).toEqual([]);
    expect(checked.alignment.promptFrom).toBe('render');
    expect(checked.alignment.tokens.filter((x) => x === PAD)).toHaveLength(35);
  });
});

describe('token-in/token-out: render result + /inference/v1/generate', () => {
  it('reads GenerateRequest ids and features.mm_placeholders, and the [conversation, engine_prompts] variant', async () => {
    const { trajectories: ts } = await load('tito.jsonl');
    expect(ts.map((t) => [t.id, t.source.lines])).toEqual([
      ['line 1', [1, 3, 5]],
      ['line 2', [2, 4]],
    ]);
    const [flat, list] = ts as [Trajectory, Trajectory];
    // /inference/v1/generate returns ids, not text.
    expectTurns(flat, conv.clean, { text: false });
    expectTurns(list, conv['render-list'], { text: false });
    for (const t of ts) {
      for (const turn of t.turns) expect(turn.placeholders).toEqual(padRuns(turn.promptIds!, profile.ids));
    }
    expect(flat.turns[2]!.placeholders).toHaveLength(2);
    expect(flat.images.map((i) => i.url)).toEqual([urls.triangle, urls.isosceles]);
    expect(list.images.map((i) => i.url)).toEqual([urls.isosceles]);
    for (const t of ts) expect((await analyze(t)).findings).toEqual([]);
  });
});

describe('malformed lines', () => {
  it('name the file, line and field; the good lines still load', async () => {
    const file = fixture('malformed.jsonl');
    const { trajectories: ts, errors } = await load('malformed.jsonl');
    // A token id written as a string is a bad value (invalid_value at its index), not a read error.
    expect(ts.map((t) => [t.id, t.source.line])).toEqual([
      ['ok-1', 1],
      ['bad-ids', 3],
      ['ok-2', 5],
    ]);
    expect(Number.isNaN(byId(ts, 'bad-ids').turns[0]!.generatedIds![5])).toBe(true);
    expect(errors.map((e) => [e.file, e.line])).toEqual([
      [file, 2],
      [file, 4],
    ]);
    expect(errors[0]!.message).toMatch(/not valid JSON/);
    expect(errors[1]).toMatchObject({ field: 'response' });
    expect(errors[1]!.message).toMatch(/missing/);
    expectTurns(byId(ts, 'ok-1'), conv.single);
  });
});

describe('request fields kept for the analysis', () => {
  it('keeps request.tools on the turn (the template renders them) and reads mm_processor_kwargs.size', () => {
    const tools = [
      {
        type: 'function',
        function: { name: 'zoom', parameters: { type: 'object', properties: { box: { type: 'array' } } } },
      },
    ];
    const record = {
      trajectory_id: 't',
      request: {
        model: 'Qwen/Qwen3-VL-8B-Instruct',
        messages: [{ role: 'user', content: 'hi' }],
        tools,
        mm_processor_kwargs: { size: { shortest_edge: 65536, longest_edge: 1048576 } },
      },
      response: {
        prompt_token_ids: [151644, 872, 198],
        choices: [{ index: 0, token_ids: [9707, 151645], finish_reason: 'stop', message: { content: 'Hello' } }],
      },
    };
    const { trajectories, errors } = vllmImporter.importRecords(
      [{ line: 1, offset: 0, length: 0, value: record }],
      fileContext('x.jsonl'),
    );
    expect(errors).toEqual([]);
    expect(trajectories[0]!.turns[0]!.tools).toEqual(tools);
    expect(trajectories[0]!.turns[0]!.processor).toEqual({ minPixels: 65536, maxPixels: 1048576 });
    expect(trajectories[0]!.model).toBe('Qwen/Qwen3-VL-8B-Instruct');
  });

  it('an error response (a failed call) is skipped, not read as a broken record', () => {
    const record = {
      trajectory_id: 't',
      request: { model: 'm', messages: [] },
      response: { object: 'error', message: 'The model is overloaded', code: 503 },
    };
    expect(
      vllmImporter.importRecords([{ line: 1, offset: 0, length: 0, value: record }], fileContext('x.jsonl')),
    ).toEqual({ trajectories: [], errors: [] });
  });
});

describe('chainCalls', () => {
  // Token ids below are arbitrary; what matters is which sequences extend which.
  const call = (promptIds: number[], generatedIds: number[], messages?: unknown[], answerText?: string) => ({
    promptIds,
    generatedIds,
    messages,
    answerText,
  });

  it('strict rule: the longest context wins; identical prompts (GRPO samples, retries) start chains of their own', () => {
    const chains = chainCalls([
      call([1, 2, 3], [4, 5]),
      call([1, 2, 3], [4, 6]), // same prompt, another sample
      call([1, 2, 3, 4, 5, 9], [7]), // extends the first
      call([1, 2, 3, 4, 6, 9], [8]), // extends the second
      call([1, 2, 3, 4, 5, 9, 7, 9], [1]), // extends the first again (longest context)
      call([1, 2, 3, 4, 5, 9], [7]), // a retry of call 2: not longer than that chain's last prompt
    ]);
    expect(chains).toMatchObject([
      { calls: [0, 2, 4], breaks: [] },
      { calls: [1, 3], breaks: [] },
      { calls: [5], breaks: [] },
    ]);
  });

  it('attaches a break only with evidence: messages that extend the chain, or tokens through its whole last prompt', () => {
    const sys = { role: 'system', content: 's' };
    const q = { role: 'user', content: 'q' };
    const chains = chainCalls(
      [
        call([1, 2, 3], [10, 11], [sys, q], 'A'),
        call([1, 2, 3], [20, 21], [sys, q], 'B'),
        // Continues the second (its answer "B" is repeated), re-tokenized inside the generation.
        call([1, 2, 3, 20, 22, 5], [30], [sys, q, { role: 'assistant', content: 'B' }, q], 'C'),
        // Same initial prompt but a conversation that extends neither: a new chain.
        call([1, 2, 3, 40, 5], [41], [sys, { role: 'user', content: 'other' }], 'D'),
        // Tokens only, its pad run (the 2s) expanded to another length: the first chain's whole prompt, pad runs aside.
        call([1, 2, 2, 3, 10, 5], [50]),
        // Tokens only, departing inside the initial prompt: a conversation of its own.
        call([1, 7, 3, 10, 11, 5], [60]),
      ],
      { padIds: [2] },
    );
    expect(chains.flatMap((c) => c.ambiguous)).toEqual([]);
    expect(chains).toMatchObject([
      { calls: [0, 4], breaks: [1] },
      { calls: [1, 2], breaks: [1] },
      { calls: [3], breaks: [] },
      { calls: [5], breaks: [] },
    ]);
    const tokensOnly = chainCalls([call([1, 2, 3], [10, 11]), call([1, 2, 3, 10, 12, 5], [9])]);
    expect(tokensOnly).toEqual([{ calls: [0, 1], breaks: [1], ambiguous: [] }]);
  });

  it('recovers 2,000 interleaved conversations of 5 calls (linear-time grouping)', () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const conversations = Array.from({ length: 2000 }, (_, c) => {
      const shared = c % 4 === 0 ? [9, 9, 9] : [c + 100, rand(50)]; // a quarter share their first tokens
      let prompt = [...shared, c];
      return Array.from({ length: 5 }, () => {
        const gen = [rand(1000), rand(1000), 1];
        const one = { promptIds: prompt, generatedIds: gen };
        prompt = [...prompt, ...gen, 2, rand(1000)];
        return one;
      });
    });
    const order: [number, number][] = [];
    for (let k = 0; k < 5; k++) for (let c = 0; c < 2000; c++) order.push([c, k]);
    const chains = chainCalls(order.map(([c, k]) => conversations[c]![k]!));
    expect(chains).toHaveLength(2000);
    for (const ch of chains) {
      const convs = new Set(ch.calls.map((i) => order[i]![0]));
      expect(convs.size).toBe(1);
      expect(ch.calls.map((i) => order[i]![1])).toEqual([0, 1, 2, 3, 4]);
    }
  });
});
