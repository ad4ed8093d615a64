// Text-only Qwen runs (most RL runs have no images): the model name in the data picks the profile
// with that model's own template; its tokenizer has the added tokens the real one has; Qwen3's
// history rendering drops reasoning and the re-render is classified so; and the prompts of a
// Qwen2.5-1.5B-Instruct vLLM log (test/fixtures/generate-text-models.ts) equal the engine's counts.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { analysisContext } from '../server/analysis/context.ts';
import { checkTrajectory } from '../server/analysis/checks.ts';
import { renderText } from '../server/analysis/render.ts';
import { commonPrefixLength } from '../server/analysis/diff.ts';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import type { Message, Trajectory } from '../server/model/trajectory.ts';
import { inferProfileName, loadProfile, profileFor, type ModelProfile } from '../server/profiles/profile.ts';
import { FIXTURES } from './fixtures/generate-vllm.ts';
import { TEXT_MODEL, TEXT_MODEL_LOG } from './fixtures/generate-text-models.ts';
import { buildTrajectory, type ScriptTurn } from './support/build.ts';

describe('the model name picks the profile', () => {
  it.each([
    ['Qwen/Qwen2.5-1.5B-Instruct', 'qwen2.5'],
    ['Qwen/Qwen2.5-7B', 'qwen2.5'],
    ['/mnt/models/Qwen2.5-7B-Instruct', 'qwen2.5'],
    ['Qwen2.5-Math-7B-Instruct', 'qwen2.5-math'],
    ['Qwen/Qwen2.5-Math-1.5B', 'qwen2.5-math'],
    ['Qwen/Qwen3-8B', 'qwen3'],
    ['Qwen/Qwen3-30B-A3B', 'qwen3'],
    ['Qwen3-8B-Base', 'qwen3'],
    ['Qwen3-4B-Instruct-2507', 'qwen3-instruct-2507'],
    ['Qwen3-30B-A3B-Thinking-2507', 'qwen3-thinking-2507'],
    ['Qwen/Qwen2.5-VL-7B-Instruct', 'qwen2.5-vl'],
    ['Qwen/Qwen3-VL-8B-Instruct', 'qwen3-vl'],
  ])('%s → %s', (name, profile) => {
    expect(inferProfileName(name)).toBe(profile);
    expect(profileFor(undefined, name).name).toBe(profile);
  });

  it.each([
    'Qwen/Qwen3.5-9B',
    'Qwen3.6-35B-A3B',
    'Qwen/QwQ-32B',
    'Qwen/Qwen2.5-Coder-7B-Instruct',
    'Qwen/Qwen2-7B-Instruct',
  ])('%s: no built-in profile covers it', (name) => {
    expect(inferProfileName(name)).toBeUndefined();
    expect(profileFor(undefined, name).uncoveredModel).toBe(name);
  });
});

describe('names that say nothing of the model', () => {
  it.each(['policy', 'actor', '/ckpt/global_step_40/actor/huggingface', '', undefined])(
    '%s: the default profile, as for data that names no model',
    (name) => {
      expect(profileFor(undefined, name).name).toBe('qwen2.5-vl');
    },
  );
});

describe('the text tokenizers', () => {
  // docs/reference/tokens.md#added-tokens-per-generation: Qwen2.5's added tokens end at <|file_sep|>,
  // Qwen3's at </think>; both keep the vision tokens (text models list them as added specials too).
  it.each([
    ['qwen2.5', '<|file_sep|>', '<tool_response>'],
    ['qwen2.5-math', '<|file_sep|>', '<think>'],
    ['qwen3', '</think>', undefined],
    ['qwen3-instruct-2507', '</think>', undefined],
  ])('%s stops at %s', (name, last, absent) => {
    const p = loadProfile(name);
    const lastId = p.tokenizer.tokenOfText(last)!;
    expect(p.tokenizer.vocabSize).toBe(lastId + 1);
    for (const vision of ['<|vision_start|>', '<|image_pad|>', '<|video_pad|>'])
      expect(p.tokenizer.isSpecial(p.tokenizer.tokenOfText(vision)!)).toBe(true);
    if (absent) expect(p.tokenizer.tokenOfText(absent)).toBeUndefined();
  });
});

