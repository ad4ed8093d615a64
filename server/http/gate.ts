// What every request to `rollscope serve` passes before any route sees it (docs/security.md):
// - the Host header must name this server (a page on evil.example that rebinds its name to
//   127.0.0.1 sends `Host: evil.example:PORT`: DNS rebinding);
// - an Origin header, when sent, must be this server's origin (browsers send it on every
//   cross-origin fetch and on every POST/PUT/DELETE);
// - bound beyond the loopback names, a random token is required, as Jupyter does: the URL
//   printed at start carries `?token=…`, which is traded for a cookie; scripts may send
//   `Authorization: Bearer …` instead;
// - state-changing methods need proof that no other page forged them: the served Origin, or
//   (from a script) the bearer token or the `X-Rollscope-Request` header, which a browser only
//   sends cross-origin after a CORS preflight this server never approves; their JSON bodies must
//   say `Content-Type: application/json` (an HTML form cannot).
// And the app's files are opened confined to the app folder (`openAppFile`).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';

/** Hosts that are this machine only: bound to one of them, `serve` asks for no token. */
export const DEFAULT_LOOPBACK_HOSTS: readonly string[] = ['127.0.0.1', 'localhost', '::1'];

/**
 * Any other bind address gets a token, including other 127.x aliases: rollscope cannot tell how
 * an address is routed (containers, port forwarding), so only the names that are loopback on
 * every machine go without one.
 */
export function needsToken(host: string): boolean {
  return !DEFAULT_LOOPBACK_HOSTS.includes(host.toLowerCase());
}

/** 24 random bytes as hex, as Jupyter's token. */
export function newToken(): string {
  return randomBytes(24).toString('hex');
}

/** Header a script (not a browser page) adds to a state-changing request when it has no token. */
export const SCRIPT_HEADER = 'x-rollscope-request';

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const ALLOWED_METHODS = new Set(['GET', 'HEAD', ...STATE_CHANGING]);
/** Methods that carry a body the routes read as JSON. */
const JSON_BODY = new Set(['POST', 'PUT', 'PATCH']);

const hostPort = (h: string, port: number) =>
  `${h.includes(':') && !h.startsWith('[') ? `[${h}]` : h}:${port}`.toLowerCase();

/**
 * Host headers this server answers to: the loopback names, the bind address as given and as
 * bound, and for a wildcard bind (0.0.0.0, ::) every address of this machine and its host name.
 */
export function servedHosts(host: string, port: number, boundAddress?: string): Set<string> {
  const names = new Set<string>([...DEFAULT_LOOPBACK_HOSTS, host]);
  if (boundAddress) names.add(boundAddress);
  const wildcard = host === '0.0.0.0' || host === '::' || boundAddress === '0.0.0.0' || boundAddress === '::';
  if (wildcard) {
    names.add(os.hostname());
    for (const addrs of Object.values(os.networkInterfaces()))
      for (const a of addrs ?? []) if (host !== '0.0.0.0' || a.family === 'IPv4') names.add(a.address);
  }
  const out = new Set<string>();
  for (const n of names) {
    out.add(hostPort(n, port));
    // Browsers leave the port out of Host when it is the scheme's default.
    if (port === 80) out.add(hostPort(n, port).replace(/:80$/, ''));
  }
  return out;
}

export interface GatePolicy {
  /** Host header values served (lower case, with port). */
  hosts: ReadonlySet<string>;
  /** Required on every request when set. */
  token?: string;
  /** Cookie the token is kept in (one per port: cookies are shared by every port of a host). */
  cookieName: string;
}

export type Verdict =
  | { kind: 'pass'; url: URL }
  /** The token came in the URL of a page: set the cookie and send the browser to the URL without it. */
  | { kind: 'login'; location: string; cookie: string }
  | { kind: 'refuse'; status: number; message: string };

function sameSecret(given: string, token: string): boolean {
  // Hash both sides: timingSafeEqual needs equal lengths, and the length must not leak either.
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b);
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function bearer(req: http.IncomingMessage): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  return m?.[1];
}

