// The parts of the engine stand-in both engines share: the scripted generation with the request's
// limits applied, the call log entry, logprob tokens, incremental text deltas
// (docs/reference/engine-protocols.md).
import { z } from 'zod';
import {
  decodeIds,
  encodeText,
  type PythonRenderer,
  REFERENCE_IDS,
  type ReferenceProfile,
} from './engine-reference.ts';

export type EngineKind = 'vllm' | 'sglang';

/** What the stand-in generates for one call: token ids verbatim (text is decoded from them), or text (tokenized). */
export interface ScriptedGeneration {
  ids?: number[];
  text?: string;
  /**
   * Default 'stop'. 'tool_calls' is generated as a 'stop' and reported as 'tool_calls' only where the
   * engine's parser finds a call (chat with tools); 'length' is also what a request's max tokens force.
   */
  finishReason?: 'stop' | 'length' | 'tool_calls' | 'abort';
  /** Per generated token; default a deterministic negative value per token. */
  logprobs?: number[];
  /**
   * Whether the EOS (<|im_end|>) is appended to ids on a 'stop' finish (vLLM includes the stop token
   * id in token_ids when it is the EOS). Default: true for `text`, false for `ids` (given verbatim).
   */
  appendEos?: boolean;
}

export interface ReceivedCall {
  path: string;
  method: string;
  headers: Record<string, string>;
  /** Parsed JSON as received (the raw text when it is not JSON; undefined without a body). */
  body: unknown;
  /** The prompt ids the engine would feed the model: rendered (chat) or given (token prompt / input_ids), image pads expanded. */
  promptIds: number[];
  /** The first choice's generation (of the first prompt). */
  generated?: ScriptedGeneration & { ids: number[] };
  /** Every choice, in the response's order (prompts × n). */
  choices?: (ScriptedGeneration & { ids: number[]; promptIds: number[] })[];
  /** The rendered prompt text, for chat requests. */
  promptText?: string;
  /** vLLM: the SamplingParams the request became (engine_render.py `sampling`). */
  sampling?: Record<string, unknown>;
  /** The response status sent (undefined while pending or when a fault answered nothing). */
  status?: number;
  fault?: FaultMode;
}

/**
 * 'reset': the answer starts, then the connection is cut; 'drop': the connection is closed as the
 * request arrives, before any byte of an answer (what a kept-alive connection the engine had
 * closed while idle does to the next request); 'hold': answered once released (`hold()`).
 */
export type FaultMode = '500' | '503' | 'timeout' | 'reset' | 'drop' | 'hold';

export function versionAtLeast(version: string, minimum: string): boolean {
  const parts = (v: string) => v.split(/[.+-]/).map((p) => Number.parseInt(p, 10) || 0);
  const a = parts(version);
  const b = parts(minimum);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d > 0;
  }
  return true;
}

/** A request the engine refuses, answered with its error JSON. */
export class EngineError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'BadRequestError',
  ) {
    super(message);
  }
}

/** The generation of one choice, after the request's limits are applied. */
export interface Generation {
  ids: number[];
  text: string;
  /** Engine-level finish: 'stop' | 'length' | 'abort'. */
  finishReason: 'stop' | 'length' | 'abort';
  /** The stop token id or string that matched; null for the EOS (vLLM `stop_reason`). */
  stopReason: number | string | null;
  logprobs: number[];
  scripted: ScriptedGeneration;
}

export interface GenerationLimits {
  maxTokens: number;
  skipSpecialTokens: boolean;
  stop: string[];
  stopTokenIds: number[];
}

/** The deterministic default logprob of the i-th generated token. */
export function defaultLogprob(id: number, i: number): number {
  return -((1 + ((id * 7 + i) % 13)) / 16);
}

export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new EngineError(400, `${issue?.path.join('.') || 'body'}: ${issue?.message ?? 'invalid request'}`);
  }
  return parsed.data;
}

/** Where a handler writes its answer: one JSON body, or an SSE stream of `data:` events. */
export interface Reply {
  json(status: number, value: unknown): void;
  sse(events: string[]): void;
  /** A status with no body (the engines' `/health`). */
  empty(status: number): void;
}

export type Handler = (call: ReceivedCall, bodyText: string, reply: Reply) => Promise<void>;

// --- generation ------------------------------------------------------------------------------------

