// vLLM request/response logs (docs/reference/vllm-api.md): JSONL, one line per call, `{"request", "response"}`
// plus whatever ids the logger added. Shapes read (field names from vllm-project/vllm
// `vllm/entrypoints/openai/chat_completion/protocol.py`, `.../completion/protocol.py`,
// `vllm/entrypoints/scale_out/token_in_token_out/protocol.py`; they moved between versions):
// - chat completions: `response.prompt_token_ids` (top level), `choices[].token_ids`,
//   `choices[].logprobs.content[].logprob`, `finish_reason`; `request.messages`, `request.tools`,
//   `request.mm_processor_kwargs`;
// - completions: `prompt_token_ids` / `token_ids` inside each choice, legacy logprobs
//   `{tokens, token_logprobs}`;
// - `return_tokens_as_token_ids`: logprob tokens written as `"token_id:123"`
//   (`vllm/entrypoints/openai/serving_engine.py::_get_decoded_token`), the generated ids when
//   `token_ids` is absent;
// - token-in/token-out: a render result (a `GenerateRequest` with `token_ids` and
//   `features.mm_placeholders`, or the `[conversation, engine_prompts]` list some builds return,
//   vllm-project/vime `vime/rollout/vllm_rollout.py::_mm_render_response_to_generate_body`) paired
//   with an `/inference/v1/generate` response (`choices[0].token_ids`, `logprobs.content`). The
//   render result may be the line's `request` or a separate `render`; `chat_request` holds the
//   chat request that was rendered (vLLM's `DerenderChatRequest` names it so).
// Calls are grouped by an explicit id when the line carries one, else by prefix chaining (chain.ts).
import { imagesInMessages, videosInMessages } from '../model/message-images.ts';
import { z } from 'zod';
import {
  Message,
  type FormatName,
  type ImageRef,
  type VideoRef,
  type ProcessorSettings,
  type ReadError,
  type TrajectoryInput,
} from '../model/trajectory.ts';
import type { FileContext, Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { zodErrors } from './read/validate.ts';
import { LogprobValues, TokenIdValues } from './turns-from-mask.ts';
import { chainCalls, padIdsOf, uniqueIds } from './chain.ts';
import { readProcessorKwargs } from './processor-kwargs.ts';
import type { Finding } from '../model/finding.ts';

type TurnInput = TrajectoryInput['turns'][number];

/** Ids and logprobs as written (-100, NaN, "NaN", null kept): bad values are findings at their index, not read errors. */
const TokenIdArray = TokenIdValues;

const ChatLogprob = z
  .object({ token: z.string().nullable().optional(), logprob: z.unknown().optional() })
  .passthrough();
const ChoiceLogprobs = z
  .object({
    content: z.array(ChatLogprob).nullable().optional(),
    tokens: z.array(z.string().nullable()).nullable().optional(),
    token_logprobs: LogprobValues.nullable().optional(),
  })
  .passthrough();
const Choice = z
  .object({
    index: z.number().int().nonnegative().optional(),
    prompt_token_ids: TokenIdArray.nullable().optional(),
    token_ids: TokenIdArray.nullable().optional(),
    logprobs: ChoiceLogprobs.nullable().optional(),
    finish_reason: z.string().nullable().optional(),
    message: z.object({ content: z.string().nullable().optional() }).passthrough().nullable().optional(),
    text: z.string().nullable().optional(),
  })
  .passthrough();
const VllmResponse = z
  .object({
    model: z.string().nullable().optional(),
    prompt_token_ids: TokenIdArray.nullable().optional(),
    choices: z.array(Choice).min(1),
    usage: z
      .object({
        prompt_tokens: z.number().int().nonnegative().optional(),
        completion_tokens: z.number().int().nonnegative().optional(),
      })
      .passthrough()
      .nullable()
      .optional(),
  })
  .passthrough();

const PlaceholderRanges = z.array(
  z.object({ offset: z.number().int().nonnegative(), length: z.number().int().nonnegative() }).passthrough(),
);
const PlaceholdersByModality = z.record(z.string(), PlaceholderRanges);
const Features = z.object({ mm_placeholders: PlaceholdersByModality.nullable().optional() }).passthrough();
/** A chat/completions request, or a `GenerateRequest` (render result / generate body). */
const RequestObject = z
  .object({
    model: z.string().nullable().optional(),
    messages: z.array(Message).optional(),
    tools: z.array(z.unknown()).nullable().optional(),
    // Read by readProcessorKwargs: a bad value is reported, and the call still loads.
    mm_processor_kwargs: z.unknown().optional(),
    prompt: z.unknown().optional(),
    token_ids: TokenIdArray.optional(),
    // The oldest versions had `features: str | None` (a TODO placeholder): kept, not read.
    features: z.union([Features, z.string()]).nullable().optional(),
  })
  .passthrough();
type RequestObject = z.infer<typeof RequestObject>;
const EnginePrompt = z
  .object({
    prompt_token_ids: TokenIdArray,
    mm_placeholders: PlaceholdersByModality.nullable().optional(),
    multi_modal_placeholders: PlaceholdersByModality.nullable().optional(),
  })
  .passthrough();
const RenderList = z.tuple([z.unknown(), z.array(EnginePrompt).min(1)]).rest(z.unknown());

/** What one request side of a line says, whichever shape it came in. */
interface RequestView {
  model?: string;
  messages?: Message[];
  tools?: unknown[];
  processor?: ProcessorSettings;
  /** Stated processor settings that could not be applied. */
  problems?: ReadError[];
  promptIds?: number[];
  placeholders?: { offset: number; length: number }[];
}

/**
 * Fields that name the conversation a call belongs to (never a per-call id such as `request_id`):
 * - `session_id`: vLLM's own request field and `X-Session-ID` header (vllm-project/vllm#48049,
 *   #48070: "OpenAI body.session_id / HTTP X-Session-ID header"; before it, clients passed it as
 *   `vllm_xargs` / `sampling_params.extra_args["session_id"]`); slime's and miles' `Sample.session_id`;
 * - `rollout_id`: Agent Lightning (`agentlightning` stores, `rollout_id` on every span/triplet),
 *   slime `Sample.rollout_id`; `trajectory_id`, `conversation_id`, `episode_id`: loggers' own names.
 * Places searched, in order: the line, `metadata`, the request body itself, `request.metadata`,
 * `request.extra_body` (and its `metadata`), `request.vllm_xargs`, `request.sampling_params.extra_args`,
 * a logged `headers` / `request.headers` object (`x-session-id`). docs/reference/vllm-api.md.
 */
export const ID_FIELDS = ['trajectory_id', 'session_id', 'rollout_id', 'conversation_id', 'episode_id'] as const;

function headerSessionId(headers: unknown): string | undefined {
  if (!isObject(headers)) return undefined;
  for (const [k, v] of Object.entries(headers))
    if (k.toLowerCase() === 'x-session-id' && typeof v === 'string' && v !== '') return v;
  return undefined;
}

export function explicitId(line: Record<string, unknown>): { field: string; value: string } | undefined {
  const request = isObject(line.request) ? line.request : undefined;
  const extraBody = isObject(request?.extra_body) ? request.extra_body : undefined;
  const sampling = isObject(request?.sampling_params) ? request.sampling_params : undefined;
  const places: [string, unknown][] = [
    ['', line],
    ['metadata.', line.metadata],
    ['request.', request],
    ['request.metadata.', request?.metadata],
    ['request.extra_body.', extraBody],
    ['request.extra_body.metadata.', extraBody?.metadata],
    ['request.vllm_xargs.', request?.vllm_xargs],
    ['request.sampling_params.extra_args.', sampling?.extra_args],
  ];
  for (const [prefix, obj] of places) {
    if (!isObject(obj)) continue;
    for (const field of ID_FIELDS) {
      const v = obj[field];
      if ((typeof v === 'string' && v !== '') || (typeof v === 'number' && Number.isFinite(v)))
        return { field: prefix + field, value: String(v) };
    }
  }
  // SGLang's own session (`GenerateReqInput.session_params = {id, rid, offset, replace}`, io_struct.py).
  const session = isObject(request?.session_params) ? request.session_params.id : undefined;
  if (typeof session === 'string' && session !== '') return { field: 'request.session_params.id', value: session };
  for (const [field, headers] of [
    ['headers.x-session-id', line.headers],
    ['request.headers.x-session-id', request?.headers],
  ] as const) {
    const v = headerSessionId(headers);
    if (v !== undefined) return { field, value: v };
  }
  return undefined;
}

/** Media of the turns: the first turn's, then only those in each later turn's new messages (history repeats the rest). */
function mediaOfTurns<T>(turns: readonly Pick<TurnInput, 'messages'>[], of: (messages: unknown[]) => T[]): T[] {
  const media: T[] = [];
  let seen = 0;
  turns.forEach((t, k) => {
    if (!t.messages) return;
    media.push(...of(k === 0 ? t.messages : t.messages.slice(seen)));
    seen = t.messages.length;
  });
  return media;
}

/** Trajectory images: the first turn's, then only those in each later turn's new messages. */
export function imagesOfTurns(turns: readonly Pick<TurnInput, 'messages'>[]): ImageRef[] {
  return mediaOfTurns(turns, imagesInMessages);
}

/** Trajectory videos (frame lists or `video_url` parts), as images are found. */
export function videosOfTurns(turns: readonly Pick<TurnInput, 'messages'>[]): VideoRef[] {
  return mediaOfTurns(turns, videosInMessages);
}

function placeholdersOf(
  byModality: z.infer<typeof PlaceholdersByModality> | null | undefined,
): { offset: number; length: number }[] | undefined {
  if (!byModality) return undefined;
  // Qwen placeholders cover exactly the pad runs (docs/reference/vllm-api.md); image and video runs together, in order.
  const ranges = [...(byModality.image ?? []), ...(byModality.video ?? [])].map((r) => ({
    offset: r.offset,
    length: r.length,
  }));
  return ranges.sort((a, b) => a.offset - b.offset);
}

/**
 * The call's `mm_processor_kwargs`: top level in the request body (vLLM `ChatCompletionRequest`,
 * `CompletionRequest`), or under `extra_body` in a client-side log (the OpenAI client merges
 * `extra_body` into the body it sends).
 */
function statedSettings(
  r: RequestObject,
  field: string,
  file: string,
  line: number,
): Pick<RequestView, 'processor' | 'problems'> {
  const extraBody = isObject(r.extra_body) ? r.extra_body : undefined;
  const [value, at] =
    r.mm_processor_kwargs !== undefined && r.mm_processor_kwargs !== null
      ? [r.mm_processor_kwargs, `${field}.mm_processor_kwargs`]
      : [extraBody?.mm_processor_kwargs, `${field}.extra_body.mm_processor_kwargs`];
  const { settings, problems } = readProcessorKwargs(value, at);
  return {
    ...(settings ? { processor: settings } : {}),
    ...(problems.length > 0
      ? { problems: problems.map((p) => ({ file, line, field: p.field, message: p.message })) }
      : {}),
  };
}

function viewOfObject(r: RequestObject, field: string, file: string, line: number): RequestView {
  const features = isObject(r.features) ? (r.features as z.infer<typeof Features>) : undefined;
  const promptFromCompletions =
    Array.isArray(r.prompt) && r.prompt.length > 0 && r.prompt.every((x) => Number.isInteger(x) && (x as number) >= 0)
      ? (r.prompt as number[])
      : undefined;
  return {
    model: r.model ?? undefined,
    messages: r.messages,
    tools: r.tools ?? undefined,
    ...statedSettings(r, field, file, line),
    promptIds: r.token_ids ?? promptFromCompletions,
    placeholders: placeholdersOf(features?.mm_placeholders),
  };
}

function viewOfRenderList(r: z.infer<typeof RenderList>): RequestView {
  const prompt = r[1][0]!;
  const conversation = z.array(Message).safeParse(r[0]);
  return {
    messages: conversation.success ? conversation.data : undefined,
    promptIds: prompt.prompt_token_ids,
    placeholders: placeholdersOf(prompt.mm_placeholders ?? prompt.multi_modal_placeholders),
  };
}

/** Parse one request-side field (`request`, `render`, `chat_request`) into a view, or errors naming the field. */
function requestView(value: unknown, field: string, file: string, line: number): RequestView | ReadError[] {
  if (value === undefined || value === null) return {};
  if (Array.isArray(value)) {
    const parsed = RenderList.safeParse(value);
    return parsed.success ? viewOfRenderList(parsed.data) : zodErrors(file, line, parsed.error, field);
  }
  const parsed = RequestObject.safeParse(value);
  return parsed.success ? viewOfObject(parsed.data, field, file, line) : zodErrors(file, line, parsed.error, field);
}

const TOKEN_ID_STRING = /^token_id:(\d+)$/;

/** Generated ids from `"token_id:123"` logprob tokens; undefined unless every token has that form. */
export function idsFromTokenStrings(tokens: readonly (string | null | undefined)[] | undefined): number[] | undefined {
  if (!tokens || tokens.length === 0) return undefined;
  const ids: number[] = [];
  for (const t of tokens) {
    const m = t ? TOKEN_ID_STRING.exec(t) : null;
    if (!m) return undefined;
    ids.push(Number(m[1]));
  }
  return ids;
}

/** Whether a logged response is the list of chunks a streamed call sent (`stream: true`). */
export function isChunkList(value: unknown): value is Record<string, unknown>[] {
  return Array.isArray(value) && value.length > 0 && value.every((c) => isObject(c) && Array.isArray(c.choices));
}

/**
 * The response a streamed call's chunks add up to, per choice index: `prompt_token_ids` (the first
 * chunk's, top level for chat, per choice for completions), `token_ids`, logprobs and text
 * concatenated, the last `finish_reason`, the usage of the chunk that has it (vLLM
 * `ChatCompletionStreamResponse`, `CompletionStreamResponse`; a usage-only last chunk has no
 * choices). Agent Lightning stored such lists as a `model_request` event's response
 * (agentlightning/server/routes/events.py `_trim_model_request`, "legacy raw-chunk format").
 */
export function responseOfChunks(chunks: readonly Record<string, unknown>[]): Record<string, unknown> {
  interface Merged {
    index: number;
    chat: boolean;
    text: string[];
    ids?: unknown[];
    prompt?: unknown;
    content?: unknown[];
    tokens?: unknown[];
    tokenLogprobs?: unknown[];
    finish?: unknown;
  }
  const byIndex = new Map<number, Merged>();
  let prompt: unknown;
  let usage: unknown;
  for (const chunk of chunks) {
    if (prompt === undefined && Array.isArray(chunk.prompt_token_ids)) prompt = chunk.prompt_token_ids;
    if (isObject(chunk.usage)) usage = chunk.usage;
    (chunk.choices as unknown[]).forEach((c, i) => {
      if (!isObject(c)) return;
      const index = typeof c.index === 'number' ? c.index : i;
      let m = byIndex.get(index);
      if (!m) byIndex.set(index, (m = { index, chat: false, text: [] }));
      if (isObject(c.delta)) {
        m.chat = true;
        if (typeof c.delta.content === 'string') m.text.push(c.delta.content);
      } else if (typeof c.text === 'string') m.text.push(c.text);
      if (Array.isArray(c.token_ids)) (m.ids ??= []).push(...c.token_ids);
      if (m.prompt === undefined && Array.isArray(c.prompt_token_ids)) m.prompt = c.prompt_token_ids;
      const lp = c.logprobs;
      if (isObject(lp)) {
        if (Array.isArray(lp.content)) (m.content ??= []).push(...lp.content);
        if (Array.isArray(lp.tokens)) (m.tokens ??= []).push(...lp.tokens);
        if (Array.isArray(lp.token_logprobs)) (m.tokenLogprobs ??= []).push(...lp.token_logprobs);
      }
      if (typeof c.finish_reason === 'string') m.finish = c.finish_reason;
    });
  }
  const first = chunks[0]!;
  const choices = [...byIndex.values()]
    .sort((a, b) => a.index - b.index)
    .map((m) => ({
      index: m.index,
      ...(m.chat ? { message: { role: 'assistant', content: m.text.join('') } } : { text: m.text.join('') }),
      ...(m.ids ? { token_ids: m.ids } : {}),
      ...(m.prompt !== undefined ? { prompt_token_ids: m.prompt } : {}),
      ...(m.content || m.tokens || m.tokenLogprobs
        ? {
            logprobs: {
              ...(m.content ? { content: m.content } : {}),
              ...(m.tokens ? { tokens: m.tokens } : {}),
              ...(m.tokenLogprobs ? { token_logprobs: m.tokenLogprobs } : {}),
            },
          }
        : {}),
      ...(m.finish !== undefined ? { finish_reason: m.finish } : {}),
    }));
  return {
    ...(typeof first.id === 'string' ? { id: first.id } : {}),
    ...(typeof first.model === 'string' ? { model: first.model } : {}),
    ...(prompt !== undefined ? { prompt_token_ids: prompt } : {}),
    choices,
    ...(usage !== undefined ? { usage } : {}),
  };
}

export interface VllmCall {
  line: number;
  key?: { field: string; value: string };
  /** Choice index, when the response held several (n > 1: one trajectory each). */
  choice?: number;
  /**
   * The request this call is one of several samples of (`n > 1`: choices answering one prompt), as
   * an id that names it in the run: the response's `id` (one per request, shared by its choices),
   * else the file and line; a completions batch's prompts are told apart by `:<prompt>`.
   */
  request?: string;
  turn: TurnInput;
  model?: string;
  tools?: unknown[];
  reward?: number;
  /** Images the request carried outside its messages (SGLang `image_data`: the history's and the new ones). */
  images?: ImageRef[];
}

/**
 * One logged call (`{"request", "response", "render"?, "chat_request"?, ...ids}`) as one call per
 * choice, or ReadErrors naming the field (`within` prefixes field names when the call sits
 * inside another record, e.g. an Agent Lightning event's `data`). `statedSettings: false` for an
 * engine that does not apply a request's `mm_processor_kwargs` (SGLang, sglang-openai.ts).
 */
export function readVllmCall(
  value: unknown,
  file: string,
  line: number,
  within = '',
  opts: { statedSettings?: boolean } = {},
): { calls: VllmCall[]; errors: ReadError[] } {
  const at = (field: string) => (within ? `${within}.${field}` : field);
  const fail = (field: string | undefined, message: string) => ({
    calls: [],
    errors: [
      {
        file,
        line,
        ...(field || within ? { field: field ? at(field) : within } : {}),
        message: `${field ? at(field) : within || 'record'}: ${message}`,
      },
    ],
  });
  if (!isObject(value)) return fail(undefined, 'not a JSON object (expected {"request": ..., "response": ...})');
  const response = isChunkList(value.response) ? responseOfChunks(value.response) : value.response;
  if (response === undefined || response === null)
    return fail('response', 'missing (the call has no response: it failed, or the logger wrote only the request)');
  // A call the server refused or that failed carries no tokens; Agent Lightning drops such calls too
  // (agentlightning/verl/agl_rollout_manager.py skips `status == "error"` / `http_status >= 400`).
  if (isObject(response) && !('choices' in response) && (response.object === 'error' || 'error' in response))
    return { calls: [], errors: [] };
  const parsedResponse = VllmResponse.safeParse(response);
  const errors: ReadError[] = parsedResponse.success ? [] : zodErrors(file, line, parsedResponse.error, at('response'));
  const views: RequestView[] = [];
  for (const field of ['request', 'render', 'chat_request'] as const) {
    const v = requestView(value[field], at(field), file, line);
    if (Array.isArray(v)) errors.push(...v);
    else views.push(opts.statedSettings === false ? { ...v, processor: undefined, problems: undefined } : v);
  }
  if (!parsedResponse.success || errors.length > 0) return { calls: [], errors };
  const res = parsedResponse.data;
  const pick = <K extends keyof RequestView>(k: K): RequestView[K] => views.find((v) => v[k] !== undefined)?.[k];
  const key = explicitId(value);
  const model = pick('model') ?? res.model ?? undefined;
  const reward = typeof value.reward === 'number' ? value.reward : undefined;
  const several = res.choices.length > 1;
  const echo = isObject(value.request) && value.request.echo === true;
  // `usage.prompt_tokens` counts every prompt of a completions batch (`prompt` a list): no one call's.
  const batch =
    isObject(value.request) &&
    Array.isArray(value.request.prompt) &&
    value.request.prompt.some((p) => typeof p === 'string' || Array.isArray(p));
  const calls = res.choices.map((choice, i): VllmCall => {
    const promptIds = choice.prompt_token_ids ?? res.prompt_token_ids ?? pick('promptIds');
    const lp = choice.logprobs;
    let idsFromLogprobs =
      idsFromTokenStrings(lp?.content?.map((c) => c.token)) ?? idsFromTokenStrings(lp?.tokens ?? undefined);
    let generatedLogprobs = lp?.content
      ? LogprobValues.parse(lp.content.map((c) => (c.logprob === undefined ? null : c.logprob)))
      : (lp?.token_logprobs ?? undefined);
    let generatedText = choice.message?.content ?? choice.text ?? undefined;
    if (echo) {
      // `echo: true` logprobs cover the prompt (the first entry null) and then the generation; the
      // generated ones are the last len(token_ids) (vllm tests/entrypoints/openai/test_return_token_ids.py
      // `test_comparison_with_prompt_logprobs_and_logprobs`), `text` is the prompt text ⧺ the generation.
      const all = generatedLogprobs?.length ?? idsFromLogprobs?.length ?? 0;
      const generatedCount =
        choice.token_ids?.length ??
        (several ? undefined : res.usage?.completion_tokens) ??
        (promptIds && all > promptIds.length ? all - promptIds.length : undefined);
      if (generatedCount !== undefined && generatedCount <= all) {
        generatedLogprobs = generatedLogprobs?.slice(generatedLogprobs.length - generatedCount);
        idsFromLogprobs = idsFromLogprobs?.slice(idsFromLogprobs.length - generatedCount);
      }
      const promptText =
        isObject(value.request) && typeof value.request.prompt === 'string' ? value.request.prompt : undefined;
      generatedText =
        promptText !== undefined && generatedText?.startsWith(promptText)
          ? generatedText.slice(promptText.length)
          : undefined;
    }
    const generatedIds = choice.token_ids ?? idsFromLogprobs;
    const messages = pick('messages');
    const placeholders = pick('placeholders');
    const processor = pick('processor');
    const turn: TurnInput = {
      ...(messages ? { messages } : {}),
      ...(promptIds ? { promptIds } : {}),
      ...(placeholders ? { placeholders } : {}),
      ...(generatedIds ? { generatedIds } : {}),
      ...(generatedLogprobs ? { generatedLogprobs } : {}),
      ...(generatedText !== undefined ? { generatedText } : {}),
      ...(choice.finish_reason ? { finishReason: choice.finish_reason } : {}),
      ...(processor ? { processor } : {}),
      ...(res.usage?.prompt_tokens !== undefined && !batch ? { statedPromptTokens: res.usage.prompt_tokens } : {}),
    };
    return {
      line,
      ...(key ? { key } : {}),
      ...(several ? { choice: choice.index ?? i } : {}),
      turn,
      ...(model ? { model } : {}),
      ...(pick('tools') ? { tools: pick('tools') } : {}),
      ...(reward !== undefined ? { reward } : {}),
    };
  });
  const stated = (res as { id?: unknown; request_id?: unknown }).id ?? (res as { request_id?: unknown }).request_id;
  markSamplesOfOneRequest(calls, typeof stated === 'string' && stated !== '' ? stated : `${file}:${line}`);
  // Settings that could not be applied are reported; the calls load without them.
  return { calls, errors: views.flatMap((v) => v.problems ?? []) };
}

/**
 * The choices of one response that answer the same prompt are samples of one group (`n > 1`;
 * vLLM's `CompletionRequest.n` / `ChatCompletionRequest.n`): each gets `request`. A completions
 * batch (`prompt` a list) answers several prompts, `n` choices each: its prompts are groups apart.
 */
export function markSamplesOfOneRequest(calls: VllmCall[], requestId: string): void {
  if (calls.length < 2) return;
  const promptOf = (c: VllmCall) => (c.turn.promptIds ? c.turn.promptIds.join(',') : '');
  const byPrompt = new Map<string, VllmCall[]>();
  for (const c of calls) {
    const list = byPrompt.get(promptOf(c));
    if (list) list.push(c);
    else byPrompt.set(promptOf(c), [c]);
  }
  let k = 0;
  for (const samples of byPrompt.values()) {
    if (samples.length > 1) for (const c of samples) c.request = byPrompt.size > 1 ? `${requestId}:${k}` : requestId;
    k++;
  }
}

interface Group {
  calls: number[];
  /** Turn indices attached to a prefix chain although their prompt breaks it. */
  breaks: number[];
  /** Prefix chaining could not tell which conversation a call continued: the turn, the call, the other candidates. */
  ambiguous?: { turn: number; call: number; others: number[] }[];
}

/** The calls of `group` that are one choice of a request with several (`n > 1`), in turn order. */
function forksOf(group: Group, calls: readonly VllmCall[]): { turn: number; call: VllmCall }[] {
  return group.calls.flatMap((i, turn) => (calls[i]!.request !== undefined ? [{ turn, call: calls[i]! }] : []));
}

/** Lines of other conversations an ambiguity names (the trajectory's grouping depends on them). */
function relatedLines(group: Group, calls: readonly VllmCall[], own: readonly number[]): number[] {
  const lines = (group.ambiguous ?? []).flatMap((a) => [calls[a.call]!.line, ...a.others.map((i) => calls[i]!.line)]);
  return [...new Set(lines)].filter((l) => !own.includes(l)).sort((a, b) => a - b);
}

/** `grouping_ambiguous` findings: the grouping of these turns is a guess the ids could have settled. */
export function ambiguityFindings(
  ambiguous: readonly {
    turn: number;
    line: number;
    otherLines: number[];
    /** The samples (choices of one request, n > 1) the other candidates are, when they are. */
    otherSamples?: number[];
  }[],
  turnCount: number,
): Finding[] {
  return ambiguous.map((a) => {
    const others = a.otherLines.map((l) => `line ${l}`).join(', ');
    const samples = a.otherSamples && `sample${a.otherSamples.length > 1 ? 's' : ''} ${a.otherSamples.join(', ')}`;
    const requestLines = [...new Set(a.otherLines)].map((l) => `line ${l}`).join(', ');
    return {
      kind: 'grouping_ambiguous',
      severity: 'error',
      turn: Math.min(a.turn, turnCount - 1),
      index: -1,
      actual: { line: a.line, alsoContinues: a.otherLines },
      message: samples
        ? `the call on line ${a.line} continues this sample and ${samples} of the request on ${requestLines} equally (identical answers so far): which sample's conversation it belongs to is a guess, so the turns from here on may belong to another sample; log each sample's calls with a session_id of its own`
        : `the call on line ${a.line} extends this conversation and the one${a.otherLines.length > 1 ? 's' : ''} starting on ${others} equally (identical prompts and answers so far): prefix chaining cannot tell which it continues, so the turns from here on may belong to the other conversation; log a session_id (or trajectory_id) with each call`,
    };
  });
}

/** What a call log of one engine says when ids are missing (the fields that engine would have written). */
export interface CallLogFormat {
  format: FormatName;
  noPromptIds: string;
  noGeneratedIds: string;
}

const VLLM_LOG: CallLogFormat = {
  format: 'vllm',
  noPromptIds:
    'no prompt_token_ids (requests sent without return_token_ids): the prompt is rendered from the messages and prefix checks cannot run',
  noGeneratedIds: 'no generated token ids (neither token_ids nor "token_id:N" logprob tokens): only the text is known',
};

function assemble(file: string, calls: readonly VllmCall[], group: Group, log: CallLogFormat): TrajectoryInput {
  const members = group.calls.map((i) => calls[i]!);
  const first = members[0]!;
  // Tools ride on each turn: the chat template renders them into the system turn.
  const turns = members.map((c) => (c.tools && c.tools.length > 0 ? { ...c.turn, tools: c.tools } : c.turn));
  const videos = videosOfTurns(turns);
  const lines = [...new Set(members.map((c) => c.line))];
  const limitations: string[] = [];
  if (turns.some((t) => !t.promptIds)) limitations.push(log.noPromptIds);
  if (turns.some((t) => !t.generatedIds)) limitations.push(log.noGeneratedIds);
  const model = members.find((c) => c.model)?.model;
  const reward = [...members].reverse().find((c) => c.reward !== undefined)?.reward;
  // A request with several choices forks the conversation: each choice is a trajectory of its own
  // (`#<choice>`, `#<choice>.<choice>` after a second fork), a sample of the group of the request it
  // was last forked at: `<session> call <turn>` where the calls name their session, else the request.
  const forks = forksOf(group, calls);
  // A choice of a batch (several prompts in one request) keeps its index too.
  const choices = forks.length > 0 ? forks.map((f) => f.call.choice).join('.') : first.choice;
  const id = `${first.key ? first.key.value : `line ${first.line}`}${choices !== undefined ? `#${choices}` : ''}`;
  const fork = forks[forks.length - 1];
  const groupId = fork && (first.key ? `${first.key.value} call ${fork.turn}` : fork.call.request);
  return {
    id,
    source: { file, line: first.line, format: log.format, ...(lines.length > 1 ? { lines } : {}) },
    ...(model ? { model } : {}),
    ...(groupId !== undefined ? { group: groupId } : {}),
    turns,
    images: [...members].reverse().find((c) => c.images)?.images ?? imagesOfTurns(turns),
    ...(videos.length > 0 ? { videos } : {}),
    ...(reward !== undefined ? { reward } : {}),
    limitations,
    meta: {
      groupedBy: first.key ? first.key.field : members.length > 1 ? 'prefix chain' : 'single call',
      ...(group.breaks.length > 0 ? { attachedAfterBreak: group.breaks } : {}),
      ...(group.ambiguous?.length ? { relatedLines: relatedLines(group, calls, lines) } : {}),
    },
    ...(group.ambiguous?.length
      ? {
          sourceFindings: ambiguityFindings(
            group.ambiguous.map((a) => {
              const others = a.others.map((i) => calls[i]!);
              return {
                turn: a.turn,
                line: calls[a.call]!.line,
                otherLines: others.map((c) => c.line),
                ...(others.every((c) => c.request !== undefined && c.choice !== undefined)
                  ? { otherSamples: others.map((c) => c.choice!) }
                  : {}),
              };
            }),
            turns.length,
          ),
        }
      : {}),
  };
}

/**
 * Group calls: explicit ids first, prefix chaining for the rest; trajectories in order of their
 * first call. A request with several choices (`n > 1`) forks its conversation: every choice starts
 * a trajectory of its own that holds the calls before the fork, and each later call goes to the
 * branch it continues (`branchesOf`, `withForkHistory`).
 */
function groupCalls(calls: readonly VllmCall[], ctx: FileContext): Group[] {
  const byKey = new Map<string, number[]>();
  const unkeyed: number[] = [];
  calls.forEach((c, i) => {
    if (!c.key) return unkeyed.push(i);
    // The prompts of a batch are conversations apart.
    const k = c.choice !== undefined && c.request === undefined ? `${c.key.value}#${c.choice}` : c.key.value;
    const list = byKey.get(k);
    if (list) list.push(i);
    else byKey.set(k, [i]);
  });
  const keyed = [...byKey.values()].flatMap((indices) => branchesOf(calls, indices));
  const chains = chainCalls(
    unkeyed.map((i) => {
      const t = calls[i]!.turn;
      return {
        promptIds: t.promptIds ?? [],
        generatedIds: t.generatedIds ?? [],
        messages: t.messages,
        answerText: t.generatedText,
      };
    }),
    {
      padIds: padIdsOf(
        ctx,
        unkeyed.map((i) => calls[i]!.model),
      ),
    },
  );
  const chained = chains.map((ch) => ({
    calls: ch.calls.map((j) => unkeyed[j]!),
    breaks: ch.breaks,
    // Other candidates are named by their first call.
    ambiguous: ch.ambiguous.map((a) => ({
      turn: a.position,
      call: unkeyed[a.call]!,
      others: a.others.map((o) => unkeyed[chains[o]!.calls[0]!]!),
    })),
  }));
  withForkHistory(calls, chained);
  return [...keyed, ...chained].sort((a, b) => a.calls[0]! - b.calls[0]!);
}

/** Whether `call` continues the conversation whose last call is `last`: by ids, else by messages. */
function continues(call: VllmCall, last: VllmCall): boolean {
  const prompt = call.turn.promptIds;
  const context = last.turn.promptIds;
  if (prompt && context) {
    const gen = last.turn.generatedIds ?? [];
    if (prompt.length < context.length + gen.length) return false;
    for (let i = 0; i < context.length; i++) if (!Object.is(prompt[i], context[i])) return false;
    for (let i = 0; i < gen.length; i++) if (!Object.is(prompt[context.length + i], gen[i])) return false;
    return true;
  }
  // Without ids: the conversation repeats the last call's messages, then that call's answer.
  const history = last.turn.messages;
  const messages = call.turn.messages;
  if (!history || !messages || messages.length <= history.length) return false;
  for (let i = 0; i < history.length; i++) if (JSON.stringify(messages[i]) !== JSON.stringify(history[i])) return false;
  const said = messages[history.length];
  const answer = last.turn.generatedText?.trim();
  return (
    said?.role === 'assistant' && typeof said.content === 'string' && !!answer && said.content.trim().startsWith(answer)
  );
}

/**
 * The calls of one named conversation (a session id) as trajectories. Without a request of several
 * choices it is one; a fork starts one branch per choice, each holding the calls before it, and a
 * later call goes to the branch it continues (its prompt extends the branch's last prompt ⧺
 * generation, or its messages repeat the branch's answer). A call that continues several branches
 * equally goes to the first and is reported (`grouping_ambiguous`); one that continues none, while
 * there are several, is a trajectory of its own.
 */
function branchesOf(calls: readonly VllmCall[], indices: readonly number[]): Group[] {
  if (!indices.some((i) => calls[i]!.request !== undefined)) return [{ calls: [...indices], breaks: [] }];
  const branches: Group[] = [];
  const candidates = (call: VllmCall) => branches.filter((b) => continues(call, calls[b.calls[b.calls.length - 1]!]!));
  /** The call of a branch that made it a sample of its request (the last fork it holds). */
  const sampleOf = (b: Group) => b.calls.findLast((j) => calls[j]!.request !== undefined)!;
  const parentOf = (call: VllmCall, at: number): Group | undefined => {
    if (branches.length === 1 && candidates(call).length === 0) return branches[0];
    const found = candidates(call);
    const parent = found[0];
    // Every candidate lists the guess, as prefix chaining does (chain.ts).
    if (parent && found.length > 1)
      for (const b of found)
        (b.ambiguous ??= []).push({
          turn: b.calls.length,
          call: at,
          others: found.filter((o) => o !== b).map(sampleOf),
        });
    return parent;
  };
  for (let n = 0; n < indices.length; ) {
    const i = indices[n]!;
    const call = calls[i]!;
    if (call.request === undefined) {
      const parent = parentOf(call, i);
      if (parent) parent.calls.push(i);
      else branches.push({ calls: [i], breaks: [] });
      n++;
      continue;
    }
    // The choices of one request answer one prompt: they continue the same branch.
    const fork: number[] = [];
    while (n < indices.length && calls[indices[n]!]!.line === call.line && calls[indices[n]!]!.request === call.request)
      fork.push(indices[n++]!);
    const parent = parentOf(call, i);
    if (parent) branches.splice(branches.indexOf(parent), 1);
    for (const choice of fork)
      branches.push({
        calls: [...(parent?.calls ?? []), choice],
        breaks: [...(parent?.breaks ?? [])],
        ...(parent?.ambiguous ? { ambiguous: [...parent.ambiguous] } : {}),
      });
  }
  return branches;
}

/**
 * Prefix chaining puts the first choice of a request made after the conversation began into the
 * conversation's chain, and starts a chain at each other choice (their common prompt is no longer
 * than the chain's last one): those get the calls before the fork too, so every sample of the
 * request holds the same history.
 */
function withForkHistory(calls: readonly VllmCall[], chains: Group[]): void {
  const chainOf = new Map<number, Group>();
  for (const g of chains) for (const i of g.calls) if (calls[i]!.request !== undefined) chainOf.set(i, g);
  const byRequest = new Map<string, number[]>();
  for (const i of chainOf.keys()) {
    const key = `${calls[i]!.line}\u0000${calls[i]!.request}`;
    const list = byRequest.get(key);
    if (list) list.push(i);
    else byRequest.set(key, [i]);
  }
  for (const choices of byRequest.values()) {
    const withHistory = choices.map((i) => chainOf.get(i)!).find((g, k) => g.calls.indexOf(choices[k]!) > 0);
    if (!withHistory) continue;
    const at = withHistory.calls.findIndex((i) => choices.includes(i));
    const history = withHistory.calls.slice(0, at);
    for (const i of choices) {
      const g = chainOf.get(i)!;
      if (g.calls[0] !== i) continue;
      g.calls = [...history, ...g.calls];
      g.breaks = [...withHistory.breaks.filter((b) => b < at), ...g.breaks.map((b) => b + at)];
      g.ambiguous = g.ambiguous?.map((a) => ({ ...a, turn: a.turn + at }));
    }
  }
}

export const vllmImporter: Importer = {
  format: 'vllm',
  description:
    'vLLM request/response logs: JSONL, one {"request", "response"} per call (chat, completions, render + /inference/v1/generate)',
  container: 'jsonl',
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (!('request' in record) && !('render' in record))
      return 'no "request" (a vLLM call log line is {"request": ..., "response": ...})';
    // A streamed call's response is its list of chunks.
    if (!(isObject(record.response) && Array.isArray(record.response.choices)) && !isChunkList(record.response))
      return 'no "response" object with "choices"';
    return true;
  },
  importRecords(records, ctx): ImportResult {
    const { file } = ctx;
    const out: ImportResult = { trajectories: [], errors: [] };
    const calls: VllmCall[] = [];
    for (const r of records) {
      const { calls: c, errors } = readVllmCall(r.value, file, r.line);
      calls.push(...c);
      out.errors.push(...errors);
    }
    out.trajectories.push(...trajectoriesFromCalls(ctx, calls, VLLM_LOG));
    return out;
  },
};

/**
 * Calls of one request/response log as trajectories: grouped by the ids the lines state, else by
 * prefix chaining (ambiguities reported), ids unique within the file. Shared by the engines whose
 * logs have this shape (vLLM, SGLang).
 */
export function trajectoriesFromCalls(
  ctx: FileContext,
  calls: readonly VllmCall[],
  log: CallLogFormat,
): TrajectoryInput[] {
  const unique = uniqueIds();
  return groupCalls(calls, ctx).map((g) => {
    const t = assemble(ctx.file, calls, g, log);
    return { ...t, id: unique(t.id) };
  });
}
