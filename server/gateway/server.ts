// The gateway's HTTP side: the OpenAI routes agents call unchanged, `/health` (and `/ping`,
// `/version`) for probes and launchers, `/metrics`, `/rollscope/sessions/ID`, and a clear 404 for
// anything else. Every request must carry the bearer token when one is set (required off loopback,
// config.ts); a browser page cannot drive the engine through it (a request with an Origin header is
// refused, and a POST must be JSON, which a cross-origin page can only send after a preflight this
// server never approves); bodies are capped in size and in nesting. It stops like a server: on
// close (SIGTERM) it takes no new request (503 with `Connection: close`, kept-alive connections told
// to close), lets every call it accepted finish (within the grace), and closes the capture last.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { z } from 'zod';
import { readJsonBody, RequestError } from '../http/request-body.ts';
import type { GatewayConfig } from './config.ts';
import { FINDINGS_HEADER, Gateway, type ClientReply, type StreamSink } from './gateway.ts';
import { ChatRequest, CompletionRequest } from './protocol.ts';

export interface RunningGateway {
  gateway: Gateway;
  url: string;
  port: number;
  /**
   * Stop taking requests, let the calls already accepted finish (up to `graceMs`, default the
   * config's), then flush and close the capture. Resolves at once when nothing is in flight.
   */
  close(graceMs?: number): Promise<void>;
}

const ROUTES = [
  'POST /v1/chat/completions',
  'POST /v1/completions',
  'GET /v1/models',
  'GET /health',
  'GET /ping',
  'GET /version',
  'GET /metrics',
  'GET /rollscope/sessions/ID',
];

/** Deepest nesting of arrays and objects a request body may have (a chat request needs a handful). */
export const MAX_JSON_DEPTH = 64;

function gatewayVersion(): string {
  try {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, findings?: number): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...(findings !== undefined ? { [FINDINGS_HEADER]: String(findings) } : {}),
  });
  res.end(text);
}

function error(res: http.ServerResponse, status: number, message: string, type = 'invalid_request_error'): void {
  sendJson(res, status, { error: { message, type, code: status } });
}

function tokenMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? '');
  if (!m) return false;
  const a = Buffer.from(m[1]!.trim());
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The SSE answer of a streamed call: headers when the engine's first event arrives, the final count as a trailer. */
function streamSink(res: http.ServerResponse): StreamSink & { started: boolean } {
  const sink = {
    started: false,
    start(findings: number) {
      if (sink.started || res.destroyed) return;
      sink.started = true;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        [FINDINGS_HEADER]: String(findings),
        trailer: FINDINGS_HEADER,
      });
    },
    event(data: string) {
      if (!res.destroyed) res.write(`data: ${data}\n\n`);
    },
    end(findings: number) {
      if (res.destroyed) return;
      res.addTrailers({ [FINDINGS_HEADER]: String(findings) });
      res.end();
    },
  };
  return sink;
}

function reply(res: http.ServerResponse, r: ClientReply | undefined, sink: { started: boolean } | undefined): void {
  if (!r || res.destroyed) return;
  if (sink?.started) {
    // The stream had begun when the engine failed: the error goes as its last event (as vLLM sends one).
    if (r.kind === 'json') res.write(`data: ${JSON.stringify(r.body)}\n\n`);
    res.end();
    return;
  }
  if (r.kind === 'json') return sendJson(res, r.status, r.body, r.findings);
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    [FINDINGS_HEADER]: String(r.findings),
  });
  for (const e of r.events) res.write(`data: ${e}\n\n`);
  res.end();
}

