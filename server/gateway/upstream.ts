// Calls to the engine, and what a failed one means for the client: the engine's own status and
// error body when it answered, else 502 (unreachable, connection reset, an answer that is not
// JSON) or 504 (no answer in time), always with a JSON error that names the upstream.

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

export interface UpstreamOptions {
  base: string;
  timeoutMs: number;
  headers: Record<string, string>;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
}

function errorCode(e: unknown): string {
  let cur: unknown = e;
  for (let depth = 0; cur && depth < 4; depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    cur = (cur as { cause?: unknown }).cause;
  }
  return '';
}

function classify(e: unknown, base: string, timedOut: boolean, cancelled: boolean): UpstreamError {
  if (e instanceof UpstreamError) return e;
  if (cancelled) return new UpstreamError('cancelled', 499, 'the client closed the connection');
  if (timedOut) return new UpstreamError('timeout', 504, 'the engine did not answer in time');
  const code = errorCode(e);
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH')
    return new UpstreamError('unreachable', 502, `cannot connect to the engine (${code})`);
  if (
    code === 'ECONNRESET' ||
    code === 'UND_ERR_SOCKET' ||
    code === 'EPIPE' ||
    /terminated|other side closed/i.test(String((e as Error)?.message))
  )
    return new UpstreamError('reset', 502, `the engine closed the connection mid-answer (${code || 'reset'})`);
  return new UpstreamError(
    'unreachable',
    502,
    `engine request failed: ${(e as Error)?.message ?? String(e)} at ${base}`,
  );
}

interface Opened {
  response: Response;
  timedOut: () => boolean;
  cancelled: () => boolean;
  done: () => void;
}

async function open(opts: UpstreamOptions, path: string, init: RequestInit): Promise<Opened> {
  const controller = new AbortController();
  let timedOut = false;
  let cancelled = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, opts.timeoutMs);
  const onClientGone = () => {
    cancelled = true;
    controller.abort();
  };
  if (opts.signal?.aborted) onClientGone();
  opts.signal?.addEventListener('abort', onClientGone, { once: true });
  const done = () => {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onClientGone);
  };
  try {
    const response = await fetch(`${opts.base}${path}`, {
      ...init,
      headers: { ...opts.headers, ...(init.headers as Record<string, string> | undefined) },
      signal: controller.signal,
    });
    return { response, timedOut: () => timedOut, cancelled: () => cancelled, done };
  } catch (e) {
    done();
    throw classify(e, opts.base, timedOut, cancelled);
  }
}

async function failIfError(o: Opened): Promise<void> {
  if (o.response.ok) return;
  const text = await o.response.text().catch(() => '');
  o.done();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: { message: text.slice(0, 2000) || o.response.statusText, code: o.response.status } };
  }
  throw new UpstreamError('status', o.response.status, `the engine answered ${o.response.status}`, body);
}

/** POST a JSON body, read a JSON answer. */
export async function postJson(opts: UpstreamOptions, path: string, body: unknown): Promise<unknown> {
  const o = await open(opts, path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  try {
    await failIfError(o);
    const text = await o.response.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new UpstreamError('bad_response', 502, `the engine's answer is not JSON: ${text.slice(0, 200)}`);
    }
  } catch (e) {
    throw classify(e, opts.base, o.timedOut(), o.cancelled());
  } finally {
    o.done();
  }
}

/** GET and pass the answer on as it is (`/v1/models`). */
export async function getRaw(
  opts: UpstreamOptions,
  path: string,
): Promise<{ status: number; body: string; type: string }> {
  const o = await open(opts, path, { method: 'GET' });
  try {
    return {
      status: o.response.status,
      body: await o.response.text(),
      type: o.response.headers.get('content-type') ?? 'application/json',
    };
  } catch (e) {
    throw classify(e, opts.base, o.timedOut(), o.cancelled());
  } finally {
    o.done();
  }
}

/** POST a streaming request; yields each server-sent event's data (`[DONE]` included). */
export async function* postSse(opts: UpstreamOptions, path: string, body: unknown): AsyncGenerator<string> {
  const o = await open(opts, path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
  });
  try {
    await failIfError(o);
    if (!o.response.body) throw new UpstreamError('bad_response', 502, 'the engine sent no stream');
    const decoder = new TextDecoder();
    let buffer = '';
    let data: string[] = [];
    for await (const chunk of o.response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl = buffer.indexOf('\n');
      while (nl >= 0) {
        const line = buffer.slice(0, nl).replace(/\r$/, '');
        buffer = buffer.slice(nl + 1);
        if (line === '') {
          if (data.length > 0) yield data.join('\n');
          data = [];
        } else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        nl = buffer.indexOf('\n');
      }
    }
    if (data.length > 0) yield data.join('\n');
  } catch (e) {
    throw classify(e, opts.base, o.timedOut(), o.cancelled());
  } finally {
    o.done();
  }
}
