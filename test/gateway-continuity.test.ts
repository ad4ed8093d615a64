// Continuity mode end to end: the same re-rendering agent, but the gateway builds each next prompt
// itself, so from the second call on the engine receives `/v1/completions` with a token-id prompt
// that is exactly the previous prompt ⧺ the generated ids ⧺ the canonical suffix of the new
// messages; the capture checks clean and exports those ids unchanged. Where the messages do not
// extend the session, the call falls back to the engine's rendering and the capture says why.
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { afterEach, describe, expect, it } from 'vitest';
import { REFERENCE_IDS } from './support/engine-reference.ts';
import {
  assistantMessage,
  checkJson,
  engineRender,
  MODEL,
  post,
  readCapture,
  type Rig,
  rollscope,
  startRig,
  tempDir,
} from './support/gateway-harness.ts';
import type { ReceivedCall } from './support/engine-standin.ts';

const NON_CANONICAL = [40, 289, 483, 990, 432, 13, REFERENCE_IDS.imEnd];
const QWEN3 = 'Qwen/Qwen3-VL-8B-Instruct';

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const generations = (r: Rig): ReceivedCall[] => r.engine.calls.filter((c) => c.generated);

describe('continuity', () => {
  it('sends the previous prompt ⧺ generated ids ⧺ the canonical suffix, and the capture checks clean', async () => {
    rig = await startRig(
      {
        engine: 'vllm',
        // Calls the test makes to the engine directly (to learn its rendering) generate one token.
        script: (c, i) =>
          c.headers['x-session-id'] === undefined
            ? { text: '' }
            : i === 0
              ? { ids: NON_CANONICAL }
              : { text: `Step ${i}.` },
      },
      { mode: 'continuity' },
    );
    const url = `${rig.url}/v1/chat/completions`;
    const headers = { 'x-session-id': 'geo-c1' };
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'How do you find the hypotenuse?' }];
    for (let turn = 0; turn < 3; turn++) {
      const a = await post(url, { model: MODEL, messages, ...(turn === 2 ? { stream: true } : {}) }, headers);
      expect(a.status).toBe(200);
      expect(a.headers.get('x-rollscope-findings')).toBe('0');
      messages.push({ role: 'assistant', content: assistantMessage(a).content });
      messages.push({ role: 'user', content: `Go on (${turn}).` });
    }
    const gens = generations(rig);
    expect(gens.map((c) => c.path)).toEqual(['/v1/chat/completions', '/v1/completions', '/v1/completions']);
    for (let k = 1; k < gens.length; k++) {
      const prev = gens[k - 1]!;
      const sent = (gens[k]!.body as { prompt: number[] }).prompt;
      const head = [...prev.promptIds, ...prev.generated!.ids];
      expect(sent.slice(0, head.length)).toEqual(head);
      expect(gens[k]!.promptIds).toEqual(sent);
    }
    // The suffix is the engine's own rendering of the new messages: after the first answer's
    // `<|im_end|>`, the engine's render of the whole conversation and the gateway's ids agree.
    const secondMessages = messages.slice(0, 3);
    const rendered = await engineRender(rig.engine, { model: MODEL, messages: secondMessages });
    const firstPrompt = gens[0]!.promptIds;
    const closeAt = rendered.indexOf(REFERENCE_IDS.imEnd, firstPrompt.length);
    expect((gens[1]!.body as { prompt: number[] }).prompt.slice(firstPrompt.length + NON_CANONICAL.length)).toEqual(
      rendered.slice(closeAt + 1),
    );

    await rig.gateway.close();
    const lines = readCapture(rig.out);
    expect(lines.map((l) => [l.gateway.upstream, l.gateway.prompt?.split(':')[0]])).toEqual([
      ['/v1/chat/completions', 'rendered by the engine'],
      ['/v1/completions', 'ids'],
      ['/v1/completions', 'ids'],
    ]);
    const { status, report } = checkJson([rig.out]);
    const t = report.trajectories;
    expect(t.map((x: { id: string }) => x.id)).toEqual(['geo-c1']);
    const errors = t[0]!.findings.filter((f: { severity: string }) => f.severity === 'error');
    expect(errors).toEqual([]);
    expect(status).toBe(0);
    // What remains is true of the ids: the model's own split, which a re-render would lose.
    expect(new Set(t[0]!.findings.map((f: { kind: string }) => f.kind))).toEqual(
      new Set(['rerender_mismatch', 'non_canonical_split']),
    );

    // The export is the engine's ids unchanged: the last prompt ⧺ its generation.
    const exported = path.join(tempDir('gw-export'), 'rows.jsonl');
    const ex = rollscope(['export', rig.out, '--out', exported, '--include-warnings']);
    expect(ex.status, ex.stderr).toBe(0);
    const rows = fs
      .readFileSync(exported, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(rows).toHaveLength(1);
    const last = gens.at(-1)!;
    expect(rows[0].tokens).toEqual([...last.promptIds, ...last.generated!.ids]);
  });

  it('parses tool calls as the hermes parser would and continues through the tool result as ids', async () => {
    const tools = [
      {
        type: 'function',
        function: {
          name: 'hypot',
          description: 'hypotenuse',
          parameters: { type: 'object', properties: { a: { type: 'number' } } },
        },
      },
    ];
    const call = '<tool_call>\n{"name": "hypot", "arguments": {"a":3,"b":4}}\n</tool_call>';
    rig = await startRig(
      {
        engine: 'vllm',
        model: QWEN3,
        script: (c, i) =>
          c.headers['x-session-id'] === undefined ? { text: '' } : i === 0 ? { text: call } : { text: 'It is 5.' },
      },
      { mode: 'continuity' },
    );
    const url = `${rig.url}/v1/chat/completions`;
    const headers = { 'x-session-id': 'tool-1' };
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'Hypotenuse of 3 and 4?' }];
    const a1 = await post(url, { model: QWEN3, messages, tools }, headers);
    const m1 = a1.json.choices[0].message;
    expect(a1.json.choices[0].finish_reason).toBe('tool_calls');
    expect(m1.content).toBeNull();
    expect(m1.tool_calls[0].function).toEqual({ name: 'hypot', arguments: '{"a": 3, "b": 4}' });
    messages.push({ role: 'assistant', content: m1.content, tool_calls: m1.tool_calls });
    messages.push({ role: 'tool', tool_call_id: m1.tool_calls[0].id, content: '5' });
    // The second answer comes from a token-in call: same shape, content parsed from the text.
    const a2 = await post(url, { model: QWEN3, messages, tools }, headers);
    expect(a2.json.choices[0].message).toMatchObject({ role: 'assistant', content: 'It is 5.', tool_calls: [] });
    expect(a2.json.choices[0].finish_reason).toBe('stop');
    const gens = generations(rig);
    expect(gens.map((c) => c.path)).toEqual(['/v1/chat/completions', '/v1/completions']);
    const head = [...gens[0]!.promptIds, ...gens[0]!.generated!.ids];
    expect(gens[1]!.promptIds.slice(0, head.length)).toEqual(head);
    // The tool result renders as the engine renders it (the template's <tool_response> turn).
    const rendered = await engineRender(rig.engine, { model: QWEN3, messages: messages.slice(0, 3), tools });
    const closeAt = rendered.indexOf(REFERENCE_IDS.imEnd, gens[0]!.promptIds.length);
    expect(gens[1]!.promptIds.slice(gens[0]!.promptIds.length + gens[0]!.generated!.ids.length)).toEqual(
      rendered.slice(closeAt + 1),
    );
    // The capture records the token-in call with the client's messages: its prompt is the chain.
    const lines = readCapture(rig.out);
    expect((lines[1]!.request as { prompt: number[] }).prompt).toEqual(gens[1]!.promptIds);
    expect(lines[1]!.request.messages).toEqual(messages);
    // `check` reads the capture as one trajectory (the assistant tool call has content null, as
    // OpenAI clients send it): analyzed, no error, no prefix break.
    const { report } = checkJson([rig.out]);
    expect(report.errors).toEqual([]);
    expect(report.trajectories.map((t) => t.id)).toEqual(['tool-1']);
    const kinds = report.trajectories[0]!.findings.map(
      (f: { kind: string; severity: string }) => `${f.kind}:${f.severity}`,
    );
    expect(kinds.filter((k: string) => k.endsWith(':error'))).toEqual([]);
  });

  it('falls back to the engine when the history was edited, checks that call, and says why', async () => {
    rig = await startRig(
      { engine: 'vllm', script: (_c, i) => (i === 0 ? { ids: NON_CANONICAL } : { text: 'Fine.' }) },
      { mode: 'continuity' },
    );
    const url = `${rig.url}/v1/chat/completions`;
    const headers = { 'x-session-id': 'edit-1' };
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'How do you find the hypotenuse?' }];
    const a1 = await post(url, { model: MODEL, messages }, headers);
    // The agent trims and rewrites the answer before sending it back (context compression).
    messages.push({ role: 'assistant', content: `${assistantMessage(a1).content} (summarized)` });
    messages.push({ role: 'user', content: 'Go on.' });
    const a2 = await post(url, { model: MODEL, messages }, headers);
    expect(a2.status).toBe(200);
    expect(Number(a2.headers.get('x-rollscope-findings'))).toBeGreaterThanOrEqual(1);
    expect(generations(rig).map((c) => c.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions']);
    const lines = readCapture(rig.out);
    expect(lines[1]!.gateway.prompt).toBe(
      "rendered by the engine: the assistant message is not the gateway's answer (edited or re-serialized)",
    );
    expect(lines[1]!.gateway.findings.map((f) => f.kind)).toContain('prefix_break');
  });

  it('sends ids to SGLang /generate and answers in the chat shape', async () => {
    rig = await startRig(
      {
        engine: 'sglang',
        script: (c, i) =>
          c.headers['x-session-id'] === undefined ? { text: '' } : i === 0 ? { ids: NON_CANONICAL } : { text: 'Next.' },
      },
      { mode: 'continuity' },
    );
    const url = `${rig.url}/v1/chat/completions`;
    const headers = { 'x-session-id': 'sg-1' };
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'How do you find the hypotenuse?' }];
    const a1 = await post(url, { model: MODEL, messages }, headers);
    expect(a1.status, JSON.stringify(a1.json)).toBe(200);
    messages.push({ role: 'assistant', content: assistantMessage(a1).content }, { role: 'user', content: 'Go on.' });
    const a2 = await post(url, { model: MODEL, messages, stream: true }, headers);
    expect(a2.status, JSON.stringify(a2.json)).toBe(200);
    expect(a2.headers.get('x-rollscope-findings')).toBe('0');
    expect(assistantMessage(a2).content).toBe('Next.');
    const gens = generations(rig);
    expect(gens.map((c) => c.path)).toEqual(['/v1/chat/completions', '/generate']);
    const sent = (gens[1]!.body as { input_ids: number[] }).input_ids;
    expect(sent.slice(0, gens[0]!.promptIds.length + NON_CANONICAL.length)).toEqual([
      ...gens[0]!.promptIds,
      ...NON_CANONICAL,
    ]);
    expect(gens[1]!.promptIds).toEqual(sent);
    await rig.gateway.close();
    const { report } = checkJson([rig.out]);
    expect(report.trajectories.map((t: { id: string }) => t.id)).toEqual(['sg-1']);
    expect(report.trajectories[0]!.findings.filter((f: { severity: string }) => f.severity === 'error')).toEqual([]);
  });
});

