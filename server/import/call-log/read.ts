// One logged call of an OpenAI-compatible engine (`{"request", "response"}` plus whatever ids the
// logger added) read into its turns: what vLLM's call logs, SGLang's OpenAI logs, Agent Lightning's
// raw model_request events and the gateway's capture share (docs/reference/vllm-api.md). Shapes read
// (field names from vllm-project/vllm `vllm/entrypoints/openai/chat_completion/protocol.py`,
// `.../completion/protocol.py`, `vllm/entrypoints/scale_out/token_in_token_out/protocol.py`; they
// moved between versions):
// - chat completions: `response.prompt_token_ids` (top level), `choices[].token_ids`,
//   `choices[].logprobs.content[].logprob`, `finish_reason`; `request.messages`, `request.tools`,
//   `request.mm_processor_kwargs`;
// - completions: `prompt_token_ids` / `token_ids` inside each choice, legacy logprobs
//   `{tokens, token_logprobs}`;
// - `return_tokens_as_token_ids`: logprob tokens written as `"token_id:123"`
//   (`vllm/entrypoints/openai/serving_engine.py::_get_decoded_token`), the generated ids when
//   `token_ids` is absent;
// - a streamed call's response logged as its list of chunks (chunks.ts folds them);
// - token-in/token-out: a render result (a `GenerateRequest` with `token_ids` and
//   `features.mm_placeholders`, or the `[conversation, engine_prompts]` list some builds return,
//   vllm-project/vime `vime/rollout/vllm_rollout.py::_mm_render_response_to_generate_body`) paired
//   with an `/inference/v1/generate` response (`choices[0].token_ids`, `logprobs.content`). The
//   render result may be the line's `request` or a separate `render`; `chat_request` holds the
//   chat request that was rendered (vLLM's `DerenderChatRequest` names it so).
import { imagesInMessages, videosInMessages } from '../../model/message-images.ts';
import { z } from 'zod';
import {
  Message,
  type ImageRef,
  type VideoRef,
  type ProcessorSettings,
  type ReadError,
  type TrajectoryInput,
} from '../../model/trajectory.ts';
import { isObject } from '../importer.ts';
import { zodErrors } from '../read/validate.ts';
import { LogprobValues, TokenIdValues } from '../turns-from-mask.ts';
import { readProcessorKwargs } from '../processor-kwargs.ts';
import { isChunkList, responseOfChunks } from './chunks.ts';

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

export interface LoggedCall {
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
export function readLoggedCall(
  value: unknown,
  file: string,
  line: number,
  within = '',
  opts: { statedSettings?: boolean } = {},
): { calls: LoggedCall[]; errors: ReadError[] } {
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
  const calls = res.choices.map((choice, i): LoggedCall => {
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
export function markSamplesOfOneRequest(calls: LoggedCall[], requestId: string): void {
  if (calls.length < 2) return;
  const promptOf = (c: LoggedCall) => (c.turn.promptIds ? c.turn.promptIds.join(',') : '');
  const byPrompt = new Map<string, LoggedCall[]>();
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
