// The engine stand-in (test/support/engine-standin.ts) against the engines' own protocol models:
// every request and response of each endpoint is checked with zod schemas written here from
// vLLM's vllm/entrypoints/openai/protocol.py (and serve/disagg/protocol.py) and SGLang's
// io_struct.py and entrypoints/openai/protocol.py (docs/reference/engine-protocols.md); prompts
// must equal Python jinja2's render of the conversation as each engine normalizes it
// (test/support/render_jinja2.py), tokenized, with each image's pads from the worked examples of
// docs/reference/image-math.md; scripted generations (non-canonical splits, <|im_end|>, tool
// calls, length stops, a generated <|image_pad|>) must come back exactly, and a stream must
// reassemble to the answer the same request gets unstreamed.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { profileNamed } from '../server/profiles/profile.ts';
import {
  defaultLogprob,
  type EngineStandin,
  type ReceivedCall,
  type ScriptedGeneration,
  startEngineStandin,
} from './support/engine-standin.ts';

const RENDER_SCRIPT = fileURLToPath(new URL('./support/render_jinja2.py', import.meta.url));
const template = (file: string) =>
  readFileSync(new URL(`../server/families/qwen/templates/${file}`, import.meta.url), 'utf8');
const QWEN25_TEMPLATE = template('qwen2.5-vl.jinja');
const QWEN3_TEMPLATE = template('qwen3-vl.jinja');

const IM_END = 151645;
const IMAGE_PAD = 151655;
/** 640×480: 391 pads for Qwen2/2.5-VL, 300 for Qwen3-VL (docs/reference/image-math.md worked examples). */
const PADS_640x480 = { 'qwen2.5-vl': 391, 'qwen3-vl': 300 } as const;

// --- zod models written from the protocol files ----------------------------------------------------

const Int = z.number().int();
const UsageInfo = z
  .object({
    prompt_tokens: Int,
    total_tokens: Int,
    completion_tokens: Int.nullable(),
    prompt_tokens_details: z.object({ cached_tokens: Int.nullable() }).nullable(),
  })
  .strict();
const TopLogprob = z.object({ token: z.string(), logprob: z.number(), bytes: z.array(Int).nullable() }).strict();
const ChatLogprobs = z
  .object({ content: z.array(TopLogprob.extend({ top_logprobs: z.array(TopLogprob) }).strict()).nullable() })
  .strict();
const ToolCall = z
  .object({
    id: z.string(),
    type: z.literal('function'),
    function: z.object({ name: z.string(), arguments: z.string() }).strict(),
  })
  .strict();

/** vLLM `ChatCompletionResponse` (protocol.py), dumped with `model_dump()`: every field present. */
const VllmChatResponse = z
  .object({
    id: z.string().startsWith('chatcmpl-'),
    object: z.literal('chat.completion'),
    created: Int,
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: Int,
          message: z
            .object({
              role: z.literal('assistant'),
              content: z.string().nullable(),
              refusal: z.null(),
              annotations: z.null(),
              audio: z.null(),
              function_call: z.null(),
              tool_calls: z.array(ToolCall),
              reasoning: z.string().nullable(),
              reasoning_content: z.string().nullable(),
            })
            .strict(),
          logprobs: ChatLogprobs.nullable(),
          finish_reason: z.string().nullable(),
          stop_reason: z.union([Int, z.string()]).nullable(),
          token_ids: z.array(Int).nullable(),
        })
        .strict(),
    ),
    service_tier: z.null(),
    system_fingerprint: z.null(),
    usage: UsageInfo,
    prompt_logprobs: z.null(),
    prompt_token_ids: z.array(Int).nullable(),
    kv_transfer_params: z.null(),
  })
  .strict();

const DeltaToolCall = z
  .object({
    id: z.string().optional(),
    type: z.literal('function').optional(),
    index: Int,
    function: z.object({ name: z.string().optional(), arguments: z.string().optional() }).strict().optional(),
  })
  .strict();

/** vLLM `ChatCompletionStreamResponse`, dumped with `exclude_unset=True` (serving_chat.py). */
const VllmChatChunk = z
  .object({
    id: z.string().startsWith('chatcmpl-'),
    object: z.literal('chat.completion.chunk'),
    created: Int,
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: Int,
          delta: z
            .object({
              role: z.literal('assistant').optional(),
              content: z.string().optional(),
              reasoning_content: z.null().optional(),
              tool_calls: z.array(DeltaToolCall).optional(),
            })
            .strict(),
          logprobs: ChatLogprobs.nullable(),
          finish_reason: z.string().nullable(),
          stop_reason: z.union([Int, z.string()]).nullable().optional(),
          token_ids: z.array(Int).nullable().optional(),
        })
        .strict(),
    ),
    usage: z.object({ prompt_tokens: Int, total_tokens: Int, completion_tokens: Int }).strict().optional(),
    prompt_token_ids: z.array(Int).nullable().optional(),
  })
  .strict();

const LegacyLogprobs = z
  .object({
    text_offset: z.array(Int),
    token_logprobs: z.array(z.number().nullable()),
    tokens: z.array(z.string()),
    top_logprobs: z.array(z.record(z.string(), z.number()).nullable()),
  })
  .strict();

/** vLLM `CompletionResponse` with `CompletionResponseChoice` (ids inside each choice). */
const VllmCompletionResponse = z
  .object({
    id: z.string().startsWith('cmpl-'),
    object: z.literal('text_completion'),
    created: Int,
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: Int,
          text: z.string(),
          logprobs: LegacyLogprobs.nullable(),
          finish_reason: z.string().nullable(),
          stop_reason: z.union([Int, z.string()]).nullable(),
          token_ids: z.array(Int).nullable(),
          prompt_logprobs: z.null(),
          prompt_token_ids: z.array(Int).nullable(),
        })
        .strict(),
    ),
    service_tier: z.null(),
    system_fingerprint: z.null(),
    usage: UsageInfo,
    kv_transfer_params: z.null(),
  })
  .strict();

const VllmCompletionChunk = z
  .object({
    id: z.string().startsWith('cmpl-'),
    object: z.literal('text_completion'),
    created: Int,
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: Int,
          text: z.string(),
          logprobs: LegacyLogprobs.nullable(),
          finish_reason: z.string().nullable(),
          stop_reason: z.union([Int, z.string()]).nullable(),
          prompt_token_ids: z.array(Int).optional(),
          token_ids: z.array(Int).optional(),
        })
        .strict(),
    ),
    usage: z.object({ prompt_tokens: Int, total_tokens: Int, completion_tokens: Int }).strict().optional(),
  })
  .strict();

