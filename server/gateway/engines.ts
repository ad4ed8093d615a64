// What each engine is asked, and how its answer is read (docs/gateway.md, "Engines";
// docs/reference/engine-protocols.md). One entry per engine in `ENGINES`, so the compiler names
// every place a new engine must fill in.
// - vLLM: the chat and completions endpoints with `return_token_ids` (since 0.10.2) and logprobs;
//   token-in is `/v1/completions` with a token-id `prompt` (its request model has no field for
//   images: vllm/entrypoints/openai/completion/protocol.py `CompletionRequest`).
// - SGLang: its OpenAI chat endpoint with `return_token_ids` (ids per choice, sgl-project/sglang#30917)
//   and, for later versions, `return_prompt_token_ids` and `return_meta_info`
//   (python/sglang/srt/entrypoints/openai/serving_chat.py; the generated ids are then in
//   `meta_info.output_token_logprobs`), never streamed; `/generate` with `input_ids` for token-in. With images
//   SGLang wants one image pad per image in `input_ids` and keeps the ids verbatim only with
//   `SGLANG_MM_AVOID_RETOKENIZE` set on the engine; otherwise it decodes them and tokenizes again
//   (python/sglang/srt/multimodal/processors/base_processor.py `load_mm_data`,
//   `process_and_combine_mm_data`, `_expand_input_ids`).
import { idsFromTokenStrings } from '../import/vllm.ts';
import type { EngineKind } from './config.ts';
import { EngineChatResponse, EngineCompletionResponse, SglangGenerateResponse, type ChatRequest } from './protocol.ts';
import { UpstreamError } from './upstream.ts';

/** An engine's answer, read into what the gateway needs; `raw` is what it sent. */
export interface EngineAnswer {
  promptIds?: number[];
  generatedIds?: number[];
  logprobs?: (number | null)[];
  /** Token strings of the logprobs, when the engine wrote them. */
  tokens?: (string | null)[];
  /** Generated text (for a chat answer: the message content after the engine's tool parsing). */
  text: string | null;
  /** Tool calls the engine's parser found (chat answers). */
  toolCalls: { id?: string | null; name: string; arguments: string }[];
  finishReason: string | null;
  promptTokens?: number;
  completionTokens?: number;
  raw: Record<string, unknown>;
  /** The answer as a vLLM call-log `response` (what the capture writes). */
  capture: Record<string, unknown>;
}

