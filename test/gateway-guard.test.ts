// Guard mode end to end: a naive agent that decodes each answer and has it re-rendered every turn
// (the vime #341 loop) gets its break flagged at the turn and token where the engine's prompt stops
// extending the previous prompt ⧺ generated ids, in the answer header, the capture, the session
// view, /metrics, and `check DIR` alike; with --on-break refuse the engine never sees that call.
import { afterEach, describe, expect, it } from 'vitest';
import { REFERENCE_IDS } from './support/engine-reference.ts';
import {
  assistantMessage,
  checkJson,
  MODEL,
  post,
  readCapture,
  type Rig,
  startRig,
} from './support/gateway-harness.ts';

// "I will use it." with " will" split as " w" + "ill" (289 483; the canonical id is 686): what a
// sampler may generate, and what decoding and tokenizing again loses.
const NON_CANONICAL = [40, 289, 483, 990, 432, 13, REFERENCE_IDS.imEnd];

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** The first index where the engine's second prompt stops extending its first prompt ⧺ generation. */
function breakIndex(r: Rig): number {
  const [first, second] = r.engine.calls.filter((c) => c.generated);
  const expected = [...first!.promptIds, ...first!.generated!.ids];
  let i = 0;
  while (i < expected.length && expected[i] === second!.promptIds[i]) i++;
  return i;
}

/** Prometheus text exposition as `name{labels}` → value. */
function metricValues(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    out.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
  }
  return out;
}

const sample = (values: Map<string, number>, name: string, labels: Record<string, string>): number | undefined => {
  for (const [k, v] of values) {
    if (!k.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([l, x]) => k.includes(`${l}="${x}"`))) return v;
  }
  return undefined;
};

async function naiveAgent(r: Rig, opts: { stream?: boolean; session?: string } = {}) {
  const headers: Record<string, string> = opts.session ? { 'x-session-id': opts.session } : {};
  const url = `${r.url}/v1/chat/completions`;
  const messages: Record<string, unknown>[] = [{ role: 'user', content: 'How do you find the hypotenuse?' }];
  const first = await post(url, { model: MODEL, messages, ...(opts.stream ? { stream: true } : {}) }, headers);
  messages.push({ role: 'assistant', content: assistantMessage(first).content });
  messages.push({ role: 'user', content: 'Go on.' });
  const second = await post(url, { model: MODEL, messages, ...(opts.stream ? { stream: true } : {}) }, headers);
  return { first, second };
}

describe.each(['vllm', 'sglang'] as const)('guard on %s: the re-rendering agent', (engine) => {
  it('is flagged at its turn and token, with the cause, everywhere the findings go', async () => {
    rig = await startRig(
      { engine, script: (_c, i) => (i === 0 ? { ids: NON_CANONICAL } : { text: 'Square the legs.' }) },
      { mode: 'guard' },
    );
    const { first, second } = await naiveAgent(rig, { session: 'geo-1' });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-rollscope-findings')).toBe('0');
    expect(second.status).toBe(200);
    expect(Number(second.headers.get('x-rollscope-findings'))).toBeGreaterThanOrEqual(1);
    // The client sees what the engine answered, without the ids the gateway asked for.
    expect(second.json.prompt_token_ids ?? null).toBeNull();
    expect(second.json.choices[0].token_ids ?? null).toBeNull();
    expect(second.json.choices[0].prompt_token_ids ?? null).toBeNull();
    expect(second.json.choices[0].logprobs).toBeNull();

    const at = breakIndex(rig);
    const lines = readCapture(rig.out);
    expect(lines.map((l) => [l.session_id, l.gateway.turn, l.gateway.outcome])).toEqual([
      ['geo-1', 0, 'ok'],
      ['geo-1', 1, 'ok'],
    ]);
    const found = lines[1]!.gateway.findings.find((f) => f.kind === 'prefix_break');
    expect(found).toMatchObject({ kind: 'prefix_break', cause: 'retokenized', turn: 1, index: at, stream: 'prompt' });
    expect(found!.expected).toEqual([289, 483]);
    expect(found!.actual).toEqual([686]);

    const view = await (await fetch(`${rig.url}/rollscope/sessions/geo-1`)).json();
    expect(view).toMatchObject({ id: 'geo-1', from: 'header', turns: 2, calls: 2 });
    expect(
      view.findings.map((f: { finding: { kind: string; index: number } }) => [f.finding.kind, f.finding.index]),
    ).toContainEqual(['prefix_break', at]);

    const metrics = metricValues(await (await fetch(`${rig.url}/metrics`)).text());
    expect(
      sample(metrics, 'rollscope_gateway_calls_total', {
        endpoint: '/v1/chat/completions',
        outcome: 'ok',
        mode: 'guard',
      }),
    ).toBe(2);
    expect(sample(metrics, 'rollscope_gateway_findings_total', { kind: 'prefix_break' })).toBe(1);
    expect(sample(metrics, 'rollscope_gateway_findings_total', { kind: 'placeholder_count' })).toBe(0);
    expect(sample(metrics, 'rollscope_gateway_own_seconds_count', { endpoint: '/v1/chat/completions' })).toBe(2);
    expect(sample(metrics, 'rollscope_gateway_upstream_seconds_count', { endpoint: '/v1/chat/completions' })).toBe(2);
    expect(sample(metrics, 'rollscope_gateway_sessions', {})).toBe(1);

    // `check DIR` reads the capture as one trajectory per session and finds the same break.
    await rig.gateway.close();
    const { status, report } = checkJson([rig.out]);
    expect(status).toBe(1);
    expect(report.trajectories.map((t: { id: string; format: string }) => [t.id, t.format])).toEqual([
      ['geo-1', engine === 'vllm' ? 'vllm' : 'sglang-openai'],
    ]);
    const checked = report.trajectories[0]!.findings.find((f: { kind: string }) => f.kind === 'prefix_break');
    expect(checked).toMatchObject({ cause: 'retokenized', turn: 1, index: at });
  });
});