describe('continuity with images', () => {
  const image = async () =>
    `data:image/png;base64,${(
      await sharp({ create: { width: 96, height: 64, channels: 3, background: '#c33' } })
        .png()
        .toBuffer()
    ).toString('base64')}`;
  const conversation = async (r: Rig, model = MODEL) => {
    const url = `${r.url}/v1/chat/completions`;
    const headers = { 'x-session-id': 'img-1' };
    const messages: Record<string, unknown>[] = [
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: await image() } },
          { type: 'text', text: 'What colour?' },
        ],
      },
    ];
    const a1 = await post(url, { model, messages }, headers);
    expect(a1.status).toBe(200);
    messages.push({ role: 'assistant', content: assistantMessage(a1).content }, { role: 'user', content: 'Sure?' });
    const a2 = await post(url, { model, messages }, headers);
    expect(a2.status).toBe(200);
    return a2;
  };

  it.each(['vllm', 'sglang'] as const)(
    'on %s: rendered by the engine and checked, and the capture says why',
    async (engine) => {
      rig = await startRig(
        { engine, script: (_c, i) => ({ text: i === 0 ? 'Red.' : 'Yes.' }) },
        { mode: 'continuity' },
      );
      await conversation(rig);
      expect(generations(rig).map((c) => c.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions']);
      const lines = readCapture(rig.out);
      expect(lines[1]!.gateway.prompt).toMatch(
        engine === 'vllm' ? /takes a token-id prompt without images/ : /SGLANG_MM_AVOID_RETOKENIZE/,
      );
      // The pad runs were checked against the image: the engine's agree with the processor math.
      expect(lines.flatMap((l) => l.gateway.findings)).toEqual([]);
    },
  );

  it('on SGLang told it keeps ids: one pad per image and the images, the prompt length compared', async () => {
    rig = await startRig(
      { engine: 'sglang', script: (_c, i) => (i === 0 ? { ids: NON_CANONICAL } : { text: 'Yes.' }) },
      { mode: 'continuity', sglangKeepsImageIds: true },
    );
    const a2 = await conversation(rig);
    const gens = generations(rig);
    expect(gens.map((c) => c.path)).toEqual(['/v1/chat/completions', '/generate']);
    const body = gens[1]!.body as { input_ids: number[]; image_data: string[] };
    expect(body.input_ids.filter((t) => t === REFERENCE_IDS.imagePad)).toHaveLength(1);
    expect(body.image_data).toHaveLength(1);
    // This stand-in re-tokenizes ids sent with images (as SGLang does without the setting): the
    // non-canonical split is lost and the engine's prompt length says so.
    expect(Number(a2.headers.get('x-rollscope-findings'))).toBe(1);
    const line = readCapture(rig.out)[1]!;
    expect(line.gateway.findings).toMatchObject([
      { kind: 'prompt_tokens_mismatch', actual: gens[1]!.promptIds.length },
    ]);
  });
});
