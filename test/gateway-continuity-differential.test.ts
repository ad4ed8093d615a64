// The differential property of continuity: for random multi-turn conversations (text, images,
// tools, reasoning; the Qwen2.5-VL, Qwen3-VL, Qwen3 and Qwen3-2507 templates) with random request
// fields and template arguments, what the engine receives equals what it renders itself from the
// client's request, except that the previous answers' generated ids are kept verbatim:
// - a call sent as ids starts with the previous prompt ⧺ the previous generated ids, and what follows
//   the close of that answer is exactly the engine's own render of the request after it;
// - the SamplingParams the engine builds from the token-in call equal those it builds from the
//   client's chat request (the engine stand-in models vLLM's `to_sampling_params`);
// - a call that falls back reaches the engine as the client sent it.
// The engine stand-in renders with Python jinja2 and the Hugging Face tokenizer (test/support/).
import fc from 'fast-check';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PythonRenderer } from './support/engine-reference.ts';
import type { ReceivedCall, ScriptedGeneration } from './support/engine-standin.ts';
import {
  afterLastAnswer,
  assistantMessage,
  engineRender,
  post,
  readCapture,
  type Rig,
  startRig,
} from './support/gateway-harness.ts';

/** Cases per run (the seed is the suite's, test/support/property-seed.ts). */
const RUNS = 24;
const MODELS = [
  'Qwen/Qwen2.5-VL-7B-Instruct',
  'Qwen/Qwen3-VL-8B-Instruct',
  'Qwen/Qwen3-8B',
  'Qwen/Qwen3-4B-Instruct-2507',
];

const TOOLS = [
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
    function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
  },
];

const text = fc.constantFrom(
  'How much is 2 + 3?',
  'Explain briefly.',
  'Und jetzt auf Deutsch, bitte: was ist eine Summe?',
  '计算一下 7 × 8。',
  'Line one\nline two\n\n  indented',
  'Use the tool if you need it.',
  '"quoted" and {braces} and `code`',
  'ok',
);
const answerText = fc.constantFrom(
  'It is 5.',
  'Sure:\n- one\n- two',
  'Das ist 56.',
  '好的。',
  '  spaced  ',
  '{"n": 1}',
);
const reasoning = fc.constantFrom('', '<think>\nadd them\n</think>\n\n', '<think>\n\n</think>\n\n');

/** The request fields a turn sets (each optional). */
const fields = fc.record(
  {
    temperature: fc.constantFrom(0, 0.7, 1.2),
    top_p: fc.constantFrom(0.9, 1),
    top_k: fc.constantFrom(20, -1),
    seed: fc.integer({ min: 0, max: 1000 }),
    stop: fc.constantFrom(['\n\n\n'], 'END'),
    min_tokens: fc.constantFrom(0, 1),
    presence_penalty: fc.constantFrom(0, 0.5),
    repetition_penalty: fc.constantFrom(1, 1.05),
    logit_bias: fc.constantFrom({ '90': 0.5 }, { '15': -1 }),
    response_format: fc.constantFrom({ type: 'json_object' }, { type: 'text' }),
    logprobs: fc.constant(true),
    top_logprobs: fc.constantFrom(0, 2),
    max_tokens: fc.constantFrom(3, 64),
    n: fc.constantFrom(1, 2),
    stream: fc.boolean(),
    thinking: fc.boolean(),
    tools: fc.constantFrom('auto', 'required', 'named', 'none', 'omitted'),
    parallel_tool_calls: fc.constant(false),
    user: fc.constant('agent-7'),
  },
  { requiredKeys: [] },
);

const turnArb = fc.record({ text, fields, answer: answerText, reasoning, toolCall: fc.boolean() });
const conversationArb = fc.record({
  model: fc.integer({ min: 0, max: MODELS.length - 1 }),
  image: fc.boolean(),
  system: fc.boolean(),
  turns: fc.array(turnArb, { minLength: 2, maxLength: 4 }),
});
type Turn = typeof turnArb extends fc.Arbitrary<infer T> ? T : never;

const rigs: Rig[] = [];
const outputs = new Map<string, ScriptedGeneration[]>();
const python = new PythonRenderer();
let image: string;

beforeAll(async () => {
  image = `data:image/png;base64,${(
    await sharp({ create: { width: 64, height: 48, channels: 3, background: '#38c' } })
      .png()
      .toBuffer()
  ).toString('base64')}`;
  for (const model of MODELS)
    rigs.push(
      await startRig(
        {
          engine: 'vllm',
          model,
          // A session's calls answer from its queue; the engine asked directly (its own render) answers ''.
          script: (c) => outputs.get(c.headers['x-session-id'] ?? '')?.[0] ?? { text: '' },
        },
        { mode: 'continuity' },
      ),
    );
}, 120_000);
afterAll(async () => {
  for (const r of rigs) await r.close();
  await python.close();
});

