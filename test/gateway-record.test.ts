// Record mode against both engines: the client gets what the engine would have given it (the ids
// and logprobs the gateway asked for are taken out again unless the client asked too), streamed
// or not, and every call is a capture line `check DIR` reads, one trajectory per session named by
// its id. Sessions are told by header, body field or message prefix; two equal candidates start a
// new session with `grouping_ambiguous`.
import { afterEach, describe, expect, it } from 'vitest';
import type { EngineKind } from './support/engine-standin.ts';
import {
  answerOf,
  assistantMessage,
  checkJson,
  MODEL,
  post,
  readCapture,
  type Rig,
  startRig,
} from './support/gateway-harness.ts';

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const ENGINES: EngineKind[] = ['vllm', 'sglang'];
const generations = (r: Rig) => r.engine.calls.filter((c) => c.generated);

describe.each(ENGINES)('record on %s', (engine) => {
  it('answers chat as the engine does, streamed and not, and captures the exact ids', async () => {
    rig = await startRig({ engine, script: (_c, i) => ({ text: `Answer ${i}.` }) }, { mode: 'record' });
    const url = `${rig.url}/v1/chat/completions`;
    const messages = [{ role: 'user', content: 'Say something.' }];
    const plain = await post(url, { model: MODEL, messages }, { 'x-session-id': 'a' });
    expect(plain.status).toBe(200);
    // What the engine answers a client that asked for nothing extra.
    const direct = await post(`${rig.engine.url}/v1/chat/completions`, { model: MODEL, messages });
    // The two answers compared field by field, less what differs per call (id, time, the text).
    const shape = (a: { choices: { message: object }[] }) => ({
      ...a,
      id: undefined,
      created: undefined,
      choices: a.choices.map((c) => ({ ...c, message: { ...c.message, content: undefined } })),
    });
    expect(shape(plain.json)).toEqual(shape(direct.json));
    expect(plain.json.choices[0].message.content).toBe('Answer 0.');

    const asked = await post(
      url,
      { model: MODEL, messages, return_token_ids: true, logprobs: true },
      { 'x-session-id': 'b' },
    );
    const gens = generations(rig);
    const askedGen = gens.find((c) => c.headers['x-session-id'] === 'b')!;
    const choice = asked.json.choices[0];
    expect(choice.token_ids).toEqual(askedGen.generated!.ids);
    expect(asked.json.prompt_token_ids ?? choice.prompt_token_ids).toEqual(askedGen.promptIds);
    expect(choice.logprobs.content.length).toBe(askedGen.generated!.ids.length);

    const streamed = await post(url, { model: MODEL, messages, stream: true }, { 'x-session-id': 'c' });
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(assistantMessage(streamed).content).toBe('Answer 3.');
    expect(streamed.events.at(-1)).toBe('[DONE]');
    for (const e of streamed.events.slice(0, -1)) {
      const chunk = JSON.parse(e);
      expect(chunk.object).toBe('chat.completion.chunk');
      for (const c of chunk.choices) expect(c.token_ids ?? null).toBeNull();
    }

    await rig.gateway.close();
    const lines = readCapture(rig.out);
    expect(lines.map((l) => l.session_id)).toEqual(['a', 'b', 'c']);
    for (const line of lines) {
      const gen = generations(rig).find((c) => c.headers['x-session-id'] === line.session_id)!;
      const res = answerOf(line);
      expect(res.prompt_token_ids ?? res.choices[0]!.prompt_token_ids).toEqual(gen.promptIds);
      expect(res.choices[0]!.token_ids).toEqual(gen.generated!.ids);
    }
    const { status, report } = checkJson([rig.out]);
    expect(status).toBe(0);
    // SGLang's answers keep their own fields (matched_stop, ids per choice): its OpenAI log format.
    const format = engine === 'vllm' ? 'vllm' : 'sglang-openai';
    expect(report.trajectories.map((t) => [t.id, t.format])).toEqual([
      ['a', format],
      ['b', format],
      ['c', format],
    ]);
  });

  it('passes completions through with their ids captured, and /v1/models as it is', async () => {
    rig = await startRig({ engine, script: () => ({ text: ' four' }) }, { mode: 'record' });
    const a = await post(
      `${rig.url}/v1/completions`,
      { model: MODEL, prompt: 'Two and two make', max_tokens: 8 },
      { 'x-session-id': 'cmp' },
    );
    expect(a.status).toBe(200);
    expect(a.json.choices[0].text).toBe(' four');
    expect(a.json.choices[0].token_ids ?? null).toBeNull();
    const line = readCapture(rig.out)[0]!;
    expect(answerOf(line).choices[0]!.prompt_token_ids).toEqual(generations(rig)[0]!.promptIds);
    const models = await fetch(`${rig.url}/v1/models`);
    expect(models.status).toBe(200);
    const direct = await (await fetch(`${rig.engine.url}/v1/models`)).json();
    const listed = await models.json();
    expect(listed.data.map((m: { id: string }) => m.id)).toEqual(direct.data.map((m: { id: string }) => m.id));
  });
});

