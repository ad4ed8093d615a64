// The run page at 1,000 steps (test/fixtures/generate-long-run.ts, generated into a temp folder):
// every trend drawn with values on its axes, a hover readout naming the step and its value, a
// drag on one trend zooming them all, and a brush over the step strip that opens the overview
// listing exactly the trajectories of the brushed steps (`where=step >= A and step <= B`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrajectoryList } from '../../server/http/api.ts';
import { LONG_RUN, writeLongRun } from '../fixtures/generate-long-run.ts';
import { SCREENSHOT_DIR, axeViolations, openInspector, type InspectorSession, type ServerProcess } from './support.ts';

let dir: string;
let session: InspectorSession;
let server: ServerProcess;
let page: Page;

const TRENDS = ['findings', 'prefix', 'placeholder', 'reward', 'length', 'truncated', 'degenerate', 'logprobs'];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-e2e-long-'));
  const run = await writeLongRun(dir);
  session = await openInspector({ serveArgs: [run.file] });
  ({ server, page } = session);
});

afterAll(async () => {
  await session?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** The readout under a chart: its legend's label → value, as a person reads it. */
async function readout(testId: string): Promise<Record<string, string>> {
  return page.$$eval(`[data-testid="${testId}"] .u-legend .u-series`, (rows) =>
    Object.fromEntries(
      rows
        .filter((r) => (r as HTMLElement).style.display !== 'none')
        .map((r) => [
          r.querySelector('.u-label')?.textContent?.replace(/:$/, '').trim() ?? '',
          r.querySelector('.u-value')?.textContent?.trim() ?? '',
        ]),
    ),
  );
}

async function plotArea(testId: string) {
  const over = page.locator(`[data-testid="${testId}"] .u-over`);
  await over.scrollIntoViewIfNeeded();
  const box = await over.boundingBox();
  if (!box) throw new Error(`no plot area in ${testId}`);
  return box;
}

describe('the run page at 1,000 steps', () => {
  it('draws every trend with values on both axes', async () => {
    await page.goto(`${server.url}#/run`);
    for (const key of TRENDS) await page.waitForSelector(`[data-testid="trend-${key}"] canvas`);
    for (const key of TRENDS) {
      const root = page.locator(`[data-testid="trend-${key}"] .uplot`);
      const steps = (await root.getAttribute('data-axis-0'))!.split(' ').map(Number);
      // The x axis spans the run in a handful of labelled steps.
      expect(steps.length, key).toBeGreaterThanOrEqual(4);
      expect(steps.length, key).toBeLessThanOrEqual(20);
      expect(Math.min(...steps), key).toBeGreaterThanOrEqual(0);
      expect(Math.max(...steps), key).toBeLessThan(LONG_RUN.steps);
      expect(Math.max(...steps) - Math.min(...steps), key).toBeGreaterThanOrEqual(LONG_RUN.steps / 2);
      expect((await root.getAttribute('data-axis-1'))?.length, key).toBeGreaterThan(0);
    }
    // The planted stretch of prefix breaks reads off the axis as a rate.
    expect(await page.locator('[data-testid="trend-prefix"] .uplot').getAttribute('data-axis-1')).toContain('%');
    // At 1,000 steps the step table lists the first 200 and says so.
    expect(await page.locator('table.steps tbody tr').count()).toBe(200);
    await expect.poll(() => page.locator('[data-testid=steps-table-note]').textContent()).toContain('1000 steps');
    // axe-core: no serious or critical accessibility violation on the page at 1,000 steps.
    expect(await axeViolations(page)).toEqual([]);
  });

  it('reads out the step under the cursor and its value on every trend at once', async () => {
    const box = await plotArea('trend-prefix');
    // Inside the planted break stretch (steps 400–479).
    const at = box.x + (box.width * 440) / (LONG_RUN.steps - 1);
    await page.mouse.move(at, box.y + box.height / 2);
    await expect.poll(async () => Number((await readout('trend-prefix')).step)).toBeGreaterThan(420);
    const prefix = await readout('trend-prefix');
    const step = Number(prefix.step);
    expect(step).toBeLessThan(460);
    expect(prefix['prefix breaks']).toMatch(/^\d+(\.\d+)?%$/);
    // The same step on the other trends (one cursor for the page).
    const reward = await readout('trend-reward');
    expect(Number(reward.step)).toBe(step);
    expect(reward.mean).toMatch(/^(\d|—)/);
    const steps = (await (await fetch(`${server.url}api/run/steps`)).json()) as {
      steps: { step: number; trends: { prefixBreakShare: number } }[];
    };
    const share = steps.steps.find((s) => s.step === step)!.trends.prefixBreakShare;
    expect(prefix['prefix breaks']).toBe(`${Number((share * 100).toPrecision(3))}%`);
    // The README's picture: the page with the cursor in the planted break stretch.
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'run-1000-steps.png') });
  });

  it('zooms every trend with a drag on one, and shows all again', async () => {
    const box = await plotArea('trend-reward');
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + box.width * 0.2, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.3, y, { steps: 5 });
    await page.mouse.up();
    await page.locator('[data-testid=zoom-reset]').waitFor();
    const ticks = async (key: string) =>
      (await page.locator(`[data-testid="trend-${key}"] .uplot`).getAttribute('data-axis-0'))!.split(' ').map(Number);
    for (const key of ['reward', 'findings', 'logprobs']) {
      const t = await ticks(key);
      expect(Math.max(...t) - Math.min(...t), key).toBeLessThan(150);
      expect(Math.min(...t), key).toBeGreaterThanOrEqual(150);
    }
    await page.click('[data-testid=zoom-reset]');
    await expect.poll(async () => Math.max(...(await ticks('reward')))).toBeGreaterThan(800);
  });

  it('brushes a step range over the strip into the overview, which lists only those steps', async () => {
    const box = await plotArea('step-brush');
    const y = box.y + box.height / 2;
    const x = (step: number) => box.x + (box.width * step) / (LONG_RUN.steps - 1);
    await page.mouse.move(x(300.5), y);
    await page.mouse.down();
    await page.mouse.move(x(309.5), y, { steps: 6 });
    await page.mouse.up();
    await page.waitForFunction(() => window.location.hash.startsWith('#/?'));
    const where = new URLSearchParams(new URL(page.url()).hash.split('?')[1]).get('where')!;
    const m = /^step >= (\d+) and step <= (\d+)$/.exec(where);
    expect(m, where).not.toBeNull();
    const [a, b] = [Number(m![1]), Number(m![2])];
    expect(a).toBeGreaterThanOrEqual(299);
    expect(b).toBeLessThanOrEqual(311);
    expect(b - a).toBeGreaterThanOrEqual(6);
    const expected = (
      (await (
        await fetch(`${server.url}api/trajectories?where=${encodeURIComponent(where)}&limit=5000`)
      ).json()) as TrajectoryList
    ).items.map((s) => s.id);
    expect(expected).toHaveLength((b - a + 1) * LONG_RUN.groupSize);
    const stepOf = (id: string) => Number(/^step(\d+)-/.exec(id)![1]);
    expect(expected.every((id) => stepOf(id) >= a && stepOf(id) <= b)).toBe(true);
    // The overview lists exactly those: its count, and every row it draws (the list is virtualized).
    await expect.poll(() => page.locator('.overview').textContent()).toContain(`${expected.length} shown`);
    const rows = await page.$$eval('tr.trow', (els) => els.map((e) => e.getAttribute('data-id')!));
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((id) => expected.includes(id))).toBe(true);
    expect(await page.inputValue('[data-testid=where-input]')).toBe(where);
  });

  it('opens the overview at a clicked step', async () => {
    await page.goto(`${server.url}#/run`);
    await page.waitForSelector('[data-testid="trend-reward"] canvas');
    const box = await plotArea('trend-reward');
    await page.mouse.click(box.x + (box.width * 620) / (LONG_RUN.steps - 1), box.y + box.height / 2);
    await page.waitForFunction(() => /[?&]step=\d+/.test(window.location.hash));
    const step = Number(new URLSearchParams(new URL(page.url()).hash.split('?')[1]).get('step'));
    expect(Math.abs(step - 620)).toBeLessThanOrEqual(3);
  });

  it('names a ratio filter by its range, labels both IS caps and gives the axis room for 100,000 (issue 33 #11)', async () => {
    const hist = (await (await fetch(`${server.url}api/run/ratios`)).json()) as {
      bins: { bin: number; lo: number; hi: number | null; trajectories: number }[];
    };
    const bin = hist.bins.find((b) => b.trajectories > 0 && b.lo >= 1 && b.hi !== null)!;
    await page.goto(`${server.url}#/?ratioBin=${bin.bin}`);
    const line = page.locator('[data-testid=shown-line]');
    await expect.poll(() => line.textContent()).toMatch(/importance ratio \d+(\.\d+)? – \d+(\.\d+)?/);
    expect(await line.textContent()).not.toContain('bar');
    const caps = await page.locator('[data-testid=ratio-cap] .ratio-cap-label').allTextContents();
    expect(caps.sort()).toEqual(['1/2', 'IS cap 2']);
    // The widest tick label of the token axis fits the room left of the plot.
    const measure = () =>
      page.$eval('[data-testid=ratio-plot]', (el) => {
        const root = el.querySelector('.uplot')!;
        const over = el.querySelector('.u-over')!;
        const labels = (root.getAttribute('data-axis-1') ?? '').split(' ').filter(Boolean);
        const ctx = document.createElement('canvas').getContext('2d')!;
        ctx.font = '11px system-ui, sans-serif';
        const widest = Math.max(...labels.map((l) => ctx.measureText(l).width));
        return { widest, room: over.getBoundingClientRect().left - root.getBoundingClientRect().left, labels };
      });
    await expect.poll(async () => (await measure()).labels.some((l) => l.length >= 7)).toBe(true);
    const fit = await measure();
    expect(fit.room).toBeGreaterThan(fit.widest);
  });
});
