// SGLang's endpoints in the engine stand-in: the native `/generate` (GenerateReqInput of
// python/sglang/srt/managers/io_struct.py, the output dict of tokenizer_manager.py) and its
// OpenAI-compatible `/v1/chat/completions`, `/v1/completions`, `/v1/models`
// (python/sglang/srt/entrypoints/openai/protocol.py, serving_chat.py), docs/reference/engine-protocols.md.
import { z } from 'zod';
import {
  alternatives,
  chatLogprobs,
  EngineError,
  type EngineContext,
  type Generation,
  type GenerationLimits,
  type Handler,
  nowSeconds,
  parseBody,
  pixelOverrides,
  randomHex,
  type ReceivedCall,
  recordGeneration,
  type Reply,
  Stop,
  StreamOptions,
  stopList,
  textDeltas,
  tokenText,
} from './engine-core.ts';
import { decodeIds, encodeText, expandImagePads, imagePadCount, REFERENCE_IDS } from './engine-reference.ts';

// --- request models ----------------------------------------------------------------------------

const SglangSamplingParams = z
  .object({
    max_new_tokens: z.number().int().nullish(),
    stop: Stop,
    stop_token_ids: z.array(z.number().int()).nullish(),
    temperature: z.number().optional(),
    top_p: z.number().optional(),
    skip_special_tokens: z.boolean().optional(),
    no_stop_trim: z.boolean().optional(),
    ignore_eos: z.boolean().optional(),
    n: z.number().int().min(1).optional(),
  })
  .passthrough();

const ImageItem = z.union([z.string(), z.object({ url: z.string() }).passthrough()]);

/** `GenerateReqInput`: exactly one of text / input_ids (input_embeds is not served here). */
export const SglangGenerateRequest = z
  .object({
    text: z.union([z.string(), z.array(z.string()).min(1)]).nullish(),
    input_ids: z.union([z.array(z.number().int()).min(1), z.array(z.array(z.number().int()).min(1)).min(1)]).nullish(),
    image_data: z.union([ImageItem, z.array(z.union([ImageItem, z.array(ImageItem), z.null()]))]).nullish(),
    sampling_params: SglangSamplingParams.nullish(),
    rid: z.union([z.string(), z.array(z.string())]).nullish(),
    return_logprob: z.boolean().nullish(),
    logprob_start_len: z.number().int().nullish(),
    top_logprobs_num: z.number().int().nullish(),
    return_text_in_logprobs: z.boolean().optional(),
    stream: z.boolean().optional(),
    session_params: z.record(z.string(), z.unknown()).nullish(),
    modalities: z.array(z.string()).nullish(),
  })
  .passthrough();
export type SglangGenerateRequest = z.infer<typeof SglangGenerateRequest>;

const SglangOpenAiCommon = {
  model: z.string(),
  n: z.number().int().min(1).optional(),
  stop: Stop,
  stream: z.boolean().optional(),
  stream_options: StreamOptions.nullish(),
  temperature: z.number().optional(),
  top_p: z.number().optional(),
  stop_token_ids: z.array(z.number().int()).nullish(),
  no_stop_trim: z.boolean().optional(),
  ignore_eos: z.boolean().optional(),
  skip_special_tokens: z.boolean().optional(),
  session_params: z.record(z.string(), z.unknown()).nullish(),
  rid: z.union([z.string(), z.array(z.string())]).nullish(),
  return_token_ids: z.boolean().optional(),
};

