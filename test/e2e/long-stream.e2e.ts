// A stream long enough to come in two answers (its head, then the whole; app/stores/trajectory.ts
// HEAD_TOKENS): the first screen is drawn from the head, the whole replaces it, and a link to a
// token past the head still opens that token.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TokenStream, TrajectoryDetail } from '../../server/http/api.ts';
import { generateRun } from '../../bench/generate.ts';
import { HEAD_TOKENS } from '../../app/stores/trajectory.ts';
import { openInspector, rowsDrawn, type InspectorSession } from './support.ts';

const ID = 'step0-p0-s0';
let session: InspectorSession;
let dir: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-long-'));
  const file = path.join(dir, 'long.rollscope.jsonl');
  await generateRun({
    out: file,
    trajectories: 1,
    groupSize: 1,
    distinct: 1,
    faultyShare: 0,
    turns: 6,
    tokensPerTurn: 2500,
    imagesPerTrajectory: 3,
  });
  session = await openInspector({ serveArgs: [file] });
});

afterAll(async () => {
  await session?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function api<T>(p: string): Promise<T> {
  const res = await fetch(session.server.url + p);
  expect(res.status, p).toBe(200);
  return (await res.json()) as T;
}

describe('a long token stream', () => {
  it('is drawn from its head first, then whole; a token past the head opens', async () => {
    const detail = await api<TrajectoryDetail>(`api/trajectories/${ID}`);
    const length = detail.streams.find((s) => s.name === 'canonical')!.length;
    // Long enough to come in two answers, or this test proves nothing.
    expect(length).toBeGreaterThan(2 * HEAD_TOKENS);
    const whole = await api<TokenStream>(`api/trajectories/${ID}/stream?name=canonical`);
    const { page, server } = session;
    const requests: string[] = [];
    page.on('request', (r) => {
      if (r.url().includes('/stream')) requests.push(new URL(r.url()).search);
    });
    await page.goto(`${server.url}#/t/${encodeURIComponent(ID)}?view=stream`);
    // The first chips are the whole stream's.
    await page.locator('.tok[data-i="1"]').waitFor();
    expect(await page.locator('.tok[data-i="1"]').getAttribute('title')).toContain(`id ${whole.ids[1]}`);
    const toolbar = page.locator('.stream .toolbar');
    await expect.poll(() => toolbar.textContent()).toContain(`${length.toLocaleString('en-US')} tokens`);
    await expect.poll(() => toolbar.textContent()).not.toContain('loading the rest');
    // The head first, then the whole; each asked for once.
    expect(requests).toEqual([`?name=canonical&turn=-1&head=${HEAD_TOKENS}`, '?name=canonical&turn=-1']);
    // A link to a token past the head: opened in a fresh page, it waits for the whole stream.
    const token = length - 5;
    const fresh = await session.browser.newPage({ viewport: { width: 1440, height: 900 } });
    await fresh.goto(`${server.url}#/t/${encodeURIComponent(ID)}?token=${token}`);
    await fresh.locator(`.tok.selected[data-i="${token}"]`).waitFor();
    expect(await fresh.locator('[data-testid=selected-token]').textContent()).toContain(
      `token #${token} · id ${whole.ids[token]}`,
    );
    await fresh.close();
  });

  it('scrolled fast, shows rows as text first and ends with every row in view drawn as chips', async () => {
    const { page, server } = session;
    await page.goto(`${server.url}#/t/${encodeURIComponent(ID)}?view=stream`);
    const toolbar = page.locator('.stream .toolbar');
    await expect.poll(() => toolbar.textContent()).not.toContain('loading the rest');
    await rowsDrawn(page);
    // A screen per frame: rows come and go before their turn, and mount as text (drawn-soon.ts).
    const sawText = await page.evaluate(async () => {
      const el = document.querySelector('.rows')!;
      let text = 0;
      for (let i = 0; i < 60; i++) {
        el.scrollTop += el.clientHeight * 0.9;
        await new Promise((r) => requestAnimationFrame(r));
        text += document.querySelectorAll('.rowtext').length;
      }
      return text;
    });
    expect(sawText).toBeGreaterThan(0);
    await rowsDrawn(page);
    expect(await page.locator('.rowtext').count()).toBe(0);
    // The rows in view are chips of the tokens there, in order.
    const ids = await page
      .locator('.tok[data-i]')
      .evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-i'))));
    expect(ids.length).toBeGreaterThan(100);
    expect(ids.every((v, k) => k === 0 || v > ids[k - 1]!)).toBe(true);
    expect(ids[0]).toBeGreaterThan(HEAD_TOKENS);
  });
});
