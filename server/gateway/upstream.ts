// Calls to the engine, and what a failed one means for the client: the engine's own status and
// error body when it answered, else 502 (unreachable, connection reset, an answer that is not
// JSON) or 504 (no answer in time), always with a JSON error that names the upstream. Plain
// node:http with kept-alive connections: a call is a few hundred microseconds of the gateway's own
// time, and fetch's web streams cost more than that (bench/gateway.ts). A kept-alive connection the
// engine closed while it sat idle (uvicorn closes idle connections after 5 s) fails the next request
// before any byte of an answer: such a request is sent once more on a new connection, and never a
// request the engine had begun to answer.
import http from 'node:http';
import https from 'node:https';

export type UpstreamFailure = 'unreachable' | 'timeout' | 'reset' | 'status' | 'bad_response' | 'cancelled';

export class UpstreamError extends Error {
  constructor(
    readonly failure: UpstreamFailure,
    /** The status the client gets. */
    readonly status: number,
    message: string,
    /** The engine's error body, passed on as it was. */
    readonly body?: unknown,
  ) {
    super(message);
  }

  /** The JSON the client gets: the engine's when it sent one, else an OpenAI-shaped error. */
  clientBody(upstream: string): unknown {
    if (this.failure === 'status' && this.body !== undefined) return this.body;
    return {
      error: {
        message: `${this.message} (upstream ${upstream})`,
        type: this.failure === 'timeout' ? 'upstream_timeout' : 'upstream_error',
        code: this.status,
        upstream,
      },
    };
  }
}

/** One gateway's connections to its engine (kept alive; destroyed when the gateway closes). */
export class UpstreamAgents {
  readonly http = new http.Agent({ keepAlive: true });
  readonly https = new https.Agent({ keepAlive: true });

  destroy(): void {
    this.http.destroy();
    this.https.destroy();
  }
}

export interface UpstreamOptions {
  base: string;
  timeoutMs: number;
  headers: Record<string, string>;
  agents: UpstreamAgents;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  /** Told when a request is sent again after a kept-alive connection failed before answering. */
  onRetry?: () => void;
}

function classify(e: unknown, base: string): UpstreamError {
  if (e instanceof UpstreamError) return e;
  const code = (e as NodeJS.ErrnoException)?.code ?? '';
  if (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    code === 'EHOSTUNREACH' ||
    code === 'ENETUNREACH' ||
    code === 'EAI_AGAIN'
  )
    return new UpstreamError('unreachable', 502, `cannot connect to the engine (${code})`);
  if (code === 'ECONNRESET' || code === 'EPIPE' || /socket hang up|aborted/i.test(String((e as Error)?.message)))
    return new UpstreamError('reset', 502, `the engine closed the connection (${code || 'reset'})`);
  return new UpstreamError(
    'unreachable',
    502,
    `engine request failed: ${(e as Error)?.message ?? String(e)} at ${base}`,
  );
}

interface Opened {
  response: http.IncomingMessage;
}

/**
 * Send a request; resolves once `onBody` has read the answer, rejects with an UpstreamError. A
 * timeout, a reset or the client going away while it reads rejects too. A request that fails on a
 * reused connection before any byte of the answer arrived is sent once more on a new one.
 */
async function exchange(
  opts: UpstreamOptions,
  method: 'GET' | 'POST',
  path: string,
  body: string | undefined,
  headers: Record<string, string>,
  onBody: (o: Opened, fail: (e: UpstreamError) => void) => Promise<void>,
): Promise<void> {
  const first = await attempt(opts, method, path, body, headers, onBody, false);
  if (first.ok) return;
  if (!first.retry) throw first.error;
  opts.onRetry?.();
  const second = await attempt(opts, method, path, body, headers, onBody, true);
  if (second.ok) return;
  throw new UpstreamError(
    second.error.failure,
    second.error.status,
    `${second.error.message}; the request had been sent again after the engine closed an idle kept-alive connection before answering (${first.error.message})`,
    second.error.body,
  );
}

type Attempt = { ok: true } | { ok: false; error: UpstreamError; retry: boolean };

