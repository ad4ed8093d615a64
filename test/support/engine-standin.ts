// An inference engine stand-in for the gateway's tests: vLLM's and SGLang's HTTP endpoints with
// their request and response models as the engines' protocol files define them
// (docs/reference/engine-protocols.md), prompts rendered and tokenized by an independent reference
// stack (engine-reference.ts: Python jinja2, the Hugging Face tokenizer, smart_resize in Python),
// and generations scripted by each test: ids verbatim or text, with the finish the test chooses.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { z } from 'zod';
import {
  decodeIds,
  encodeText,
  expandImagePads,
  imagePadCount,
  PythonRenderer,
  REFERENCE_IDS,
  type ReferenceProfile,
  referenceProfileOf,
  templateSource,
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
  /** The response status sent (undefined while pending or when a fault answered nothing). */
  status?: number;
  fault?: FaultMode;
}

export interface StandinOptions {
  engine: EngineKind;
  /** Served model name (returned by /v1/models) and the profile to render with: a built-in profile name ('qwen2.5-vl', 'qwen3-vl', …) */
  model: string;
  profile?: string;
  /** Called per generation request, in arrival order; may be async. */
  script: (call: ReceivedCall, index: number) => ScriptedGeneration | Promise<ScriptedGeneration>;
  /** vLLM version behaviour to emulate where it matters (e.g. return_token_ids needs >= 0.10.2). */
  vllmVersion?: string;
  /** The engine's context length (vLLM `max_model_len`, SGLang `context_length`); default 32768. */
  maxModelLen?: number;
  /** vLLM `--enable-auto-tool-choice --tool-call-parser hermes` (default true); false: no tool parser. */
  toolParser?: boolean;
}

export type FaultMode = '500' | '503' | 'timeout' | 'reset' | 'slow';

export interface EngineStandin {
  url: string;
  calls: ReceivedCall[];
  /** Faults for the next `count` requests (default 1): connection refused is modelled by close(); */
  fail(mode: FaultMode, opts?: { count?: number; delayMs?: number }): void;
  close(): Promise<void>;
}

const DEFAULT_VLLM_VERSION = '0.11.0';

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
interface Generation {
  ids: number[];
  text: string;
  /** Engine-level finish: 'stop' | 'length' | 'abort'. */
  finishReason: 'stop' | 'length' | 'abort';
  /** The stop token id or string that matched; null for the EOS (vLLM `stop_reason`). */
  stopReason: number | string | null;
  logprobs: number[];
  scripted: ScriptedGeneration;
}

interface GenerationLimits {
  maxTokens: number;
  skipSpecialTokens: boolean;
  stop: string[];
  stopTokenIds: number[];
}

/** The deterministic default logprob of the i-th generated token. */
export function defaultLogprob(id: number, i: number): number {
  return -((1 + ((id * 7 + i) % 13)) / 16);
}

// --- zod models of the requests, written from the protocol files ---------------------------------

const StreamOptions = z.object({
  include_usage: z.boolean().nullish(),
  continuous_usage_stats: z.boolean().nullish(),
});

const Stop = z.union([z.string(), z.array(z.string())]).nullish();

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

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new EngineError(400, `${issue?.path.join('.') || 'body'}: ${issue?.message ?? 'invalid request'}`);
  }
  return parsed.data;
}

// --- the server -----------------------------------------------------------------------------------

interface Fault {
  mode: FaultMode;
  delayMs: number;
}

/** Where a handler writes its answer: one JSON body, or an SSE stream of `data:` events. */
interface Reply {
  json(status: number, value: unknown): void;
  sse(events: string[]): void;
}

type Handler = (call: ReceivedCall, bodyText: string, reply: Reply) => Promise<void>;

