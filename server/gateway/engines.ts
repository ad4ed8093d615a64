// What each engine is asked, and how its answer is read (docs/gateway.md, "Engines";
// docs/reference/engine-protocols.md). One entry per engine in `ENGINES`, so the compiler names
// every place a new engine must fill in.
// - vLLM: the chat and completions endpoints with `return_token_ids` (since 0.10.2) and logprobs;
//   token-in is `/v1/completions` with a token-id `prompt` (its request model has no field for
//   images: vllm/entrypoints/openai/completion/protocol.py `CompletionRequest`), streamed when the
//   client streams, the client's fields carried (fields.ts).
// - SGLang: its OpenAI chat endpoint with `return_token_ids` (ids per choice, sgl-project/sglang#30917)
//   and, for later versions, `return_prompt_token_ids` and `return_meta_info`
//   (python/sglang/srt/entrypoints/openai/serving_chat.py; the generated ids are then in
//   `meta_info.output_token_logprobs`), never streamed; `/generate` with `input_ids` for token-in,
//   the client's fields moved where `GenerateReqInput` and `SamplingParams` take them (as the chat
//   endpoint's `to_sampling_params` does, python/sglang/srt/entrypoints/openai/protocol.py). With
//   images SGLang wants one image pad per image in `input_ids` and keeps the ids verbatim only
//   with `SGLANG_MM_AVOID_RETOKENIZE` set on the engine; otherwise it decodes them and tokenizes
//   again (python/sglang/srt/multimodal/processors/base_processor.py `load_mm_data`,
//   `process_and_combine_mm_data`, `_expand_input_ids`).
import { idsFromTokenStrings } from '../import/call-log/read.ts';
import { isObject } from '../import/importer.ts';
import type { EngineKind } from './config.ts';
import { EngineChatResponse, EngineCompletionResponse, SglangGenerateResponse, type ChatRequest } from './protocol.ts';
import { UpstreamError } from './upstream.ts';

/** One candidate of a generated position's top logprobs. */
export interface TopCandidate {
  token: string;
  logprob: number;
}

/** One choice of an engine's answer. */
export interface ChoiceAnswer {
  index: number;
  generatedIds?: number[];
  logprobs?: (number | null)[];
  /** Token strings of the logprobs, when the engine wrote them (`token_id:N` when asked so). */
  tokens?: (string | null)[];
  /** Per generated position, the top candidates the engine wrote (completions' legacy dicts, SGLang's triples). */
  top?: (TopCandidate[] | null)[];
  /** Generated text (for a chat answer: the message content after the engine's tool parsing). */
  text: string | null;
  /** Tool calls the engine's parser found (chat answers). */
  toolCalls: { id?: string | null; name: string; arguments: string }[];
  finishReason: string | null;
  stopReason?: unknown;
  /** Reasoning the engine split from the content (a reasoning parser on the engine). */
  reasoning?: string;
}

/** An engine's answer, read into what the gateway needs (choice 0 flat, every choice in `choices`); `raw` is what it sent. */
export interface EngineAnswer extends ChoiceAnswer {
  promptIds?: number[];
  promptTokens?: number;
  completionTokens?: number;
  choices: ChoiceAnswer[];
  raw: Record<string, unknown>;
  /** The answer as a vLLM call-log `response` (what the capture writes). */
  capture: Record<string, unknown>;
}

/** How the answer of a token-in call is read for tool calls (the request's `tools` and `tool_choice`). */
export type ToolMode =
  | { mode: 'none' }
  | { mode: 'auto'; names: string[] }
  | { mode: 'required' }
  | { mode: 'named'; name: string };

export interface TokenInRequest {
  model?: string | null;
  /** The prompt with image pads expanded (what the model runs). */
  promptIds: number[];
  /** The same with one pad per image (what SGLang expands itself). */
  collapsedIds: number[];
  imageUrls: string[];
  /** The client's carried fields by name, translated ones at their `to` path (fields.ts). */
  fields: Record<string, unknown>;
  maxTokens?: number;
  n: number;
  stream: boolean;
  /** The client's `top_logprobs` when it asked for logprobs (0: the sampled token's only). */
  logprobs?: number;
  /** vLLM's structured output for a forced tool call (`{json: schema}`). */
  structuredOutputs?: Record<string, unknown>;
  responseFormat?: unknown;
  templateKwargs: Record<string, unknown>;
  continuousUsage?: boolean;
  tools: ToolMode;
  parallelToolCalls: boolean;
  sessionId: string;
  /** The engine is known to keep token ids sent with images (SGLang with SGLANG_MM_AVOID_RETOKENIZE=1). */
  imagesKeepIds: boolean;
}