function attempt(
  opts: UpstreamOptions,
  method: 'GET' | 'POST',
  path: string,
  body: string | undefined,
  headers: Record<string, string>,
  onBody: (o: Opened, fail: (e: UpstreamError) => void) => Promise<void>,
  retried: boolean,
): Promise<Attempt> {
  return new Promise<Attempt>((resolve) => {
    const url = new URL(`${opts.base}${path}`);
    const transport = url.protocol === 'https:' ? https : http;
    let settled = false;
    let answered = false;
    const fail = (e: UpstreamError) => {
      if (settled) return;
      settled = true;
      cleanup();
      req.destroy();
      // A kept-alive connection that failed before the answer began: the engine had closed it.
      const retry = !retried && !answered && req.reusedSocket && e.failure === 'reset';
      resolve({ ok: false, error: retry ? e : withWhen(e, answered), retry });
    };
    const timer = setTimeout(
      () => fail(new UpstreamError('timeout', 504, 'the engine did not answer in time')),
      opts.timeoutMs,
    );
    const onClientGone = () => fail(new UpstreamError('cancelled', 499, 'the client closed the connection'));
    const cleanup = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onClientGone);
    };
    const req = transport.request(
      url,
      {
        method,
        agent: url.protocol === 'https:' ? opts.agents.https : opts.agents.http,
        headers: {
          ...opts.headers,
          ...headers,
          ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}),
        },
      },
      (response) => {
        answered = true;
        response.on('aborted', () =>
          fail(classify(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }), opts.base)),
        );
        response.on('error', (e) => fail(classify(e, opts.base)));
        onBody({ response }, fail).then(
          () => {
            if (settled) return;
            settled = true;
            cleanup();
            resolve({ ok: true });
          },
          (e: unknown) => fail(classify(e, opts.base)),
        );
      },
    );
    req.on('error', (e) => fail(classify(e, opts.base)));
    if (opts.signal?.aborted) return onClientGone();
    opts.signal?.addEventListener('abort', onClientGone, { once: true });
    req.end(body);
  });
}

/** A reset's message says whether the engine had begun to answer (then the request is never sent again). */
function withWhen(e: UpstreamError, answered: boolean): UpstreamError {
  if (e.failure !== 'reset') return e;
  return new UpstreamError(
    e.failure,
    e.status,
    answered
      ? `${e.message} after it began to answer (not sent again: the engine may have acted on it)`
      : `${e.message} before answering`,
    e.body,
  );
}

async function readAll(response: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of response) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function statusError(status: number, text: string): UpstreamError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: { message: text.slice(0, 2000) || http.STATUS_CODES[status], code: status } };
  }
  return new UpstreamError('status', status, `the engine answered ${status}`, body);
}

/** POST a JSON body, read a JSON answer. */
export async function postJson(opts: UpstreamOptions, path: string, body: unknown): Promise<unknown> {
  let value: unknown;
  await exchange(
    opts,
    'POST',
    path,
    JSON.stringify(body),
    { 'content-type': 'application/json' },
    async ({ response }) => {
      const text = await readAll(response);
      const status = response.statusCode ?? 502;
      if (status >= 400) throw statusError(status, text);
      try {
        value = JSON.parse(text);
      } catch {
        throw new UpstreamError('bad_response', 502, `the engine's answer is not JSON: ${text.slice(0, 200)}`);
      }
    },
  );
  return value;
}

/** GET and pass the answer on as it is (`/v1/models`). */
export async function getRaw(
  opts: UpstreamOptions,
  path: string,
): Promise<{ status: number; body: string; type: string }> {
  let out = { status: 502, body: '', type: 'application/json' };
  await exchange(opts, 'GET', path, undefined, {}, async ({ response }) => {
    out = {
      status: response.statusCode ?? 502,
      body: await readAll(response),
      type: String(response.headers['content-type'] ?? 'application/json'),
    };
  });
  return out;
}

/** POST a streaming request; yields each server-sent event's data (`[DONE]` included). */
export async function* postSse(opts: UpstreamOptions, path: string, body: unknown): AsyncGenerator<string> {
  // Events are handed over through a queue: the generator's consumer sets the pace.
  const queue: string[] = [];
  let wake: (() => void) | undefined;
  let finished = false;
  let failure: unknown;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  const done = exchange(
    opts,
    'POST',
    path,
    JSON.stringify(body),
    { 'content-type': 'application/json', accept: 'text/event-stream' },
    async ({ response }) => {
      const status = response.statusCode ?? 502;
      if (status >= 400) throw statusError(status, await readAll(response));
      let buffer = '';
      let data: string[] = [];
      response.setEncoding('utf8');
      for await (const chunk of response as AsyncIterable<string>) {
        buffer += chunk;
        let nl = buffer.indexOf('\n');
        while (nl >= 0) {
          const line = buffer.slice(0, nl).replace(/\r$/, '');
          buffer = buffer.slice(nl + 1);
          if (line === '') {
            if (data.length > 0) queue.push(data.join('\n'));
            data = [];
          } else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
          nl = buffer.indexOf('\n');
        }
        notify();
      }
      if (data.length > 0) queue.push(data.join('\n'));
      // A stream that stops without its [DONE] was cut.
      if (!queue.includes('[DONE]') && !response.complete)
        throw new UpstreamError('reset', 502, 'the engine closed the connection (the stream ended without [DONE])');
    },
  ).then(
    () => {
      finished = true;
      notify();
    },
    (e: unknown) => {
      failure = e;
      finished = true;
      notify();
    },
  );
  try {
    for (;;) {
      while (queue.length > 0) yield queue.shift()!;
      if (finished) break;
      await new Promise<void>((r) => {
        wake = r;
      });
    }
    await done;
    if (failure) throw failure;
  } finally {
    finished = true;
  }
}