export async function startEngineStandin(opts: StandinOptions): Promise<EngineStandin> {
  const profile = referenceProfileOf(opts.profile ?? opts.model);
  const template = templateSource(profile);
  const renderer = new PythonRenderer();
  const calls: ReceivedCall[] = [];
  const faults: Fault[] = [];
  const sockets = new Set<Socket>();
  const vllmVersion = opts.vllmVersion ?? DEFAULT_VLLM_VERSION;
  const maxModelLen = opts.maxModelLen ?? 32768;
  let generationIndex = 0;

  const engine = {
    profile,
    template,
    renderer,
    model: opts.model,
    maxModelLen,
    vllmVersion,
    toolParser: opts.toolParser ?? true,
    async generate(call: ReceivedCall, limits: GenerationLimits): Promise<Generation> {
      const scripted = await opts.script(call, generationIndex++);
      return applyLimits(profile, scripted, limits);
    },
  };
  const routes: Record<string, Record<string, Handler>> = opts.engine === 'vllm'
    ? vllmRoutes(engine)
    : vllmRoutes(engine);

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void handle(req, res, Buffer.concat(chunks).toString('utf8'));
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, bodyText: string): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://engine');
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    let body: unknown;
    let bodyError: string | undefined;
    if (bodyText.length > 0) {
      try {
        body = JSON.parse(bodyText);
      } catch (e) {
        body = bodyText;
        bodyError = (e as Error).message;
      }
    }
    const call: ReceivedCall = { path: url.pathname, method: req.method ?? 'GET', headers, body, promptIds: [] };
    calls.push(call);

    const fault = faults.shift();
    if (fault) call.fault = fault.mode;
    if (fault?.mode === 'timeout') return;
    if (fault?.mode === '500' || fault?.mode === '503') {
      const status = Number(fault.mode);
      call.status = status;
      sendJson(res, status, errorBody(opts.engine, status, 'stand-in fault', faultType(status)));
      return;
    }
    if (fault?.mode === 'slow') await new Promise((r) => setTimeout(r, fault.delayMs));

    const reply: Reply =
      fault?.mode === 'reset'
        ? resetReply(res, call)
        : {
            json: (status, value) => {
              call.status = status;
              sendJson(res, status, value);
            },
            sse: (events) => {
              call.status = 200;
              sendSse(res, events);
            },
          };

    const byMethod = routes[url.pathname];
    const handler = byMethod?.[call.method];
    if (!handler) {
      // FastAPI's answers for an unknown route and a known route with another method.
      reply.json(byMethod ? 405 : 404, { detail: byMethod ? 'Method Not Allowed' : 'Not Found' });
      return;
    }
    try {
      if (bodyError !== undefined) throw new EngineError(400, `JSON decode error: ${bodyError}`);
      await handler(call, bodyText, reply);
    } catch (e) {
      const err =
        e instanceof EngineError ? e : new EngineError(500, (e as Error).message ?? String(e), 'InternalServerError');
      reply.json(err.status, errorBody(opts.engine, err.status, err.message, err.type));
    }
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    fail(mode, o = {}) {
      for (let i = 0; i < (o.count ?? 1); i++) faults.push({ mode, delayMs: o.delayMs ?? 1000 });
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
      await renderer.close();
    },
  };
}

function faultType(status: number): string {
  return status === 503 ? 'ServiceUnavailableError' : 'InternalServerError';
}

/** vLLM's `ErrorResponse{error: ErrorInfo{message, type, param, code}}` (protocol.py). */
function errorBody(engine: EngineKind, status: number, message: string, type: string): unknown {
  if (engine === 'sglang') return { object: 'error', message, type, param: null, code: status };
  return { error: { message, type, param: null, code: status } };
}

