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
 * How deep arrays and objects nest in JSON text, or the offset where they first pass `max` (so a
 * body of 200k `[` never reaches a recursive reader). Brackets inside strings do not count.
 */
export function jsonNestingPast(bytes: Uint8Array, max: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (inString) {
      if (b === 0x5c)
        i++; // a backslash escapes the next byte
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x5b || b === 0x7b) {
      if (++depth > max) return i;
    } else if (b === 0x5d || b === 0x7d) depth--;
  }
  return undefined;
}

/**
 * Read a request body of at most `maxBytes` as JSON, nested at most `maxDepth` deep, and validate
 * it with `schema`. Throws RequestError: 413 when too large, 400 for bad JSON, nesting past the
 * limit, or a body the schema refuses (naming the field).
 */
export async function readJsonBody<S extends z.ZodType>(
  req: http.IncomingMessage,
  schema: S,
  maxBytes: number,
  maxDepth = 128,
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
  const bytes = Buffer.concat(chunks);
  const past = jsonNestingPast(bytes, maxDepth);
  if (past !== undefined)
    throw new RequestError(
      400,
      `request body nests arrays and objects deeper than the limit of ${maxDepth} levels (at byte ${past})`,
    );
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
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
