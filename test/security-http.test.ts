// `rollscope serve` against hostile requests (docs/security.md §The server): the real
// server, in-process and as the CLI child, on a real run. Every request goes to loopback only:
// 127.0.0.1, and 127.0.0.2 (a loopback alias) to stand for "another address" in the token cases.
// Requests are written byte for byte on a socket, so the paths arrive exactly as an attacker
// would send them (fetch and http.request normalise or refuse some of them).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { bombPng } from './support/hostile-files.ts';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageInfo, RunInfo, TrajectoryDetail } from '../server/http/api.ts';
import { needsToken, servedHosts } from '../server/http/gate.ts';
import { openRunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { IDS, writeFixtureRun } from './e2e/fixture.ts';
import { waitFor } from './support/wait.ts';

const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
/** Text only the file outside the served folders holds: seeing it in any response means a leak. */
const SECRET = 'SECRET-6f1d0c-outside-the-roots';

let tmp: string;
let appDir: string;
let runDir: string;
let server: RunningServer;
let port: number;

// ---- raw HTTP ------------------------------------------------------------------------------

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * One request written as given (HTTP/1.0: the answer is never chunked and ends with the
 * connection). `host: null` sends no Host header.
 */
function raw(
  p: number,
  req: { method?: string; target: string; host?: string | null; headers?: Record<string, string>; body?: string },
  address = '127.0.0.1',
): Promise<RawResponse> {
  const lines = [`${req.method ?? 'GET'} ${req.target} HTTP/1.0`];
  const host = req.host === undefined ? `${address}:${p}` : req.host;
  if (host !== null) lines.push(`Host: ${host}`);
  for (const [k, v] of Object.entries(req.headers ?? {})) lines.push(`${k}: ${v}`);
  if (req.body !== undefined) lines.push(`Content-Length: ${Buffer.byteLength(req.body)}`);
  const text = `${lines.join('\r\n')}\r\n\r\n${req.body ?? ''}`;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = net.connect({ host: address, port: p }, () => sock.write(Buffer.from(text, 'latin1')));
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('error', reject);
    sock.on('end', () => {
      const all = Buffer.concat(chunks);
      const split = all.indexOf('\r\n\r\n');
      const head = all
        .subarray(0, split < 0 ? all.length : split)
        .toString('latin1')
        .split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of head.slice(1)) {
        const c = l.indexOf(':');
        if (c > 0) headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
      }
      resolve({
        status: Number(/^HTTP\/1\.\d (\d{3})/.exec(head[0] ?? '')?.[1] ?? 0),
        headers,
        body: split < 0 ? Buffer.alloc(0) : all.subarray(split + 4),
      });
    });
  });
}

const json = (r: RawResponse): unknown => JSON.parse(r.body.toString('utf8'));
const errorOf = (r: RawResponse): string => (json(r) as { error: string }).error;

// ---- fixtures ------------------------------------------------------------------------------

/** Trajectories whose only content is one image reference each (ids say what they try). */
const HOSTILE_IMAGES: Record<string, (outside: string) => string> = {
  'img-dotdot': () => '../outside/secret.png',
  'img-absolute': (outside) => path.join(outside, 'secret.png'),
  'img-symlink': () => 'link.png',
  'img-symlink-dir': () => 'linkdir/secret.png',
  'img-file-url-dotdot': (outside) => `file://${path.dirname(outside)}/run/%2e%2e/outside/secret.png`,
  'img-encoded-slash': () => '..%2foutside%2fsecret.png',
  'img-bomb': () => 'bomb.png',
};