describe('other paths', () => {
  it('answers an unknown path with a 404 that lists the routes, and a bad body with 400 naming the field', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'x' }) }, { mode: 'record' });
    const r = await fetch(`${rig.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(404);
    const body = await r.json();
    expect(body.error.message).toContain('POST /v1/chat/completions');
    const bad = await post(`${rig.url}/v1/chat/completions`, { model: MODEL, messages: [{ content: 'no role' }] });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain('messages.0.role');
    const notJson = await fetch(`${rig.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: '{}',
    });
    expect(notJson.status).toBe(415);
    expect(readCapture(rig.out)).toEqual([]);
  });
});

describe('sessions', () => {
  const turn = async (r: Rig, messages: unknown[], headers: Record<string, string> = {}, extra: object = {}) => {
    const a = await post(`${r.url}/v1/chat/completions`, { model: MODEL, messages, ...extra }, headers);
    expect(a.status).toBe(200);
    return assistantMessage(a).content;
  };

  it('are told by a configured header, then session_id, then user', async () => {
    rig = await startRig(
      { engine: 'vllm', script: () => ({ text: 'ok' }) },
      { mode: 'record', sessionHeader: 'X-Episode' },
    );
    await turn(rig, [{ role: 'user', content: 'a' }], { 'x-episode': 'ep-1', 'x-session-id': 'ignored' });
    await turn(rig, [{ role: 'user', content: 'b' }], {}, { session_id: 'sid-1', user: 'ignored' });
    await turn(rig, [{ role: 'user', content: 'c' }], {}, { user: 'user-1' });
    const lines = readCapture(rig.out);
    expect(lines.map((l) => [l.session_id, l.gateway.sessionFrom])).toEqual([
      ['ep-1', 'header'],
      ['sid-1', 'session_id'],
      ['user-1', 'user'],
    ]);
    // The engine hears the session too (vLLM's X-Session-ID routing and caching).
    expect(generations(rig)[0]!.headers['x-episode']).toBe('ep-1');
  });

  it('are told by the message prefix without an id, and two equal candidates start a new one', async () => {
    rig = await startRig({ engine: 'vllm', script: () => ({ text: 'same answer' }) }, { mode: 'guard' });
    const q = [{ role: 'user', content: 'What is shown?' }];
    const a1 = await turn(rig, q);
    await turn(rig, [{ role: 'user', content: 'Another question' }]);
    const more = [...q, { role: 'assistant', content: a1 }, { role: 'user', content: 'More.' }];
    await turn(rig, more);
    // Two more conversations ask the first question and get the same answer (GRPO siblings).
    await turn(rig, q);
    await turn(rig, q);
    // The longest history wins: this continues the first conversation, not the two that stopped earlier.
    await turn(rig, [...more, { role: 'assistant', content: a1 }, { role: 'user', content: 'Again.' }]);
    // This extends the two siblings equally.
    await turn(rig, [...q, { role: 'assistant', content: a1 }, { role: 'user', content: 'Different.' }]);
    const lines = readCapture(rig.out);
    const ids = lines.map((l) => l.session_id);
    expect(new Set(ids.slice(0, 2)).size).toBe(2);
    expect(ids[2]).toBe(ids[0]);
    expect(new Set([ids[0], ids[1], ids[3], ids[4]]).size).toBe(4);
    expect(ids[5]).toBe(ids[0]);
    expect(ids.indexOf(ids[6]!)).toBe(6);
    expect(lines[6]!.gateway.findings).toMatchObject([
      { kind: 'grouping_ambiguous', severity: 'error', actual: { alsoContinues: [ids[3], ids[4]] } },
    ]);
    expect(lines.slice(0, 6).flatMap((l) => l.gateway.findings)).toEqual([]);
    expect(lines.map((l) => l.gateway.sessionFrom)).toEqual([...Array(6).fill('messages'), 'new']);
  });

  it('are forgotten after the TTL and past the cap, and a known id that returns with history says so', async () => {
    // The sessions' clock is the test's: it moves past the TTL instead of sleeping through it.
    let now = 1_000_000;
    rig = await startRig(
      { engine: 'vllm', script: () => ({ text: 'ok' }) },
      { mode: 'guard', maxSessions: 2, sessionTtlMs: 400 },
      { now: () => now },
    );
    const q = [{ role: 'user', content: 'q' }];
    for (const id of ['s1', 's2', 's3']) await turn(rig, q, { 'x-session-id': id });
    expect(rig.gateway.gateway.sessions.size).toBe(2);
    expect(await fetch(`${rig.url}/rollscope/sessions/s1`).then((r) => r.status)).toBe(404);
    expect(await fetch(`${rig.url}/rollscope/sessions/s3`).then((r) => r.status)).toBe(200);
    now += 399;
    expect(await fetch(`${rig.url}/rollscope/sessions/s3`).then((r) => r.status)).toBe(200);
    now += 400;
    expect(await fetch(`${rig.url}/rollscope/sessions/s3`).then((r) => r.status)).toBe(404);
    expect(rig.gateway.gateway.sessions.size).toBe(0);
    await turn(rig, [...q, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'again' }], {
      'x-session-id': 's3',
    });
    const last = readCapture(rig.out).at(-1)!;
    expect(last.gateway.findings).toMatchObject([{ kind: 'session_lost', severity: 'warning', turn: 0 }]);
    const metrics = await (await fetch(`${rig.url}/metrics`)).text();
    expect(metrics).toMatch(/rollscope_gateway_sessions_evicted\{[^}]*\} 3/);
  });
});
