// The HTTP server behind the app: node:http, a JSON API validated with the zod schemas of api.ts
// and answered by the route modules (routes-*.ts), and the built app from dist/app. Loopback by
// default; every request first passes the gate (gate.ts: Host, Origin, token, state-changing requests) and the
// app's files are opened confined to the app folder. Nothing remote is ever fetched.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import type { z } from 'zod';
import { ZodError } from 'zod';
import type { RunStore } from './store.ts';
import { NotFound } from './views.ts';
import { ImageUnavailable } from '../images/resolve.ts';
import { checkRequest, NotServed, openAppFile, servedHosts } from './gate.ts';
import { RequestError } from './request-body.ts';
import { FilterError } from '../analysis/filter.ts';
import type { ApiError } from './api.ts';
import { trajectoryRoutes } from './routes-trajectories.ts';
import { exportRoutes } from './routes-export.ts';
import { askRoutes } from './routes-ask.ts';
import { compareRoutes } from './routes-compare.ts';
import type { TrainedSide } from './trained-side.ts';
import { runRoutes } from './routes-run.ts';

export interface ServeOptions {
  store: RunStore;
  /** 0 = any free port. */
  port: number;
  host: string;
  /** Folder of the built app (index.html, assets/). */
  appDir: string;
  /** Try the next ports when `port` is taken (the default port), instead of failing. */
  fallbackPort?: boolean;
  /** Required on every request when set (serve sets one when bound beyond loopback; gate.ts). */
  token?: string;
  /** The trained side to compare the run with (`serve --trained`). */
  trained?: TrainedSide;
}

export interface RunningServer {
  url: string;
  /** `url` with `?token=…` when the server has a token: the address to open (and to print). */
  openUrl: string;
  port: number;
  close(): Promise<void>;
}

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

const SECURITY_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Content-Security-Policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'",
};

/** Responses larger than this are gzipped when the client accepts it (token streams compress ~5×). */
const GZIP_MIN_BYTES = 16 * 1024;

function sendJson<S extends z.ZodType>(res: http.ServerResponse, schema: S, body: z.input<S>, status = 200): void {
  // Validate what we send: a response that breaks the contract is a server bug, reported as one.
  const parsed = schema.safeParse(body);
  if (!parsed.success)
    throw new Error(
      `response does not match its schema: ${parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.')}: ${i.message}`)
        .join('; ')}`,
    );
  const text = Buffer.from(JSON.stringify(parsed.data));
  const headers: http.OutgoingHttpHeaders = {
    'Content-Type': 'application/json; charset=utf-8',
    'Cache-Control': 'no-store',
    Vary: 'Accept-Encoding',
    ...SECURITY_HEADERS,
  };
  const accepts = /\bgzip\b/.test(String(res.req?.headers['accept-encoding'] ?? ''));
  if (accepts && text.length >= GZIP_MIN_BYTES) {
    res.writeHead(status, { ...headers, 'Content-Encoding': 'gzip' });
    res.end(gzipSync(text, { level: 1 }));
    return;
  }
  res.writeHead(status, headers);
  res.end(text);
}

function sendError(
  res: http.ServerResponse,
  status: number,
  message: string,
  extra: Omit<ApiError, 'error'> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', ...SECURITY_HEADERS });
  res.end(JSON.stringify({ error: message, ...extra } satisfies ApiError));
}

export async function startServer(opts: ServeOptions): Promise<RunningServer> {
  const { store } = opts;
  let port = opts.port;
  let hosts = new Set<string>();
  const appDir = path.resolve(opts.appDir);
  // Each route module answers its own paths (the run and its trajectories, export jobs, the playground).
  const tools = { sendJson, sendError, headers: SECURITY_HEADERS };
  // The compare routes first: they answer /api/trajectories/ID/compare before the trajectory views do.
  const routes = [
    compareRoutes(store, opts.trained, tools),
    trajectoryRoutes(store, tools, appDir),
    runRoutes(store, tools),
    exportRoutes(store, tools),
    askRoutes(store, tools),
  ];
  async function routeApi(req: http.IncomingMessage, url: URL, res: http.ServerResponse): Promise<void> {
    for (const r of routes) if (await r.handle(req, res, url)) return;
    if (req.method !== 'GET' && req.method !== 'HEAD')
      throw new RequestError(405, `no ${req.method} route ${url.pathname}`);
    throw new RequestError(404, `no API route ${url.pathname}`);
  }

  function serveStatic(url: URL, res: http.ServerResponse): void {
    const index = path.join(appDir, 'index.html');
    if (!fs.existsSync(index)) {
      res.writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('The app is not built: run `npm run build` in the rollscope folder, then reload.\n');
      return;
    }
    // Only files inside the built app, never anything else on disk (gate.ts openAppFile).
    const { fd, file } = openAppFile(appDir, url.pathname);
    const type = MIME[path.extname(file)] ?? 'application/octet-stream';
    const immutable = url.pathname.startsWith('/assets/');
    res.writeHead(200, {
      'Content-Type': type,
      'Cache-Control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      ...SECURITY_HEADERS,
    });
    fs.createReadStream(file, { fd }).pipe(res);
  }

  const server = http.createServer((req, res) => {
    const verdict = checkRequest(req, { hosts, token: opts.token, cookieName: `rollscope-token-${port}` });
    if (verdict.kind === 'refuse') return sendError(res, verdict.status, verdict.message);
    if (verdict.kind === 'login') {
      res.writeHead(302, {
        Location: verdict.location,
        'Set-Cookie': verdict.cookie,
        'Cache-Control': 'no-store',
        ...SECURITY_HEADERS,
      });
      res.end();
      return;
    }
    const { url } = verdict;
    const api = url.pathname.startsWith('/api/') || url.pathname === '/api';
    if (!api && req.method !== 'GET' && req.method !== 'HEAD')
      return sendError(res, 405, 'only GET (state-changing requests go to the API)');
    const work = api ? routeApi(req, url, res) : (async () => serveStatic(url, res))();
    work.catch((e: unknown) => {
      if (e instanceof RequestError) return sendError(res, e.status, e.message);
      if (e instanceof URIError) return sendError(res, 400, `malformed URL: ${url.pathname}`);
      if (e instanceof NotServed) return sendError(res, 404, e.message);
      if (e instanceof ImageUnavailable) return sendError(res, 404, e.message);
      if (e instanceof NotFound) return sendError(res, 404, e.message);
      if (e instanceof ZodError) return sendError(res, 400, e.message);
      if (e instanceof FilterError) return sendError(res, 400, `where: ${e.message}`, { offset: e.offset });
      sendError(res, 500, (e as Error).message);
    });
  });

  const listen = (p: number) =>
    new Promise<number>((resolve, reject) => {
      const onError = (e: Error) => {
        server.off('listening', onListening);
        reject(e);
      };
      const onListening = () => {
        server.off('error', onError);
        resolve((server.address() as AddressInfo).port);
      };
      server.once('error', onError);
      server.once('listening', onListening);
      server.listen(p, opts.host);
    });
  try {
    port = await listen(port);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE' || !opts.fallbackPort) throw e;
    port = await listen(0);
  }
  hosts = servedHosts(opts.host, port, (server.address() as AddressInfo).address);
  const shownHost =
    opts.host === '0.0.0.0' || opts.host === '::'
      ? '127.0.0.1'
      : opts.host.includes(':')
        ? `[${opts.host}]`
        : opts.host;
  const url = `http://${shownHost}:${port}/`;
  return {
    url,
    openUrl: opts.token ? `${url}?token=${opts.token}` : url,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        store.close();
        for (const r of routes) r.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