/** `GenerateResponse` (vllm/entrypoints/serve/disagg/protocol.py). */
const VllmGenerateResponse = z
  .object({
    request_id: z.string(),
    choices: z.array(
      z
        .object({
          index: Int,
          logprobs: ChatLogprobs.nullable(),
          finish_reason: z.string().nullable(),
          token_ids: z.array(Int).nullable(),
        })
        .strict(),
    ),
    prompt_logprobs: z.null(),
    kv_transfer_params: z.null(),
  })
  .strict();

const VllmError = z
  .object({ error: z.object({ message: z.string(), type: z.string(), param: z.null(), code: Int }).strict() })
  .strict();

const ModelList = z
  .object({
    object: z.literal('list'),
    data: z.array(
      z
        .object({
          id: z.string(),
          object: z.literal('model'),
          created: Int,
          owned_by: z.string(),
          root: z.string().nullable(),
          parent: z.null().optional(),
          max_model_len: Int.nullable(),
          permission: z.array(z.unknown()).optional(),
        })
        .strict(),
    ),
  })
  .strict();

/** The request models the test sends, from the same files (only the fields these tests use). */
const VllmChatRequestIn = z
  .object({
    model: z.string(),
    messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant', 'tool']) }).passthrough()).min(1),
    stream: z.boolean().optional(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).strict().optional(),
    max_tokens: Int.optional(),
    max_completion_tokens: Int.optional(),
    logprobs: z.boolean().optional(),
    top_logprobs: Int.optional(),
    return_token_ids: z.boolean().optional(),
    return_tokens_as_token_ids: z.boolean().optional(),
    skip_special_tokens: z.boolean().optional(),
    tools: z
      .array(z.object({ type: z.literal('function'), function: z.object({ name: z.string() }).passthrough() }))
      .optional(),
    add_generation_prompt: z.boolean().optional(),
    continue_final_message: z.boolean().optional(),
    n: Int.optional(),
    stop: z.union([z.string(), z.array(z.string())]).optional(),
  })
  .strict();
const VllmCompletionRequestIn = z
  .object({
    model: z.string(),
    prompt: z.union([z.array(Int), z.string()]),
    max_tokens: Int.optional(),
    stream: z.boolean().optional(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).strict().optional(),
    return_token_ids: z.boolean().optional(),
    logprobs: Int.optional(),
  })
  .strict();

/** SGLang `/generate` output (tokenizer_manager.py `_handle_batch_output`, `add_logprob_to_meta_info`). */
const LogprobTriple = z.tuple([z.number().nullable(), Int, z.string().nullable()]);
const SglangOutput = z
  .object({
    text: z.string(),
    output_ids: z.array(Int),
    meta_info: z
      .object({
        id: z.string(),
        finish_reason: z
          .union([
            z.object({ type: z.literal('stop'), matched: z.union([Int, z.string()]) }).strict(),
            z.object({ type: z.literal('length'), length: Int }).strict(),
            z.object({ type: z.literal('abort'), message: z.string() }).strict(),
          ])
          .nullable(),
        prompt_tokens: Int,
        weight_version: z.string(),
        completion_tokens: Int,
        cached_tokens: Int,
        e2e_latency: z.number(),
        output_token_logprobs: z.array(LogprobTriple).optional(),
        input_token_logprobs: z.array(LogprobTriple).optional(),
        output_top_logprobs: z.array(z.array(LogprobTriple).nullable()).optional(),
        input_top_logprobs: z.array(z.array(LogprobTriple).nullable()).optional(),
      })
      .strict(),
  })
  .strict();
const SglangGenerateIn = z
  .object({
    text: z.string().optional(),
    input_ids: z.array(Int).optional(),
    image_data: z.array(z.string()).optional(),
    sampling_params: z
      .object({ max_new_tokens: Int.optional(), skip_special_tokens: z.boolean().optional() })
      .strict()
      .optional(),
    return_logprob: z.boolean().optional(),
    stream: z.boolean().optional(),
  })
  .strict();

const SglangUsage = z
  .object({
    prompt_tokens: Int,
    total_tokens: Int,
    completion_tokens: Int,
    prompt_tokens_details: z.null(),
    reasoning_tokens: Int,
  })
  .strict();
/** SGLang `ChatCompletionResponse` (entrypoints/openai/protocol.py), ids per choice with return_token_ids. */
const SglangChatResponse = z
  .object({
    id: z.string(),
    object: z.literal('chat.completion'),
    created: Int,
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: Int,
          message: z
            .object({
              role: z.literal('assistant'),
              content: z.string().nullable(),
              reasoning_content: z.null(),
              tool_calls: z
                .array(
                  z
                    .object({
                      id: z.string(),
                      index: Int.nullable(),
                      type: z.literal('function'),
                      function: z.object({ name: z.string(), arguments: z.string() }).strict(),
                    })
                    .strict(),
                )
                .nullable(),
            })
            .strict(),
          logprobs: ChatLogprobs.nullable(),
          finish_reason: z.enum(['stop', 'length', 'tool_calls', 'content_filter', 'function_call', 'abort']),
          matched_stop: z.union([Int, z.string()]).nullable(),
          prompt_token_ids: z.array(Int).optional(),
          token_ids: z.array(Int).optional(),
        })
        .strict(),
    ),
    usage: SglangUsage,
    metadata: z.object({ weight_version: z.string() }).strict(),
  })
  .strict();
const SglangCompletionResponse = z
  .object({
    id: z.string(),
    object: z.literal('text_completion'),
    created: Int,
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: Int,
          text: z.string(),
          logprobs: LegacyLogprobs.nullable(),
          finish_reason: z.enum(['stop', 'length', 'content_filter', 'abort']),
          matched_stop: z.union([Int, z.string()]).nullable(),
          prompt_token_ids: z.array(Int).optional(),
          token_ids: z.array(Int).optional(),
        })
        .strict(),
    ),
    usage: SglangUsage,
    metadata: z.object({ weight_version: z.string() }).strict(),
  })
  .strict();
