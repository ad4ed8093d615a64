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
import { z } from 'zod';
import {
  Message,
  type ImageRef,
  type ProcessorSettings,
  type ReadError,
  type TrajectoryInput,
} from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { zodErrors } from './read/validate.ts';
import { chainCalls, QWEN_VL_PAD_IDS, uniqueIds } from './chain.ts';

type TurnInput = TrajectoryInput['turns'][number];

const TokenIdArray = z.array(z.number().int().nonnegative());
/** Python's json writes NaN and ±Infinity; they are findings for the checks, not read errors. */
const AnyNumber = z.custom<number>((v) => typeof v === 'number', { message: 'expected a number' });
const PositiveInt = z.number().int().positive();

const ChatLogprob = z
  .object({ token: z.string().nullable().optional(), logprob: AnyNumber.nullable().optional() })
  .passthrough();
const ChoiceLogprobs = z
  .object({
    content: z.array(ChatLogprob).nullable().optional(),
    tokens: z.array(z.string().nullable()).nullable().optional(),
    token_logprobs: z.array(AnyNumber.nullable()).nullable().optional(),
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
  })
  .passthrough();

const PlaceholderRanges = z.array(
  z.object({ offset: z.number().int().nonnegative(), length: z.number().int().nonnegative() }).passthrough(),
);
const PlaceholdersByModality = z.record(z.string(), PlaceholderRanges);
const Features = z.object({ mm_placeholders: PlaceholdersByModality.nullable().optional() }).passthrough();
const MmProcessorKwargs = z
  .object({
    min_pixels: PositiveInt.optional(),
    max_pixels: PositiveInt.optional(),
    // Qwen3-VL's processor states the bounds as `size` (docs/reference/image-math.md#processor-parameters).
    size: z
      .object({ shortest_edge: PositiveInt.optional(), longest_edge: PositiveInt.optional() })
      .passthrough()
      .optional(),
  })
  .passthrough();
