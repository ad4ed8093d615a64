// The head of a long token stream (`stream?head=N`): the first screen the app draws before the
// whole stream arrives. It must be exactly the start of the whole stream, never cut inside an
// image's pad run or a character split across tokens, and say how long the whole is.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenStream } from '../server/http/api.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { headEnd, tokenStream } from '../server/http/views.ts';
import { partialByteJoins } from '../server/profiles/tokenizer.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { IDS, writeFixtureRun } from './e2e/fixture.ts';

let store: RunStore;
let server: RunningServer;

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-head-'));
  await writeFixtureRun(dir);
  const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-app-'));
  fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');
  store = openRunStore([dir], { pollMs: 0 });
  await store.ready;
  server = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
});

afterAll(async () => {
  await server?.close();
});

/** What the whole stream says about its first `n` tokens. */
function prefixOf(whole: TokenStream, n: number) {
  return {
    ids: whole.ids.slice(0, n),
    lossMask: whole.lossMask?.slice(0, n) ?? null,
    logprobs: whole.logprobs?.slice(0, n) ?? null,
    badLogprobs: whole.badLogprobs.filter((i) => i < n),
    turns: whole.turns.filter((m) => m.index < n),
    vision: whole.vision.filter((v) => v.start < n),
    joins: whole.joins.filter((j) => j.start < n),
  };
}

describe('the head of a stream', () => {
  it('is the start of the whole stream for every head size, never inside a pad run', async () => {
    const c = (await store.get(IDS.clean))!;
    for (const [name, turn] of [
      ['canonical', -1],
      ['prompt', 0],
      ['prompt', 1],
    ] as const) {
      const whole = TokenStream.parse(tokenStream(c, name, turn, {}));
      expect(whole.total).toBeUndefined();
      expect(whole.vision.length).toBeGreaterThan(0);
      for (let head = 1; head <= whole.ids.length + 1; head++) {
        const h = TokenStream.parse(tokenStream(c, name, turn, {}, head));
        const n = h.ids.length;
        expect(h.total).toBe(whole.ids.length);
        expect(n).toBeGreaterThanOrEqual(Math.min(head, whole.ids.length));
        expect(h).toMatchObject(prefixOf(whole, n));
        for (const id of h.ids) expect(h.pieces[id]).toBe(whole.pieces[id]);
        for (const v of h.vision) expect(v.padStart + v.padLength <= n || v.padStart >= n).toBe(true);
        // Moved past a pad run only: a head that is not the whole ends where asked or where an image's pads end.
        if (n > head && n < whole.ids.length)
          expect(whole.vision.some((v) => v.padStart + v.padLength === n)).toBe(true);
      }
    }
  });

  it('is answered by the stream route with `head`, and a bad head is refused', async () => {
    const base = `${server.url}api/trajectories/${IDS.clean}/stream?name=canonical`;
    const whole = TokenStream.parse(await (await fetch(base)).json());
    const h = TokenStream.parse(await (await fetch(`${base}&head=10`)).json());
    expect(h.ids).toEqual(whole.ids.slice(0, 10));
    expect(h.total).toBe(whole.ids.length);
    const bad = await fetch(`${base}&head=0`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/head/);
  });

  it('does not split a character byte-level BPE spread over tokens', async () => {
    const profile = loadProfile('qwen2.5-vl');
    const ids = await profile.tokenizer.encode('Angle △ABC ≥ 90°: 漢字 🙂 done');
    const joins = partialByteJoins(profile.tokenizer, ids);
    expect(joins.length).toBeGreaterThan(0);
    for (let head = 1; head <= ids.length; head++) {
      const n = headEnd(profile, ids, [], head);
      const inside = joins.find((j) => j.start < head && head < j.end);
      expect(n).toBe(inside ? inside.end : head);
    }
  });
});