export interface EngineAdapter {
  /** The most tokens a call may generate when the client set no limit (what the chat endpoint would allow). */
  room(maxModelLen: number, promptLength: number): number;
  /** How the engine writes ids and logprobs nobody asked for: as null (vLLM) or not at all (SGLang). */
  unasked: 'null' | 'omit';
  /** The chat request the engine renders itself, asked for its ids. */
  chatBody(req: ChatRequest): Record<string, unknown>;
  /** Whether the chat endpoint streams ids (else the gateway streams the client from a whole answer). */
  streamsChatIds: boolean;
  readChat(raw: unknown): EngineAnswer;
  /** The completions request asked for its ids. */
  completionBody(req: Record<string, unknown>): Record<string, unknown>;
  readCompletion(raw: unknown): EngineAnswer;
  /** Token-in: where and what; the reason when the engine cannot take these ids. */
  tokenIn(
    req: TokenInRequest,
  ): { path: string; body: Record<string, unknown>; streams: boolean } | { unsupported: string };
  readTokenIn(raw: unknown, req: TokenInRequest): EngineAnswer;
  /** Whose reading of the model family's tool calls the engine's chat answers follow (`ToolCallParser.parse`, or `.sglang`). */
  toolParser: 'vllm' | 'sglang';
  /** Said at start-up and on every call it concerns: what continuity cannot do on this engine. */
  imagesWithIds: string;
}

function parsed<T>(
  schema: {
    safeParse(
      v: unknown,
    ): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
  },
  raw: unknown,
  what: string,
): T {
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new UpstreamError(
    'bad_response',
    502,
    `the engine's ${what} answer does not have the expected shape (${issue?.path.join('.') || 'body'}: ${issue?.message})`,
  );
}

type ChatChoice = EngineChatResponse['choices'][number];

function chatChoice(choice: ChatChoice, i: number): ChoiceAnswer {
  const meta = choice.meta_info ?? undefined;
  const triples = Array.isArray(meta?.output_token_logprobs) ? (meta.output_token_logprobs as unknown[][]) : undefined;
  const tokens = choice.logprobs?.content?.map((c) => c.token ?? null);
  const generatedIds =
    choice.token_ids ??
    (triples?.every((t) => Number.isInteger(t[1])) ? triples.map((t) => t[1] as number) : undefined) ??
    idsFromTokenStrings(tokens);
  const logprobs =
    choice.logprobs?.content?.map((c) => c.logprob ?? null) ??
    triples?.map((t) => (typeof t[0] === 'number' ? t[0] : null));
  const message = choice.message as { reasoning?: unknown; reasoning_content?: unknown };
  const reasoning = message.reasoning ?? message.reasoning_content;
  return {
    index: choice.index ?? i,
    generatedIds: generatedIds ?? undefined,
    logprobs,
    tokens,
    text: choice.message.content ?? null,
    toolCalls: (choice.message.tool_calls ?? []).map((c) => ({
      id: c.id,
      name: c.function.name,
      arguments: c.function.arguments ?? '',
    })),
    finishReason: choice.finish_reason ?? null,
    ...(typeof reasoning === 'string' ? { reasoning } : {}),
  };
}

function withChoices(choices: ChoiceAnswer[], rest: Omit<EngineAnswer, keyof ChoiceAnswer | 'choices'>): EngineAnswer {
  return { ...choices[0]!, choices, ...rest };
}

/** A chat answer (the engine's own rendering); the capture gets ids on every choice where vLLM's chat answer has them. */
function chatAnswer(raw: unknown): EngineAnswer {
  const res = parsed(EngineChatResponse, raw, 'chat');
  const choices = res.choices.map(chatChoice);
  const promptIds = res.prompt_token_ids ?? res.choices[0]!.prompt_token_ids ?? undefined;
  const capture: Record<string, unknown> = { ...(raw as Record<string, unknown>) };
  // The capture is read by the call-log reader: ids where a vLLM chat answer has them.
  if (promptIds) capture.prompt_token_ids = promptIds;
  capture.choices = (raw as { choices: Record<string, unknown>[] }).choices.map((c, i) =>
    choices[i]!.generatedIds ? { ...c, token_ids: choices[i]!.generatedIds } : c,
  );
  return withChoices(choices, {
    promptIds,
    promptTokens: res.usage?.prompt_tokens ?? undefined,
    completionTokens: res.usage?.completion_tokens ?? undefined,
    raw: raw as Record<string, unknown>,
    capture,
  });
}