/** A chat/completions request, or a `GenerateRequest` (render result / generate body). */
const RequestObject = z
  .object({
    model: z.string().nullable().optional(),
    messages: z.array(Message).optional(),
    tools: z.array(z.unknown()).nullable().optional(),
    mm_processor_kwargs: MmProcessorKwargs.nullable().optional(),
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
  promptIds?: number[];
  placeholders?: { offset: number; length: number }[];
}

/** Fields a logger (or vLLM's `session_id`) puts the trajectory's id in, and where (docs/reference/vllm-api.md). */
export const ID_FIELDS = ['trajectory_id', 'session_id', 'rollout_id'] as const;

export function explicitId(line: Record<string, unknown>): { field: string; value: string } | undefined {
  const request = isObject(line.request) ? line.request : undefined;
  const extraBody = isObject(request?.extra_body) ? request.extra_body : undefined;
  const places: [string, unknown][] = [
    ['', line],
    ['metadata.', line.metadata],
    ['request.metadata.', request?.metadata],
    ['request.extra_body.', extraBody],
    ['request.extra_body.metadata.', extraBody?.metadata],
  ];
  for (const [prefix, obj] of places) {
    if (!isObject(obj)) continue;
    for (const field of ID_FIELDS) {
      const v = obj[field];
      if ((typeof v === 'string' && v !== '') || (typeof v === 'number' && Number.isFinite(v)))
        return { field: prefix + field, value: String(v) };
    }
  }
  return undefined;
}

function imageUrlOf(part: Record<string, unknown>): string | undefined {
  const u = part.image_url;
  if (typeof u === 'string') return u;
  if (isObject(u) && typeof u.url === 'string') return u.url;
  if (typeof part.image === 'string') return part.image;
  return undefined;
}

/**
 * Images of OpenAI-style messages in order of appearance: what the Qwen templates render as a
 * vision span (`type == 'image'`, or an `image` / `image_url` key), with qwen-vl-utils'
 * per-image `min_pixels`/`max_pixels` when stated.
 */
export function imagesInMessages(messages: readonly unknown[]): ImageRef[] {
  const out: ImageRef[] = [];
  for (const m of messages) {
    if (!isObject(m) || !Array.isArray(m.content)) continue;
    for (const part of m.content) {
      if (!isObject(part) || !(part.type === 'image' || 'image' in part || 'image_url' in part)) continue;
      const url = imageUrlOf(part);
      const img: ImageRef =
        url !== undefined ? { url } : { unavailable: 'the record names the image but does not carry it (no URL)' };
      if (typeof part.min_pixels === 'number' && part.min_pixels > 0) img.minPixels = Math.round(part.min_pixels);
      if (typeof part.max_pixels === 'number' && part.max_pixels > 0) img.maxPixels = Math.round(part.max_pixels);
      out.push(img);
    }
  }
  return out;
}

/** Trajectory images: the first turn's, then only those in each later turn's new messages (history repeats the rest). */
export function imagesOfTurns(turns: readonly Pick<TurnInput, 'messages'>[]): ImageRef[] {
  const images: ImageRef[] = [];
  let seen = 0;
  turns.forEach((t, k) => {
    if (!t.messages) return;
    images.push(...imagesInMessages(k === 0 ? t.messages : t.messages.slice(seen)));
    seen = t.messages.length;
  });
  return images;
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

function processorOf(kwargs: z.infer<typeof MmProcessorKwargs> | null | undefined): ProcessorSettings | undefined {
  if (!kwargs) return undefined;
  const minPixels = kwargs.min_pixels ?? kwargs.size?.shortest_edge;
  const maxPixels = kwargs.max_pixels ?? kwargs.size?.longest_edge;
  if (minPixels === undefined && maxPixels === undefined) return undefined;
  return { ...(minPixels !== undefined ? { minPixels } : {}), ...(maxPixels !== undefined ? { maxPixels } : {}) };
}

function viewOfObject(r: RequestObject): RequestView {
  const features = isObject(r.features) ? (r.features as z.infer<typeof Features>) : undefined;
  const promptFromCompletions =
    Array.isArray(r.prompt) && r.prompt.length > 0 && r.prompt.every((x) => Number.isInteger(x) && (x as number) >= 0)
      ? (r.prompt as number[])
      : undefined;
  return {
    model: r.model ?? undefined,
    messages: r.messages,
    tools: r.tools ?? undefined,
    processor: processorOf(r.mm_processor_kwargs),
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
  return parsed.success ? viewOfObject(parsed.data) : zodErrors(file, line, parsed.error, field);
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

export interface VllmCall {
  line: number;
  key?: { field: string; value: string };
  /** Choice index, when the response held several (n > 1: one trajectory each). */
  choice?: number;
  turn: TurnInput;
  model?: string;
  tools?: unknown[];
  reward?: number;
}

/**
 * One logged call (`{"request", "response", "render"?, "chat_request"?, ...ids}`) as one call per
 * choice, or ReadErrors naming the field (`within` prefixes field names when the call sits
 * inside another record, e.g. an Agent Lightning event's `data`).
 */
export function readVllmCall(
  value: unknown,
  file: string,
  line: number,
  within = '',
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
  const response = value.response;
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
    else views.push(v);
  }
  if (!parsedResponse.success || errors.length > 0) return { calls: [], errors };
  const res = parsedResponse.data;
  const pick = <K extends keyof RequestView>(k: K): RequestView[K] => views.find((v) => v[k] !== undefined)?.[k];
  const key = explicitId(value);
  const model = pick('model') ?? res.model ?? undefined;
  const reward = typeof value.reward === 'number' ? value.reward : undefined;
  const several = res.choices.length > 1;
  const calls = res.choices.map((choice, i): VllmCall => {
    const promptIds = choice.prompt_token_ids ?? res.prompt_token_ids ?? pick('promptIds');
    const lp = choice.logprobs;
    const generatedIds =
      choice.token_ids ??
      idsFromTokenStrings(lp?.content?.map((c) => c.token)) ??
      idsFromTokenStrings(lp?.tokens ?? undefined);
    const generatedLogprobs = lp?.content
      ? lp.content.map((c) => c.logprob ?? NaN)
      : lp?.token_logprobs
        ? lp.token_logprobs.map((x) => x ?? NaN)
        : undefined;
    const generatedText = choice.message?.content ?? choice.text ?? undefined;
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
    };
    return {
      line,
      ...(key ? { key: several ? { ...key, value: `${key.value}#${choice.index ?? i}` } : key } : {}),
      ...(several ? { choice: choice.index ?? i } : {}),
      turn,
      ...(model ? { model } : {}),
      ...(pick('tools') ? { tools: pick('tools') } : {}),
      ...(reward !== undefined ? { reward } : {}),
    };
  });
  return { calls, errors: [] };
}

interface Group {
  calls: number[];
  /** Turn indices attached to a prefix chain although their prompt breaks it. */
  breaks: number[];
}

function assemble(file: string, calls: readonly VllmCall[], group: Group): TrajectoryInput {
  const members = group.calls.map((i) => calls[i]!);
  const first = members[0]!;
  // Tools ride on each turn: the chat template renders them into the system turn.
  const turns = members.map((c) => (c.tools && c.tools.length > 0 ? { ...c.turn, tools: c.tools } : c.turn));
  const lines = [...new Set(members.map((c) => c.line))];
  const limitations: string[] = [];
  if (turns.some((t) => !t.promptIds)) {
    limitations.push(
      'no prompt_token_ids (requests sent without return_token_ids): the prompt is rendered from the messages and prefix checks cannot run',
    );
  }
  if (turns.some((t) => !t.generatedIds))
    limitations.push(
      'no generated token ids (neither token_ids nor "token_id:N" logprob tokens): only the text is known',
    );
  const model = members.find((c) => c.model)?.model;
  const reward = [...members].reverse().find((c) => c.reward !== undefined)?.reward;
  const id = first.key ? first.key.value : `line ${first.line}${first.choice !== undefined ? `#${first.choice}` : ''}`;
  return {
    id,
    source: { file, line: first.line, format: 'vllm', ...(lines.length > 1 ? { lines } : {}) },
    ...(model ? { model } : {}),
    turns,
    images: imagesOfTurns(turns),
    ...(reward !== undefined ? { reward } : {}),
    limitations,
    meta: {
      groupedBy: first.key ? first.key.field : members.length > 1 ? 'prefix chain' : 'single call',
      ...(group.breaks.length > 0 ? { attachedAfterBreak: group.breaks } : {}),
    },
  };
}

/** Group calls: explicit ids first, prefix chaining for the rest; trajectories in order of their first call. */
function groupCalls(calls: readonly VllmCall[]): Group[] {
  const byKey = new Map<string, Group>();
  const unkeyed: number[] = [];
  calls.forEach((c, i) => {
    if (!c.key) return unkeyed.push(i);
    const k = `${c.key.value}`;
    const g = byKey.get(k);
    if (g) g.calls.push(i);
    else byKey.set(k, { calls: [i], breaks: [] });
  });
  const chained = chainCalls(
    unkeyed.map((i) => {
      const t = calls[i]!.turn;
      return {
        promptIds: t.promptIds ?? [],
        generatedIds: t.generatedIds ?? [],
        messages: t.messages,
        answerText: t.generatedText,
      };
    }),
    { padIds: QWEN_VL_PAD_IDS },
  ).map((ch) => ({ calls: ch.calls.map((j) => unkeyed[j]!), breaks: ch.breaks }));
  return [...byKey.values(), ...chained].sort((a, b) => a.calls[0]! - b.calls[0]!);
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
    if (!isObject(record.response) || !Array.isArray(record.response.choices))
      return 'no "response" object with "choices"';
    return true;
  },
  importRecords(records, { file }): ImportResult {
    const out: ImportResult = { trajectories: [], errors: [] };
    const calls: VllmCall[] = [];
    for (const r of records) {
      const { calls: c, errors } = readVllmCall(r.value, file, r.line);
      calls.push(...c);
      out.errors.push(...errors);
    }
    const unique = uniqueIds();
    for (const g of groupCalls(calls)) {
      const t = assemble(file, calls, g);
      out.trajectories.push({ ...t, id: unique(t.id) });
    }
    return out;
  },
};