/** Decide on one request before any route runs. Pure apart from reading `req`'s line and headers. */
export function checkRequest(req: http.IncomingMessage, policy: GatePolicy): Verdict {
  const host = (req.headers.host ?? '').toLowerCase();
  const firstHost = [...policy.hosts][0] ?? '127.0.0.1';
  if (!policy.hosts.has(host))
    return { kind: 'refuse', status: 421, message: `host "${host}" is not served here; use http://${firstHost}/` };
  const method = req.method ?? 'GET';
  if (!ALLOWED_METHODS.has(method)) return { kind: 'refuse', status: 405, message: `method ${method} is not served` };
  const target = req.url ?? '/';
  // Origin-form only ("/path?query"): an absolute-form target would make this a proxy, and "//x" would parse as a host.
  if (!target.startsWith('/') || target.startsWith('//'))
    return { kind: 'refuse', status: 400, message: 'request target must be a path' };
  let url: URL;
  try {
    url = new URL(`http://${host}${target}`);
  } catch {
    return { kind: 'refuse', status: 400, message: 'malformed request target' };
  }

  const origin = req.headers.origin;
  // "null" (sandboxed frames, file: pages, some redirects) is never this server.
  if (origin !== undefined && !policy.hosts.has(originHost(origin)))
    return { kind: 'refuse', status: 403, message: `cross-origin request from ${origin} refused` };

  let viaBearer = false;
  let login: Verdict | undefined;
  if (policy.token !== undefined) {
    const fromBearer = bearer(req);
    const fromCookie = cookieValue(req.headers.cookie, policy.cookieName);
    const fromQuery = url.searchParams.get('token') ?? undefined;
    viaBearer = fromBearer !== undefined && sameSecret(fromBearer, policy.token);
    const ok =
      viaBearer ||
      (fromCookie !== undefined && sameSecret(fromCookie, policy.token)) ||
      (fromQuery !== undefined && sameSecret(fromQuery, policy.token));
    if (!ok)
      return {
        kind: 'refuse',
        status: 401,
        message:
          'this server needs its token: open the URL with ?token=… that `rollscope serve` printed at start, or send Authorization: Bearer TOKEN',
      };
    const page = (method === 'GET' || method === 'HEAD') && !isApi(url.pathname);
    if (fromQuery !== undefined && page) {
      // Trade the URL token for a cookie and drop it from the address bar (history, screenshots).
      const clean = new URL(url);
      clean.searchParams.delete('token');
      login = {
        kind: 'login',
        location: clean.pathname + clean.search,
        // Lax: sent when the user opens the link from elsewhere, never on another site's POST or subresource.
        cookie: `${policy.cookieName}=${policy.token}; Path=/; HttpOnly; SameSite=Lax`,
      };
    }
  }

  if (STATE_CHANGING.has(method)) {
    // Every browser sends Origin on these; without one the caller must prove it is not a forged page request.
    if (origin === undefined && !viaBearer && req.headers[SCRIPT_HEADER] === undefined) {
      return {
        kind: 'refuse',
        status: 403,
        message: `${method} without an Origin header needs Authorization: Bearer TOKEN or the X-Rollscope-Request header`,
      };
    }
    const hasBody =
      JSON_BODY.has(method) ||
      Number(req.headers['content-length'] ?? 0) > 0 ||
      req.headers['transfer-encoding'] !== undefined;
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (hasBody && type !== 'application/json')
      return { kind: 'refuse', status: 415, message: `${method} bodies must be Content-Type: application/json` };
  }
  return login ?? { kind: 'pass', url };
}

function isApi(pathname: string): boolean {
  return pathname === '/api' || pathname.startsWith('/api/');
}

/** `http://127.0.0.1:4874` → `127.0.0.1:4874`; anything that is not an http origin → '' (never served). */
function originHost(origin: string): string {
  try {
    const u = new URL(origin);
    if (u.protocol !== 'http:' || u.pathname !== '/' || u.username || u.password) return '';
    return u.host.toLowerCase();
  } catch {
    return '';
  }
}

// ---- the app's files -----------------------------------------------------------------------

export class NotServed extends Error {}

export interface OpenedFile {
  fd: number;
  /** The real path of what was opened. */
  file: string;
  size: number;
}

/**
 * Open the file a URL path names inside `appDir`, or throw NotServed. The path is decoded once
 * (the URL parser has already folded `..` and `%2e%2e`); what decoding produces is then refused
 * outright if it could mean anything but a plain relative name: `..` segments (from `%2f`), a
 * backslash, a NUL, a `%` left by double encoding. Then the file is opened and the kernel's real
 * path of the descriptor checked, so a symlink inside the app folder cannot lead out of it.
 */
export function openAppFile(appDir: string, pathname: string): OpenedFile {
  let rel: string;
  try {
    rel = decodeURIComponent(pathname);
  } catch {
    throw new NotServed(`malformed path: ${pathname}`);
  }
  if (rel === '/' || rel === '') rel = '/index.html';
  if (/[\u0000\\%]/.test(rel) || rel.split('/').some((seg) => seg === '..' || seg === '.'))
    throw new NotServed(`not found: ${pathname}`);
  const root = fs.realpathSync(appDir);
  const wanted = path.resolve(root, `.${rel}`);
  if (!wanted.startsWith(root + path.sep)) throw new NotServed(`not found: ${pathname}`);
  let fd: number;
  try {
    // Non-blocking: a FIFO planted in the folder cannot hang the server.
    fd = fs.openSync(wanted, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch {
    throw new NotServed(`not found: ${pathname}`);
  }
  try {
    const real = realPathOf(fd, wanted);
    const st = fs.fstatSync(fd);
    if (real === undefined || !real.startsWith(root + path.sep) || !st.isFile())
      throw new NotServed(`not found: ${pathname}`);
    return { fd, file: real, size: st.size };
  } catch (e) {
    fs.closeSync(fd);
    throw e;
  }
}

function realPathOf(fd: number, opened: string): string | undefined {
  try {
    return fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    // Not Linux: checked by path, a symlink swapped in after the open is not caught (docs/security.md).
    try {
      return fs.realpathSync(opened);
    } catch {
      return undefined;
    }
  }
}