/** Completions' legacy top logprobs, one `{token: logprob}` per position. */
export function legacyTop(top: unknown): (TopCandidate[] | null)[] | undefined {
  if (!Array.isArray(top)) return undefined;
  return top.map((d) =>
    isObject(d)
      ? Object.entries(d).flatMap(([token, lp]) => (typeof lp === 'number' ? [{ token, logprob: lp }] : []))
      : null,
  );
}

function completionAnswer(raw: unknown): EngineAnswer {
  const res = parsed(EngineCompletionResponse, raw, 'completion');
  const choices = res.choices.map((choice, i): ChoiceAnswer => {
    const tokens = choice.logprobs?.tokens ?? undefined;
    const top = legacyTop((choice.logprobs as { top_logprobs?: unknown } | null | undefined)?.top_logprobs);
    return {
      index: choice.index ?? i,
      generatedIds: choice.token_ids ?? idsFromTokenStrings(tokens) ?? undefined,
      logprobs: choice.logprobs?.token_logprobs ?? undefined,
      tokens,
      ...(top ? { top } : {}),
      text: choice.text ?? null,
      toolCalls: [],
      finishReason: choice.finish_reason ?? null,
      stopReason: (choice as { stop_reason?: unknown }).stop_reason,
    };
  });
  return withChoices(choices, {
    promptIds: res.choices[0]!.prompt_token_ids ?? undefined,
    promptTokens: res.usage?.prompt_tokens ?? undefined,
    completionTokens: res.usage?.completion_tokens ?? undefined,
    raw: raw as Record<string, unknown>,
    capture: raw as Record<string, unknown>,
  });
}

const vllm: EngineAdapter = {
  // vLLM's default max_tokens: the rest of the context (serving_engine.py `get_max_tokens`).
  room: (max, prompt) => max - prompt,
  unasked: 'null',
  chatBody: (req) => ({ ...req, return_token_ids: true, logprobs: true }),
  streamsChatIds: true,
  readChat: chatAnswer,
  completionBody: (req) => ({
    ...req,
    return_token_ids: true,
    logprobs: typeof req.logprobs === 'number' ? req.logprobs : 1,
  }),
  readCompletion: completionAnswer,
  tokenIn(req) {
    if (req.imageUrls.length > 0) return { unsupported: vllm.imagesWithIds };
    return {
      path: '/v1/completions',
      streams: req.stream,
      body: {
        ...(req.model ? { model: req.model } : {}),
        session_id: req.sessionId,
        ...req.fields,
        prompt: req.promptIds,
        ...(req.maxTokens !== undefined ? { max_tokens: req.maxTokens } : {}),
        n: req.n,
        stream: req.stream,
        ...(req.stream
          ? {
              stream_options: { include_usage: true, ...(req.continuousUsage ? { continuous_usage_stats: true } : {}) },
            }
          : {}),
        // The client's top_logprobs (or the sampled token's alone), each token as token_id:N so the
        // candidates never collide; the gateway decodes them for the answer.
        logprobs: req.logprobs ?? 0,
        return_tokens_as_token_ids: true,
        return_token_ids: true,
        ...(req.structuredOutputs ? { structured_outputs: req.structuredOutputs } : {}),
      },
    };
  },
  readTokenIn: (raw) => completionAnswer(raw),
  toolParser: 'vllm',
  imagesWithIds:
    "vLLM's /v1/completions takes a token-id prompt without images, so calls of sessions with images are rendered by the engine (its chat endpoint) and checked, not sent as ids",
};

/** `convert_json_schema_to_str`: the JSON text SGLang's sampling params carry a schema as. */
const jsonText = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

/** SGLang's `to_sampling_params`: response_format as the grammar field it sets. */
function sglangResponseFormat(format: unknown): Record<string, unknown> {
  if (!isObject(format)) return {};
  if (format.type === 'json_schema' && isObject(format.json_schema))
    return { json_schema: jsonText(format.json_schema.schema ?? null) };
  if (format.type === 'json_object') return { json_schema: '{"type": "object"}' };
  if (format.type === 'structural_tag') return { structural_tag: jsonText(format) };
  return {};
}