describe('each template as its model renders it', () => {
  const q: Message[] = [{ role: 'user', content: 'Hi' }];
  const render = (name: string, extra: object = {}) =>
    loadProfile(name).template.render({ messages: q, add_generation_prompt: true, ...extra });

  it('Qwen2.5 and Qwen2.5-Math inject their own default system prompts, the VL template another', () => {
    expect(render('qwen2.5')).toBe(
      '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(render('qwen2.5-math')).toContain(
      '<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n',
    );
    expect(render('qwen2.5-vl')).toContain('<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n');
  });

  it('Qwen3: no default system prompt; enable_thinking false writes the empty think block', () => {
    expect(render('qwen3')).toBe('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    expect(render('qwen3', { enable_thinking: false })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
    expect(render('qwen3-instruct-2507', { enable_thinking: false })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(render('qwen3-thinking-2507')).toBe('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n');
  });
});

describe("Qwen3's template drops reasoning from the history", () => {
  const script = (answer: string): { id: string; messages: Message[]; turns: ScriptTurn[] } => ({
    id: 'think',
    messages: [{ role: 'user', content: 'A right triangle has legs 3 and 4. How long is the hypotenuse?' }],
    turns: [{ answer, observation: [{ role: 'user', content: 'Now give only the number.' }] }, { answer: '5' }],
  });
  const check = (t: Trajectory, p: ModelProfile) => checkTrajectory(t, analysisContext(t, p));

  it.each([
    ['qwen3', '<think>\nLegs 3 and 4: the hypotenuse is √(9 + 16).\n</think>\n\nThe hypotenuse is 5.'],
    // The Thinking-2507 generation prompt opens <think> itself: the model writes only its reasoning and </think>.
    ['qwen3-thinking-2507', 'Legs 3 and 4: the hypotenuse is √(9 + 16).\n</think>\n\nThe hypotenuse is 5.'],
  ])(
    '%s: a loop that re-renders the conversation gets prefix_break/reasoning_stripped where the reasoning was',
    async (name, answer) => {
      const p = loadProfile(name);
      // The loop decodes the answer (think tags are not special: they stay) and re-renders; the template strips them.
      const t = await buildTrajectory(p, script(answer), 'rerender');
      const t0 = t.turns[0]!;
      // Where turn 1's prompt leaves turn 0's: at the first generated token, or (Thinking-2507) at the
      // `<think>\n` its generation prompt wrote, which the history turn no longer has.
      const at = commonPrefixLength([...t0.promptIds!, ...t0.generatedIds!], t.turns[1]!.promptIds!);
      expect([...t0.promptIds!, ...t0.generatedIds!][at]).toBe(p.tokenizer.tokenOfText('<think>'));
      const r = await check(t, p);
      const errors = r.findings.filter((f) => f.severity === 'error');
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.find((f) => f.kind === 'prefix_break')).toMatchObject({
        cause: 'reasoning_stripped',
        turn: 1,
        index: at,
        stream: 'prompt',
      });
      expect(errors.every((f) => f.cause === 'reasoning_stripped')).toBe(true);
      // The canonical loop keeps the generated ids: no error; re-rendering the conversation would
      // strip the reasoning again, which is said as a warning of that cause.
      const kept = await buildTrajectory(p, script(answer), 'canonical');
      const findings = (await check(kept, p)).findings;
      expect(findings.map((f) => [f.kind, f.cause, f.severity])).toEqual([
        ['rerender_mismatch', 'reasoning_stripped', 'warning'],
      ]);
    },
  );

  it('the template itself keeps the reasoning of the turn after the last user query', () => {
    const messages: Message[] = [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: '<think>r1</think>a1' },
      { role: 'user', content: 'q2' },
      { role: 'assistant', content: '<think>r2</think>a2' },
    ];
    const text = renderText(loadProfile('qwen3'), messages);
    expect(text).toContain('<|im_start|>assistant\na1<|im_end|>');
    expect(text).toContain('<|im_start|>assistant\n<think>\nr2\n</think>\n\na2<|im_end|>');
  });
});

describe(`a ${TEXT_MODEL} vLLM log`, () => {
  const file = path.join(FIXTURES, TEXT_MODEL_LOG);
  const checkJson = async (model?: string) => {
    let text = '';
    await runCheck(
      [file],
      { json: true, workers: 0, ...(model ? { model } : {}) },
      { write: (s: string) => (text += s) },
    );
    return CheckReport.parse(JSON.parse(text));
  };
  const mismatches = (r: CheckReport) =>
    r.trajectories.flatMap((t) =>
      (t.findings as { kind: string }[]).filter((f) => f.kind === 'prompt_tokens_mismatch').map(() => t.id),
    );

  it("is checked with Qwen2.5-Instruct's own template: every prompt equals the engine's count, no finding", async () => {
    const r = await checkJson();
    expect(new Set(r.trajectories.map((t) => t.profile))).toEqual(new Set(['qwen2.5']));
    expect(mismatches(r)).toEqual([]);
    expect(r.trajectories.flatMap((t) => t.findings)).toEqual([]);
  });

  it('rendered with the Qwen2.5-VL template (what rollscope did before), the prompts without a system message disagree', async () => {
    const r = await checkJson('qwen2.5-vl');
    expect(mismatches(r)).toEqual(['qwen25-usage-no-system', 'qwen25-tool-call', 'qwen25-tool-result']);
  });
});
