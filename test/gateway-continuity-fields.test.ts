// Continuity keeps the meaning of every request field: template arguments render the suffix
// (Qwen3's enable_thinking: false keeps its closed think block on every continued turn), sampling
// fields reach the engine as the SamplingParams it would have built from the chat request itself,
// a forced tool choice is the structured output vLLM derives and its answer is read as vLLM reads
// it, top_logprobs come back; a field whose meaning cannot be kept falls back, named in the capture
// and counted on /metrics; a streamed n = 2 call keeps both choices in the capture.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { encodeText, PythonRenderer } from './support/engine-reference.ts';
import type { ReceivedCall } from './support/engine-standin.ts';
import {
  afterLastAnswer,
  assistantMessage,
  engineRender,
  checkJson,
  MODEL,
  post,
  readCapture,
  type Rig,
  startRig,
} from './support/gateway-harness.ts';

const QWEN3 = 'Qwen/Qwen3-8B';

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});
const python = new PythonRenderer();
afterAll(() => python.close());

const generations = (r: Rig): ReceivedCall[] => r.engine.calls.filter((c) => c.generated);

/** What the engine would do with the client's own chat request: its SamplingParams, max_tokens as it was sent. */
function expectedSampling(body: Record<string, unknown>, maxTokens: number) {
  return python.samplingParams('chat', JSON.stringify(body), maxTokens);
}

/** The SamplingParams compared: the client's logprobs only when it asked for them (the gateway asks for its own). */
function comparable(sampling: Record<string, unknown>, asked: boolean): Record<string, unknown> {
  const { logprobs, ...rest } = sampling;
  return asked ? { ...rest, logprobs } : rest;
}

describe('continuity keeps template arguments', () => {
  it('Qwen3 enable_thinking: false renders the closed think block on every continued turn, as the engine does', async () => {
    rig = await startRig(
      { engine: 'vllm', model: QWEN3, script: (_c, i) => ({ text: `Answer ${i}.` }) },
      { mode: 'continuity' },
    );
    const url = `${rig.url}/v1/chat/completions`;
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'Think less.' }];
    const kwargs = { chat_template_kwargs: { enable_thinking: false } };
    const closed = await encodeText('qwen3', '<|im_start|>assistant\n<think>\n\n</think>\n\n');
    for (let turn = 0; turn < 4; turn++) {
      const body = { model: QWEN3, messages: [...messages], ...kwargs, ...(turn === 3 ? { stream: true } : {}) };
      const a = await post(url, body, { 'x-session-id': 'think-off' });
      expect(a.status).toBe(200);
      const call = generations(rig).at(-1)!;
      expect(call.path).toBe(turn === 0 ? '/v1/chat/completions' : '/v1/completions');
      expect(call.promptIds.slice(-closed.length)).toEqual(closed);
      if (turn > 0)
        expect(afterLastAnswer(call.promptIds)).toEqual(afterLastAnswer(await engineRender(rig.engine, body)));
      messages.push(
        { role: 'assistant', content: assistantMessage(a).content },
        { role: 'user', content: `More ${turn}.` },
      );
    }
    expect(readCapture(rig.out).map((l) => l.gateway.fallback?.reason)).toEqual([
      'first_call',
      undefined,
      undefined,
      undefined,
    ]);
  });
});

describe('continuity keeps sampling fields', () => {
  it('sends response_format, min_tokens, logit_bias, seed, stop and top_logprobs on every turn, as the engine reads them', async () => {
    rig = await startRig({ engine: 'vllm', script: (_c, i) => ({ text: `{"step": ${i}}` }) }, { mode: 'continuity' });
    const url = `${rig.url}/v1/chat/completions`;
    const fields = {
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'step', schema: { type: 'object', properties: { step: { type: 'integer' } } } },
      },
      min_tokens: 2,
      logit_bias: { '90': 1.5 },
      seed: 7,
      stop: ['\n\n'],
      temperature: 0.6,
      logprobs: true,
      top_logprobs: 2,
    };
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'Count in JSON.' }];
    for (let turn = 0; turn < 3; turn++) {
      const body = { model: MODEL, messages: [...messages], ...fields, ...(turn === 2 ? { stream: true } : {}) };
      const a = await post(url, body, { 'x-session-id': 'fields' });
      expect(a.status).toBe(200);
      const call = generations(rig).at(-1)!;
      expect(call.path).toBe(turn === 0 ? '/v1/chat/completions' : '/v1/completions');
      const sampling = call.sampling!;
      expect(comparable(sampling, true)).toEqual(
        comparable(await expectedSampling(body, sampling.max_tokens as number), true),
      );
      // The client's top_logprobs come back, two per token, on streamed and whole answers alike.
      const contents =
        a.events.length > 0
          ? a.events
              .filter((e) => e !== '[DONE]')
              .flatMap((e) =>
                JSON.parse(e).choices.flatMap((c: { logprobs?: { content?: unknown[] } }) => c.logprobs?.content ?? []),
              )
          : a.json.choices[0].logprobs.content;
      expect(contents.length).toBe(call.generated!.ids.length);
      for (const c of contents as { top_logprobs: unknown[] }[]) expect(c.top_logprobs).toHaveLength(2);
      messages.push({ role: 'assistant', content: assistantMessage(a).content }, { role: 'user', content: 'Next.' });
    }
  });

  it('turns a forced tool choice into the structured output vLLM derives, and reads the answer as vLLM does', async () => {
    const tools = [
      {
        type: 'function',
        function: {
          name: 'add',
          description: 'add two numbers',
          parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
        },
      },
      {
        type: 'function',
        function: { name: 'neg', parameters: { type: 'object', properties: { x: { type: 'number' } } } },
      },
    ];
    const outputs = [
      'Let me add.',
      '[{"name": "add", "parameters": {"a": 1, "b": 2.0}}]',
      '{"x": 3}',
      '[{"name": "add", "parameters": {"a": 3, "b": 4}}, {"name": "neg", "parameters": {"x": 1}}]',
    ];
    rig = await startRig(
      { engine: 'vllm', script: (_c, i) => ({ text: outputs[i] ?? 'Done.' }) },
      { mode: 'continuity' },
    );
    const url = `${rig.url}/v1/chat/completions`;
    const choices: unknown[] = ['auto', 'required', { type: 'function', function: { name: 'neg' } }, 'required'];
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'Add 1 and 2.' }];
    for (let turn = 0; turn < 4; turn++) {
      const body = {
        model: MODEL,
        messages: [...messages],
        tools,
        tool_choice: choices[turn],
        ...(turn === 3 ? { parallel_tool_calls: false } : {}),
      };
      const a = await post(url, body, { 'x-session-id': 'forced' });
      expect(a.status, JSON.stringify(a.json)).toBe(200);
      const call = generations(rig).at(-1)!;
      expect(call.path).toBe(turn === 0 ? '/v1/chat/completions' : '/v1/completions');
      expect(comparable(call.sampling!, false)).toEqual(
        comparable(await expectedSampling(body, call.sampling!.max_tokens as number), false),
      );
      const message = a.json.choices[0].message;
      if (turn > 0) {
        // The engine's own reading of the same output.
        const want = await python.forcedToolCalls(outputs[turn]!, choices[turn]);
        const calls = turn === 3 ? want.tool_calls.slice(0, 1) : want.tool_calls;
        expect(message.content).toBe('');
        expect(message.tool_calls.map((t: { function: unknown }) => t.function)).toEqual(calls);
        expect(a.json.choices[0].finish_reason).toBe(turn === 2 ? 'stop' : 'tool_calls');
        messages.push(
          { role: 'assistant', content: message.content, tool_calls: message.tool_calls },
          ...message.tool_calls.map((t: { id: string }) => ({ role: 'tool', tool_call_id: t.id, content: '3' })),
        );
      } else messages.push({ role: 'assistant', content: message.content }, { role: 'user', content: 'Use the tool.' });
    }
  });
});

