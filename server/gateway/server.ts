// The gateway's HTTP side: the OpenAI routes agents call unchanged, `/metrics`,
// `/rollscope/sessions/ID`, and a clear 404 for anything else. Every request must carry the bearer
// token when one is set (required off loopback, config.ts); a browser page cannot drive the engine
// through it (a request with an Origin header is refused, and a POST must be JSON, which a
// cross-origin page can only send after a preflight this server never approves); bodies are capped.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
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
  /** Stop listening, finish calls in flight (up to `graceMs`), flush and close the capture. */
  close(graceMs?: number): Promise<void>;
}

const ROUTES = [
  'POST /v1/chat/completions',
  'POST /v1/completions',
  'GET /v1/models',
  'GET /metrics',
  'GET /rollscope/sessions/ID',
];

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
  const inFlight = new Set<Promise<void>>();
  const sockets = new Set<Socket>();

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const arrived = performance.now();
    const url = new URL(req.url ?? '/', 'http://gateway');
    const method = req.method ?? 'GET';
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
      return readJsonBody(req, schema, config.maxBodyBytes);
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
    const p = handle(req, res).finally(() => inFlight.delete(p));
    inFlight.add(p);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
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
    close(graceMs = 10_000) {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await Promise.race([Promise.allSettled([...inFlight]), new Promise((r) => setTimeout(r, graceMs))]);
        for (const s of sockets) s.destroy();
        await stopped;
        gateway.close();
      })();
      return closing;
    },
  };
}
