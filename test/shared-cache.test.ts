// The caches of the work a run's samples share (server/util/shared-cache.ts): bounded in bytes,
// answering only for what they were asked before (a hash hit is checked against the ids or the
// URL), and never changing a report: `check --json` over every fixture and over generated runs
// (the standard run's layout, GRPO groups repeated; and a run of distinct prompts, no groups) is
// the same bytes with the caches on, off, and so small that they churn.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { generateRun, STANDARD_RUN } from '../bench/generate.ts';
import { nonCanonicalSpans, splitVerdictCacheStats } from '../server/analysis/canonical-split.ts';
import { inlineImageCacheStats, inlineImageKey, resolveImages } from '../server/images/resolve.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import {
  ByteLru,
  hashIds,
  parseSharedCacheMb,
  SHARED_CACHE_ENV,
  SharedCacheSettingError,
  sharedCacheBytes,
} from '../server/util/shared-cache.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('ByteLru', () => {
  it('holds at most its bound in bytes, dropping the least recently used first', () => {
    const lru = new ByteLru<string, number>(100);
    lru.set('a', 1, 40);
    lru.set('b', 2, 40);
    expect(lru.get('a')).toBe(1); // now b is the least recent
    lru.set('c', 3, 40);
    expect(lru.bytes).toBe(80);
    expect(lru.get('b')).toBeUndefined();
    expect([lru.get('a'), lru.get('c')]).toEqual([1, 3]);
    lru.set('big', 4, 101); // larger than the whole bound: not kept, nothing else dropped
    expect([lru.get('big'), lru.size]).toEqual([undefined, 2]);
    expect(lru.get('a', () => false)).toBeUndefined(); // a hit its check refuses is a miss
    expect(new ByteLru(0).enabled).toBe(false);
  });

  it('hashes ids by value and position', () => {
    expect(hashIds([1, 2, 3])).toBe(hashIds([9, 1, 2, 3, 9], 1, 4));
    expect(hashIds([1, 2, 3])).not.toBe(hashIds([3, 2, 1]));
    expect(hashIds([0])).not.toBe(hashIds([0, 0]));
  });
});