function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendSse(res: http.ServerResponse, events: string[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  for (const e of events) res.write(`data: ${e}\n\n`);
  res.end();
}

/** The 'reset' fault: the answer starts, then the socket is destroyed halfway. */
function resetReply(res: http.ServerResponse, call: ReceivedCall): Reply {
  return {
    json(status, value) {
      call.status = status;
      const text = JSON.stringify(value);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.write(text.slice(0, Math.floor(text.length / 2)), () => res.socket?.destroy());
    },
    sse(events) {
      call.status = 200;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
      const half = events.slice(0, Math.max(1, Math.floor(events.length / 2)));
      res.write(half.map((e) => `data: ${e}\n\n`).join(''), () => res.socket?.destroy());
    },
  };
}

// --- generation ------------------------------------------------------------------------------------

async function applyLimits(
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

function recordGeneration(call: ReceivedCall, promptIds: number[], gen: Generation): void {
  const entry = { ...gen.scripted, ids: gen.ids, promptIds };
  call.choices ??= [];
  call.choices.push(entry);
  if (!call.generated) call.generated = { ...gen.scripted, ids: gen.ids };
}

// --- vLLM --------------------------------------------------------------------------------------------

interface EngineContext {
  profile: ReferenceProfile;
  template: string;
  renderer: PythonRenderer;
  model: string;
  maxModelLen: number;
  vllmVersion: string;
  toolParser: boolean;
  generate(call: ReceivedCall, limits: GenerationLimits): Promise<Generation>;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);
const randomHex = () => randomUUID().replace(/-/g, '');

function vllmRoutes(engine: EngineContext): Record<string, Record<string, Handler>> {
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
    '/health': { GET: async (_c, _b, reply) => reply.json(200, {}) },
    '/version': { GET: async (_c, _b, reply) => reply.json(200, { version: engine.vllmVersion }) },
    '/v1/chat/completions': { POST: (call, bodyText, reply) => vllmChat(engine, call, bodyText, reply) },
    '/v1/completions': { POST: (call, _bodyText, reply) => vllmCompletion(engine, call, reply) },
  };
}

/** The image `mm_processor_kwargs` the Qwen-VL processor takes (`min_pixels`, `max_pixels`, or `size`). */
function pixelOverrides(kwargs: Record<string, unknown> | null | undefined): {
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

function stopList(stop: string | string[] | null | undefined): string[] {
  if (stop === null || stop === undefined) return [];
  return typeof stop === 'string' ? [stop] : stop;
}

function maxTokensFor(engine: EngineContext, requested: number | null | undefined, promptLength: number): number {
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

function tokenIdsSupported(engine: EngineContext): boolean {
  return versionAtLeast(engine.vllmVersion, '0.10.2');
}

interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

/** One token as vLLM writes it in logprobs: its decoded text, or `token_id:N` when asked. */
async function tokenText(engine: EngineContext, id: number, asTokenId: boolean): Promise<string> {
  return asTokenId ? `token_id:${id}` : decodeIds(engine.profile, [id], false);
}

/** The other candidates of a step's top logprobs: fixed neighbour ids, each less likely than the last. */
function alternatives(id: number, logprob: number, count: number): { id: number; logprob: number }[] {
  const out: { id: number; logprob: number }[] = [];
  for (let k = 1; k <= count; k++) out.push({ id: (id + k) % REFERENCE_IDS.endOfText, logprob: logprob - k });
  return out;
}

async function chatLogprobs(
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

interface ToolCallOut {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
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
    rendered = await engine.renderer.renderChat(req.chat_template ?? engine.template, bodyText);
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
  const parseTools = req.tools && req.tools.length > 0 && toolChoice === 'auto' && engine.toolParser;
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
      const parsed = await hermesToolCalls(engine, gen.text);
      if (parsed.toolsCalled && parsed.toolCalls.length > 0) {
        toolCalls = parsed.toolCalls;
        content = parsed.content;
        finish = 'tool_calls';
      }
    }
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

/** The text each token adds, as an incremental detokenizer emits it (an incomplete UTF-8 tail waits). */
async function textDeltas(engine: EngineContext, gen: Generation, skipSpecialTokens: boolean): Promise<string[]> {
  const deltas: string[] = [];
  let emitted = '';
  for (let k = 1; k <= gen.ids.length; k++) {
    let full = await decodeIds(engine.profile, gen.ids.slice(0, k), skipSpecialTokens);
    if (k === gen.ids.length) full = gen.text;
    else if (full.endsWith('\uFFFD')) {
      deltas.push('');
      continue;
    }
    const delta = full.startsWith(emitted)
      ? full.slice(emitted.length)
      : full.slice(Math.min(emitted.length, full.length));
    deltas.push(delta);
    emitted = full;
  }
  return deltas;
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
    const parsed = ctx.parseTools ? await hermesToolCalls(engine, gen.text) : undefined;
    const calling = parsed?.toolsCalled && parsed.toolCalls.length > 0 ? parsed : undefined;
    // With a tool call, the content before `<tool_call>` streams as text and the call as one
    // name delta and one arguments delta (what hermes' streaming parser sends, reassembled).
    const contentLimit = calling ? (calling.content ?? '').length : Number.POSITIVE_INFINITY;
    let streamedText = 0;
    for (let k = 0; k < gen.ids.length; k++) {
      const last = k === gen.ids.length - 1;
      let text = deltas[k] ?? '';
      if (streamedText + text.length > contentLimit) text = text.slice(0, Math.max(0, contentLimit - streamedText));
      streamedText += text.length;
      const delta: Record<string, unknown> = { content: text, reasoning_content: null };
      if (last && calling) {
        delta.content = undefined;
        delta.tool_calls = calling.toolCalls.flatMap((c, index) => [
          { id: c.id, type: 'function', index, function: { name: c.function.name } },
          { index, function: { arguments: c.function.arguments } },
        ]);
      }
      const choice: Record<string, unknown> = {
        index: i,
        delta: JSON.parse(JSON.stringify(delta)),
        logprobs: logprobs ? { content: logprobs.content.slice(k, k + 1) } : null,
        finish_reason: last ? (calling ? 'tool_calls' : gen.finishReason) : null,
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
  const asTokenId = req.return_tokens_as_token_ids ?? false;
  const requestId = `cmpl-${req.request_id ?? randomHex()}`;
  const created = nowSeconds();
  const results: { promptIds: number[]; gen: Generation }[] = [];
  for (const promptIds of prompts) {
    const limits: GenerationLimits = {
      maxTokens: maxTokensFor(engine, req.max_tokens === undefined ? 16 : req.max_tokens, promptIds.length),
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

  const legacyLogprobs = async (gen: Generation) => {
    if (req.logprobs === null || req.logprobs === undefined) return null;
    const tokens: string[] = [];
    const top: Record<string, number>[] = [];
    const offsets: number[] = [];
    let offset = 0;
    for (let i = 0; i < gen.ids.length; i++) {
      const id = gen.ids[i] as number;
      const lp = Math.max(gen.logprobs[i] as number, -9999);
      const token = await tokenText(engine, id, asTokenId);
      tokens.push(token);
      offsets.push(offset);
      offset += token.length;
      const entry: Record<string, number> = { [token]: lp };
      for (const alt of alternatives(id, lp, req.logprobs))
        entry[await tokenText(engine, alt.id, asTokenId)] = alt.logprob;
      top.push(entry);
    }
    return {
      text_offset: offsets,
      token_logprobs: gen.logprobs.map((l) => Math.max(l, -9999)),
      tokens,
      top_logprobs: top,
    };
  };

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
        logprobs: null,
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