export async function applyLimits(
  profile: ReferenceProfile,
  scripted: ScriptedGeneration,
  limits: GenerationLimits,
): Promise<Generation> {
  if (scripted.ids === undefined && scripted.text === undefined)
    throw new Error('engine stand-in script: a generation needs ids or text');
  let ids = scripted.ids ? [...scripted.ids] : await encodeText(profile, scripted.text ?? '');
  let finish: Generation['finishReason'] =
    scripted.finishReason === 'length' || scripted.finishReason === 'abort' ? scripted.finishReason : 'stop';
  const appendEos = scripted.appendEos ?? scripted.ids === undefined;
  if (finish === 'stop' && appendEos) ids.push(REFERENCE_IDS.imEnd);
  const scriptedLogprobs = scripted.logprobs;
  if (scriptedLogprobs && scriptedLogprobs.length < ids.length)
    throw new Error(`engine stand-in script: ${scriptedLogprobs.length} logprobs for ${ids.length} ids`);
  let logprobs = ids.map((id, i) => scriptedLogprobs?.[i] ?? defaultLogprob(id, i));
  let stopReason: number | string | null = null;

  // A stop token id ends the generation at its first occurrence (kept in the ids, as the EOS is).
  const stopAt = ids.findIndex((id) => limits.stopTokenIds.includes(id));
  if (stopAt >= 0 && stopAt < limits.maxTokens) {
    stopReason = ids[stopAt] === REFERENCE_IDS.imEnd ? null : (ids[stopAt] ?? null);
    ids = ids.slice(0, stopAt + 1);
    finish = 'stop';
  }
  if (ids.length > limits.maxTokens) {
    ids = ids.slice(0, limits.maxTokens);
    finish = 'length';
    stopReason = null;
  }
  logprobs = logprobs.slice(0, ids.length);
  const last = ids[ids.length - 1];
  // The stop token is not part of the text (vllm-api.md "The stop token is kept").
  const endsOnStopToken =
    finish === 'stop' && last !== undefined && (last === REFERENCE_IDS.imEnd || limits.stopTokenIds.includes(last));
  let text = await decodeIds(profile, endsOnStopToken ? ids.slice(0, -1) : ids, limits.skipSpecialTokens);

  // Stop strings: the text is cut before the match and generation ends at the token completing it.
  for (const s of limits.stop) {
    const at = s ? text.indexOf(s) : -1;
    if (at < 0) continue;
    for (let k = 1; k <= ids.length; k++) {
      const partial = await decodeIds(profile, ids.slice(0, k), limits.skipSpecialTokens);
      if (partial.includes(s)) {
        ids = ids.slice(0, k);
        logprobs = logprobs.slice(0, k);
        break;
      }
    }
    text = text.slice(0, at);
    finish = 'stop';
    stopReason = s;
    break;
  }
  return { ids, text, finishReason: finish, stopReason, logprobs, scripted };
}

export function recordGeneration(call: ReceivedCall, promptIds: number[], gen: Generation): void {
  const entry = { ...gen.scripted, ids: gen.ids, promptIds };
  call.choices ??= [];
  call.choices.push(entry);
  if (!call.generated) call.generated = { ...gen.scripted, ids: gen.ids };
}

export interface EngineContext {
  profile: ReferenceProfile;
  template: string;
  renderer: PythonRenderer;
  model: string;
  maxModelLen: number;
  vllmVersion: string;
  toolParser: boolean;
  /** Whether vLLM's `/inference/v1/generate` is served. */
  generateEndpoint: boolean;
  generate(call: ReceivedCall, limits: GenerationLimits): Promise<Generation>;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);
/** Response ids are random in vLLM and SGLang; here they are numbered, so a run is the same every time. */
let responseNumber = 0;
export const randomHex = () => (++responseNumber).toString(16).padStart(32, '0');

/** The image `mm_processor_kwargs` the Qwen-VL processor takes (`min_pixels`, `max_pixels`, or `size`). */
export function pixelOverrides(kwargs: Record<string, unknown> | null | undefined): {
  minPixels?: number;
  maxPixels?: number;
} {
  if (!kwargs) return {};
  const out: { minPixels?: number; maxPixels?: number } = {};
  const size = kwargs.size as { shortest_edge?: unknown; longest_edge?: unknown } | undefined;
  const min = kwargs.min_pixels ?? size?.shortest_edge;
  const max = kwargs.max_pixels ?? size?.longest_edge;
  if (typeof min === 'number') out.minPixels = min;
  if (typeof max === 'number') out.maxPixels = max;
  return out;
}