export const SglangChatRequest = z
  .object({
    ...SglangOpenAiCommon,
    messages: z
      .array(
        z.object({ role: z.string(), content: z.union([z.string(), z.array(z.unknown()), z.null()]) }).passthrough(),
      )
      .min(1),
    logprobs: z.boolean().optional(),
    top_logprobs: z.number().int().nullish(),
    max_tokens: z.number().int().nullish(),
    max_completion_tokens: z.number().int().nullish(),
    tools: z
      .array(
        z
          .object({
            type: z.string().optional(),
            function: z
              .object({
                name: z.string(),
                description: z.string().nullish(),
                parameters: z.unknown().optional(),
                strict: z.boolean().optional(),
              })
              .passthrough(),
          })
          .passthrough(),
      )
      .nullish(),
    tool_choice: z
      .union([
        z.literal('auto'),
        z.literal('required'),
        z.literal('none'),
        z.object({ type: z.literal('function').optional(), function: z.object({ name: z.string() }) }),
      ])
      .nullish(),
    continue_final_message: z.boolean().optional(),
    chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
    mm_processor_kwargs: z.record(z.string(), z.unknown()).nullish(),
  })
  .passthrough();
export type SglangChatRequest = z.infer<typeof SglangChatRequest>;

export const SglangCompletionRequest = z
  .object({
    ...SglangOpenAiCommon,
    prompt: z.union([
      z.array(z.number().int()).min(1),
      z.array(z.array(z.number().int()).min(1)).min(1),
      z.string(),
      z.array(z.string()).min(1),
    ]),
    echo: z.boolean().optional(),
    logprobs: z.number().int().nullish(),
    max_tokens: z.number().int().positive().optional(),
  })
  .passthrough();
export type SglangCompletionRequest = z.infer<typeof SglangCompletionRequest>;

// --- the prompt the engine runs ------------------------------------------------------------------

/** `<|vision_start|>` + one or more `<|image_pad|>` + `<|vision_end|>` (qwen_vl.py `image_token_regex`). */
const IMAGE_SPAN = /<\|vision_start\|>(?:<\|image_pad\|>)+<\|vision_end\|>/g;
const IMAGE_PLACEHOLDER = '<|vision_start|><|image_pad|><|vision_end|>';

/**
 * The prompt ids SGLang runs for a Qwen-VL request with images: the prompt (text, or input_ids
 * decoded to text) has each image span, expanded or not, collapsed to one placeholder, and the
 * HF processor tokenizes the whole text again and expands each pad to the image's count
 * (base_processor.py `load_mm_data`, tokenizer_manager.py passes `input_text or input_ids`).
 * So ids given with images are not kept: a non-canonical split comes back re-tokenized.
 */
async function multimodalPromptIds(
  engine: EngineContext,
  prompt: string | number[],
  images: string[],
  overrides: { minPixels?: number; maxPixels?: number },
): Promise<number[]> {
  const text = typeof prompt === 'string' ? prompt : await decodeIds(engine.profile, prompt, false);
  const spans = text.match(IMAGE_SPAN)?.length ?? 0;
  if (spans > images.length)
    throw new EngineError(
      400,
      `Mismatch: More '${IMAGE_PLACEHOLDER}' tokens found than corresponding data items provided.`,
    );
  // More images than placeholders: SGLang warns and uses the first ones.
  const used = images.slice(0, spans);
  const collapsed = text.replace(IMAGE_SPAN, IMAGE_PLACEHOLDER);
  const pads = await Promise.all(
    used.map((url) =>
      imagePadCount(engine.renderer, engine.profile, url, overrides).catch((e: Error) => {
        throw new EngineError(400, `An exception occurred while loading multimodal data: ${e.message}`);
      }),
    ),
  );
  return expandImagePads(await encodeText(engine.profile, collapsed), pads);
}

function imageUrls(item: unknown): string[] {
  if (item === null || item === undefined) return [];
  if (typeof item === 'string') return [item];
  if (Array.isArray(item)) return item.flatMap(imageUrls);
  if (typeof item === 'object' && typeof (item as { url?: unknown }).url === 'string')
    return [(item as { url: string }).url];
  return [];
}

