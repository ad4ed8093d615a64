// vLLM's endpoints in the engine stand-in: `/v1/chat/completions`, `/v1/completions`,
// `/inference/v1/generate` and `/v1/models`, with the request and response models of
// vllm/entrypoints/openai/protocol.py and the serving code's answers (docs/reference/engine-protocols.md).
import { z } from 'zod';
import {
  alternatives,
  chatLogprobs,
  EngineError,
  type EngineContext,
  type Generation,
  type GenerationLimits,
  type Handler,
  maxTokensFor,
  nowSeconds,
  parseBody,
  pixelOverrides,
  randomHex,
  type ReceivedCall,
  recordGeneration,
  type Reply,
  Stop,
  stopList,
  StreamOptions,
  textDeltas,
  tokenText,
  versionAtLeast,
} from './engine-core.ts';
import {
  decodeIds,
  encodeText,
  expandImagePads,
  imagePadCount,
  type PythonRenderer,
  REFERENCE_IDS,
} from './engine-reference.ts';

// --- zod models of the requests, written from the protocol files ---------------------------------

const VllmSampling = {
  model: z.string().nullish(),
  n: z.number().int().min(1).nullish(),
  stop: Stop,
  stream: z.boolean().nullish(),
  stream_options: StreamOptions.nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  seed: z.number().int().nullish(),
  user: z.string().nullish(),
  stop_token_ids: z.array(z.number().int()).nullish(),
  include_stop_str_in_output: z.boolean().optional(),
  ignore_eos: z.boolean().optional(),
  skip_special_tokens: z.boolean().optional(),
  prompt_logprobs: z.number().int().nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  return_token_ids: z.boolean().nullish(),
  request_id: z.string().optional(),
  cache_salt: z.string().min(1).nullish(),
  priority: z.number().int().optional(),
};

export const VllmChatRequest = z
  .object({
    ...VllmSampling,
    messages: z.array(z.object({ role: z.string() }).passthrough()),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().nullish(),
    max_tokens: z.number().int().nullish(),
    max_completion_tokens: z.number().int().nullish(),
    tools: z
      .array(
        z
          .object({
            type: z.literal('function').optional(),
            function: z
              .object({
                name: z.string(),
                description: z.string().nullish(),
                parameters: z.record(z.string(), z.unknown()).nullish(),
              })
              .passthrough(),
          })
          .passthrough(),
      )
      .nullish(),
    tool_choice: z
      .union([
        z.literal('none'),
        z.literal('auto'),
        z.literal('required'),
        z.object({ type: z.literal('function').optional(), function: z.object({ name: z.string() }) }),
      ])
      .nullish(),
    echo: z.boolean().optional(),
    add_generation_prompt: z.boolean().optional(),
    continue_final_message: z.boolean().optional(),
    add_special_tokens: z.boolean().optional(),
    documents: z.array(z.record(z.string(), z.string())).nullish(),
    chat_template: z.string().nullish(),
    chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
    mm_processor_kwargs: z.record(z.string(), z.unknown()).nullish(),
  })
  .passthrough();
export type VllmChatRequest = z.infer<typeof VllmChatRequest>;

export const VllmCompletionRequest = z
  .object({
    ...VllmSampling,
    prompt: z.union([
      z.array(z.number().int()).min(1),
      z.array(z.array(z.number().int()).min(1)).min(1),
      z.string(),
      z.array(z.string()).min(1),
    ]),
    echo: z.boolean().nullish(),
    logprobs: z.number().int().nullish(),
    max_tokens: z.number().int().nullish(),
    suffix: z.string().nullish(),
    add_special_tokens: z.boolean().optional(),
  })
  .passthrough();
export type VllmCompletionRequest = z.infer<typeof VllmCompletionRequest>;