export async function startGateway(
  config: GatewayConfig,
  log: (line: string) => void = () => undefined,
  clock: { now?: () => number } = {},
): Promise<RunningGateway> {
  const gateway = new Gateway(config, clock);
  for (const note of await gateway.start()) log(note);
  const version = gatewayVersion();
  const inFlight = new Set<Promise<void>>();
  /** Answers not yet begun: told to close their connection when the gateway begins to stop. */
  const unanswered = new Set<http.ServerResponse>();
  let draining = false;

  const health = async (signal: AbortSignal): Promise<{ status: number; body: unknown }> => {
    const engine = draining
      ? { ok: false, error: 'not asked (the gateway is stopping)' }
      : await gateway.engineHealth(signal);
    const ok = !draining && engine.ok;
    return {
      status: ok ? 200 : 503,
      body: {
        status: ok ? 'ok' : 'unavailable',
        gateway: { status: draining ? 'stopping' : 'ready', mode: config.mode, replica: gateway.replica },
        engine: { url: config.upstream, ...engine },
      },
    };
  };

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const arrived = performance.now();
    const url = new URL(req.url ?? '/', 'http://gateway');
    const method = req.method ?? 'GET';
    if (draining) {
      // A request that arrives while the gateway stops is not accepted; the connection closes after it.
      res.setHeader('connection', 'close');
      res.setHeader('retry-after', '1');
      return error(
        res,
        503,
        'the gateway is shutting down: send the request to another replica or again',
        'unavailable',
      );
    }
    if (req.headers.origin !== undefined)
      return error(res, 403, 'requests from web pages are refused (this is an API for agents)', 'forbidden');
    if (config.token && !tokenMatches(req.headers.authorization, config.token)) {
      res.setHeader('www-authenticate', 'Bearer');
      return error(res, 401, 'missing or wrong bearer token (Authorization: Bearer TOKEN)', 'unauthorized');
    }
    const route = `${method} ${url.pathname}`;
    // The client going away aborts the engine call (the call is recorded as cancelled).
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    const readBody = async <S extends z.ZodType>(schema: S): Promise<z.output<S>> => {
      if (!/^application\/json\b/i.test(req.headers['content-type'] ?? ''))
        throw new RequestError(415, 'the body must be JSON (Content-Type: application/json)');
      return readJsonBody(req, schema, config.maxBodyBytes, MAX_JSON_DEPTH);
    };
    try {
      if (route === 'POST /v1/chat/completions') {
        const body = await readBody(ChatRequest);
        let sink: ReturnType<typeof streamSink> | undefined;
        const r = await gateway.chat(req.headers, body, gone.signal, () => (sink = streamSink(res)), arrived);
        return reply(res, r, sink);
      }
      if (route === 'POST /v1/completions') {
        const body = await readBody(CompletionRequest);
        let sink: ReturnType<typeof streamSink> | undefined;
        const r = await gateway.completion(req.headers, body, gone.signal, () => (sink = streamSink(res)), arrived);
        return reply(res, r, sink);
      }
      if (route === 'GET /v1/models') return reply(res, await gateway.models(gone.signal), undefined);
      if (route === 'GET /health' || route === 'GET /ping') {
        const h = await health(gone.signal);
        return sendJson(res, h.status, h.body);
      }
      if (route === 'GET /version') {
        const engine = await gateway.passThrough('/version', gone.signal);
        return sendJson(res, 200, {
          version: version,
          gateway: { name: 'rollscope', version },
          engine:
            engine.kind === 'json' && engine.status === 200
              ? engine.body
              : { status: engine.kind === 'json' ? engine.status : 502 },
        });
      }
      if (route === 'GET /metrics') {
        const text = await gateway.metrics.text();
        res.writeHead(200, { 'content-type': gateway.metrics.contentType });
        res.end(text);
        return;
      }
      const session = /^\/rollscope\/sessions\/(.+)$/.exec(url.pathname);
      if (method === 'GET' && session) {
        const view = gateway.sessionView(decodeURIComponent(session[1]!));
        if (!view)
          return error(
            res,
            404,
            `no session ${decodeURIComponent(session[1]!)} on this gateway (replica ${gateway.replica})`,
            'not_found',
          );
        return sendJson(res, 200, view);
      }
      return error(
        res,
        404,
        `no route ${method} ${url.pathname}: the gateway answers ${ROUTES.join(', ')}`,
        'not_found',
      );
    } catch (e) {
      if (e instanceof RequestError) return error(res, e.status, e.message);
      log(`internal error on ${route}: ${(e as Error).stack ?? (e as Error).message}`);
      if (res.headersSent) res.end();
      else error(res, 500, `gateway error: ${(e as Error).message}`, 'internal_error');
    }
  };

  const server = http.createServer((req, res) => {
    unanswered.add(res);
    const p = handle(req, res).finally(() => {
      inFlight.delete(p);
      unanswered.delete(res);
    });
    inFlight.add(p);
  });
  // Long generations: no server-side timeout on a request (the engine call has its own).
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  let closing: Promise<void> | undefined;
  return {
    gateway,
    url: `http://${host}:${port}`,
    port,
    close(graceMs = config.graceMs) {
      closing ??= (async () => {
        draining = true;
        // A call accepted before the stop finishes, and tells its kept-alive connection to close after it.
        for (const res of unanswered) if (!res.headersSent) res.setHeader('connection', 'close');
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        // Idle kept-alive connections close now; busy ones after their answer (Connection: close).
        server.closeIdleConnections();
        let timer: NodeJS.Timeout | undefined;
        const grace = new Promise<'grace'>((resolve) => {
          timer = setTimeout(() => resolve('grace'), graceMs);
          timer.unref();
        });
        // Every call accepted so far (the set grows while requests that arrived meanwhile are answered 503).
        while (inFlight.size > 0) {
          if ((await Promise.race([Promise.allSettled([...inFlight]), grace])) === 'grace') {
            log(`${inFlight.size} call(s) still running after the ${graceMs} ms grace: cut (captured as cancelled)`);
            server.closeAllConnections();
            await Promise.allSettled([...inFlight]);
            break;
          }
        }
        clearTimeout(timer);
        server.closeAllConnections();
        await stopped;
        gateway.close();
      })();
      return closing;
    },
  };
}
