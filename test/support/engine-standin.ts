import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import {
  EngineError,
  type EngineKind,
  type FaultMode,
  type Generation,
  type GenerationLimits,
  type Handler,
  type ReceivedCall,
  type Reply,
  type ScriptedGeneration,
  applyLimits,
} from './engine-core.ts';
import { PythonRenderer, referenceProfileOf, templateSource } from './engine-reference.ts';
import { sglangRoutes } from './engine-sglang.ts';
import { vllmRoutes } from './engine-vllm.ts';

export type { EngineKind, FaultMode, ReceivedCall, ScriptedGeneration } from './engine-core.ts';
export { defaultLogprob, EngineError, versionAtLeast } from './engine-core.ts';

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
  /**
   * vLLM `--enable-auto-tool-choice --tool-call-parser hermes`, SGLang `--tool-call-parser qwen25`
   * (default true); false: the engine runs without a tool parser.
   */
  toolParser?: boolean;
  /**
   * Whether vLLM serves `/inference/v1/generate` (tokens in, tokens out; newer builds only, the
   * release that added it is not pinned here). Default true.
   */
  generateEndpoint?: boolean;
}

export interface EngineStandin {
  url: string;
  calls: ReceivedCall[];
  /**
   * Faults for the next `count` requests of any path (default 1), recorded on the call as `fault`;
   * connection refused is modelled by close(), a slow engine by hold().
   */
  fail(mode: Exclude<FaultMode, 'hold'>, opts?: { count?: number }): void;
  /**
   * Holds the next `count` requests (default 1) unanswered until `release()`: `arrived` resolves
   * once all of them have reached the engine. A test of what happens while the engine is busy
   * (a client gone, a SIGTERM, a SIGKILL) acts on `arrived`, never after a guessed delay.
   */
  hold(count?: number): { arrived: Promise<void>; release(): void };
  /** Resolves once the engine has received `count` requests in all. */
  received(count: number): Promise<void>;
  /**
   * Streams written from now on stop before their last event (`[DONE]`) until `release()`: a test
   * sees what reached the client while the engine's stream is still open.
   */
  holdStreams(): { release(): void; open(): number };
  close(): Promise<void>;
}

const DEFAULT_VLLM_VERSION = '0.11.0';

// --- the server -----------------------------------------------------------------------------------

interface Fault {
  mode: FaultMode;
  /** For 'hold': the gate the request waits at. */
  gate?: Gate;
}

interface Gate {
  count: number;
  held: number;
  arrived: () => void;
  released: Promise<void>;
}

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
  const receivedWaiters: { count: number; resolve: () => void }[] = [];
  /** Every hold's release: close() lets held requests go. */
  const releases: (() => void)[] = [];

  const engine = {
    profile,
    template,
    renderer,
    model: opts.model,
    maxModelLen,
    vllmVersion,
    toolParser: opts.toolParser ?? true,
    generateEndpoint: opts.generateEndpoint ?? true,
    async generate(call: ReceivedCall, limits: GenerationLimits): Promise<Generation> {
      const scripted = await opts.script(call, generationIndex++);
      return applyLimits(profile, scripted, limits);
    },
  };
  const routes: Record<string, Record<string, Handler>> = opts.engine === 'vllm'
    ? vllmRoutes(engine)
    : sglangRoutes(engine);

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
    for (const w of receivedWaiters.filter((x) => calls.length >= x.count)) {
      receivedWaiters.splice(receivedWaiters.indexOf(w), 1);
      w.resolve();
    }

    const fault = faults.shift();
    if (fault) call.fault = fault.mode;
    if (fault?.mode === 'timeout') return;
    if (fault?.mode === 'drop') {
      req.socket.destroy();
      return;
    }
    if (fault?.mode === '500' || fault?.mode === '503') {
      const status = Number(fault.mode);
      call.status = status;
      sendJson(res, status, errorBody(opts.engine, call.path, status, 'stand-in fault', faultType(status)));
      return;
    }
    if (fault?.gate) {
      if (++fault.gate.held === fault.gate.count) fault.gate.arrived();
      await fault.gate.released;
    }

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
              sendSse(res, events, hold);
            },
            empty: (status) => {
              call.status = status;
              res.writeHead(status, { 'content-length': 0 });
              res.end();
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
      reply.json(err.status, errorBody(opts.engine, call.path, err.status, err.message, err.type));
    }
  }

  let hold: StreamHold | undefined;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    fail(mode, o = {}) {
      for (let i = 0; i < (o.count ?? 1); i++) faults.push({ mode });
    },
    hold(count = 1) {
      let arrived!: () => void;
      let release!: () => void;
      const arrival = new Promise<void>((r) => (arrived = r));
      const gate: Gate = { count, held: 0, arrived, released: new Promise<void>((r) => (release = r)) };
      for (let i = 0; i < count; i++) faults.push({ mode: 'hold', gate });
      releases.push(release);
      return { arrived: arrival, release };
    },
    received(count) {
      if (calls.length >= count) return Promise.resolve();
      return new Promise<void>((resolve) => receivedWaiters.push({ count, resolve }));
    },
    holdStreams() {
      const h: StreamHold = { waiting: [], open: 0 };
      hold = h;
      return {
        release() {
          if (hold === h) hold = undefined;
          for (const w of h.waiting.splice(0)) w();
        },
        open: () => h.open,
      };
    },
    async close() {
      for (const release of releases) release();
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
function errorBody(engine: EngineKind, path: string, status: number, message: string, type: string): unknown {
  if (engine === 'vllm') return { error: { message, type, param: null, code: status } };
  // SGLang: its native routes answer `{"error": {"message"}}` (http_server.py `_create_error_response`),
  // the OpenAI ones `ErrorResponse{object: "error", message, type, param, code}` (protocol.py).
  if (!path.startsWith('/v1/')) return { error: { message } };
  return { object: 'error', message, type, param: null, code: status };
}

function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

interface StreamHold {
  waiting: (() => void)[];
  /** Streams held open now. */
  open: number;
}

function sendSse(res: http.ServerResponse, events: string[], hold?: StreamHold): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  const last = hold ? events.length - 1 : events.length;
  for (const e of events.slice(0, last)) res.write(`data: ${e}\n\n`);
  if (!hold) return void res.end();
  hold.open++;
  hold.waiting.push(() => {
    hold.open--;
    for (const e of events.slice(last)) res.write(`data: ${e}\n\n`);
    res.end();
  });
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
    empty(status) {
      call.status = status;
      res.socket?.destroy();
    },
  };
}
