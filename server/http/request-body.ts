// What the route modules (routes-export.ts, routes-ask.ts) share: how they plug into the server,
// and how a state-changing request's JSON body is read and validated. Who may send a POST at all
// (this server's Origin, a token or the script header; a JSON content type) is decided before
// any route runs, by the request gate (gate.ts).
import type http from 'node:http';
import type { z } from 'zod';

/** The server's response helpers, handed to the route modules when they are registered. */
export interface RouteTools {
  /** Validate `body` against `schema` and send it (gzipped when large). */
  sendJson<S extends z.ZodType>(res: http.ServerResponse, schema: S, body: z.input<S>, status?: number): void;
  sendError(res: http.ServerResponse, status: number, message: string): void;
  /** Headers every response carries (content type sniffing, referrer, CSP). */
  headers: Readonly<Record<string, string>>;
}

/** A group of API routes registered with the server. */
export interface ApiRoutes {
  /** Answers the request when it is one of these routes (resolves true), else leaves it alone (false). */
  handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<boolean>;
  /** Stop background work (the server is closing). */
  close(): void;
}

/** A request the route refuses, with the HTTP status to say so. */
export class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Read a request body of at most `maxBytes` as JSON and validate it with `schema`. Throws
 * RequestError: 413 when too large, 400 for bad JSON or a body the schema refuses (naming the field).
 */
export async function readJsonBody<S extends z.ZodType>(
  req: http.IncomingMessage,
  schema: S,
  maxBytes: number,
): Promise<z.output<S>> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > maxBytes)
    throw new RequestError(413, `request body of ${declared} bytes is over the ${maxBytes}-byte limit`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new RequestError(413, `request body is over the ${maxBytes}-byte limit`);
    chunks.push(chunk);
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (e) {
    throw new RequestError(400, `request body is not valid JSON: ${(e as Error).message}`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || 'body'}: ${i.message}`);
    throw new RequestError(400, `bad request: ${issues.join('; ')}`);
  }
  return parsed.data;
}

/** Run a route; a RequestError becomes its status and message, anything else a 500. */
export async function answer(res: http.ServerResponse, tools: RouteTools, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (e) {
    if (e instanceof RequestError) return tools.sendError(res, e.status, e.message);
    tools.sendError(res, 500, (e as Error).message);
  }
}