export interface TokenInRequest {
  model?: string | null;
  /** The prompt with image pads expanded (what the model runs). */
  promptIds: number[];
  /** The same with one pad per image (what SGLang expands itself). */
  collapsedIds: number[];
  imageUrls: string[];
  sampling: Record<string, unknown>;
  maxTokens?: number;
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
  /** Token-in: where and what; undefined (with the reason) when the engine cannot take these ids. */
  tokenIn(req: TokenInRequest): { path: string; body: Record<string, unknown> } | { unsupported: string };
  readTokenIn(raw: unknown, req: TokenInRequest): EngineAnswer;
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

/** Chat sampling fields that carry over to a token-in call unchanged (vLLM and SGLang spell them alike). */
export const CARRIED_SAMPLING = [
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'seed',
  'stop',
  'stop_token_ids',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'skip_special_tokens',
  'include_stop_str_in_output',
  'ignore_eos',
] as const;

function chatAnswer(raw: unknown): EngineAnswer {
  const res = parsed(EngineChatResponse, raw, 'chat');
  const choice = res.choices[0]!;
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
  const promptIds = res.prompt_token_ids ?? choice.prompt_token_ids ?? undefined;
  const capture: Record<string, unknown> = { ...(raw as Record<string, unknown>) };
  // The capture is read by the vLLM importer: ids where a vLLM chat answer has them.
  if (promptIds) capture.prompt_token_ids = promptIds;
  if (generatedIds)
    capture.choices = res.choices.map((c, i) =>
      i === 0 ? { ...(raw as { choices: Record<string, unknown>[] }).choices[0], token_ids: generatedIds } : c,
    );
  return {
    promptIds,
    generatedIds,
    logprobs,
    tokens,
    text: choice.message.content ?? null,
    toolCalls: (choice.message.tool_calls ?? []).map((c) => ({
      id: c.id,
      name: c.function.name,
      arguments: c.function.arguments ?? '',
    })),
    finishReason: choice.finish_reason ?? null,
    promptTokens: res.usage?.prompt_tokens ?? undefined,
    completionTokens: res.usage?.completion_tokens ?? undefined,
    raw: raw as Record<string, unknown>,
    capture,
  };
}

function completionAnswer(raw: unknown): EngineAnswer {
  const res = parsed(EngineCompletionResponse, raw, 'completion');
  const choice = res.choices[0]!;
  const tokens = choice.logprobs?.tokens ?? undefined;
  return {
    promptIds: choice.prompt_token_ids ?? undefined,
    generatedIds: choice.token_ids ?? idsFromTokenStrings(tokens) ?? undefined,
    logprobs: choice.logprobs?.token_logprobs ?? undefined,
    tokens,
    text: choice.text ?? null,
    toolCalls: [],
    finishReason: choice.finish_reason ?? null,
    promptTokens: res.usage?.prompt_tokens ?? undefined,
    completionTokens: res.usage?.completion_tokens ?? undefined,
    raw: raw as Record<string, unknown>,
    capture: raw as Record<string, unknown>,
  };
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
      body: {
        ...(req.model ? { model: req.model } : {}),
        prompt: req.promptIds,
        ...req.sampling,
        ...(req.maxTokens !== undefined ? { max_tokens: req.maxTokens } : {}),
        n: 1,
        stream: false,
        logprobs: 1,
        return_token_ids: true,
        session_id: req.sessionId,
      },
    };
  },
  readTokenIn: (raw) => completionAnswer(raw),
  imagesWithIds:
    "vLLM's /v1/completions takes a token-id prompt without images, so calls of sessions with images are rendered by the engine (its chat endpoint) and checked, not sent as ids",
};

/** SGLang's sampling parameters from the chat fields (`max_tokens` is `max_new_tokens` there). */
function sglangSampling(sampling: Record<string, unknown>, maxTokens: number | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(sampling)) if (k !== 'seed') out[k] = v;
  if (sampling.seed !== undefined) out.sampling_seed = sampling.seed;
  if (maxTokens !== undefined) out.max_new_tokens = maxTokens;
  return out;
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
    return {
      path: '/generate',
      body: {
        input_ids: req.collapsedIds,
        ...(req.imageUrls.length > 0 ? { image_data: req.imageUrls } : {}),
        sampling_params: sglangSampling(req.sampling, req.maxTokens),
        return_logprob: true,
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
          logprobs: logprobs
            ? { token_logprobs: logprobs, tokens: triples?.map((t) => (typeof t[2] === 'string' ? t[2] : null)) }
            : null,
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
    return {
      promptIds: req.promptIds,
      generatedIds: generatedIds ?? undefined,
      logprobs,
      text,
      toolCalls: [],
      finishReason: finish,
      promptTokens: meta.prompt_tokens ?? undefined,
      completionTokens: meta.completion_tokens ?? undefined,
      raw: raw as Record<string, unknown>,
      capture,
    };
  },
  imagesWithIds:
    'SGLang takes token ids with images (one image pad per image, expanded by its processor) but keeps them verbatim only when the engine runs with SGLANG_MM_AVOID_RETOKENIZE=1 (tell the gateway with --sglang-keeps-image-ids); otherwise it decodes and re-tokenizes them, so calls of sessions with images are rendered by the engine (its chat endpoint) and checked',
};

export const ENGINES: Record<EngineKind, EngineAdapter> = { vllm, sglang };