/** The request body of one turn. */
function requestOf(model: string, messages: unknown[], f: Turn['fields']): Record<string, unknown> {
  const { thinking, tools, ...rest } = f;
  const body: Record<string, unknown> = { model, messages, ...rest };
  if (rest.top_logprobs !== undefined && !rest.logprobs) delete body.top_logprobs;
  if (thinking !== undefined && /qwen3-8b/i.test(model)) body.chat_template_kwargs = { enable_thinking: thinking };
  if (tools !== undefined && tools !== 'omitted') {
    body.tools = TOOLS;
    body.tool_choice = tools === 'named' ? { type: 'function', function: { name: 'lookup' } } : tools;
  }
  if (!body.tools) delete body.parallel_tool_calls;
  // A tool call cut short is JSON no engine takes back as arguments: cut only plain answers.
  if (body.tools && body.max_tokens === 3) delete body.max_tokens;
  return body;
}

/** What the scripted model generates for a turn, shaped by its tool choice. */
function outputOf(turn: Turn, body: Record<string, unknown>): ScriptedGeneration {
  const choice = body.tool_choice;
  if (choice === 'required') return { text: '[{"name": "add", "parameters": {"a": 2, "b": 3}}]' };
  if (typeof choice === 'object') return { text: '{"q": "sum"}' };
  if (choice === 'auto' && turn.toolCall)
    return { text: `${turn.reasoning}<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>` };
  return { text: `${turn.reasoning}${turn.answer}` };
}

const counted = { ids: 0, fallback: 0 };
let sessions = 0;

describe('continuity against the engine (differential)', () => {
  it('sends what the engine renders itself from the client’s request, the previous answers’ ids kept verbatim', async () => {
    await fc.assert(
      fc.asyncProperty(conversationArb, async (conv) => {
        const rig = rigs[conv.model]!;
        const model = MODELS[conv.model]!;
        const session = `diff-${sessions++}`;
        const vision = /vl/i.test(model);
        const messages: Record<string, unknown>[] = conv.system ? [{ role: 'system', content: 'Be brief.' }] : [];
        messages.push({
          role: 'user',
          content:
            vision && conv.image
              ? [
                  { type: 'image_url', image_url: { url: image } },
                  { type: 'text', text: conv.turns[0]!.text },
                ]
              : conv.turns[0]!.text,
        });
        let previous: ReceivedCall | undefined;
        for (const [k, turn] of conv.turns.entries()) {
          const body = requestOf(model, [...messages], turn.fields);
          outputs.set(session, [outputOf(turn, body)]);
          const before = rig.engine.calls.length;
          const a = await post(`${rig.url}/v1/chat/completions`, body, { 'x-session-id': session });
          expect(a.status, JSON.stringify(a.json)).toBe(200);
          const call = rig.engine.calls.slice(before).find((c) => c.generated)!;
          const sent = call.body as Record<string, unknown>;
          if (call.path === '/v1/completions') {
            counted.ids++;
            // The previous prompt and its generated ids, verbatim.
            const head = [...previous!.promptIds, ...previous!.generated!.ids];
            expect(call.promptIds.slice(0, head.length)).toEqual(head);
            // After the previous answer's close: the engine's own render of the client's request.
            expect(afterLastAnswer(call.promptIds)).toEqual(afterLastAnswer(await engineRender(rig.engine, body)));
            // The SamplingParams the engine builds: what it builds from the client's chat request.
            const want = await python.samplingParams('chat', JSON.stringify(body), call.sampling!.max_tokens as number);
            const { logprobs: gotLp, ...got } = call.sampling!;
            const { logprobs: wantLp, ...wanted } = want;
            expect(got).toEqual(wanted);
            if (body.logprobs) expect(gotLp).toBe(wantLp);
          } else {
            if (k > 0) counted.fallback++;
            // Rendered by the engine: the client's fields reach it as they were sent.
            for (const [f, v] of Object.entries(body))
              if (f !== 'stream' && f !== 'stream_options' && f !== 'logprobs') expect(sent[f], f).toEqual(v);
          }
          previous = call;
          const msg = assistantMessage(a);
          messages.push({
            role: 'assistant',
            content: msg.content,
            ...(msg.tool_calls?.length ? { tool_calls: msg.tool_calls } : {}),
          });
          if (msg.tool_calls?.length)
            for (const t of msg.tool_calls as { id: string }[])
              messages.push({ role: 'tool', tool_call_id: t.id, content: '5' });
          else messages.push({ role: 'user', content: conv.turns[k + 1]?.text ?? 'Thanks.' });
        }
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
    // The property held on calls that were sent as ids, not only on fallbacks.
    console.log(`continued calls: ${counted.ids} as ids, ${counted.fallback} rendered by the engine`);
    expect(counted.ids).toBeGreaterThan(counted.fallback / 2);
    const reasons = rigs.flatMap((r) => readCapture(r.out).map((l) => l.gateway.fallback?.reason));
    const byReason: Record<string, number> = {};
    for (const r of reasons) if (r && r !== 'first_call') byReason[r] = (byReason[r] ?? 0) + 1;
    console.log('fallbacks after the first call, by reason:', byReason);
    // Every field the conversations set has a meaning the gateway knows.
    expect(reasons.filter((r) => r === 'field:unknown')).toEqual([]);
  }, 900_000);
});