const SglangErrorResponse = z
  .object({ object: z.literal('error'), message: z.string(), type: z.string(), param: z.null(), code: Int })
  .strict();

// --- the reference: Python jinja2 and the tokenizer -----------------------------------------------

/** Renders with Python jinja2 exactly as transformers does (render_jinja2.py), several cases at once. */
function pythonRender(cases: { template: string; variables: Record<string, unknown> }[]): string[] {
  const payload = JSON.stringify(
    cases.map((c) => ({ template: c.template, input: JSON.stringify(c.variables), parse_arguments: false })),
  );
  const run = spawnSync('python3', [RENDER_SCRIPT], { input: payload, maxBuffer: 64 * 1024 * 1024 });
  if (run.status !== 0) throw new Error(`render_jinja2.py failed: ${run.stderr.toString()}`);
  const out = JSON.parse(run.stdout.toString('utf8')) as ({ ok: string } | { error: string })[];
  return out.map((o) => {
    if ('error' in o) throw new Error(o.error);
    return o.ok;
  });
}

async function idsOf(profile: 'qwen2.5-vl' | 'qwen3-vl', text: string, padsPerImage = 0): Promise<number[]> {
  const ids = await profileNamed(profile).tokenizer.encode(text);
  return ids.flatMap((id) => (id === IMAGE_PAD && padsPerImage > 0 ? new Array(padsPerImage).fill(IMAGE_PAD) : [id]));
}

const encode = (profile: 'qwen2.5-vl' | 'qwen3-vl', text: string) => profileNamed(profile).tokenizer.encode(text);

// --- HTTP helpers ----------------------------------------------------------------------------------

async function post(base: string, path: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const r = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : undefined };
}

/** An SSE answer: every `data:` payload, in order; the terminator must be `[DONE]`. */
async function postStream(base: string, path: string, body: unknown): Promise<unknown[]> {
  const r = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const text = await r.text();
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  const events = text.split('\n\n').filter((e) => e.length > 0);
  for (const e of events) expect(e.startsWith('data: ')).toBe(true);
  return events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
}

/** A test's scripted generations, taken in arrival order by the stand-in. */
function scriptQueue() {
  const queue: ScriptedGeneration[] = [];
  return {
    push: (...g: ScriptedGeneration[]) => queue.push(...g),
    script: (_call: ReceivedCall, _index: number): ScriptedGeneration => {
      const next = queue.shift();
      if (!next) throw new Error('the test scripted no generation for this call');
      return next;
    },
    get pending() {
      return queue.length;
    },
  };
}

let png640x480: string;
beforeAll(async () => {
  const bytes = await sharp({ create: { width: 640, height: 480, channels: 3, background: '#5a7' } })
    .png()
    .toBuffer();
  png640x480 = `data:image/png;base64,${bytes.toString('base64')}`;
});

const imagePart = () => ({ type: 'image_url', image_url: { url: png640x480 } });

// --- vLLM ------------------------------------------------------------------------------------------

