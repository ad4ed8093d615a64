// Fetching an image a rollout names by http(s) URL, only with `--allow-remote-images`. A rollout
// file is untrusted and rollscope may run on a GPU box inside a private network, so a URL in a
// record must not become a request to an internal service (SSRF; docs/security.md §Images):
// only http/https, every address the name resolves to must be public, the connection is pinned
// to the address that was checked (a second DNS answer cannot rebind it to 127.0.0.1), every
// redirect is checked again the same way, and time, bytes, content type and pixels are bounded.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { LookupFunction } from 'node:net';
import { ImageUnavailable, imageSize, MAX_IMAGE_BYTES, MAX_INPUT_PIXELS } from './limits.ts';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export interface RemoteImageLimits {
  /** Whole fetch, redirects included. */
  timeoutMs: number;
  maxBytes: number;
  maxPixels: number;
  maxRedirects: number;
  /**
   * Which resolved addresses may be connected to. Default: public unicast only
   * (`isPublicAddress`). Tests replace it to reach a loopback test server; nothing else should.
   */
  allowAddress?: (address: string, family: 4 | 6) => boolean;
  /** Name resolution (default: node:dns lookup, every address). A seam for the rebinding test. */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
}

export function defaultRemoteLimits(): RemoteImageLimits {
  return { timeoutMs: 10_000, maxBytes: MAX_IMAGE_BYTES, maxPixels: MAX_INPUT_PIXELS, maxRedirects: 5 };
}

export interface RemoteImage {
  bytes: Buffer;
  width: number;
  height: number;
  contentType: string;
  /** The URL the bytes came from, after redirects. */
  url: string;
}

/** Ranges no fetch may reach: loopback, private, link-local, shared, reserved, multicast, and v6 forms that embed v4. */
// Two lists: a BlockList also matches IPv4 addresses against IPv6 rules (as ::ffff:a.b.c.d), so
// one list holding ::ffff:0:0/96 would refuse every IPv4 address.
const NOT_PUBLIC_V4 = new net.BlockList();
const NOT_PUBLIC_V6 = new net.BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private (RFC 1918)
  ['100.64.0.0', 10], // carrier-grade NAT (RFC 6598)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, including cloud metadata 169.254.169.254
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  NOT_PUBLIC_V4.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['::ffff:0:0', 96], // IPv4-mapped: would reach any v4 address, private ones included
  ['64:ff9b::', 96], // NAT64 (embeds v4)
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard
  ['2001::', 23], // IETF protocol assignments (Teredo embeds v4)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds v4)
  ['fc00::', 7], // unique local (private)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  NOT_PUBLIC_V6.addSubnet(network, prefix, 'ipv6');
}

/** True for a public unicast address: the only kind a fetch named by a rollout may reach. */
export function isPublicAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 0) return false;
  return family === 4 ? !NOT_PUBLIC_V4.check(address, 'ipv4') : !NOT_PUBLIC_V6.check(address, 'ipv6');
}

function describeAddress(address: string): string {
  if (/^127\.|^::1$/.test(address)) return 'a loopback address';
  if (/^169\.254\.|^fe[89ab]/i.test(address)) return 'a link-local address';
  if (/^10\.|^192\.168\.|^172\.(1[6-9]|2\d|3[01])\.|^f[cd]/i.test(address)) return 'a private address';
  return 'not a public address';
}

async function systemLookup(hostname: string): Promise<ResolvedAddress[]> {
  const all = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
}