describe(`${SHARED_CACHE_ENV}: a number of MB >= 0, anything else an error`, () => {
  const BAD = ['abc', '-1', '1e400', 'Infinity', '0x10', '12MB', 'NaN'];

  it('unset or empty is the default, 0 turns the caches off, a decimal is MB', () => {
    expect(parseSharedCacheMb(undefined)).toBe(48);
    expect(parseSharedCacheMb('')).toBe(48);
    expect(parseSharedCacheMb('  ')).toBe(48);
    expect(parseSharedCacheMb('0')).toBe(0);
    expect(parseSharedCacheMb(' 12 ')).toBe(12);
    expect(parseSharedCacheMb('0.02')).toBe(0.02);
    expect(parseSharedCacheMb('1e2')).toBe(100);
    const saved = process.env[SHARED_CACHE_ENV];
    try {
      process.env[SHARED_CACHE_ENV] = '0';
      expect(sharedCacheBytes()).toBe(0);
      expect(new ByteLru(sharedCacheBytes()).enabled).toBe(false);
      process.env[SHARED_CACHE_ENV] = '2';
      expect(sharedCacheBytes()).toBe(2 * 1024 * 1024);
      process.env[SHARED_CACHE_ENV] = 'abc';
      expect(() => sharedCacheBytes()).toThrow(SharedCacheSettingError);
    } finally {
      if (saved === undefined) delete process.env[SHARED_CACHE_ENV];
      else process.env[SHARED_CACHE_ENV] = saved;
    }
  });

  it.each(BAD)('%s is an error naming the variable, the value and what it takes', (value) => {
    expect(() => parseSharedCacheMb(value)).toThrow(SharedCacheSettingError);
    expect(() => parseSharedCacheMb(value)).toThrow(
      `${SHARED_CACHE_ENV}=${JSON.stringify(value)} is not a cache size: it takes a number of MB >= 0`,
    );
  });

  const rollscope = (mb: string | undefined, args: string[], timeout = 120_000) => {
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
    if (mb === undefined) delete env[SHARED_CACHE_ENV];
    else env[SHARED_CACHE_ENV] = mb;
    return spawnSync(process.execPath, ['bin/rollscope.js', ...args], { cwd: ROOT, encoding: 'utf8', timeout, env });
  };
  const FIXTURE = 'test/fixtures/slime/samples.jsonl';
  const oneLineError = (r: ReturnType<typeof rollscope>, command: string, value: string) => {
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `rollscope ${command}: ${SHARED_CACHE_ENV}=${JSON.stringify(value)} is not a cache size: it takes a number of MB >= 0 ` +
        '(0 turns the shared-work caches off; unset or empty: 48)\n',
    );
  };

  it('check exits with status 2 and one line before reading anything', () => {
    for (const value of ['abc', '-1', '1e400'])
      oneLineError(rollscope(value, ['check', FIXTURE, '--json']), 'check', value);
    // Workers are never started with it: the main thread refuses it first.
    oneLineError(rollscope('abc', ['check', FIXTURE, '--workers', '2']), 'check', 'abc');
    // --help still answers.
    expect(rollscope('abc', ['check', '--help']).status).toBe(0);
  }, 240_000);

  it('export and serve refuse it too (serve before it listens)', () => {
    const out = path.join(os.tmpdir(), `rollscope-shared-cache-${process.pid}.parquet`);
    oneLineError(rollscope('-1', ['export', FIXTURE, '--out', out, '--format', 'parquet']), 'export', '-1');
    expect(fs.existsSync(out)).toBe(false);
    oneLineError(rollscope('abc', ['serve', FIXTURE, '--no-open', '--port', '0'], 60_000), 'serve', 'abc');
  }, 240_000);

  it('a good value, empty and 0 check as before, on workers too', () => {
    const unset = rollscope(undefined, ['check', FIXTURE, '--json', '--workers', '0']);
    expect(unset.stderr).toBe('');
    expect([0, 1]).toContain(unset.status);
    for (const [value, workers] of [
      ['12', '2'],
      ['', '0'],
      ['0', '2'],
    ] as const) {
      const r = rollscope(value, ['check', FIXTURE, '--json', '--workers', workers]);
      expect(r.stderr).toBe('');
      expect(r.status).toBe(unset.status);
      expect(r.stdout).toBe(unset.stdout);
    }
  }, 240_000);
});

describe('canonical-split verdicts by piece', () => {
  const tok = loadProfile('qwen2.5-vl').tokenizer;

  it('a piece seen before is not decoded again, and its spans are the same (fresh copies)', async () => {
    const text = 'The answer will be 42, as the figure shows.';
    const ids = [...(await tok.encode(text))];
    const will = (await tok.encode(' will'))[0]!;
    const at = ids.indexOf(will);
    expect(at).toBeGreaterThan(0);
    // The sampler's split " w" + "ill" of the canonical " will".
    const split = [
      ...ids.slice(0, at),
      ...(await tok.encode(' w')),
      ...(await tok.encode('ill')),
      ...ids.slice(at + 1),
    ];
    expect(split.length).toBe(ids.length + 1);
    const before = splitVerdictCacheStats();
    const first = await nonCanonicalSpans(tok, split);
    expect(first).toEqual([{ at, stored: split.slice(at, at + 2), canonical: [will] }]);
    first[0]!.stored.push(-1); // a caller's change reaches no cached verdict

    const decode = vi.spyOn(tok, 'decodeSync');
    try {
      const again = await nonCanonicalSpans(tok, [...split]);
      expect(again).toEqual([{ at, stored: split.slice(at, at + 2), canonical: [will] }]);
      expect(decode).not.toHaveBeenCalled();
    } finally {
      decode.mockRestore();
    }
    const after = splitVerdictCacheStats();
    expect(after.hits).toBeGreaterThan(before.hits);
    expect(after.bytes).toBeGreaterThan(0);
  });

  it('a cached piece ending the generation is still left out of a cut turn, and kept in a whole one', async () => {
    const will = (await tok.encode(' will'))[0]!;
    const split = [...(await tok.encode('It')), ...(await tok.encode(' w')), ...(await tok.encode('ill'))];
    expect(await nonCanonicalSpans(tok, split)).toEqual([{ at: 1, stored: split.slice(1), canonical: [will] }]);
    expect(await nonCanonicalSpans(tok, split, { cut: true })).toEqual([]);
    expect(await nonCanonicalSpans(tok, split)).toHaveLength(1);
  });
});