describe('continuity falls back on a field whose meaning it cannot keep', () => {
  it('names the field in the capture and counts the reason on /metrics', async () => {
    rig = await startRig({ engine: 'vllm', script: (_c, i) => ({ text: `Fine ${i}.` }) }, { mode: 'continuity' });
    const url = `${rig.url}/v1/chat/completions`;
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'Hello.' }];
    const extras = [
      {},
      { echo: true },
      { brand_new_knob: 3 },
      { chat_template_kwargs: { add_generation_prompt: false } },
      {},
    ];
    for (const extra of extras) {
      const a = await post(url, { model: MODEL, messages: [...messages], ...extra }, { 'x-session-id': 'fb' });
      expect(a.status).toBe(200);
      messages.push({ role: 'assistant', content: assistantMessage(a).content }, { role: 'user', content: 'Go on.' });
    }
    const lines = readCapture(rig.out);
    expect(lines.map((l) => l.gateway.fallback?.reason)).toEqual([
      'first_call',
      'field:echo',
      'field:unknown',
      'field:chat_template_kwargs',
      undefined,
    ]);
    expect(lines[2]!.gateway.prompt).toMatch(/brand_new_knob/);
    expect(generations(rig).map((c) => c.path)).toEqual([
      '/v1/chat/completions',
      '/v1/chat/completions',
      '/v1/chat/completions',
      '/v1/chat/completions',
      '/v1/completions',
    ]);
    const metrics = await (await fetch(`${rig.url}/metrics`)).text();
    for (const reason of ['first_call', 'field:echo', 'field:unknown', 'field:chat_template_kwargs'])
      expect(metrics).toMatch(new RegExp(`rollscope_gateway_fallbacks_total\\{[^}]*reason="${reason}"[^}]*\\} 1`));
  });
});

describe('every choice of a streamed n > 1 call is captured', () => {
  it.each(['guard', 'continuity'] as const)('in %s mode, and check reads them as one group', async (mode) => {
    rig = await startRig({ engine: 'vllm', script: (_c, i) => ({ text: `Sample ${i}.` }) }, { mode });
    const url = `${rig.url}/v1/chat/completions`;
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'Sample twice.' }];
    const first = await post(url, { model: MODEL, messages }, { 'x-session-id': 'grpo' });
    messages.push({ role: 'assistant', content: assistantMessage(first).content }, { role: 'user', content: 'Again.' });
    const a = await post(url, { model: MODEL, messages, n: 2, stream: true }, { 'x-session-id': 'grpo' });
    expect(a.status).toBe(200);
    const indices = new Set(
      a.events
        .filter((e) => e !== '[DONE]')
        .flatMap((e) => JSON.parse(e).choices.map((c: { index: number }) => c.index)),
    );
    expect(indices).toEqual(new Set([0, 1]));
    const call = generations(rig).at(-1)!;
    expect(call.path).toBe(mode === 'guard' ? '/v1/chat/completions' : '/v1/completions');
    await rig.gateway.close();
    const line = readCapture(rig.out)[1]!;
    const choices = (line.response as { choices: { index: number; token_ids: number[] }[] }).choices;
    expect(choices.map((c) => c.token_ids)).toEqual(call.choices!.map((c) => c.ids));
    const { report } = checkJson([rig.out]);
    const samples = report.trajectories.filter((t) => t.id.startsWith('grpo#'));
    expect(samples.map((t) => t.id).sort()).toEqual(['grpo#0', 'grpo#1']);
    expect(new Set(samples.map((t) => t.group)).size).toBe(1);
  });
});
