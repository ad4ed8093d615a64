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
import { ByteLru, hashIds, SHARED_CACHE_ENV } from '../server/util/shared-cache.ts';

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
