// Hostile image references (docs/security.md §Images): local paths stay inside the
// roots whatever the spelling, data: URLs and pixel counts are bounded, and http(s) images are
// fetched only with --allow-remote-images, then never from loopback/private/link-local addresses.
// Every server here listens on loopback; the happy paths reach it through the test-only
// `allowAddress` seam, never through any other address.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { bombPng } from './support/hostile-files.ts';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Trajectory, type ImageRef } from '../server/model/trajectory.ts';
import {
  imageBytes,
  imageSize,
  MAX_DATA_URL_BYTES,
  MAX_INPUT_PIXELS,
  resolveImages,
} from '../server/images/resolve.ts';
import { fetchRemoteImage, isPublicAddress, type RemoteImageLimits } from '../server/images/remote.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { COMMON_OPTIONS, parse } from '../server/cli/command.ts';

let tmp: string;
let root: string;
let outside: string;
let okPng: Buffer;
let secretPng: Buffer;

beforeAll(async () => {
  tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-security-images-')));
  root = path.join(tmp, 'run');
  outside = path.join(tmp, 'outside');
  fs.mkdirSync(path.join(root, 'imgs'), { recursive: true });
  fs.mkdirSync(outside);
  okPng = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#3a7' } })
    .png()
    .toBuffer();
  // The secret has a size no allowed image has: seeing 333×77 anywhere means it leaked.
  secretPng = await sharp({ create: { width: 333, height: 77, channels: 3, background: '#a33' } })
    .png()
    .toBuffer();
  fs.writeFileSync(path.join(root, 'imgs', 'ok.png'), okPng);
  fs.writeFileSync(path.join(outside, 'secret.png'), secretPng);
  fs.symlinkSync(path.join(outside, 'secret.png'), path.join(root, 'link.png'));
  fs.symlinkSync(outside, path.join(root, 'linkdir'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function trajectoryWith(urls: string[]): Trajectory {
  return Trajectory.parse({
    id: 'images',
    source: { file: path.join(root, 'run.rollscope.jsonl'), line: 1, format: 'native' },
    turns: [],
    images: urls.map((url) => ({ url })),
  });
}

async function resolveOne(
  url: string,
  extra: { allowRemoteImages?: boolean; remote?: Partial<RemoteImageLimits> } = {},
): Promise<ImageRef> {
  const t = await resolveImages(trajectoryWith([url]), { baseDir: root, roots: [root], ...extra });
  return t.images[0]!;
}

describe('local image paths stay inside the roots', () => {
  it('a path inside the roots, relative or absolute, is read (the control)', async () => {
    expect(await resolveOne('imgs/ok.png')).toMatchObject({ width: 40, height: 30, sizeFrom: 'bytes' });
    expect(await resolveOne(path.join(root, 'imgs', 'ok.png'))).toMatchObject({ width: 40, height: 30 });
    expect(await resolveOne(`file://${path.join(root, 'imgs', 'ok.png')}`)).toMatchObject({ width: 40, height: 30 });
    expect((await resolveOne(`file://${root}/imgs/o%6B.png`)).width).toBe(40); // percent-decoded once in a file: URL
  });

  const escapes: [string, () => string, RegExp][] = [
    ['a symlink to a file outside', () => 'link.png', /leads outside the folders rollscope was given/],
    ['a symlinked folder outside', () => 'linkdir/secret.png', /leads outside/],
    ['../', () => '../outside/secret.png', /leads outside/],
    ['../ from a subfolder', () => 'imgs/../../outside/secret.png', /leads outside/],
    ['an absolute path outside', () => path.join(outside, 'secret.png'), /leads outside/],
    [
      '%2e%2e in a file: URL (the URL parser folds it to ..)',
      () => `file://${root}/%2e%2e/outside/secret.png`,
      /leads outside/,
    ],
    ['%2e%2e%2f in a file: URL', () => `file://${root}/%2e%2e%2foutside%2fsecret.png`, /malformed file: URL/],
    [
      'an encoded slash in a file: URL',
      () => `file://${root}/..%2Foutside%2Fsecret.png`,
      /malformed file: URL.*encoded \//,
    ],
    [
      'percent-encoding in a plain path (a file name, not ..)',
      () => '%2e%2e/outside/secret.png',
      /image file not found/,
    ],
    ['double encoding', () => `file://${root}/%252e%252e/outside/secret.png`, /image file not found/],
    [
      'a file: URL naming another host',
      () => 'file://fileserver.invalid/outside/secret.png',
      /file: URL names another host/,
    ],
    ['a NUL byte', () => 'imgs/ok.png\u0000../../outside/secret.png', /NUL byte/],
    ['another URL scheme', () => 'ftp://127.0.0.1/secret.png', /unsupported image URL scheme "ftp:"/],
    ['a folder', () => 'imgs', /not a regular file/],
  ];
  it.each(escapes)('%s is refused and the bytes outside are never read', async (_name, url, reason) => {
    const img = await resolveOne(url());
    expect(img.unavailable).toMatch(reason);
    expect(img.width).toBeUndefined();
    expect(() => imageBytes(url(), root, [root])).toThrow(reason);
  });

  it('a FIFO planted under a root is refused without blocking the read', async () => {
    const fifo = path.join(root, 'fifo.png');
    try {
      execFileSync('mkfifo', [fifo]);
    } catch {
      return; // no mkfifo on this system: nothing to plant
    }
    expect((await resolveOne('fifo.png')).unavailable).toMatch(/not a regular file/);
  });

  it('an image file over the byte limit is refused before it is read', async () => {
    const big = path.join(root, 'big.png');
    fs.writeFileSync(big, okPng);
    fs.truncateSync(big, MAX_DATA_URL_BYTES + 1); // sparse: no 64 MiB written
    expect((await resolveOne('big.png')).unavailable).toMatch(/is 67108865 bytes, over the 67108864-byte limit/);
  });
});

describe('data: URLs and decoding', () => {
  it('an oversized data: URL is refused on its encoded length, before decoding', async () => {
    const url = `data:image/png;base64,${'A'.repeat(Math.ceil((MAX_DATA_URL_BYTES * 4) / 3) + 8)}`;
    expect((await resolveOne(url)).unavailable).toMatch(/data: URL of ~\d+ bytes is over the 67108864-byte limit/);
  });

  it('a data: URL within the limit is read, base64 or percent-encoded bytes', async () => {
    expect(await resolveOne(`data:image/png;base64,${okPng.toString('base64')}`)).toMatchObject({
      width: 40,
      height: 30,
    });
    const percent = [...okPng].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
    expect(await resolveOne(`data:image/png,${percent}`)).toMatchObject({ width: 40, height: 30 });
  });

  it('a decompression bomb (a tiny PNG claiming 100,000 × 100,000) is refused with a clear message, not decoded', async () => {
    const bomb = bombPng(100_000, 100_000);
    expect(bomb.length).toBeLessThan(200);
    const reason =
      /image claims 100000×100000 pixels, over the 178956970-pixel limit \(a decompression bomb\?\); not decoded/;
    expect((await resolveOne(`data:image/png;base64,${bomb.toString('base64')}`)).unavailable).toMatch(reason);
    fs.writeFileSync(path.join(root, 'bomb.png'), bomb);
    expect((await resolveOne('bomb.png')).unavailable).toMatch(reason);
    // Decoding (the server's previews) carries the same pixel limit: sharp refuses before allocating.
    await expect(
      sharp(bomb, { limitInputPixels: MAX_INPUT_PIXELS }).resize({ width: 64 }).png().toBuffer(),
    ).rejects.toThrow(/pixel limit/);
    // Just under the limit is a size, not a refusal (the limit is PIL's, not an arbitrary one).
    expect(await imageSize(bombPng(13_000, 13_000))).toEqual({ width: 13_000, height: 13_000 });
  });

  it('SVG is not read as an image', async () => {
    const svg = Buffer.from(
      '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><image href="file:///etc/passwd"/></svg>',
    );
    expect((await resolveOne(`data:image/svg+xml;base64,${svg.toString('base64')}`)).unavailable).toMatch(
      /not a raster image/,
    );
  });
});

/** A loopback HTTP server that counts requests per path. */
async function testServer(
  host: string,
  routes: Record<string, (req: http.IncomingMessage, res: http.ServerResponse) => void>,
) {
  const hits: string[] = [];
  const hosts: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    hosts.push(req.headers.host ?? '');
    const route = routes[req.url ?? ''];
    if (route) route(req, res);
    else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    hits,
    hosts,
    port,
    url: (p: string) => `http://${host}:${port}${p}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('remote images', () => {
  let main: Awaited<ReturnType<typeof testServer>>;
  let other: Awaited<ReturnType<typeof testServer>>;
  const onlyMain: Partial<RemoteImageLimits> = { allowAddress: (a) => a === '127.0.0.1' };
  const png = (body: () => Buffer) => (_req: http.IncomingMessage, res: http.ServerResponse) => {
    const b = body();
    res.writeHead(200, { 'Content-Type': 'image/png', 'Content-Length': b.length });
    res.end(b);
  };
  const redirect = (to: () => string) => (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(302, { Location: to() });
    res.end();
  };

  beforeAll(async () => {
    other = await testServer('127.0.0.2', { '/ok.png': png(() => okPng) });
    main = await testServer('127.0.0.1', {
      '/ok.png': png(() => okPng),
      '/bomb.png': png(() => bombPng(100_000, 100_000)),
      '/page': (_q, res) => {
        res.writeHead(200, { 'Content-Type': 'text/html' });
        res.end('<html></html>');
      },
      '/svg': (_q, res) => {
        res.writeHead(200, { 'Content-Type': 'image/svg+xml' });
        res.end('<svg/>');
      },
      '/declared-big': (_q, res) => {
        res.writeHead(200, { 'Content-Type': 'image/png', 'Content-Length': 5000 });
        res.end(Buffer.alloc(5000));
      },
      '/chunked-big': (_q, res) => {
        res.writeHead(200, { 'Content-Type': 'image/png' });
        for (let i = 0; i < 5; i++) res.write(Buffer.alloc(1000));
        res.end();
      },
      '/hang': () => undefined,
      '/to-other': redirect(() => other.url('/ok.png')),
      '/to-ftp': redirect(() => 'ftp://127.0.0.1/ok.png'),
      '/to-relative': redirect(() => '/ok.png'),
      '/loop': redirect(() => '/loop'),
    });
  });
  afterAll(async () => {
    await main.close();
    await other.close();
  });

  it('are not fetched by default: marked unavailable with the reason, and no request is made', async () => {
    const before = main.hits.length;
    const img = await resolveOne(main.url('/ok.png'));
    expect(img.unavailable).toBe(
      'remote image not fetched (rollscope fetches nothing unless --allow-remote-images is given)',
    );
    expect(img.width).toBeUndefined();
    expect(main.hits.length).toBe(before);
  });

  it('with --allow-remote-images (through the pipeline), loopback is refused by address, by IP or by name, with no request made', async () => {
    const before = main.hits.length;
    const t = trajectoryWith([
      main.url('/ok.png'),
      `http://localhost:${main.port}/ok.png`,
      `http://[::ffff:127.0.0.1]:${main.port}/ok.png`,
      `http://2130706433:${main.port}/ok.png`,
    ]);
    const checked = await analyzeTrajectory(t, { allowRemoteImages: true }, [root]);
    const reasons = checked.trajectory.images.map((i) => i.unavailable);
    expect(reasons[0]).toMatch(/refused: 127\.0\.0\.1, a loopback address/);
    expect(reasons[1]).toMatch(/refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/);
    expect(reasons[2]).toMatch(/refused: ::ffff:7f00:1/);
    expect(reasons[3]).toMatch(/refused: 127\.0\.0\.1/); // decimal IPv4 spelling
    expect(main.hits.length).toBe(before);
    // The flag reached the fetcher: without it, the reason is "not fetched".
    const off = await analyzeTrajectory(t, {}, [root]);
    expect(off.trajectory.images[0]!.unavailable).toMatch(/not fetched/);
  });

  it('only public unicast addresses pass the address check', () => {
    const refused = [
      '127.0.0.1',
      '127.9.9.9',
      '10.1.2.3',
      '172.16.5.4',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '255.255.255.255',
      '224.0.0.251',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd12:3456::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '64:ff9b::a00:1',
      '2002:7f00:1::',
      'not-an-ip',
    ];
    const allowed = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '2a00:1450:4001::1'];
    expect(refused.filter(isPublicAddress)).toEqual([]);
    expect(allowed.filter((a) => !isPublicAddress(a))).toEqual([]);
  });

  it('a permitted server: the image, its size and content type', async () => {
    const got = await fetchRemoteImage(main.url('/ok.png'), onlyMain);
    expect(got).toMatchObject({ width: 40, height: 30, contentType: 'image/png', url: main.url('/ok.png') });
    expect(got.bytes.equals(okPng)).toBe(true);
  });

  it.each([
    ['a non-image content type', '/page', {}, /content type "text\/html" is not a raster image/],
    ['SVG', '/svg', {}, /content type "image\/svg\+xml"/],
    [
      'a declared length over the byte limit',
      '/declared-big',
      { maxBytes: 1000 },
      /5000 bytes declared, over the 1000-byte limit/,
    ],
    ['a streamed body over the byte limit', '/chunked-big', { maxBytes: 2500 }, /over the 2500-byte limit/],
    ['a server that never answers', '/hang', { timeoutMs: 300 }, /timed out after 300 ms/],
    ['a decompression bomb', '/bomb.png', {}, /claims 100000×100000 pixels/],
    ['HTTP 404', '/missing', {}, /HTTP 404/],
    ['a redirect to another (refused) address', '/to-other', {}, /refused: 127\.0\.0\.2, a loopback address/],
    ['a redirect to another scheme', '/to-ftp', {}, /only http and https are fetched, not ftp:/],
    ['a redirect loop', '/loop', {}, /more than 5 redirects/],
  ] as const)('refused: %s', async (_name, route, limits, reason) => {
    const otherBefore = other.hits.length;
    await expect(fetchRemoteImage(main.url(route), { ...onlyMain, ...limits })).rejects.toThrow(reason);
    expect(other.hits.length).toBe(otherBefore); // a refused redirect target is never contacted
  });

  it('a redirect to a permitted place is followed, and checked like the first hop', async () => {
    const got = await fetchRemoteImage(main.url('/to-relative'), onlyMain);
    expect(got).toMatchObject({ width: 40, url: main.url('/ok.png') });
  });

  it('credentials in the URL are refused', async () => {
    await expect(fetchRemoteImage(`http://user:pw@127.0.0.1:${main.port}/ok.png`, onlyMain)).rejects.toThrow(
      /carries credentials/,
    );
  });

  it('DNS rebinding: the connection goes to the address that was checked; one refused answer refuses the host', async () => {
    let lookups = 0;
    // First answer permitted, every later one not: a fetcher that resolves again to connect would reach 127.0.0.2.
    const rebinding = async () =>
      lookups++ === 0 ? [{ address: '127.0.0.1', family: 4 as const }] : [{ address: '127.0.0.2', family: 4 as const }];
    const otherBefore = other.hits.length;
    const got = await fetchRemoteImage(`http://images.test:${main.port}/ok.png`, { ...onlyMain, lookup: rebinding });
    expect(got.width).toBe(40);
    expect(lookups).toBe(1);
    expect(main.hosts.at(-1)).toBe(`images.test:${main.port}`);
    expect(other.hits.length).toBe(otherBefore);

    const mixed = async () => [
      { address: '127.0.0.1', family: 4 as const },
      { address: '127.0.0.2', family: 4 as const },
    ];
    await expect(
      fetchRemoteImage(`http://images.test:${main.port}/ok.png`, { ...onlyMain, lookup: mixed }),
    ).rejects.toThrow(/images\.test resolves to 127\.0\.0\.2/);
  });

  it('the CLI takes --allow-remote-images', () => {
    expect(parse(['run.jsonl', '--allow-remote-images'], COMMON_OPTIONS).values['allow-remote-images']).toBe(true);
    expect(parse(['run.jsonl'], COMMON_OPTIONS).values['allow-remote-images']).toBe(false);
  });
});