describe('inline image sizes by URL', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-shared-cache-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const resolve = async (url: string) =>
    (
      await resolveImages(
        Trajectory.parse({
          id: 'img',
          source: { file: path.join(dir, 'run.jsonl'), line: 1, format: 'native' },
          turns: [],
          images: [{ url }],
        }),
        { baseDir: dir, roots: [dir] },
      )
    ).images[0]!;

  it('the same bytes are decoded once; other bytes under the same sampled key get their own answer', async () => {
    const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const url = `data:image/png;base64,${png.toString('base64')}`;
    // The same PNG with its stated width changed, at a byte the sampled key does not read.
    let other: string | undefined;
    for (let byte = 16; byte < 24 && other === undefined; byte++) {
      const changed = Buffer.from(png);
      changed[byte] = changed[byte]! ^ 0x01;
      const candidate = `data:image/png;base64,${changed.toString('base64')}`;
      if (candidate !== url && inlineImageKey(candidate) === inlineImageKey(url)) other = candidate;
    }
    expect(other).toBeDefined();

    const before = inlineImageCacheStats();
    const a = await resolve(url);
    expect(a).toMatchObject({ width: 40, height: 30, sizeFrom: 'bytes' });
    const again = await resolve(`data:image/png;base64,${png.toString('base64')}`); // another string, same text
    expect(again).toEqual(a);
    expect(inlineImageCacheStats().hits).toBe(before.hits + 1);
    const b = await resolve(other!);
    expect(b).not.toEqual(a);
    expect(inlineImageCacheStats().hits).toBe(before.hits + 1);
  });
});

describe('check --json is the same bytes with the shared caches on, off and churning', () => {
  let dir: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-shared-cache-'));
    // The standard run's layout (slime, images inline, three generations, groups repeated)...
    await generateRun({ ...STANDARD_RUN, trajectories: 96, out: path.join(dir, 'standard.jsonl') });
    // ...and every prompt its own: no groups, each sample's words swapped.
    await generateRun({
      ...STANDARD_RUN,
      groupSize: 1,
      vary: 'swap',
      distinct: 24,
      trajectories: 64,
      out: path.join(dir, 'distinct.jsonl'),
    });
  }, 240_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const check = (mb: string | undefined) => {
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
    if (mb === undefined) delete env[SHARED_CACHE_ENV];
    else env[SHARED_CACHE_ENV] = mb;
    const r = spawnSync(
      process.execPath,
      ['bin/rollscope.js', 'check', '--json', '--workers', '0', 'test/fixtures', dir],
      { cwd: ROOT, encoding: 'utf8', timeout: 240_000, env, maxBuffer: 1 << 28 },
    );
    expect(r.stderr).toBe('');
    return r.stdout;
  };

  it('over every fixture and both generated runs', () => {
    const on = check(undefined);
    const report = JSON.parse(on) as { trajectories: { source: { file: string } }[] };
    const files = new Set(report.trajectories.map((t) => path.basename(t.source.file)));
    expect(files.has('standard.jsonl') && files.has('distinct.jsonl')).toBe(true);
    expect(report.trajectories.length).toBeGreaterThan(400);
    expect(check('0')).toBe(on);
    expect(check('0.02')).toBe(on); // ~20 KB: the image cache keeps nothing, the verdicts churn
  }, 600_000);
});