describe('guard', () => {
  it('answers 409 with the finding instead of forwarding under --on-break refuse', async () => {
    rig = await startRig(
      { engine: 'vllm', script: (_c, i) => (i === 0 ? { ids: NON_CANONICAL } : { text: 'Never generated.' }) },
      { mode: 'guard', onBreak: 'refuse' },
    );
    const { second } = await naiveAgent(rig, { session: 'geo-2' });
    expect(second.status).toBe(409);
    expect(second.json.error.type).toBe('rollscope_break');
    expect(second.json.error.findings[0]).toMatchObject({ kind: 'prefix_break', cause: 'retokenized', turn: 1 });
    // The gateway predicted the engine's prompt: the index is where the engine would have broken.
    const generationCalls = rig.engine.calls.filter((c) => c.path === '/v1/chat/completions');
    expect(generationCalls).toHaveLength(1);
    const lines = readCapture(rig.out);
    expect(lines.map((l) => l.gateway.outcome)).toEqual(['ok', 'refused']);
    expect(lines[1]!.gateway.turn).toBeUndefined();
  });

  it('carries the findings header on streamed answers and streams what the engine streamed', async () => {
    rig = await startRig(
      { engine: 'vllm', script: (_c, i) => (i === 0 ? { ids: NON_CANONICAL } : { text: 'Square the legs.' }) },
      { mode: 'guard' },
    );
    const { first, second } = await naiveAgent(rig, { stream: true, session: 'geo-3' });
    expect(first.headers.get('x-rollscope-findings')).toBe('0');
    expect(assistantMessage(first).content).toBe('I will use it.');
    expect(first.events.at(-1)).toBe('[DONE]');
    // No ids or logprobs reach a client that did not ask, and no usage chunk it did not ask for.
    for (const e of first.events.slice(0, -1)) {
      const chunk = JSON.parse(e);
      expect(chunk.prompt_token_ids ?? null).toBeNull();
      for (const c of chunk.choices) {
        expect(c.token_ids ?? null).toBeNull();
        expect(c.logprobs ?? null).toBeNull();
      }
      expect(chunk.choices.length).toBeGreaterThan(0);
    }
    expect(Number(second.headers.get('x-rollscope-findings'))).toBeGreaterThanOrEqual(1);
    const lines = readCapture(rig.out);
    expect(lines[0]!.response).toMatchObject({
      prompt_token_ids: rig.engine.calls.find((c) => c.generated)!.promptIds,
    });
    expect((lines[0]!.response.choices as { token_ids: number[] }[])[0]!.token_ids).toEqual(NON_CANONICAL);
    expect(lines[1]!.gateway.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      turn: 1,
      index: breakIndex(rig),
    });
  });

  it('finds nothing in an agent that sends the history back unchanged', async () => {
    rig = await startRig(
      { engine: 'vllm', script: (_c, i) => ({ text: i === 0 ? 'I will use it.' : 'Done.' }) },
      { mode: 'guard' },
    );
    const { second } = await naiveAgent(rig, { session: 'geo-4' });
    expect(second.headers.get('x-rollscope-findings')).toBe('0');
    expect(readCapture(rig.out).flatMap((l) => l.gateway.findings)).toEqual([]);
  });
});