describe('vLLM stand-in (Qwen2.5-VL)', () => {
  const q = scriptQueue();
  let engine: EngineStandin;
  const MODEL = 'Qwen/Qwen2.5-VL-7B-Instruct';
  beforeAll(async () => {
    engine = await startEngineStandin({ engine: 'vllm', model: MODEL, script: q.script, vllmVersion: '0.11.0' });
  });
  afterAll(async () => {
    expect(q.pending).toBe(0);
    for (const call of engine.calls) {
      if (call.path === '/v1/chat/completions' && call.status === 200) VllmChatRequestIn.parse(call.body);
      if (call.path === '/v1/completions' && call.status === 200) VllmCompletionRequestIn.parse(call.body);
    }
    await engine.close();
  });

  const chat = (body: Record<string, unknown>) => post(engine.url, '/v1/chat/completions', { model: MODEL, ...body });

  it('renders a chat as vLLM does: string content as one text part, the image as {"type": "image"}, pads from its size', async () => {
    q.push({ text: 'A green square.' });
    const messages = [{ role: 'user', content: [imagePart(), { type: 'text', text: 'What is this?' }] }];
    const res = await chat({ messages, return_token_ids: true });
    expect(res.status).toBe(200);
    const body = VllmChatResponse.parse(res.json);
    const [expected] = pythonRender([
      {
        template: QWEN25_TEMPLATE,
        variables: {
          messages: [
            {
              role: 'user',
              content: [{ type: 'image' }, { type: 'text', text: 'What is this?' }],
            },
          ],
          add_generation_prompt: true,
        },
      },
    ]);
    expect(engine.calls.at(-1)?.promptText).toBe(expected);
    const promptIds = await idsOf('qwen2.5-vl', expected as string, PADS_640x480['qwen2.5-vl']);
    expect(body.prompt_token_ids).toEqual(promptIds);
    expect(body.prompt_token_ids?.filter((id) => id === IMAGE_PAD)).toHaveLength(391);
    expect(body.usage.prompt_tokens).toBe(promptIds.length);
    const choice = body.choices[0];
    expect(choice?.message.content).toBe('A green square.');
    expect(choice?.token_ids).toEqual([...(await encode('qwen2.5-vl', 'A green square.')), IM_END]);
    expect(choice?.finish_reason).toBe('stop');
    expect(choice?.stop_reason).toBeNull();
    expect(body.usage.completion_tokens).toBe(choice?.token_ids?.length);
    expect(engine.calls.at(-1)?.promptIds).toEqual(promptIds);
    expect(engine.calls.at(-1)?.generated?.ids).toEqual(choice?.token_ids);
  });

  it('returns scripted ids verbatim: a non-canonical split, an <|im_end|>, a generated <|image_pad|>', async () => {
    const [hel, lo] = [await encode('qwen2.5-vl', 'Hel'), await encode('qwen2.5-vl', 'lo world')];
    const split = [...hel, ...lo];
    expect(split).not.toEqual(await encode('qwen2.5-vl', 'Hello world'));
    q.push({ ids: [...split, IMAGE_PAD, IM_END] }, { ids: [...split, IMAGE_PAD, IM_END] });
    const messages = [{ role: 'user', content: 'Say hello.' }];
    const skipped = VllmChatResponse.parse((await chat({ messages, return_token_ids: true })).json);
    expect(skipped.choices[0]?.token_ids).toEqual([...split, IMAGE_PAD, IM_END]);
    expect(skipped.choices[0]?.message.content).toBe('Hello world');
    const kept = VllmChatResponse.parse(
      (await chat({ messages, return_token_ids: true, skip_special_tokens: false })).json,
    );
    expect(kept.choices[0]?.token_ids).toEqual([...split, IMAGE_PAD, IM_END]);
    expect(kept.choices[0]?.message.content).toBe('Hello world<|image_pad|>');
    const [expected] = pythonRender([
      {
        template: QWEN25_TEMPLATE,
        variables: {
          messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }],
          add_generation_prompt: true,
        },
      },
    ]);
    expect(kept.prompt_token_ids).toEqual(await idsOf('qwen2.5-vl', expected as string));
  });

  it('stops at max_tokens with finish_reason length and no <|im_end|>', async () => {
    q.push({ text: 'one two three four five' });
    const body = VllmChatResponse.parse(
      (await chat({ messages: [{ role: 'user', content: 'Count.' }], max_tokens: 3, return_token_ids: true })).json,
    );
    const all = await encode('qwen2.5-vl', 'one two three four five');
    expect(body.choices[0]?.token_ids).toEqual(all.slice(0, 3));
    expect(body.choices[0]?.finish_reason).toBe('length');
    expect(body.choices[0]?.message.content).toBe('one two three');
    expect(body.usage.completion_tokens).toBe(3);
  });

  it('writes logprobs per token, as "token_id:N" when asked, and scripted values exactly', async () => {
    const ids = await encode('qwen2.5-vl', 'Yes.');
    q.push({ ids: [...ids, IM_END], logprobs: [-0.5, -0.25, -0.125].slice(0, ids.length + 1) });
    const lps = [-0.5, -0.25, -0.125].slice(0, ids.length + 1);
    const body = VllmChatResponse.parse(
      (
        await chat({
          messages: [{ role: 'user', content: 'Ok?' }],
          logprobs: true,
          top_logprobs: 2,
          return_tokens_as_token_ids: true,
        })
      ).json,
    );
    const content = body.choices[0]?.logprobs?.content ?? [];
    expect(content.map((c) => c.token)).toEqual([...ids, IM_END].map((id) => `token_id:${id}`));
    expect(content.map((c) => c.logprob)).toEqual(lps);
    for (const c of content) {
      expect(c.top_logprobs).toHaveLength(2);
      expect(c.top_logprobs[0]?.token).toBe(c.token);
    }
    // Not asked for: no ids in the answer.
    expect(body.choices[0]?.token_ids).toBeNull();
    expect(body.prompt_token_ids).toBeNull();
  });

  it('gives each generated token a deterministic default logprob', async () => {
    q.push({ text: 'Fine' });
    const body = VllmChatResponse.parse(
      (await chat({ messages: [{ role: 'user', content: 'How?' }], logprobs: true, return_token_ids: true })).json,
    );
    const ids = body.choices[0]?.token_ids ?? [];
    expect(body.choices[0]?.logprobs?.content?.map((c) => c.logprob)).toEqual(
      ids.map((id, i) => defaultLogprob(id, i)),
    );
    expect(body.choices[0]?.logprobs?.content?.at(-1)?.token).toBe('<|im_end|>');
  });

  it('continue_final_message leaves the last assistant turn open', async () => {
    q.push({ text: ' blue.', appendEos: true });
    const messages = [
      { role: 'user', content: 'Sky colour?' },
      { role: 'assistant', content: 'It is' },
    ];
    const res = await chat({
      messages,
      continue_final_message: true,
      add_generation_prompt: false,
      return_token_ids: true,
    });
    const body = VllmChatResponse.parse(res.json);
    const text = engine.calls.at(-1)?.promptText ?? '';
    expect(text.endsWith('<|im_start|>assistant\nIt is')).toBe(true);
    expect(body.prompt_token_ids).toEqual(await idsOf('qwen2.5-vl', text));
  });

  it('refuses what vLLM refuses, in its error shape', async () => {
    const a = await chat({ messages: [{ role: 'user', content: 'x' }], stream_options: { include_usage: true } });
    expect(a.status).toBe(400);
    expect(VllmError.parse(a.json).error.message).toMatch(/stream=True/);
    const b = await chat({ messages: [{ role: 'user', content: 'x' }], top_logprobs: 2 });
    expect(b.status).toBe(400);
    expect(VllmError.parse(b.json).error.message).toMatch(/logprobs/);
    const c = await chat({
      messages: [
        { role: 'user', content: [imagePart()] },
        { role: 'user', content: 'x' },
      ],
      max_tokens: 40_000,
    });
    expect(c.status).toBe(400);
    expect(VllmError.parse(c.json).error.message).toMatch(/maximum context length is 32768/);
    const d = await post(engine.url, '/v1/chat/completions', { model: MODEL });
    expect(d.status).toBe(400);
    VllmError.parse(d.json);
    const e = await post(engine.url, '/v1/chat/completions', {
      model: 'other',
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(e.status).toBe(404);
    expect(VllmError.parse(e.json).error).toMatchObject({
      type: 'NotFoundError',
      message: 'The model `other` does not exist.',
    });
  });

  it('ends at a stop string: the text cut before it, the ids at the token that completes it', async () => {
    q.push({ text: 'Answer: 42. END and more' });
    const body = VllmChatResponse.parse(
      (await chat({ messages: [{ role: 'user', content: 'Q' }], stop: ['END'], return_token_ids: true })).json,
    );
    const choice = body.choices[0];
    expect(choice?.message.content).toBe('Answer: 42. ');
    expect(choice?.finish_reason).toBe('stop');
    expect(choice?.stop_reason).toBe('END');
    const all = await encode('qwen2.5-vl', 'Answer: 42. END and more');
    const ids = choice?.token_ids ?? [];
    expect(all.slice(0, ids.length)).toEqual(ids);
    const decoded = await profileNamed('qwen2.5-vl').tokenizer.decode(ids);
    expect(decoded.endsWith('END')).toBe(true);
  });

  it('serves /v1/models and answers an unknown path 404 and a wrong method 405', async () => {
    const models = ModelList.parse(await (await fetch(`${engine.url}/v1/models`)).json());
    expect(models.data[0]?.id).toBe(MODEL);
    expect(models.data[0]?.max_model_len).toBe(32768);
    const missing = await fetch(`${engine.url}/v1/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ detail: 'Not Found' });
    const wrong = await fetch(`${engine.url}/v1/chat/completions`);
    expect(wrong.status).toBe(405);
    expect(engine.calls.at(-1)?.path).toBe('/v1/chat/completions');
    expect(engine.calls.at(-1)?.method).toBe('GET');
  });

  it('streams a chat that reassembles to the unstreamed answer, ids and usage included', async () => {
    const text = 'Streaming 𝔸𝔹 works.'; // 𝔹 is two tokens, the first an incomplete UTF-8 byte run
    q.push({ text }, { text });
    const request = {
      messages: [{ role: 'user', content: [imagePart(), { type: 'text', text: 'Go.' }] }],
      return_token_ids: true,
      logprobs: true,
    };
    const whole = VllmChatResponse.parse((await chat(request)).json);
    const chunks = (
      await postStream(engine.url, '/v1/chat/completions', {
        model: MODEL,
        ...request,
        stream: true,
        stream_options: { include_usage: true },
      })
    ).map((c) => VllmChatChunk.parse(c));
    const first = chunks[0];
    expect(first?.choices[0]?.delta).toEqual({ role: 'assistant', content: '' });
    expect(first?.prompt_token_ids).toEqual(whole.prompt_token_ids);
    const body = chunks.slice(1, -1);
    expect(body.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(whole.choices[0]?.message.content);
    expect(body.some((c) => c.choices[0]?.delta.content === '')).toBe(true);
    expect(body.every((c) => !c.choices[0]?.delta.content?.includes('\uFFFD'))).toBe(true);
    expect(body.flatMap((c) => c.choices[0]?.token_ids ?? [])).toEqual(whole.choices[0]?.token_ids);
    expect(body.flatMap((c) => c.choices[0]?.logprobs?.content ?? [])).toEqual(whole.choices[0]?.logprobs?.content);
    expect(body.at(-1)?.choices[0]?.finish_reason).toBe('stop');
    expect(body.slice(0, -1).every((c) => c.choices[0]?.finish_reason === null)).toBe(true);
    const usage = chunks.at(-1);
    expect(usage?.choices).toEqual([]);
    expect(usage?.usage).toEqual({
      prompt_tokens: whole.usage.prompt_tokens,
      total_tokens: whole.usage.total_tokens,
      completion_tokens: whole.usage.completion_tokens,
    });
  });

  it('takes a token-id prompt on /v1/completions, streamed and not', async () => {
    const prompt = await idsOf('qwen2.5-vl', '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    q.push({ text: 'Hello!' }, { text: 'Hello!' });
    const res = await post(engine.url, '/v1/completions', {
      model: MODEL,
      prompt,
      max_tokens: 32,
      return_token_ids: true,
    });
    const body = VllmCompletionResponse.parse(res.json);
    expect(engine.calls.at(-1)?.promptIds).toEqual(prompt);
    expect(body.choices[0]?.prompt_token_ids).toEqual(prompt);
    expect(body.choices[0]?.token_ids).toEqual([...(await encode('qwen2.5-vl', 'Hello!')), IM_END]);
    expect(body.choices[0]?.text).toBe('Hello!');
    expect(body.usage.prompt_tokens).toBe(prompt.length);
    const chunks = (
      await postStream(engine.url, '/v1/completions', {
        model: MODEL,
        prompt,
        max_tokens: 32,
        return_token_ids: true,
        stream: true,
        stream_options: { include_usage: true },
      })
    ).map((c) => VllmCompletionChunk.parse(c));
    const tokens = chunks.filter((c) => c.choices.length > 0);
    expect(tokens[0]?.choices[0]?.prompt_token_ids).toEqual(prompt);
    expect(tokens.map((c) => c.choices[0]?.text).join('')).toBe(body.choices[0]?.text);
    expect(tokens.flatMap((c) => c.choices[0]?.token_ids ?? [])).toEqual(body.choices[0]?.token_ids);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(body.usage.completion_tokens);
  });

  it('defaults /v1/completions to 16 tokens and writes legacy logprobs', async () => {
    q.push({ text: 'a b c d e f g h i j k l m n o p q r s t' });
    const res = await post(engine.url, '/v1/completions', { model: MODEL, prompt: 'Letters:', logprobs: 1 });
    const body = VllmCompletionResponse.parse(res.json);
    expect(body.choices[0]?.finish_reason).toBe('length');
    expect(body.usage.completion_tokens).toBe(16);
    expect(body.choices[0]?.logprobs?.tokens.join('')).toBe(body.choices[0]?.text);
    expect(body.choices[0]?.token_ids).toBeNull();
  });

  it('serves /inference/v1/generate: ids in, ids out', async () => {
    const prompt = await idsOf('qwen2.5-vl', '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    q.push({ ids: [9707, IM_END] });
    const res = await post(engine.url, '/inference/v1/generate', {
      token_ids: prompt,
      sampling_params: { max_tokens: 8, logprobs: 0 },
    });
    const body = VllmGenerateResponse.parse(res.json);
    expect(body.choices[0]?.token_ids).toEqual([9707, IM_END]);
    expect(body.choices[0]?.finish_reason).toBe('stop');
    expect(engine.calls.at(-1)?.promptIds).toEqual(prompt);
    const bad = await post(engine.url, '/inference/v1/generate', {
      token_ids: prompt,
      sampling_params: {},
      features: { mm_placeholders: { image: [{ offset: 0, length: 3 }] } },
    });
    expect(bad.status).toBe(400);
    expect(VllmError.parse(bad.json).error.message).toMatch(/not a run of <\|image_pad\|>/);
  });
});

describe('vLLM stand-in (Qwen3-VL): tool calls with the hermes parser', () => {
  const q = scriptQueue();
  let engine: EngineStandin;
  const MODEL = 'Qwen/Qwen3-VL-8B-Instruct';
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Weather of a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } } },
      },
    },
    { type: 'function', function: { name: 'zoom' } },
  ];
  beforeAll(async () => {
    engine = await startEngineStandin({ engine: 'vllm', model: MODEL, script: q.script });
  });
  afterAll(async () => {
    expect(q.pending).toBe(0);
    await engine.close();
  });

  const toolText = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2.0}}\n</tool_call>';

  it('renders the tools as vLLM dumps them and the history with decoded arguments', async () => {
    q.push({ text: toolText });
    const messages = [
      { role: 'user', content: 'Weather?' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'zoom', arguments: '{"x":1}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: [imagePart(), { type: 'text', text: 'zoomed' }] },
    ];
    const res = await post(engine.url, '/v1/chat/completions', {
      model: MODEL,
      messages,
      tools,
      return_token_ids: true,
    });
    expect(res.status).toBe(200);
    const body = VllmChatResponse.parse(res.json);
    const [expected] = pythonRender([
      {
        template: QWEN3_TEMPLATE,
        variables: {
          messages: [
            { role: 'user', content: [{ type: 'text', text: 'Weather?' }] },
            {
              role: 'assistant',
              // "" becomes one empty text part: a non-empty list, so Qwen3-VL writes "\n" before the call.
              content: [{ type: 'text', text: '' }],
              tool_calls: [{ id: 'c1', type: 'function', function: { name: 'zoom', arguments: { x: 1 } } }],
            },
            { role: 'tool', content: [{ type: 'image' }, { type: 'text', text: 'zoomed' }], tool_call_id: 'c1' },
          ],
          tools: [
            {
              type: 'function',
              function: {
                name: 'get_weather',
                description: 'Weather of a city',
                parameters: { type: 'object', properties: { city: { type: 'string' } } },
              },
            },
            { type: 'function', function: { name: 'zoom', description: null, parameters: null } },
          ],
          add_generation_prompt: true,
        },
      },
    ]);
    expect(engine.calls.at(-1)?.promptText).toBe(expected);
    expect(expected).toContain(
      '{"type": "function", "function": {"name": "zoom", "description": null, "parameters": null}}',
    );
    expect(expected).toContain('<|im_start|>assistant\n\n<tool_call>\n{"name": "zoom", "arguments": {"x": 1}}');
    expect(body.prompt_token_ids).toEqual(await idsOf('qwen3-vl', expected as string, PADS_640x480['qwen3-vl']));
    const choice = body.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.message.content).toBeNull();
    expect(choice?.message.tool_calls).toHaveLength(1);
    expect(choice?.message.tool_calls[0]?.function).toEqual({
      name: 'get_weather',
      arguments: '{"city": "Paris", "days": 2.0}',
    });
    expect(choice?.message.tool_calls[0]?.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(choice?.token_ids).toEqual([...(await encode('qwen3-vl', toolText)), IM_END]);
    expect(choice?.token_ids?.[0]).toBe(151657);
  });

  it('keeps text before the call as content, and a text without a call as plain content', async () => {
    q.push({ text: `Let me check.\n${toolText}` }, { text: 'No tool needed.' });
    const msgs = [{ role: 'user', content: 'Weather?' }];
    const a = VllmChatResponse.parse(
      (await post(engine.url, '/v1/chat/completions', { model: MODEL, messages: msgs, tools })).json,
    );
    expect(a.choices[0]?.message.content).toBe('Let me check.\n');
    expect(a.choices[0]?.message.tool_calls[0]?.function.name).toBe('get_weather');
    const b = VllmChatResponse.parse(
      (await post(engine.url, '/v1/chat/completions', { model: MODEL, messages: msgs, tools })).json,
    );
    expect(b.choices[0]?.finish_reason).toBe('stop');
    expect(b.choices[0]?.message.tool_calls).toEqual([]);
    expect(b.choices[0]?.message.content).toBe('No tool needed.');
  });

  it('streams a tool call that reassembles to the unstreamed one', async () => {
    q.push({ text: `Checking.\n${toolText}` }, { text: `Checking.\n${toolText}` });
    const request = { model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], tools, return_token_ids: true };
    const whole = VllmChatResponse.parse((await post(engine.url, '/v1/chat/completions', request)).json);
    const chunks = (await postStream(engine.url, '/v1/chat/completions', { ...request, stream: true })).map((c) =>
      VllmChatChunk.parse(c),
    );
    const deltas = chunks.slice(1).map((c) => c.choices[0]?.delta);
    expect(deltas.map((d) => d?.content ?? '').join('')).toBe(whole.choices[0]?.message.content);
    const calls = deltas.flatMap((d) => d?.tool_calls ?? []);
    expect(calls[0]?.function?.name).toBe('get_weather');
    expect(calls[0]?.id).toMatch(/^chatcmpl-tool-/);
    expect(calls.map((c) => c.function?.arguments ?? '').join('')).toBe(
      whole.choices[0]?.message.tool_calls[0]?.function.arguments,
    );
    expect(chunks.slice(1).flatMap((c) => c.choices[0]?.token_ids ?? [])).toEqual(whole.choices[0]?.token_ids);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('tool_calls');
  });
});

describe('vLLM before 0.10.2', () => {
  it('ignores return_token_ids: the answer has no ids', async () => {
    const engine = await startEngineStandin({
      engine: 'vllm',
      model: 'qwen2.5-vl',
      vllmVersion: '0.10.1',
      script: () => ({ text: 'ok' }),
    });
    try {
      const body = VllmChatResponse.parse(
        (
          await post(engine.url, '/v1/chat/completions', {
            model: 'qwen2.5-vl',
            messages: [{ role: 'user', content: 'x' }],
            return_token_ids: true,
          })
        ).json,
      );
      expect(body.prompt_token_ids).toBeNull();
      expect(body.choices[0]?.token_ids).toBeNull();
      expect(engine.calls[0]?.generated?.ids).toEqual([...(await encode('qwen2.5-vl', 'ok')), IM_END]);
    } finally {
      await engine.close();
    }
  });
});

describe('faults', () => {
  const q = scriptQueue();
  let engine: EngineStandin;
  beforeAll(async () => {
    engine = await startEngineStandin({ engine: 'vllm', model: 'qwen2.5-vl', script: q.script });
  });
  afterAll(async () => {
    await engine.close();
  });
  const request = { model: 'qwen2.5-vl', messages: [{ role: 'user', content: 'x' }] };

  it('answers 500 and 503 in the engine error shape for the next `count` requests, then serves again', async () => {
    engine.fail('503', { count: 2 });
    for (let i = 0; i < 2; i++) {
      const r = await post(engine.url, '/v1/chat/completions', request);
      expect(r.status).toBe(503);
      expect(VllmError.parse(r.json).error.code).toBe(503);
    }
    engine.fail('500');
    expect((await post(engine.url, '/v1/chat/completions', request)).status).toBe(500);
    q.push({ text: 'back' });
    const ok = await post(engine.url, '/v1/chat/completions', request);
    expect(ok.status).toBe(200);
    expect(engine.calls.slice(-4).map((c) => c.fault)).toEqual(['503', '503', '500', undefined]);
  });

  it('never answers on timeout (until the client gives up), then serves the next request', async () => {
    engine.fail('timeout');
    const before = engine.calls.length;
    const controller = new AbortController();
    const pending = fetch(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(request),
      signal: controller.signal,
    });
    let answered = false;
    void pending.then(() => (answered = true)).catch(() => undefined);
    // The engine has taken the request and returned without a word: nothing will answer it.
    await engine.received(before + 1);
    expect(engine.calls.at(-1)!.fault).toBe('timeout');
    expect(answered).toBe(false);
    controller.abort();
    await expect(pending).rejects.toThrow();
    q.push({ text: 'ok' });
    expect((await post(engine.url, '/v1/chat/completions', request)).status).toBe(200);
  });

  it('resets the connection halfway through an answer, streamed or not', async () => {
    q.push({ text: 'lost' });
    engine.fail('reset');
    await expect(post(engine.url, '/v1/chat/completions', request)).rejects.toThrow();
    q.push({ text: 'lost in a stream of several tokens' });
    engine.fail('reset');
    const r = await fetch(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ ...request, stream: true }),
    });
    expect(r.status).toBe(200);
    await expect(r.text()).rejects.toThrow();
  });

  it('holds a request unanswered until it is released, then answers it', async () => {
    q.push({ text: 'late' });
    const held = engine.hold();
    let answered = false;
    const pending = post(engine.url, '/v1/chat/completions', request).then((r) => {
      answered = true;
      return r;
    });
    await held.arrived;
    expect(engine.calls.at(-1)!.fault).toBe('hold');
    expect(answered).toBe(false);
    held.release();
    expect((await pending).status).toBe(200);
  });

  it('models connection refused by close()', async () => {
    const other = await startEngineStandin({ engine: 'vllm', model: 'qwen2.5-vl', script: () => ({ text: 'x' }) });
    const url = other.url;
    await other.close();
    await expect(fetch(`${url}/v1/models`)).rejects.toThrow();
  });
});

// --- SGLang ------------------------------------------------------------------------------------------

describe('SGLang stand-in (Qwen3-VL)', () => {
  const q = scriptQueue();
  let engine: EngineStandin;
  const MODEL = 'Qwen/Qwen3-VL-8B-Instruct';
  beforeAll(async () => {
    engine = await startEngineStandin({ engine: 'sglang', model: MODEL, script: q.script });
  });
  afterAll(async () => {
    expect(q.pending).toBe(0);
    for (const call of engine.calls)
      if (call.path === '/generate' && call.status === 200) SglangGenerateIn.parse(call.body);
    await engine.close();
  });

  const turn =
    '<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe.<|im_end|>\n<|im_start|>assistant\n';

  it('/generate with input_ids and image_data: one pad per image or pre-expanded, both expanded by the processor', async () => {
    q.push({ text: 'A square.' }, { text: 'A square.' });
    const single = await encode('qwen3-vl', turn);
    const expanded = await idsOf('qwen3-vl', turn, PADS_640x480['qwen3-vl']);
    const a = await post(engine.url, '/generate', {
      input_ids: single,
      image_data: [png640x480],
      sampling_params: { max_new_tokens: 32 },
      return_logprob: true,
    });
    expect(a.status).toBe(200);
    const outA = SglangOutput.parse(a.json);
    expect(engine.calls.at(-1)?.promptIds).toEqual(expanded);
    expect(outA.meta_info.prompt_tokens).toBe(expanded.length);
    const b = await post(engine.url, '/generate', {
      input_ids: expanded,
      image_data: [png640x480],
      sampling_params: { max_new_tokens: 32 },
      return_logprob: true,
    });
    const outB = SglangOutput.parse(b.json);
    expect(engine.calls.at(-1)?.promptIds).toEqual(expanded);
    expect(outB.output_ids).toEqual(outA.output_ids);
    expect(outA.output_ids).toEqual([...(await encode('qwen3-vl', 'A square.')), IM_END]);
    expect(outA.text).toBe('A square.');
    expect(outA.meta_info.finish_reason).toEqual({ type: 'stop', matched: IM_END });
    expect(outA.meta_info.output_token_logprobs?.map((t) => t[1])).toEqual(outA.output_ids);
    expect(outA.meta_info.output_token_logprobs?.every((t) => t[2] === null)).toBe(true);
    expect(outA.meta_info.completion_tokens).toBe(outA.output_ids.length);
  });

  it('keeps given input_ids as they are without images, but re-tokenizes them with images', async () => {
    const hel = await encode('qwen3-vl', 'Hel');
    const lo = await encode('qwen3-vl', 'lo there');
    const head = await encode('qwen3-vl', '<|im_start|>user\n');
    const tail = await encode('qwen3-vl', '<|im_end|>\n<|im_start|>assistant\n');
    const nonCanonical = [...head, ...hel, ...lo, ...tail];
    expect(nonCanonical).not.toEqual(
      await encode('qwen3-vl', '<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n'),
    );
    q.push({ text: 'ok' }, { text: 'ok' });
    await post(engine.url, '/generate', { input_ids: nonCanonical, sampling_params: { max_new_tokens: 8 } });
    expect(engine.calls.at(-1)?.promptIds).toEqual(nonCanonical);
    const withImage = [
      ...head,
      ...(await encode('qwen3-vl', '<|vision_start|><|image_pad|><|vision_end|>')),
      ...hel,
      ...lo,
      ...tail,
    ];
    await post(engine.url, '/generate', {
      input_ids: withImage,
      image_data: [png640x480],
      sampling_params: { max_new_tokens: 8 },
    });
    expect(engine.calls.at(-1)?.promptIds).toEqual(
      await idsOf(
        'qwen3-vl',
        '<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hello there<|im_end|>\n<|im_start|>assistant\n',
        300,
      ),
    );
  });

  it('/generate stops at max_new_tokens with {"type": "length"} and streams cumulative outputs', async () => {
    q.push({ text: 'one two three four' }, { text: 'one two three four' });
    const prompt = await encode('qwen3-vl', '<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n');
    const whole = SglangOutput.parse(
      (await post(engine.url, '/generate', { input_ids: prompt, sampling_params: { max_new_tokens: 2 } })).json,
    );
    expect(whole.meta_info.finish_reason).toEqual({ type: 'length', length: 2 });
    expect(whole.output_ids).toEqual((await encode('qwen3-vl', 'one two three four')).slice(0, 2));
    const chunks = (
      await postStream(engine.url, '/generate', {
        input_ids: prompt,
        sampling_params: { max_new_tokens: 2 },
        stream: true,
      })
    ).map((c) => SglangOutput.parse(c));
    expect(chunks).toHaveLength(2);
    expect(chunks[0]?.meta_info.finish_reason).toBeNull();
    expect(chunks[0]?.output_ids).toEqual(whole.output_ids.slice(0, 1));
    const { id: _a, ...lastMeta } = chunks.at(-1)?.meta_info ?? {};
    const { id: _b, ...wholeMeta } = whole.meta_info;
    expect({ ...chunks.at(-1), meta_info: lastMeta }).toEqual({ ...whole, meta_info: wholeMeta });
  });

  it('answers a bad /generate with its native error shape', async () => {
    const r = await post(engine.url, '/generate', { sampling_params: {} });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: { message: 'Either text, input_ids or input_embeds should be provided.' } });
    const more = await post(engine.url, '/generate', { text: `${turn}${turn}`, image_data: [png640x480] });
    expect(more.status).toBe(400);
    expect((r.json as { error: { message: string } }).error.message).toBeTypeOf('string');
    expect((more.json as { error: { message: string } }).error.message).toMatch(/More .* tokens found than/);
  });

  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];

  it('renders chat as SGLang does (tools as their function objects) and parses Qwen 2.5 tool calls', async () => {
    const toolText =
      'I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    q.push({ text: toolText });
    const messages = [{ role: 'user', content: [imagePart(), { type: 'text', text: 'Weather here?' }] }];
    const res = await post(engine.url, '/v1/chat/completions', {
      model: MODEL,
      messages,
      tools,
      return_token_ids: true,
    });
    expect(res.status).toBe(200);
    const body = SglangChatResponse.parse(res.json);
    const [expected] = pythonRender([
      {
        template: QWEN3_TEMPLATE,
        variables: {
          messages: [{ role: 'user', content: [{ type: 'image' }, { type: 'text', text: 'Weather here?' }] }],
          tools: [{ description: null, name: 'get_weather', parameters: { type: 'object' }, strict: false }],
          add_generation_prompt: true,
          reasoning_effort: null,
        },
      },
    ]);
    expect(engine.calls.at(-1)?.promptText).toBe(expected);
    const promptIds = await idsOf('qwen3-vl', expected as string, 300);
    const choice = body.choices[0];
    expect(choice?.prompt_token_ids).toEqual(promptIds);
    expect(body.usage.prompt_tokens).toBe(promptIds.length);
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.matched_stop).toBeNull();
    expect(choice?.message.content).toBe('I will check.');
    expect(choice?.message.tool_calls?.[0]?.function).toEqual({ name: 'get_weather', arguments: '{"city": "Paris"}' });
    expect(choice?.message.tool_calls?.[0]?.index).toBe(0);
    expect(choice?.token_ids).toEqual([...(await encode('qwen3-vl', toolText)), IM_END]);
  });

  it('chat without return_token_ids has no ids; streaming with them is refused', async () => {
    q.push({ text: 'Plain.' });
    const body = SglangChatResponse.parse(
      (await post(engine.url, '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Hi' }] }))
        .json,
    );
    expect(body.choices[0]?.token_ids).toBeUndefined();
    expect(body.choices[0]?.matched_stop).toBe(IM_END);
    expect(body.choices[0]?.message.content).toBe('Plain.');
    const refused = await post(engine.url, '/v1/chat/completions', {
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
      return_token_ids: true,
    });
    expect(refused.status).toBe(400);
    SglangErrorResponse.parse(refused.json);
  });

  it('streams chat content that reassembles to the unstreamed answer', async () => {
    q.push({ text: 'Two words.' }, { text: 'Two words.' });
    const request = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }] };
    const whole = SglangChatResponse.parse((await post(engine.url, '/v1/chat/completions', request)).json);
    const chunks = await postStream(engine.url, '/v1/chat/completions', {
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    const parsed = chunks.map(
      (c) => c as { choices: { delta: { content: string | null }; finish_reason: string | null }[]; usage: unknown },
    );
    expect(parsed.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(whole.choices[0]?.message.content);
    expect(parsed.at(-2)?.choices[0]?.finish_reason).toBe('stop');
    expect(parsed.at(-1)?.usage).toEqual(whole.usage);
  });

  it('/v1/completions with a token prompt returns per-choice ids, streamed and not', async () => {
    const prompt = await encode('qwen3-vl', '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    q.push({ text: 'Hey.' }, { text: 'Hey.' });
    const body = SglangCompletionResponse.parse(
      (await post(engine.url, '/v1/completions', { model: MODEL, prompt, return_token_ids: true })).json,
    );
    expect(body.choices[0]?.prompt_token_ids).toEqual(prompt);
    expect(body.choices[0]?.token_ids).toEqual([...(await encode('qwen3-vl', 'Hey.')), IM_END]);
    const chunks = (await postStream(engine.url, '/v1/completions', {
      model: MODEL,
      prompt,
      return_token_ids: true,
      stream: true,
    })) as {
      choices: { text: string; prompt_token_ids?: number[]; token_ids?: number[] }[];
    }[];
    expect(chunks[0]?.choices[0]?.prompt_token_ids).toEqual(prompt);
    expect(chunks.flatMap((c) => c.choices[0]?.token_ids ?? [])).toEqual(body.choices[0]?.token_ids);
    expect(chunks.map((c) => c.choices[0]?.text).join('')).toBe(body.choices[0]?.text);
  });

  it("answers faults on OpenAI routes in SGLang's ErrorResponse shape", async () => {
    engine.fail('503');
    const r = await post(engine.url, '/v1/chat/completions', {
      model: MODEL,
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(r.status).toBe(503);
    expect(SglangErrorResponse.parse(r.json).code).toBe(503);
    const models = await (await fetch(`${engine.url}/v1/models`)).json();
    expect((models as { data: { owned_by: string }[] }).data[0]?.owned_by).toBe('sglang');
  });
});