beforeAll(async () => {
  tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-security-http-')));
  appDir = path.join(tmp, 'app');
  runDir = path.join(tmp, 'run');
  const outside = path.join(tmp, 'outside');
  fs.mkdirSync(path.join(appDir, 'assets'), { recursive: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');
  fs.writeFileSync(path.join(appDir, 'assets', 'app.js'), 'console.log("app")');
  // The secret beside the app folder (one `..` away) and in a folder of its own.
  fs.writeFileSync(path.join(tmp, 'secret.txt'), SECRET);
  fs.writeFileSync(path.join(outside, 'secret.txt'), SECRET);
  fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(appDir, 'leak.txt'));
  fs.symlinkSync(outside, path.join(appDir, 'assets', 'linkdir'));
  execFileSync('mkfifo', [path.join(appDir, 'fifo.js')]);

  await writeFixtureRun(runDir);
  // The secret image has a size no image of the run has: 333×77 anywhere means it leaked.
  fs.writeFileSync(
    path.join(outside, 'secret.png'),
    await sharp({ create: { width: 333, height: 77, channels: 3, background: '#a33' } })
      .png()
      .toBuffer(),
  );
  fs.writeFileSync(path.join(runDir, 'bomb.png'), bombPng(100_000, 100_000));
  fs.symlinkSync(path.join(outside, 'secret.png'), path.join(runDir, 'link.png'));
  fs.symlinkSync(outside, path.join(runDir, 'linkdir'));
  const hostile = Object.entries(HOSTILE_IMAGES).map(([id, url], i) =>
    JSON.stringify({
      id,
      source: { file: 'hostile.rollscope.jsonl', line: i + 1, format: 'native' },
      turns: [],
      images: [{ url: url(outside) }],
    }),
  );
  fs.writeFileSync(path.join(runDir, 'hostile.rollscope.jsonl'), `${hostile.join('\n')}\n`);

  const store = openRunStore([runDir], { pollMs: 0 });
  await store.ready;
  server = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
  port = server.port;
}, 120_000);

afterAll(async () => {
  await server?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// ---- the CLI as a child --------------------------------------------------------------------

interface Served {
  child: ChildProcess;
  /** The URL as printed (with ?token=… when there is one). */
  printed: string;
  port: number;
  token?: string;
  stderr: () => string;
  stop(): Promise<void>;
}

function startCli(args: string[]): Promise<Served> {
  const child = spawn(process.execPath, ['bin/rollscope.js', 'serve', '--no-open', '--port', '0', ...args], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /(http:\/\/[^\s/]+:(\d+)\/(?:\?token=([0-9a-f]+))?)\n/.exec(out);
      if (!m) return;
      resolve({
        child,
        printed: m[1]!,
        port: Number(m[2]),
        ...(m[3] ? { token: m[3] } : {}),
        stderr: () => err,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
          }),
      });
    });
    child.once('exit', (code) => reject(new Error(`rollscope serve exited with ${code}: ${err || out}`)));
  });
}

async function untilLoaded(p: number, address: string, headers: Record<string, string> = {}): Promise<void> {
  await waitFor('the run to finish loading', async () => {
    const r = await raw(p, { target: '/api/run', headers }, address);
    return r.status === 200 && !RunInfo.parse(json(r)).loading;
  });
}

// ---- the tests -----------------------------------------------------------------------------