const sglang: EngineAdapter = {
  // SGLang refuses a request whose prompt and max_new_tokens reach the context length.
  room: (max, prompt) => max - prompt - 1,
  unasked: 'omit',
  chatBody: (req) => ({
    ...req,
    logprobs: true,
    return_token_ids: true,
    return_prompt_token_ids: true,
    return_meta_info: true,
    stream: false,
  }),
  // SGLang refuses return_prompt_token_ids on a stream in some versions: the gateway streams the client itself.
  streamsChatIds: false,
  readChat: chatAnswer,
  completionBody: (req) => ({
    ...req,
    logprobs: typeof req.logprobs === 'number' ? req.logprobs : 1,
    return_token_ids: true,
    return_prompt_token_ids: true,
    return_meta_info: true,
    stream: false,
  }),
  readCompletion: completionAnswer,
  tokenIn(req) {
    if (req.imageUrls.length > 0 && !req.imagesKeepIds) return { unsupported: sglang.imagesWithIds };
    const samplingParams: Record<string, unknown> = {};
    const top: Record<string, unknown> = {};
    for (const [path, value] of Object.entries(req.fields)) {
      if (path.startsWith('sampling_params.')) samplingParams[path.slice('sampling_params.'.length)] = value;
      else top[path] = value;
    }
    const spaces = req.templateKwargs.spaces_between_special_tokens;
    return {
      path: '/generate',
      streams: false,
      body: {
        ...top,
        input_ids: req.collapsedIds,
        ...(req.imageUrls.length > 0 ? { image_data: req.imageUrls } : {}),
        sampling_params: {
          ...samplingParams,
          ...sglangResponseFormat(req.responseFormat),
          // The chat endpoint keeps special tokens in the text when tools are offered (serving_chat.py).
          ...(req.tools.mode !== 'none' ? { skip_special_tokens: false } : {}),
          ...(typeof spaces === 'boolean' ? { spaces_between_special_tokens: spaces } : {}),
          ...(req.maxTokens !== undefined ? { max_new_tokens: req.maxTokens } : {}),
        },
        return_logprob: true,
        top_logprobs_num: req.logprobs ?? 0,
        return_text_in_logprobs: true,
        stream: false,
      },
    };
  },
  readTokenIn(raw, req) {
    const res = parsed(SglangGenerateResponse, raw, '/generate');
    const meta = res.meta_info;
    const triples = meta.output_token_logprobs ?? undefined;
    const generatedIds =
      res.output_ids ??
      (triples?.every((t) => Number.isInteger(t[1])) ? triples.map((t) => t[1] as number) : undefined);
    const logprobs = triples?.map((t) => (typeof t[0] === 'number' ? t[0] : null));
    const tokens = triples?.map((t) => (typeof t[2] === 'string' ? t[2] : null));
    const topRaw = (meta as { output_top_logprobs?: unknown }).output_top_logprobs;
    const top = Array.isArray(topRaw)
      ? topRaw.map((pos) =>
          Array.isArray(pos)
            ? pos.flatMap((t) =>
                Array.isArray(t) && typeof t[0] === 'number'
                  ? [{ token: typeof t[2] === 'string' ? t[2] : `token_id:${t[1]}`, logprob: t[0] }]
                  : [],
              )
            : null,
        )
      : undefined;
    const finish = typeof meta.finish_reason === 'string' ? meta.finish_reason : (meta.finish_reason?.type ?? null);
    const text = res.text ?? null;
    // The capture in vLLM's completions shape: the prompt the model ran (pads expanded), the ids it generated.
    const capture = {
      id: meta.id ?? undefined,
      object: 'text_completion',
      choices: [
        {
          index: 0,
          text,
          token_ids: generatedIds ?? null,
          prompt_token_ids: req.promptIds,
          finish_reason: finish,
          logprobs: logprobs ? { token_logprobs: logprobs, tokens } : null,
        },
      ],
      usage: {
        ...(meta.prompt_tokens !== undefined && meta.prompt_tokens !== null
          ? { prompt_tokens: meta.prompt_tokens }
          : {}),
        ...(meta.completion_tokens !== undefined && meta.completion_tokens !== null
          ? { completion_tokens: meta.completion_tokens }
          : {}),
      },
      sglang_meta_info: meta,
    };
    const choice: ChoiceAnswer = {
      index: 0,
      generatedIds: generatedIds ?? undefined,
      logprobs,
      tokens,
      ...(top ? { top } : {}),
      text,
      toolCalls: [],
      finishReason: finish,
    };
    return withChoices([choice], {
      promptIds: req.promptIds,
      promptTokens: meta.prompt_tokens ?? undefined,
      completionTokens: meta.completion_tokens ?? undefined,
      raw: raw as Record<string, unknown>,
      capture,
    });
  },
  toolParser: 'sglang',
  imagesWithIds:
    'SGLang takes token ids with images (one image pad per image, expanded by its processor) but keeps them verbatim only when the engine runs with SGLANG_MM_AVOID_RETOKENIZE=1 (tell the gateway with --sglang-keeps-image-ids); otherwise it decodes and re-tokenizes them, so calls of sessions with images are rendered by the engine (its chat endpoint) and checked',
};

export const ENGINES: Record<EngineKind, EngineAdapter> = { vllm, sglang };