/** Resolve the URL's host and check every address; the first one is where the connection goes. */
async function checkedAddress(target: URL, limits: RemoteImageLimits): Promise<ResolvedAddress> {
  const host = target.hostname.replace(/^\[|\]$/g, '');
  const literal = net.isIP(host);
  let addresses: ResolvedAddress[];
  if (literal) addresses = [{ address: host, family: literal === 6 ? 6 : 4 }];
  else {
    try {
      addresses = await (limits.lookup ?? systemLookup)(host);
    } catch (e) {
      throw new ImageUnavailable(
        `remote image host ${host} does not resolve (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      );
    }
  }
  if (addresses.length === 0) throw new ImageUnavailable(`remote image host ${host} has no address`);
  const allowed = limits.allowAddress ?? ((a: string) => isPublicAddress(a));
  // Any refused address refuses the host: which one a connection would pick is not ours to choose.
  const refused = addresses.find((a) => !allowed(a.address, a.family));
  if (refused) {
    throw new ImageUnavailable(
      `remote image ${target.origin} refused: ${host === refused.address ? '' : `${host} resolves to `}${refused.address}, ${describeAddress(refused.address)}`,
    );
  }
  return addresses[0]!;
}

function checkUrl(raw: string): URL {
  let target: URL;
  try {
    target = new URL(raw);
  } catch {
    throw new ImageUnavailable(`malformed image URL: ${raw.slice(0, 200)}`);
  }
  if (target.protocol !== 'http:' && target.protocol !== 'https:')
    throw new ImageUnavailable(`remote image refused: only http and https are fetched, not ${target.protocol}`);
  if (target.username || target.password)
    throw new ImageUnavailable('remote image refused: the URL carries credentials');
  return target;
}

type Hop = { redirect: string } | { bytes: Buffer; contentType: string };

/** One request, connected to the checked address only (a custom lookup, no agent, no proxy). */
function request(target: URL, pinned: ResolvedAddress, limits: RemoteImageLimits, deadline: number): Promise<Hop> {
  return new Promise<Hop>((resolve, reject) => {
    const remaining = deadline - Date.now();
    if (remaining <= 0) return reject(new ImageUnavailable(`remote image timed out after ${limits.timeoutMs} ms`));
    const pin: LookupFunction = (_hostname, options, callback) => {
      // Node asks for every address when it races IPv4/IPv6 (autoSelectFamily); answer the checked one only.
      if ((options as { all?: boolean }).all)
        (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, [pinned]);
      else callback(null, pinned.address, pinned.family);
    };
    const host = target.hostname.replace(/^\[|\]$/g, '');
    const get = target.protocol === 'https:' ? https.request : http.request;
    const req = get({
      protocol: target.protocol,
      hostname: host,
      port: target.port || undefined,
      path: `${target.pathname}${target.search}`,
      method: 'GET',
      agent: false,
      lookup: pin,
      ...(target.protocol === 'https:' && !net.isIP(host) ? { servername: host } : {}),
      headers: { Accept: 'image/*', 'Accept-Encoding': 'identity', 'User-Agent': 'rollscope' },
    });
    const timer = setTimeout(
      () => req.destroy(new ImageUnavailable(`remote image timed out after ${limits.timeoutMs} ms`)),
      remaining,
    );
    const fail = (e: Error) => {
      clearTimeout(timer);
      req.destroy();
      reject(
        e instanceof ImageUnavailable
          ? e
          : new ImageUnavailable(`remote image fetch failed: ${(e as NodeJS.ErrnoException).code ?? e.message}`),
      );
    };
    req.on('error', fail);
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400 && res.headers.location) {
        res.resume();
        clearTimeout(timer);
        req.destroy();
        return resolve({ redirect: res.headers.location });
      }
      if (status < 200 || status >= 300) return fail(new ImageUnavailable(`remote image: HTTP ${status}`));
      const contentType = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      // SVG is XML a renderer may follow links from, and no Qwen-VL processor (PIL) reads it.
      if (!contentType.startsWith('image/') || contentType === 'image/svg+xml') {
        return fail(
          new ImageUnavailable(`remote image refused: content type "${contentType || 'none'}" is not a raster image/*`),
        );
      }
      const encoding = (res.headers['content-encoding'] ?? 'identity').toLowerCase();
      if (encoding !== 'identity')
        return fail(new ImageUnavailable(`remote image refused: content encoding "${encoding}" (asked for identity)`));
      const declared = Number(res.headers['content-length'] ?? NaN);
      if (declared > limits.maxBytes)
        return fail(
          new ImageUnavailable(
            `remote image refused: ${declared} bytes declared, over the ${limits.maxBytes}-byte limit`,
          ),
        );
      const parts: Buffer[] = [];
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > limits.maxBytes)
          fail(new ImageUnavailable(`remote image refused: over the ${limits.maxBytes}-byte limit`));
        else parts.push(chunk);
      });
      res.on('error', fail);
      res.on('end', () => {
        clearTimeout(timer);
        if (received <= limits.maxBytes) resolve({ bytes: Buffer.concat(parts), contentType });
      });
    });
    req.end();
  });
}

/**
 * Fetch an image by http(s) URL within the limits; throws ImageUnavailable saying why not
 * (scheme, address, timeout, size, content type, pixels, redirects).
 */
export async function fetchRemoteImage(url: string, overrides: Partial<RemoteImageLimits> = {}): Promise<RemoteImage> {
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  const limits: RemoteImageLimits = { ...defaultRemoteLimits(), ...defined };
  const deadline = Date.now() + limits.timeoutMs;
  let target = checkUrl(url);
  for (let hops = 0; ; hops++) {
    const pinned = await checkedAddress(target, limits);
    const hop = await request(target, pinned, limits, deadline);
    if ('redirect' in hop) {
      if (hops >= limits.maxRedirects)
        throw new ImageUnavailable(`remote image refused: more than ${limits.maxRedirects} redirects`);
      let next: string;
      try {
        next = new URL(hop.redirect, target).href;
      } catch {
        throw new ImageUnavailable(`remote image: malformed redirect to ${hop.redirect.slice(0, 200)}`);
      }
      target = checkUrl(next); // the next hop is checked like the first: scheme, then address
      continue;
    }
    const size = await imageSize(hop.bytes, limits.maxPixels);
    return { bytes: hop.bytes, ...size, contentType: hop.contentType, url: target.href };
  }
}