function checkContext(engine: EngineContext, promptLength: number, maxNewTokens: number | null | undefined): number {
  if (promptLength >= engine.maxModelLen)
    throw new EngineError(
      400,
      `The input (${promptLength} tokens) is longer than the model's context length (${engine.maxModelLen} tokens).`,
    );
  if (maxNewTokens !== null && maxNewTokens !== undefined && maxNewTokens + promptLength >= engine.maxModelLen)
    throw new EngineError(
      400,
      `Requested token count exceeds the model's maximum context length of ${engine.maxModelLen} tokens. You requested a total of ${
        maxNewTokens + promptLength
      } tokens: ${promptLength} tokens from the input messages and ${maxNewTokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
    );
  return maxNewTokens ?? engine.maxModelLen - promptLength - 1;
}

/** The scheduler's finish object as `to_json()` writes it (schedule_batch.py). */
function finishReasonJson(gen: Generation, maxTokens: number): Record<string, unknown> {
  if (gen.finishReason === 'length') return { type: 'length', length: maxTokens };
  if (gen.finishReason === 'abort') return { type: 'abort', message: 'Abort in waiting queue' };
  const last = gen.ids[gen.ids.length - 1];
  return { type: 'stop', matched: gen.stopReason ?? last ?? REFERENCE_IDS.imEnd };
}

// --- /generate -------------------------------------------------------------------------------------

interface GenerateInput {
  promptIds: number[];
  limits: GenerationLimits;
}

async function outputDict(
  engine: EngineContext,
  req: SglangGenerateRequest,
  input: GenerateInput,
  gen: Generation,
  rid: string,
  upTo = gen.ids.length,
): Promise<Record<string, unknown>> {
  const ids = gen.ids.slice(0, upTo);
  const done = upTo === gen.ids.length;
  const text = done ? gen.text : await decodeIds(engine.profile, ids, input.limits.skipSpecialTokens);
  const meta: Record<string, unknown> = {
    id: rid,
    finish_reason: done ? finishReasonJson(gen, input.limits.maxTokens) : null,
    prompt_tokens: input.promptIds.length,
    weight_version: 'default',
    completion_tokens: ids.length,
    cached_tokens: 0,
    e2e_latency: 0.001,
  };
  if (req.return_logprob) {
    const withText = req.return_text_in_logprobs ?? false;
    const triple = async (lp: number | null, id: number) => [
      lp,
      id,
      withText ? await decodeIds(engine.profile, [id], false) : null,
    ];
    const out = [];
    for (let i = 0; i < ids.length; i++) out.push(await triple(gen.logprobs[i] as number, ids[i] as number));
    meta.output_token_logprobs = out;
    // logprob_start_len -1 (the default): no prompt logprobs; else from that position, the first null.
    const start = req.logprob_start_len ?? -1;
    const inputLps = [];
    if (start >= 0)
      for (let p = start; p < input.promptIds.length; p++)
        inputLps.push(await triple(p === start ? null : -1, input.promptIds[p] as number));
    meta.input_token_logprobs = inputLps;
    const topN = req.top_logprobs_num ?? 0;
    if (topN > 0) {
      const tops = [];
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i] as number;
        const lp = gen.logprobs[i] as number;
        const cands = [{ id, logprob: lp }, ...alternatives(id, lp, topN - 1)];
        tops.push(await Promise.all(cands.map((c) => triple(c.logprob, c.id))));
      }
      meta.output_top_logprobs = tops;
      meta.input_top_logprobs = inputLps.map(() => null);
    }
  }
  return { text, output_ids: ids, meta_info: meta };
}

async function sglangGenerate(engine: EngineContext, call: ReceivedCall, reply: Reply): Promise<void> {
  const req = parseBody(SglangGenerateRequest, call.body);
  const hasText = req.text !== null && req.text !== undefined;
  const hasIds = req.input_ids !== null && req.input_ids !== undefined;
  if (!hasText && !hasIds) throw new EngineError(400, 'Either text, input_ids or input_embeds should be provided.');
  // text wins when both are given (io_struct.py `_determine_batch_size` reads text first).
  const prompts: (string | number[])[] = hasText
    ? typeof req.text === 'string'
      ? [req.text]
      : (req.text as string[])
    : typeof (req.input_ids as unknown[])[0] === 'number'
      ? [req.input_ids as number[]]
      : (req.input_ids as number[][]);
  const single = prompts.length === 1 && (typeof req.text === 'string' || typeof (req.input_ids ?? [])[0] === 'number');
  const sp = req.sampling_params ?? {};
  const n = sp.n ?? 1;
  // Images: one item (or list) per prompt in a batch, a list for a single prompt.
  const imagesOf = (i: number): string[] => {
    const data = req.image_data;
    if (data === null || data === undefined) return [];
    if (single) return imageUrls(data);
    return Array.isArray(data) ? imageUrls(data[i]) : imageUrls(data);
  };
  const inputs: GenerateInput[] = [];
  for (const [i, prompt] of prompts.entries()) {
    const images = imagesOf(i);
    const promptIds =
      images.length > 0
        ? await multimodalPromptIds(engine, prompt, images, pixelOverrides(undefined))
        : typeof prompt === 'string'
          ? await encodeText(engine.profile, prompt)
          : prompt;
    const maxTokens = checkContext(engine, promptIds.length, sp.max_new_tokens === undefined ? 128 : sp.max_new_tokens);
    inputs.push({
      promptIds,
      limits: {
        maxTokens,
        skipSpecialTokens: sp.skip_special_tokens ?? true,
        stop: stopList(sp.stop),
        stopTokenIds: sp.stop_token_ids ?? [],
      },
    });
  }
  call.promptIds = inputs[0]?.promptIds ?? [];
  const results: { input: GenerateInput; gen: Generation; rid: string }[] = [];
  const rids = typeof req.rid === 'string' ? [req.rid] : (req.rid ?? []);
  for (const [i, input] of inputs.entries()) {
    for (let k = 0; k < n; k++) {
      const gen = await engine.generate(call, input.limits);
      recordGeneration(call, input.promptIds, gen);
      results.push({ input, gen, rid: rids[i * n + k] ?? randomHex() });
    }
  }
  const asList = !single || n > 1;
  if (req.stream) {
    // Each chunk holds the text and ids so far (SGLang's default, cumulative streaming output).
    const events: string[] = [];
    for (const [index, r] of results.entries()) {
      for (let k = 1; k <= r.gen.ids.length; k++) {
        const out = await outputDict(engine, req, r.input, r.gen, r.rid, k);
        events.push(JSON.stringify(asList ? { ...out, index } : out));
      }
    }
    events.push('[DONE]');
    reply.sse(events);
    return;
  }
  const outs = [];
  for (const r of results) outs.push(await outputDict(engine, req, r.input, r.gen, r.rid));
  reply.json(200, asList ? outs : outs[0]);
}

// --- OpenAI-compatible -------------------------------------------------------------------------------

interface SglangToolCall {
  id: string;
  index: number | null;
  type: 'function';
  function: { name: string; arguments: string };
}

async function parseToolCalls(
  engine: EngineContext,
  text: string,
  tools: { function: { name: string } }[],
): Promise<{ found: boolean; calls: SglangToolCall[]; content: string | null }> {
  const names = tools.map((t) => t.function.name);
  const parsed = await engine.renderer.qwen25(text, names);
  return {
    found: text.includes('<tool_call>\n'),
    calls: parsed.tool_calls.map((c) => ({
      id: `call_${randomHex().slice(0, 24)}`,
      index: names.indexOf(c.name),
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    })),
    content: parsed.content,
  };
}

function sglangUsage(promptTokens: number, completionTokens: number) {
  return {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
    prompt_tokens_details: null,
    reasoning_tokens: 0,
  };
}

async function sglangChat(engine: EngineContext, call: ReceivedCall, bodyText: string, reply: Reply): Promise<void> {
  const req = parseBody(SglangChatRequest, call.body);
  if (req.stream && req.return_token_ids)
    throw new EngineError(400, 'return_token_ids is not supported for streaming chat completions.');
  const toolChoice = req.tool_choice ?? (req.tools ? 'auto' : 'none');
  if (toolChoice === 'required' && !req.tools?.length)
    throw new EngineError(400, 'Tools cannot be empty if tool choice is set to required.');
  if (typeof toolChoice === 'object') {
    if (!req.tools?.length)
      throw new EngineError(400, 'Tools cannot be empty if tool choice is set to a specific tool.');
    if (!req.tools.some((t) => t.function.name === toolChoice.function.name))
      throw new EngineError(400, `Tool '${toolChoice.function.name}' not found in tools list.`);
  }
  let rendered: Awaited<ReturnType<EngineContext['renderer']['renderChat']>>;
  try {
    rendered = await engine.renderer.renderChat('sglang', engine.template, bodyText);
  } catch (e) {
    throw new EngineError(400, (e as Error).message);
  }
  // apply_chat_template(tokenize=True) then, for a multimodal model, decoded and given as text:
  // the engine tokenizes the render and the continued assistant prefix as one string.
  const prompt = rendered.prompt + (rendered.assistant_prefix ?? '');
  call.promptText = prompt;
  const overrides = pixelOverrides(req.mm_processor_kwargs);
  const promptIds =
    rendered.images.length > 0
      ? await multimodalPromptIds(engine, prompt, rendered.images, overrides)
      : await encodeText(engine.profile, prompt);
  call.promptIds = promptIds;
  const maxTokens = checkContext(engine, promptIds.length, req.max_completion_tokens ?? req.max_tokens);
  const limits: GenerationLimits = {
    maxTokens,
    skipSpecialTokens: req.tools && toolChoice !== 'none' ? false : (req.skip_special_tokens ?? true),
    stop: stopList(req.stop),
    stopTokenIds: req.stop_token_ids ?? [],
  };
  const gens: Generation[] = [];
  for (let i = 0; i < (req.n ?? 1); i++) {
    const gen = await engine.generate(call, limits);
    recordGeneration(call, promptIds, gen);
    gens.push(gen);
  }
  const parseTools = toolChoice !== 'none' && !!req.tools?.length && engine.toolParser;
  const id = typeof req.rid === 'string' ? req.rid : randomHex();
  const created = nowSeconds();
  if (req.stream) {
    reply.sse(await sglangChatStream(engine, req, gens, { id, created, parseTools, promptIds, maxTokens }));
    return;
  }
  const choices = [];
  for (const [index, gen] of gens.entries()) {
    let content: string | null = gen.text;
    let toolCalls: SglangToolCall[] | null = null;
    const finish = finishReasonJson(gen, maxTokens);
    if (parseTools) {
      const parsed = await parseToolCalls(engine, gen.text, req.tools ?? []);
      if (parsed.found) {
        if (finish.type === 'stop') {
          finish.type = 'tool_calls';
          finish.matched = null;
        }
        content = parsed.content;
        toolCalls = parsed.calls;
      }
    }
    choices.push({
      index,
      message: { role: 'assistant', content: content ? content : null, reasoning_content: null, tool_calls: toolCalls },
      logprobs: req.logprobs ? await chatLogprobs(engine, gen, req.top_logprobs ?? 0, false) : null,
      finish_reason: finish.type,
      matched_stop: finish.matched ?? null,
      ...(req.return_token_ids ? { prompt_token_ids: promptIds, token_ids: gen.ids } : {}),
    });
  }
  reply.json(200, {
    id,
    object: 'chat.completion',
    created,
    model: req.model,
    choices,
    usage: sglangUsage(
      promptIds.length,
      gens.reduce((s, g) => s + g.ids.length, 0),
    ),
    metadata: { weight_version: 'default' },
  });
}

async function sglangChatStream(
  engine: EngineContext,
  req: SglangChatRequest,
  gens: Generation[],
  ctx: { id: string; created: number; parseTools: boolean; promptIds: number[]; maxTokens: number },
): Promise<string[]> {
  const events: string[] = [];
  const head = { id: ctx.id, object: 'chat.completion.chunk', created: ctx.created, model: req.model };
  const emptyDelta = { role: null, content: null, reasoning_content: null, tool_calls: null };
  const chunk = (index: number, delta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      ...head,
      choices: [
        {
          index,
          delta: { ...emptyDelta, ...delta },
          logprobs: null,
          finish_reason: null,
          matched_stop: null,
          ...extra,
        },
      ],
      usage: null,
    });
  const finishes: Record<string, unknown>[] = [];
  for (const [index, gen] of gens.entries()) {
    events.push(chunk(index, { role: 'assistant', content: '' }));
    const deltas = await textDeltas(engine, gen, req.tools ? false : (req.skip_special_tokens ?? true));
    const parsed = ctx.parseTools ? await parseToolCalls(engine, gen.text, req.tools ?? []) : undefined;
    const finish = finishReasonJson(gen, ctx.maxTokens);
    if (parsed?.found && finish.type === 'stop') {
      finish.type = 'tool_calls';
      finish.matched = null;
    }
    finishes.push(finish);
    if (parsed?.found) {
      // The detector streams the text before the call, then each call's name and its arguments.
      if (parsed.content) events.push(chunk(index, { content: parsed.content }));
      for (const [k, c] of parsed.calls.entries())
        events.push(
          chunk(index, {
            tool_calls: [{ id: c.id, index: k, type: 'function', function: { name: c.function.name, arguments: '' } }],
          }),
          chunk(index, {
            tool_calls: [
              { id: null, index: k, type: 'function', function: { name: null, arguments: c.function.arguments } },
            ],
          }),
        );
    } else {
      for (const d of deltas) if (d) events.push(chunk(index, { content: d }));
    }
  }
  for (const [index, finish] of finishes.entries())
    events.push(
      JSON.stringify({
        ...head,
        choices: [
          {
            index,
            delta: emptyDelta,
            logprobs: null,
            finish_reason: finish.type,
            matched_stop: finish.matched ?? null,
          },
        ],
        usage: null,
      }),
    );
  if (req.stream_options?.include_usage)
    events.push(
      JSON.stringify({
        ...head,
        choices: [],
        usage: sglangUsage(
          ctx.promptIds.length,
          gens.reduce((s, g) => s + g.ids.length, 0),
        ),
      }),
    );
  events.push('[DONE]');
  return events;
}

async function legacyLogprobs(engine: EngineContext, gen: Generation, topN: number) {
  const tokens: string[] = [];
  const top: Record<string, number>[] = [];
  for (let i = 0; i < gen.ids.length; i++) {
    const id = gen.ids[i] as number;
    const lp = gen.logprobs[i] as number;
    const token = await tokenText(engine, id, false);
    tokens.push(token);
    const entry: Record<string, number> = { [token]: lp };
    for (const alt of alternatives(id, lp, Math.max(0, topN - 1)))
      entry[await tokenText(engine, alt.id, false)] = alt.logprob;
    top.push(entry);
  }
  // SGLang does not compute text offsets (utils.py `to_openai_style_logprobs`: -1 each).
  return { text_offset: gen.ids.map(() => -1), token_logprobs: [...gen.logprobs], tokens, top_logprobs: top };
}

async function sglangCompletion(engine: EngineContext, call: ReceivedCall, reply: Reply): Promise<void> {
  const req = parseBody(SglangCompletionRequest, call.body);
  const raw = req.prompt;
  const prompts: number[][] = [];
  if (typeof raw === 'string') prompts.push(await encodeText(engine.profile, raw));
  else if (typeof raw[0] === 'number') prompts.push(raw as number[]);
  else if (typeof raw[0] === 'string')
    for (const s of raw as string[]) prompts.push(await encodeText(engine.profile, s));
  else for (const p of raw as number[][]) prompts.push(p);
  call.promptIds = prompts[0] ?? [];
  const n = req.n ?? 1;
  const results: { promptIds: number[]; gen: Generation; maxTokens: number }[] = [];
  for (const promptIds of prompts) {
    const maxTokens = checkContext(engine, promptIds.length, req.max_tokens ?? 16);
    const limits: GenerationLimits = {
      maxTokens,
      skipSpecialTokens: req.skip_special_tokens ?? true,
      stop: stopList(req.stop),
      stopTokenIds: req.stop_token_ids ?? [],
    };
    for (let i = 0; i < n; i++) {
      const gen = await engine.generate(call, limits);
      recordGeneration(call, promptIds, gen);
      results.push({ promptIds, gen, maxTokens });
    }
  }
  const id = typeof req.rid === 'string' ? req.rid : randomHex();
  const created = nowSeconds();
  const promptTokens = prompts.reduce((s, p) => s + p.length, 0);
  const completionTokens = results.reduce((s, r) => s + r.gen.ids.length, 0);
  if (req.stream) {
    const events: string[] = [];
    const head = { id, object: 'text_completion', created, model: req.model };
    for (const [index, r] of results.entries()) {
      const deltas = await textDeltas(engine, r.gen, req.skip_special_tokens ?? true);
      const finish = finishReasonJson(r.gen, r.maxTokens);
      for (let k = 0; k < r.gen.ids.length; k++) {
        const last = k === r.gen.ids.length - 1;
        const choice: Record<string, unknown> = {
          index,
          text: deltas[k] ?? '',
          logprobs: null,
          finish_reason: last ? finish.type : null,
          matched_stop: last ? (finish.matched ?? null) : null,
        };
        if (req.return_token_ids) {
          if (k === 0) choice.prompt_token_ids = r.promptIds;
          choice.token_ids = [r.gen.ids[k]];
        }
        events.push(JSON.stringify({ ...head, choices: [choice], usage: null }));
      }
    }
    if (req.stream_options?.include_usage)
      events.push(JSON.stringify({ ...head, choices: [], usage: sglangUsage(promptTokens, completionTokens) }));
    events.push('[DONE]');
    reply.sse(events);
    return;
  }
  const choices = [];
  for (const [index, r] of results.entries()) {
    const finish = finishReasonJson(r.gen, r.maxTokens);
    const echoed = req.echo ? await decodeIds(engine.profile, r.promptIds, req.skip_special_tokens ?? true) : '';
    choices.push({
      index,
      text: echoed + r.gen.text,
      logprobs:
        req.logprobs !== null && req.logprobs !== undefined ? await legacyLogprobs(engine, r.gen, req.logprobs) : null,
      finish_reason: finish.type,
      matched_stop: finish.matched ?? null,
      ...(req.return_token_ids ? { prompt_token_ids: r.promptIds, token_ids: r.gen.ids } : {}),
    });
  }
  reply.json(200, {
    id,
    object: 'text_completion',
    created,
    model: req.model,
    choices,
    usage: sglangUsage(promptTokens, completionTokens),
    metadata: { weight_version: 'default' },
  });
}

export function sglangRoutes(engine: EngineContext): Record<string, Record<string, Handler>> {
  return {
    '/v1/models': {
      GET: async (_c, _b, reply) =>
        reply.json(200, {
          object: 'list',
          data: [
            {
              id: engine.model,
              object: 'model',
              created: nowSeconds(),
              owned_by: 'sglang',
              root: engine.model,
              max_model_len: engine.maxModelLen,
            },
          ],
        }),
    },
    '/health': { GET: async (_c, _b, reply) => reply.empty(200) },
    '/get_model_info': {
      GET: async (_c, _b, reply) =>
        reply.json(200, { model_path: engine.model, tokenizer_path: engine.model, is_generation: true }),
    },
    '/generate': { POST: (call, _b, reply) => sglangGenerate(engine, call, reply) },
    '/v1/chat/completions': { POST: (call, bodyText, reply) => sglangChat(engine, call, bodyText, reply) },
    '/v1/completions': { POST: (call, _b, reply) => sglangCompletion(engine, call, reply) },
  };
}