export function vllmRoutes(engine: EngineContext): Record<string, Record<string, Handler>> {
  return {
    '/v1/models': {
      GET: async (_call, _body, reply) => {
        reply.json(200, {
          object: 'list',
          data: [
            {
              id: engine.model,
              object: 'model',
              created: nowSeconds(),
              owned_by: 'vllm',
              root: engine.model,
              parent: null,
              max_model_len: engine.maxModelLen,
              permission: [],
            },
          ],
        });
      },
    },
    '/health': { GET: async (_c, _b, reply) => reply.empty(200) },
    '/version': { GET: async (_c, _b, reply) => reply.json(200, { version: engine.vllmVersion }) },
    '/v1/chat/completions': { POST: (call, bodyText, reply) => vllmChat(engine, call, bodyText, reply) },
    '/v1/completions': { POST: (call, _bodyText, reply) => vllmCompletion(engine, call, reply) },
    ...(engine.generateEndpoint
      ? {
          '/inference/v1/generate': {
            POST: (call: ReceivedCall, _b: string, reply: Reply) => vllmGenerate(engine, call, reply),
          },
        }
      : {}),
  };
}

/** serving_engine.py `_check_model`: a request may leave `model` out, or name the served model. */
function checkModel(engine: EngineContext, model: string | null | undefined): void {
  if (model && model !== engine.model)
    throw new EngineError(404, `The model \`${model}\` does not exist.`, 'NotFoundError');
}

function tokenIdsSupported(engine: EngineContext): boolean {
  return versionAtLeast(engine.vllmVersion, '0.10.2');
}