describe('where it listens', () => {
  it('binds 127.0.0.1 by default, with no token, and is not reachable on another address', async () => {
    const s = await startCli([runDir]);
    try {
      expect(s.printed).toBe(`http://127.0.0.1:${s.port}/`);
      expect(s.token).toBeUndefined();
      expect((await raw(s.port, { target: '/api/run' })).status).toBe(200);
      // 127.0.0.2 is this machine too, but the socket is bound to 127.0.0.1 only.
      await expect(raw(s.port, { target: '/api/run', host: `127.0.0.1:${s.port}` }, '127.0.0.2')).rejects.toMatchObject(
        { code: 'ECONNREFUSED' },
      );
    } finally {
      await s.stop();
    }
  }, 60_000);

  it('--require-token asks for a token on 127.0.0.1 too (a shared machine: every local user reaches loopback)', async () => {
    const s = await startCli([runDir, '--require-token']);
    try {
      expect(s.printed).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${s.port}/\\?token=[0-9a-f]{48}$`));
      expect((await raw(s.port, { target: '/api/run' })).status).toBe(401);
      expect((await raw(s.port, { target: '/api/run', headers: { Authorization: `Bearer ${s.token!}` } })).status).toBe(
        200,
      );
    } finally {
      await s.stop();
    }
  }, 60_000);

  it('only the loopback names go without a token; the served Host names include the bind name and the bound address', () => {
    expect(['127.0.0.1', 'localhost', '::1', 'LOCALHOST'].map(needsToken)).toEqual([false, false, false, false]);
    expect(['127.0.0.2', '0.0.0.0', '::', '10.1.2.3', 'gpu-box.lan'].map(needsToken)).toEqual([
      true,
      true,
      true,
      true,
      true,
    ]);
    const hosts = servedHosts('gpu-box.lan', 4874, '10.1.2.3');
    for (const h of ['gpu-box.lan:4874', '10.1.2.3:4874', '127.0.0.1:4874', 'localhost:4874', '[::1]:4874'])
      expect(hosts.has(h), h).toBe(true);
    expect(hosts.has('gpu-box.lan:4875')).toBe(false);
    expect(hosts.has('evil.example:4874')).toBe(false);
    expect(servedHosts('::', 80).has('[::1]')).toBe(true);
  });
});

describe('with a token (bound beyond the loopback names: 127.0.0.2 here)', () => {
  let s: Served;
  beforeAll(async () => {
    s = await startCli([runDir, '--host', '127.0.0.2']);
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
  });
  const at = (r: {
    target: string;
    method?: string;
    host?: string | null;
    headers?: Record<string, string>;
    body?: string;
  }) => raw(s.port, r, '127.0.0.2');

  it('prints a random token in the URL and says it is needed', async () => {
    expect(s.printed).toMatch(new RegExp(`^http://127\\.0\\.0\\.2:${s.port}/\\?token=[0-9a-f]{48}$`));
    await waitFor('the token notice', () => s.stderr().includes('needs the token'));
    const other = await startCli([runDir, '--host', '127.0.0.2']);
    await other.stop();
    expect(other.token).not.toBe(s.token);
  }, 60_000);

  it('every API request without the right token is refused; Bearer, cookie and ?token are accepted', async () => {
    const token = s.token!;
    await untilLoaded(s.port, '127.0.0.2', { Authorization: `Bearer ${token}` });
    for (const target of [
      '/api/run',
      '/api/trajectories',
      `/api/trajectories/${IDS.clean}`,
      `/api/trajectories/${IDS.clean}/images/0/preview?w=64`,
    ]) {
      expect((await at({ target })).status, target).toBe(401);
      // One character off (never the same character: a fixed '0' was the right token one time in 16).
      const offByOne = `${token.slice(0, -1)}${token.endsWith('0') ? '1' : '0'}`;
      expect((await at({ target, headers: { Authorization: `Bearer ${offByOne}` } })).status, target).toBe(401);
      expect((await at({ target, headers: { Authorization: 'Bearer ' } })).status, target).toBe(401);
      expect((await at({ target, headers: { Cookie: `rollscope-token-${s.port}=nope` } })).status, target).toBe(401);
      // The cookie of another rollscope (another port) is not this one's.
      expect((await at({ target, headers: { Cookie: `rollscope-token-${s.port + 1}=${token}` } })).status, target).toBe(
        401,
      );
      expect((await at({ target, headers: { Authorization: `Bearer ${token}` } })).status, target).toBe(200);
      expect(
        (await at({ target, headers: { Cookie: `a=b; rollscope-token-${s.port}=${token}` } })).status,
        target,
      ).toBe(200);
    }
    expect((await at({ target: `/api/run?token=${token}` })).status).toBe(200);
    expect(errorOf(await at({ target: '/api/run' }))).toMatch(/token/);
  });

  it('the app: the printed URL sets the cookie and drops the token from the address; pages and assets then load with the cookie', async () => {
    const token = s.token!;
    expect((await at({ target: '/' })).status).toBe(401);
    const login = await at({ target: `/?token=${token}` });
    expect(login.status).toBe(302);
    expect(login.headers.location).toBe('/');
    expect(login.headers['set-cookie']).toBe(`rollscope-token-${s.port}=${token}; Path=/; HttpOnly; SameSite=Lax`);
    // Other query parameters survive the trade.
    expect((await at({ target: `/?colour=mask&token=${token}` })).headers.location).toBe('/?colour=mask');
    const cookie = { Cookie: login.headers['set-cookie']!.split(';')[0]! };
    const page = await at({ target: '/', headers: cookie });
    expect(page.status).toBe(200);
    const html = page.body.toString('utf8');
    expect(html).toContain('<div id="root">');
    const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThan(0);
    for (const a of assets) {
      expect((await at({ target: a })).status, a).toBe(401);
      expect((await at({ target: a, headers: cookie })).status, a).toBe(200);
    }
  });

  it('answers to the bound address, not to other Host names, token or not', async () => {
    const auth = { Authorization: `Bearer ${s.token!}` };
    expect((await at({ target: '/api/run', headers: auth })).status).toBe(200);
    expect((await at({ target: '/api/run', host: `evil.example:${s.port}`, headers: auth })).status).toBe(421);
    expect((await at({ target: '/api/run', host: `127.0.0.3:${s.port}`, headers: auth })).status).toBe(421);
  });

  it('a cookie alone does not make a state-changing request without Origin legitimate; the Bearer token does', async () => {
    const token = s.token!;
    const body = '{}';
    const jsonType = { 'Content-Type': 'application/json' };
    const cookieOnly = await at({
      method: 'POST',
      target: '/api/run',
      headers: { ...jsonType, Cookie: `rollscope-token-${s.port}=${token}` },
      body,
    });
    expect(cookieOnly.status).toBe(403);
    const withBearer = await at({
      method: 'POST',
      target: '/api/run',
      headers: { ...jsonType, Authorization: `Bearer ${token}` },
      body,
    });
    expect([401, 403, 415, 421]).not.toContain(withBearer.status); // past the gate: the route decides
    const withOrigin = await at({
      method: 'POST',
      target: '/api/run',
      headers: { ...jsonType, Cookie: `rollscope-token-${s.port}=${token}`, Origin: `http://127.0.0.2:${s.port}` },
      body,
    });
    expect([401, 403, 415, 421]).not.toContain(withOrigin.status);
  });
});

describe('DNS rebinding: a Host header it does not serve is refused', () => {
  it.each([
    ['another name', 'evil.example'],
    ['another name with the port', () => `evil.example:${port}`],
    ['loopback with another port', '127.0.0.1:1'],
    ['a name ending like ours', () => `127.0.0.1:${port}.evil.example`],
    ['a name starting like ours', () => `localhost.evil.example:${port}`],
    ['an empty Host', ''],
  ])('%s', async (_what, host) => {
    const h = typeof host === 'function' ? host() : host;
    for (const target of ['/api/run', '/', '/assets/app.js']) {
      const r = await raw(port, { target, host: h });
      expect(r.status, `${target} Host: ${h}`).toBe(421);
      expect(r.body.toString()).not.toContain('trajectories');
    }
  });

  it('no Host header at all, and a proxy-style absolute target, are refused', async () => {
    expect((await raw(port, { target: '/api/run', host: null })).status).toBe(421);
    expect((await raw(port, { target: `http://evil.example:${port}/api/run` })).status).toBe(400);
    expect((await raw(port, { target: `//evil.example/api/run` })).status).toBe(400);
  });

  it('the loopback names it serves are accepted (the control)', async () => {
    for (const h of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`])
      expect((await raw(port, { target: '/api/run', host: h })).status, h).toBe(200);
  });
});

describe('cross-origin requests', () => {
  const served = () => `http://127.0.0.1:${port}`;
  const jsonType = { 'Content-Type': 'application/json' };
  const pastGate = (r: RawResponse) =>
    ![401, 403, 405, 415, 421].includes(r.status) || (r.status === 405 && !/not served/.test(errorOf(r)));

  it.each(['POST', 'PUT', 'PATCH', 'DELETE'])(
    '%s from another origin is refused, also with JSON and the script header',
    async (method) => {
      for (const origin of [
        'http://evil.example',
        `http://evil.example:${port}`,
        `https://127.0.0.1:${port}`,
        `http://127.0.0.1:${port + 1}`,
        'null',
      ]) {
        const r = await raw(port, {
          method,
          target: '/api/run',
          headers: { ...jsonType, Origin: origin, 'X-Rollscope-Request': '1' },
          body: '{}',
        });
        expect(r.status, `${method} from ${origin}`).toBe(403);
        expect(errorOf(r)).toMatch(/cross-origin/);
      }
    },
  );

  it.each(['POST', 'PUT', 'PATCH', 'DELETE'])(
    '%s without Origin and without the token or script header is refused',
    async (method) => {
      const r = await raw(port, { method, target: '/api/run', headers: jsonType, body: '{}' });
      expect(r.status).toBe(403);
      expect(errorOf(r)).toMatch(/Origin/);
    },
  );

  it('a JSON body must say application/json (what an HTML form cannot send)', async () => {
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/jsonx',
      undefined,
    ]) {
      const headers: Record<string, string> = { Origin: served(), ...(type ? { 'Content-Type': type } : {}) };
      const r = await raw(port, { method: 'POST', target: '/api/run', headers, body: '{}' });
      expect(r.status, String(type)).toBe(415);
    }
  });

  it('from the served origin, or from a script with the X-Rollscope-Request header, a JSON request passes the gate', async () => {
    const sameOrigin = await raw(port, {
      method: 'POST',
      target: '/api/run',
      headers: { ...jsonType, Origin: served() },
      body: '{}',
    });
    expect(pastGate(sameOrigin), `${sameOrigin.status} ${sameOrigin.body}`).toBe(true);
    const charset = await raw(port, {
      method: 'POST',
      target: '/api/run',
      headers: { 'Content-Type': 'application/json; charset=utf-8', Origin: `http://localhost:${port}` },
      body: '{}',
    });
    expect(pastGate(charset)).toBe(true);
    const script = await raw(port, {
      method: 'POST',
      target: '/api/run',
      headers: { ...jsonType, 'X-Rollscope-Request': '1' },
      body: '{}',
    });
    expect(pastGate(script)).toBe(true);
    const del = await raw(port, { method: 'DELETE', target: '/api/run', headers: { Origin: served() } });
    expect(pastGate(del)).toBe(true);
  });

  it('cross-origin reads are refused too, preflights are never approved, and no response grants CORS', async () => {
    const r = await raw(port, { target: '/api/run', headers: { Origin: 'http://evil.example' } });
    expect(r.status).toBe(403);
    const preflight = await raw(port, {
      method: 'OPTIONS',
      target: '/api/run',
      headers: {
        Origin: 'http://evil.example',
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'x-rollscope-request',
      },
    });
    expect(preflight.status).toBe(405);
    for (const m of ['TRACE', 'PROPFIND', 'OPTIONS'])
      expect((await raw(port, { method: m, target: '/api/run' })).status, m).toBe(405);
    // CONNECT never reaches the request handler: node closes the socket without an answer.
    expect((await raw(port, { method: 'CONNECT', target: `127.0.0.1:${port}` })).status).toBe(0);
    const ok = await raw(port, { target: '/api/run', headers: { Origin: served() } });
    expect(ok.status).toBe(200);
    for (const res of [r, preflight, ok])
      expect(Object.keys(res.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
  });
});

describe('only files under the app folder and the run are served', () => {
  it('the app folder is served (the control)', async () => {
    expect((await raw(port, { target: '/' })).body.toString()).toContain('<title>app</title>');
    expect((await raw(port, { target: '/index.html' })).status).toBe(200);
    const js = await raw(port, { target: '/assets/app.js' });
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toMatch(/javascript/);
  });

  const ESCAPES = [
    '/../secret.txt',
    '/assets/../../secret.txt',
    '/..%2fsecret.txt',
    '/..%2Fsecret.txt',
    '/%2e%2e/secret.txt',
    '/%2e%2e%2fsecret.txt',
    '/%2E%2E%2Fsecret.txt',
    '/assets/%2e%2e%2f%2e%2e%2fsecret.txt',
    '/.%2e/secret.txt',
    '/%252e%252e%252fsecret.txt',
    '/%25%32%65%25%32%65%25%32%66secret.txt',
    '/..\\secret.txt',
    '/assets\\..\\..\\secret.txt',
    '/%5c..%5csecret.txt',
    '/..%5csecret.txt',
    '/%c0%ae%c0%ae/secret.txt',
    '/%c0%ae%c0%ae%c0%afsecret.txt',
    '/%e0%80%ae%e0%80%ae/secret.txt',
    '/..%00/secret.txt',
    '/secret.txt%00.js',
    '/%00',
    `/${'..%2f'.repeat(12)}etc%2fpasswd`,
    '/%2fetc%2fpasswd',
    `/${encodeURIComponent(path.join(os.tmpdir(), 'x', '..'))}%2fsecret.txt`,
    '/leak.txt',
    '/assets/linkdir/secret.txt',
    '/assets/linkdir%2fsecret.txt',
    '/fifo.js',
    '/assets',
    '/assets/',
  ];

  it.each(ESCAPES)('%s is not served', async (target) => {
    const r = await raw(port, { target });
    expect(r.status, `${target}: ${r.status}`).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.body.toString('latin1')).not.toContain(SECRET);
    expect(r.body.toString('latin1')).not.toContain('root:');
  });

  it('a raw NUL or a control byte in the request line is refused', async () => {
    for (const target of ['/..\u0000/secret.txt', '/secret.txt\u0000', '/\u0001']) {
      const r = await raw(port, { target });
      expect(r.status, JSON.stringify(target)).toBe(400);
      expect(r.body.toString('latin1')).not.toContain(SECRET);
    }
  });

  // The URL parser folds `%2e%2e` segments as a browser does (`images/%2e%2e` is the trajectory itself): an answer, never a file.
  it('the same spellings through the API reach no file either', async () => {
    for (const encoded of [
      '..%2f..%2fsecret.txt',
      '%2e%2e',
      '..%5c..%5csecret.txt',
      encodeURIComponent(path.join(tmp, 'secret.txt')),
    ]) {
      for (const target of [
        `/api/trajectories/${encoded}`,
        `/api/trajectories/${IDS.clean}/images/${encoded}`,
        `/api/trajectories/${IDS.clean}/images/0/${encoded}`,
        `/api/${encoded}`,
      ]) {
        const r = await raw(port, { target });
        expect(r.status, target).toBeLessThan(500);
        expect(r.body.toString('latin1')).not.toContain(SECRET);
        if (r.status === 200 && !/json/.test(r.headers['content-type'] ?? ''))
          expect(r.body.toString(), target).toContain('<title>app</title>'); // `/api/%2e%2e` is `/`
      }
    }
  });
});

describe('images over HTTP obey the image rules', () => {
  it('a readable image under the run gets its size and a preview (the control)', async () => {
    const info = ImageInfo.parse(json(await raw(port, { target: `/api/trajectories/${IDS.clean}/images/0` })));
    expect(info).toMatchObject({ width: 640, height: 480, unavailable: null, hasPreview: true });
    const preview = await raw(port, { target: `/api/trajectories/${IDS.clean}/images/0/preview?w=64` });
    expect(preview.status).toBe(200);
    expect((await sharp(preview.body).metadata()).width).toBe(64);
  });

  it.each(Object.keys(HOSTILE_IMAGES).filter((id) => id !== 'img-bomb'))(
    '%s: no size, no preview, the reason given, the bytes never sent',
    async (id) => {
      const detail = TrajectoryDetail.parse(json(await raw(port, { target: `/api/trajectories/${id}` })));
      const info = detail.images[0]!;
      expect(info.width).toBeNull();
      expect(info.hasPreview).toBe(false);
      expect(info.unavailable).toMatch(/outside the folders|not found|malformed/);
      expect(JSON.stringify(detail)).not.toContain('333');
      const preview = await raw(port, { target: `/api/trajectories/${id}/images/0/preview?w=400` });
      expect(preview.status).toBe(404);
      expect(preview.headers['content-type']).toMatch(/json/);
    },
  );

  it('a decompression bomb (100000×100000 claimed) is refused with the reason and never decoded for a preview', async () => {
    const before = process.memoryUsage().rss;
    const detail = TrajectoryDetail.parse(json(await raw(port, { target: '/api/trajectories/img-bomb' })));
    expect(detail.images[0]!.unavailable).toMatch(/100000×100000.*decompression bomb/);
    expect(detail.images[0]!.hasPreview).toBe(false);
    const preview = await raw(port, { target: '/api/trajectories/img-bomb/images/0/preview?w=800' });
    expect(preview.status).toBe(404);
    expect(errorOf(preview)).toMatch(/no readable bytes/);
    // 10^10 RGB pixels would be 30 GB; nothing close to that was allocated.
    expect(process.memoryUsage().rss - before).toBeLessThan(512 * 1024 * 1024);
  });

  it('--allow-remote-images reaches the server; a loopback image is refused by address either way, and never requested', async () => {
    let hits = 0;
    const imageServer = http.createServer((_req, res) => {
      hits++;
      res.writeHead(200, { 'Content-Type': 'image/png' });
      res.end();
    });
    await new Promise<void>((r) => imageServer.listen(0, '127.0.0.1', r));
    const dir = fs.mkdtempSync(path.join(tmp, 'remote-'));
    const url = `http://127.0.0.1:${(imageServer.address() as AddressInfo).port}/cat.png`;
    fs.writeFileSync(
      path.join(dir, 'remote.rollscope.jsonl'),
      `${JSON.stringify({
        id: 'remote',
        source: { file: 'remote.rollscope.jsonl', line: 1, format: 'native' },
        turns: [],
        images: [{ url }],
      })}\n`,
    );
    const reasons: string[] = [];
    try {
      for (const extra of [[], ['--allow-remote-images']]) {
        const s = await startCli([dir, ...extra]);
        try {
          await untilLoaded(s.port, '127.0.0.1');
          const info = ImageInfo.parse(json(await raw(s.port, { target: '/api/trajectories/remote/images/0' })));
          reasons.push(info.unavailable ?? '');
          expect((await raw(s.port, { target: '/api/trajectories/remote/images/0/preview?w=64' })).status).toBe(404);
        } finally {
          await s.stop();
        }
      }
    } finally {
      imageServer.close();
    }
    expect(reasons[0]).toMatch(/not fetched.*--allow-remote-images/);
    expect(reasons[1]).toMatch(/loopback|not a public|refused/i);
    expect(reasons[1]).not.toMatch(/not fetched.*unless --allow-remote-images/);
    expect(hits).toBe(0);
  }, 90_000);
});

describe('the app renders record text as text', () => {
  it('every response carries a Content-Security-Policy without inline scripts, and nosniff', async () => {
    for (const target of ['/', '/assets/app.js', '/api/run', '/api/nothing', '/../secret.txt']) {
      const r = await raw(port, { target });
      expect(r.headers['content-security-policy'], target).toMatch(/default-src 'self'/);
      expect(r.headers['content-security-policy']).not.toMatch(/script-src[^;]*unsafe-inline/);
      expect(r.headers['x-content-type-options'], target).toBe('nosniff');
    }
  });

  it('no app source writes HTML from data (no dangerouslySetInnerHTML, innerHTML, outerHTML, insertAdjacentHTML, document.write, eval)', () => {
    const files: string[] = [];
    const walk = (d: string) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        if (e.isDirectory()) walk(path.join(d, e.name));
        else if (/\.(tsx?|jsx?)$/.test(e.name)) files.push(path.join(d, e.name));
      }
    };
    walk(path.join(REPO, 'app'));
    expect(files.length).toBeGreaterThan(5);
    for (const f of files) {
      const text = fs.readFileSync(f, 'utf8');
      expect(text, path.relative(REPO, f)).not.toMatch(
        /dangerouslySetInnerHTML|\.innerHTML\s*=|\.outerHTML\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function\(/,
      );
    }
  });
});