export function stopList(stop: string | string[] | null | undefined): string[] {
  if (stop === null || stop === undefined) return [];
  return typeof stop === 'string' ? [stop] : stop;
}

export function maxTokensFor(
  engine: EngineContext,
  requested: number | null | undefined,
  promptLength: number,
): number {
  const room = engine.maxModelLen - promptLength;
  if (room <= 0 || (requested !== null && requested !== undefined && requested > room))
    throw new EngineError(
      400,
      `This model's maximum context length is ${engine.maxModelLen} tokens. However, you requested ${
        (requested ?? 0) + promptLength
      } tokens (${promptLength} in the messages, ${requested ?? 0} in the completion). Please reduce the length of the messages or completion.`,
    );
  return requested ?? room;
}

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

/** One token as vLLM writes it in logprobs: its decoded text, or `token_id:N` when asked. */
export async function tokenText(engine: EngineContext, id: number, asTokenId: boolean): Promise<string> {
  return asTokenId ? `token_id:${id}` : decodeIds(engine.profile, [id], false);
}

/** The other candidates of a step's top logprobs: fixed neighbour ids, each less likely than the last. */
export function alternatives(id: number, logprob: number, count: number): { id: number; logprob: number }[] {
  const out: { id: number; logprob: number }[] = [];
  for (let k = 1; k <= count; k++) out.push({ id: (id + k) % REFERENCE_IDS.endOfText, logprob: logprob - k });
  return out;
}

/** The text each token adds, as an incremental detokenizer emits it (an incomplete UTF-8 tail waits). */
export async function textDeltas(
  engine: EngineContext,
  gen: Generation,
  skipSpecialTokens: boolean,
): Promise<string[]> {
  // Byte-level BPE decodes by concatenation, so the ids since the last complete character decode
  // to exactly the new text; the deltas are then held to the final text (a stop string is cut).
  const deltas: string[] = [];
  let emitted = 0;
  let from = 0;
  for (let k = 0; k < gen.ids.length; k++) {
    if (k === gen.ids.length - 1) {
      deltas.push(gen.text.slice(emitted));
      break;
    }
    const piece = await decodeIds(engine.profile, gen.ids.slice(from, k + 1), skipSpecialTokens);
    if (piece.endsWith('\uFFFD')) {
      deltas.push('');
      continue;
    }
    const delta = gen.text.slice(emitted, emitted + piece.length);
    deltas.push(delta);
    emitted += delta.length;
    from = k + 1;
  }
  return deltas;
}

// OpenAI request parts both engines read.
export const StreamOptions = z.object({
  include_usage: z.boolean().nullish(),
  continuous_usage_stats: z.boolean().nullish(),
});

export const Stop = z.union([z.string(), z.array(z.string())]).nullish();

/** OpenAI chat logprobs: per token its text (or `token_id:N`), logprob, UTF-8 bytes and top candidates. */
export async function chatLogprobs(
  engine: EngineContext,
  gen: Generation,
  topLogprobs: number,
  asTokenId: boolean,
): Promise<{ content: (TokenLogprob & { top_logprobs: TokenLogprob[] })[] }> {
  const content: (TokenLogprob & { top_logprobs: TokenLogprob[] })[] = [];
  for (let i = 0; i < gen.ids.length; i++) {
    const id = gen.ids[i] as number;
    const lp = Math.max(gen.logprobs[i] as number, -9999);
    const token = await tokenText(engine, id, asTokenId);
    const top: TokenLogprob[] = [];
    const candidates = [{ id, logprob: lp }, ...alternatives(id, lp, Math.max(0, topLogprobs - 1))];
    for (const c of topLogprobs > 0 ? candidates.slice(0, topLogprobs) : []) {
      const t = await tokenText(engine, c.id, asTokenId);
      top.push({ token: t, logprob: Math.max(c.logprob, -9999), bytes: [...Buffer.from(t, 'utf8')] });
    }
    content.push({ token, logprob: lp, bytes: [...Buffer.from(token, 'utf8')], top_logprobs: top });
  }
  return { content };
}