interface ToolCallOut {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** The tool calls of an answer: hermes for "auto", vLLM's reading of a forced tool choice otherwise. */
async function toolCallsOf(
  engine: EngineContext,
  req: VllmChatRequest,
  text: string,
): Promise<{ toolsCalled: boolean; toolCalls: ToolCallOut[]; content: string | null }> {
  const choice = req.tool_choice;
  if (choice !== 'required' && (typeof choice !== 'object' || choice === null)) return hermesToolCalls(engine, text);
  const parsed = await engine.renderer.forcedToolCalls(text, choice);
  return {
    toolsCalled: parsed.tools_called,
    toolCalls: parsed.tool_calls.map((c) => ({
      id: `chatcmpl-tool-${randomHex()}`,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    })),
    content: parsed.content,
  };
}

/** vLLM's hermes parser (hermes_tool_parser.py `extract_tool_calls`), run in Python for its json.dumps. */
async function hermesToolCalls(
  engine: EngineContext,
  text: string,
): Promise<{ toolsCalled: boolean; toolCalls: ToolCallOut[]; content: string | null }> {
  const parsed = await engine.renderer.hermes(text);
  return {
    toolsCalled: parsed.tools_called,
    toolCalls: parsed.tool_calls.map((c) => ({
      id: `chatcmpl-tool-${randomHex()}`,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    })),
    content: parsed.content,
  };
}

async function vllmChat(engine: EngineContext, call: ReceivedCall, bodyText: string, reply: Reply): Promise<void> {
  const req = parseBody(VllmChatRequest, call.body);
  checkModel(engine, req.model);
  if (req.stream_options && !req.stream)
    throw new EngineError(400, 'Stream options can only be defined when `stream=True`.');
  if (req.top_logprobs !== null && req.top_logprobs !== undefined) {
    if (req.top_logprobs < 0 && req.top_logprobs !== -1)
      throw new EngineError(400, '`top_logprobs` must be a positive value or -1.');
    if ((req.top_logprobs === -1 || req.top_logprobs > 0) && !req.logprobs)
      throw new EngineError(400, 'when using `top_logprobs`, `logprobs` must be set to true.');
  }
  if (req.continue_final_message && req.add_generation_prompt)
    throw new EngineError(400, 'Cannot set both `continue_final_message` and `add_generation_prompt` to True.');
  const toolChoice = req.tool_choice ?? (req.tools && req.tools.length > 0 ? 'auto' : 'none');
  if (toolChoice !== 'none' && !req.tools) throw new EngineError(400, 'When using `tool_choice`, `tools` must be set.');
  if (toolChoice === 'auto' && !engine.toolParser)
    throw new EngineError(
      400,
      '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    );
  if (
    req.chat_template_kwargs &&
    ('chat_template' in req.chat_template_kwargs || 'tokenize' in req.chat_template_kwargs)
  )
    throw new EngineError(400, 'chat_template_kwargs may not set chat_template or tokenize');

  let rendered: Awaited<ReturnType<PythonRenderer['renderChat']>>;
  try {
    rendered = await engine.renderer.renderChat('vllm', req.chat_template ?? engine.template, bodyText);
  } catch (e) {
    throw new EngineError(400, (e as Error).message);
  }
  call.promptText = rendered.prompt;
  const pads = await Promise.all(
    rendered.images.map((url) =>
      imagePadCount(engine.renderer, engine.profile, url, pixelOverrides(req.mm_processor_kwargs)).catch((e: Error) => {
        throw new EngineError(400, `image: ${e.message}`);
      }),
    ),
  );
  let promptIds: number[];
  try {
    promptIds = expandImagePads(await encodeText(engine.profile, rendered.prompt), pads);
  } catch (e) {
    throw new EngineError(400, (e as Error).message);
  }
  call.promptIds = promptIds;

  const maxTokens = maxTokensFor(engine, req.max_completion_tokens ?? req.max_tokens, promptIds.length);
  call.sampling = await engine.renderer.samplingParams('chat', bodyText, maxTokens);
  const limits: GenerationLimits = {
    maxTokens,
    skipSpecialTokens: req.skip_special_tokens ?? true,
    stop: stopList(req.stop),
    stopTokenIds: req.stop_token_ids ?? [],
  };
  const n = req.n ?? 1;
  const gens: Generation[] = [];
  for (let i = 0; i < n; i++) {
    const gen = await engine.generate(call, limits);
    recordGeneration(call, promptIds, gen);
    gens.push(gen);
  }

  const withIds = (req.return_token_ids ?? false) && tokenIdsSupported(engine);
  const forced = toolChoice === 'required' || typeof toolChoice === 'object';
  const parseTools = (req.tools && req.tools.length > 0 && toolChoice === 'auto' && engine.toolParser) || forced;
  const requestId = `chatcmpl-${req.request_id ?? randomHex()}`;
  const created = nowSeconds();
  const topLogprobs = req.top_logprobs ?? 0;
  const asTokenId = req.return_tokens_as_token_ids ?? false;

  if (req.stream) {
    reply.sse(
      await vllmChatStream(engine, req, gens, { requestId, created, withIds, parseTools: !!parseTools, promptIds }),
    );
    return;
  }

  const choices = [];
  for (const [index, gen] of gens.entries()) {
    let content: string | null = gen.text;
    let toolCalls: ToolCallOut[] = [];
    let finish: string = gen.finishReason;
    if (parseTools) {
      const parsed = await toolCallsOf(engine, req, gen.text);
      if (parsed.toolsCalled && parsed.toolCalls.length > 0) {
        toolCalls = parsed.toolCalls;
        content = parsed.content;
        // "tool_calls" for auto and required calls, "stop" for a named one (serving.py).
        finish = typeof toolChoice === 'object' ? gen.finishReason : 'tool_calls';
      } else if (forced) content = '';
    }
    if (req.parallel_tool_calls === false) toolCalls = toolCalls.slice(0, 1);
    choices.push({
      index,
      message: {
        role: 'assistant',
        content,
        refusal: null,
        annotations: null,
        audio: null,
        function_call: null,
        tool_calls: toolCalls,
        reasoning: null,
        reasoning_content: null,
      },
      logprobs: req.logprobs ? await chatLogprobs(engine, gen, topLogprobs, asTokenId) : null,
      finish_reason: finish,
      stop_reason: gen.stopReason,
      token_ids: withIds ? gen.ids : null,
    });
  }
  const completionTokens = gens.reduce((s, g) => s + g.ids.length, 0);
  reply.json(200, {
    id: requestId,
    object: 'chat.completion',
    created,
    model: engine.model,
    choices,
    service_tier: null,
    system_fingerprint: null,
    usage: {
      prompt_tokens: promptIds.length,
      total_tokens: promptIds.length + completionTokens,
      completion_tokens: completionTokens,
      prompt_tokens_details: null,
    },
    prompt_logprobs: null,
    prompt_token_ids: withIds ? promptIds : null,
    kv_transfer_params: null,
  });
}

async function vllmChatStream(
  engine: EngineContext,
  req: VllmChatRequest,
  gens: Generation[],
  ctx: { requestId: string; created: number; withIds: boolean; parseTools: boolean; promptIds: number[] },
): Promise<string[]> {
  const events: string[] = [];
  const head = { id: ctx.requestId, object: 'chat.completion.chunk', created: ctx.created, model: engine.model };
  const includeUsage = req.stream_options ? (req.stream_options.include_usage ?? true) : false;
  const continuous = includeUsage && (req.stream_options?.continuous_usage_stats ?? false);
  const promptTokens = ctx.promptIds.length;
  const usage = (completion: number) => ({
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completion,
    completion_tokens: completion,
  });
  for (let i = 0; i < gens.length; i++) {
    events.push(
      JSON.stringify({
        ...head,
        choices: [{ index: i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
        ...(continuous ? { usage: usage(0) } : {}),
        prompt_token_ids: ctx.withIds ? ctx.promptIds : null,
      }),
    );
  }
  for (const [i, gen] of gens.entries()) {
    const deltas = await textDeltas(engine, gen, req.skip_special_tokens ?? true);
    const logprobs = req.logprobs
      ? await chatLogprobs(engine, gen, req.top_logprobs ?? 0, req.return_tokens_as_token_ids ?? false)
      : null;
    const parsed = ctx.parseTools ? await toolCallsOf(engine, req, gen.text) : undefined;
    const calling = parsed?.toolsCalled && parsed.toolCalls.length > 0 ? parsed : undefined;
    // With a tool call, the content before `<tool_call>` streams as text and each call as a name
    // delta then an arguments delta on the tokens after it (what the hermes streaming parser sends,
    // reassembled). Unlike vLLM, which skips a chunk while the parser holds text back, every token
    // has its chunk, so streamed token_ids are complete.
    const contentLimit = calling ? (calling.content ?? '').length : Number.POSITIVE_INFINITY;
    const kept =
      req.parallel_tool_calls === false ? (calling?.toolCalls ?? []).slice(0, 1) : (calling?.toolCalls ?? []);
    const toolEvents = kept.flatMap((c, index) => [
      { id: c.id, type: 'function', index, function: { name: c.function.name } },
      { index, function: { arguments: c.function.arguments } },
    ]);
    let streamedText = 0;
    for (let k = 0; k < gen.ids.length; k++) {
      const last = k === gen.ids.length - 1;
      let text = deltas[k] ?? '';
      const inCall = streamedText + text.length > contentLimit;
      if (inCall) text = text.slice(0, Math.max(0, contentLimit - streamedText));
      streamedText += text.length;
      const delta: Record<string, unknown> = {};
      if (!inCall || text) delta.content = text;
      delta.reasoning_content = null;
      if (inCall && toolEvents.length > 0) delta.tool_calls = last ? toolEvents.splice(0) : toolEvents.splice(0, 1);
      const choice: Record<string, unknown> = {
        index: i,
        delta: JSON.parse(JSON.stringify(delta)),
        logprobs: logprobs ? { content: logprobs.content.slice(k, k + 1) } : null,
        finish_reason: last ? (calling && typeof req.tool_choice !== 'object' ? 'tool_calls' : gen.finishReason) : null,
      };
      if (last) choice.stop_reason = gen.stopReason;
      choice.token_ids = ctx.withIds ? [gen.ids[k]] : null;
      events.push(JSON.stringify({ ...head, choices: [choice], ...(continuous ? { usage: usage(k + 1) } : {}) }));
    }
  }
  if (includeUsage) {
    const completion = gens.reduce((s, g) => s + g.ids.length, 0);
    events.push(JSON.stringify({ ...head, choices: [], usage: usage(completion) }));
  }
  events.push('[DONE]');
  return events;
}

async function vllmCompletion(engine: EngineContext, call: ReceivedCall, reply: Reply): Promise<void> {
  const req = parseBody(VllmCompletionRequest, call.body);
  checkModel(engine, req.model);
  if (req.stream_options && !req.stream)
    throw new EngineError(400, 'Stream options can only be defined when `stream=True`.');
  if (req.logprobs !== null && req.logprobs !== undefined && req.logprobs < 0)
    throw new EngineError(400, '`logprobs` must be a positive value.');
  const prompts: number[][] = [];
  const raw = req.prompt;
  if (typeof raw === 'string') prompts.push(await encodeText(engine.profile, raw));
  else if (raw.length > 0 && typeof raw[0] === 'number') prompts.push(raw as number[]);
  else if (raw.length > 0 && typeof raw[0] === 'string')
    for (const s of raw as string[]) prompts.push(await encodeText(engine.profile, s));
  else for (const p of raw as number[][]) prompts.push(p);
  call.promptIds = prompts[0] ?? [];

  const n = req.n ?? 1;
  const withIds = (req.return_token_ids ?? false) && tokenIdsSupported(engine);
  const requestId = `cmpl-${req.request_id ?? randomHex()}`;
  const created = nowSeconds();
  const results: { promptIds: number[]; gen: Generation }[] = [];
  for (const promptIds of prompts) {
    const maxTokens = maxTokensFor(engine, req.max_tokens === undefined ? 16 : req.max_tokens, promptIds.length);
    call.sampling ??= await engine.renderer.samplingParams('completion', JSON.stringify(call.body), maxTokens);
    const limits: GenerationLimits = {
      maxTokens,
      skipSpecialTokens: req.skip_special_tokens ?? true,
      stop: stopList(req.stop),
      stopTokenIds: req.stop_token_ids ?? [],
    };
    for (let i = 0; i < n; i++) {
      const gen = await engine.generate(call, limits);
      recordGeneration(call, promptIds, gen);
      results.push({ promptIds, gen });
    }
  }

  const legacyLogprobs = (gen: Generation) => completionLogprobs(engine, req, gen, 0, gen.ids.length);

  if (req.stream) {
    reply.sse(await vllmCompletionStream(engine, req, results, { requestId, created, withIds, n }));
    return;
  }
  const choices = [];
  for (const [index, { promptIds, gen }] of results.entries()) {
    const echoed = req.echo ? await decodeIds(engine.profile, promptIds, req.skip_special_tokens ?? true) : '';
    choices.push({
      index,
      text: echoed + gen.text,
      logprobs: await legacyLogprobs(gen),
      finish_reason: gen.finishReason,
      stop_reason: gen.stopReason,
      token_ids: withIds ? gen.ids : null,
      prompt_logprobs: null,
      prompt_token_ids: withIds ? promptIds : null,
    });
  }
  const promptTokens = prompts.reduce((s, p) => s + p.length, 0);
  const completionTokens = results.reduce((s, r) => s + r.gen.ids.length, 0);
  reply.json(200, {
    id: requestId,
    object: 'text_completion',
    created,
    model: engine.model,
    choices,
    service_tier: null,
    system_fingerprint: null,
    usage: {
      prompt_tokens: promptTokens,
      total_tokens: promptTokens + completionTokens,
      completion_tokens: completionTokens,
      prompt_tokens_details: null,
    },
    kv_transfer_params: null,
  });
}

async function vllmCompletionStream(
  engine: EngineContext,
  req: VllmCompletionRequest,
  results: { promptIds: number[]; gen: Generation }[],
  ctx: { requestId: string; created: number; withIds: boolean; n: number },
): Promise<string[]> {
  const events: string[] = [];
  const head = { id: ctx.requestId, object: 'text_completion', created: ctx.created, model: engine.model };
  const includeUsage = req.stream_options ? (req.stream_options.include_usage ?? true) : false;
  const promptTokens = results.filter((_, i) => i % ctx.n === 0).reduce((s, r) => s + r.promptIds.length, 0);
  for (const [index, { promptIds, gen }] of results.entries()) {
    const deltas = await textDeltas(engine, gen, req.skip_special_tokens ?? true);
    for (let k = 0; k < gen.ids.length; k++) {
      const last = k === gen.ids.length - 1;
      const choice: Record<string, unknown> = {
        index,
        text: deltas[k] ?? '',
        logprobs: await completionLogprobs(engine, req, gen, k, k + 1),
        finish_reason: last ? gen.finishReason : null,
        stop_reason: last ? gen.stopReason : null,
      };
      if (ctx.withIds) {
        if (k === 0) choice.prompt_token_ids = promptIds;
        choice.token_ids = [gen.ids[k]];
      }
      events.push(JSON.stringify({ ...head, choices: [choice] }));
    }
  }
  if (includeUsage) {
    const completion = results.reduce((s, r) => s + r.gen.ids.length, 0);
    events.push(
      JSON.stringify({
        ...head,
        choices: [],
        usage: { prompt_tokens: promptTokens, total_tokens: promptTokens + completion, completion_tokens: completion },
      }),
    );
  }
  events.push('[DONE]');
  return events;
}

/**
 * Completions' legacy logprobs of positions `from..to` (serving_completion.py
 * `_create_completion_logprobs`): per token its text (or `token_id:N`), logprob, offset, and the
 * top candidates as `{token: logprob}`, the sampled token first. Streamed chunks carry their own
 * positions' entries.
 */
async function completionLogprobs(
  engine: EngineContext,
  req: VllmCompletionRequest,
  gen: Generation,
  from: number,
  to: number,
) {
  if (req.logprobs === null || req.logprobs === undefined) return null;
  const asTokenId = req.return_tokens_as_token_ids ?? false;
  const tokens: string[] = [];
  const top: Record<string, number>[] = [];
  const offsets: number[] = [];
  let offset = 0;
  for (let i = 0; i < to; i++) {
    const id = gen.ids[i] as number;
    const lp = Math.max(gen.logprobs[i] as number, -9999);
    const token = await tokenText(engine, id, asTokenId);
    if (i >= from) {
      tokens.push(token);
      offsets.push(offset);
      const entry: Record<string, number> = { [token]: lp };
      for (const alt of alternatives(id, lp, req.logprobs))
        entry[await tokenText(engine, alt.id, asTokenId)] = alt.logprob;
      top.push(entry);
    }
    offset += token.length;
  }
  return {
    text_offset: offsets,
    token_logprobs: gen.logprobs.slice(from, to).map((l) => Math.max(l, -9999)),
    tokens,
    top_logprobs: top,
  };
}

/** `GenerateRequest` (vllm/entrypoints/serve/disagg/protocol.py; later scale_out/token_in_token_out). */
export const VllmGenerateRequest = z
  .object({
    request_id: z.string().optional(),
    token_ids: z.array(z.number().int().nonnegative()).min(1),
    features: z
      .union([
        z.string(),
        z
          .object({
            mm_hashes: z.record(z.string(), z.array(z.string())).nullish(),
            mm_placeholders: z
              .record(
                z.string(),
                z.array(z.object({ offset: z.number().int(), length: z.number().int() }).passthrough()),
              )
              .nullish(),
            kwargs_data: z.record(z.string(), z.array(z.string().nullable())).nullish(),
          })
          .passthrough(),
      ])
      .nullish(),
    sampling_params: z
      .object({
        n: z.number().int().min(1).optional(),
        max_tokens: z.number().int().nullish(),
        logprobs: z.number().int().nullish(),
        stop: Stop,
        stop_token_ids: z.array(z.number().int()).nullish(),
        skip_special_tokens: z.boolean().optional(),
        temperature: z.number().optional(),
      })
      .passthrough(),
    model: z.string().nullish(),
    stream: z.boolean().nullish(),
    stream_options: StreamOptions.nullish(),
    cache_salt: z.string().nullish(),
    priority: z.number().int().optional(),
  })
  .passthrough();
export type VllmGenerateRequest = z.infer<typeof VllmGenerateRequest>;

/**
 * Tokens in, tokens out: the ids are the prompt as given; with render `features` their image
 * placeholders must each cover a run of `<|image_pad|>` (vllm-api.md "Render and generate").
 */
async function vllmGenerate(engine: EngineContext, call: ReceivedCall, reply: Reply): Promise<void> {
  const req = parseBody(VllmGenerateRequest, call.body);
  checkModel(engine, req.model);
  const promptIds = req.token_ids;
  call.promptIds = promptIds;
  const features = req.features;
  if (features && typeof features === 'object') {
    for (const ph of features.mm_placeholders?.image ?? []) {
      const run = promptIds.slice(ph.offset, ph.offset + ph.length);
      if (run.length !== ph.length || run.some((id) => id !== REFERENCE_IDS.imagePad))
        throw new EngineError(
          400,
          `image placeholder {offset: ${ph.offset}, length: ${ph.length}} is not a run of <|image_pad|>`,
        );
    }
  }
  const sp = req.sampling_params;
  const limits: GenerationLimits = {
    maxTokens: maxTokensFor(engine, sp.max_tokens === undefined ? 16 : sp.max_tokens, promptIds.length),
    skipSpecialTokens: sp.skip_special_tokens ?? true,
    stop: stopList(sp.stop),
    stopTokenIds: sp.stop_token_ids ?? [],
  };
  const gens: Generation[] = [];
  for (let i = 0; i < (sp.n ?? 1); i++) {
    const gen = await engine.generate(call, limits);
    recordGeneration(call, promptIds, gen);
    gens.push(gen);
  }
  const requestId = req.request_id ?? randomHex();
  const withLogprobs = sp.logprobs !== null && sp.logprobs !== undefined;
  if (req.stream) {
    const events: string[] = [];
    for (const [index, gen] of gens.entries()) {
      const lps = withLogprobs ? await chatLogprobs(engine, gen, sp.logprobs ?? 0, false) : null;
      for (let k = 0; k < gen.ids.length; k++) {
        const last = k === gen.ids.length - 1;
        events.push(
          JSON.stringify({
            request_id: requestId,
            choices: [
              {
                index,
                logprobs: lps ? { content: lps.content.slice(k, k + 1) } : null,
                finish_reason: last ? gen.finishReason : null,
                token_ids: [gen.ids[k]],
              },
            ],
          }),
        );
      }
    }
    events.push('[DONE]');
    reply.sse(events);
    return;
  }
  const choices = [];
  for (const [index, gen] of gens.entries()) {
    choices.push({
      index,
      logprobs: withLogprobs ? await chatLogprobs(engine, gen, sp.logprobs ?? 0, false) : null,
      finish_reason: gen.finishReason,
      token_ids: gen.ids,
    });
  }
  reply.json(200, { request_id: requestId, choices, prompt_logprobs: null, kv_transfer_params: null });
}
