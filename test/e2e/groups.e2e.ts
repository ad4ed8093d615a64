// A run by step and by GRPO group, in the browser, while it is still being written: the real
// `serve` on a folder that grows (appended lines, a half-written last line, a new step folder),
// the built app in chromium.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCREENSHOT_DIR, openInspector, type InspectorSession, type ServerProcess, rowsDrawn } from './support.ts';

const FIXTURES = path.resolve('test/fixtures/groups');
const SLIME = fs
  .readFileSync(path.join(FIXTURES, 'slime', 'samples.jsonl'), 'utf8')
  .trim()
  .split('\n');
const VERL = fs
  .readFileSync(path.join(FIXTURES, 'verl', 'step_3', 'agent_loop.jsonl'), 'utf8')
  .trim()
  .split('\n');

let dir: string;
let session: InspectorSession;
let server: ServerProcess;
let page: Page;

const memberIds = () => page.$$eval('.member', (els) => els.map((e) => e.getAttribute('data-id')));

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-e2e-groups-'));
  fs.mkdirSync(path.join(dir, 'slime'));
  fs.writeFileSync(path.join(dir, 'slime', 'samples.jsonl'), `${SLIME.slice(0, 8).join('\n')}\n`);
  // Tall enough that the grouped list (virtualized) renders every group of the run.
  session = await openInspector({ serveArgs: [dir], viewport: { width: 1280, height: 1500 } });
  ({ server, page } = session);
});

afterAll(async () => {
  await session?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('a live run by group', () => {
  it('shows the groups of step 0, the equal-reward group marked degenerate', async () => {
    await page.goto(`${server.url}#/?by=group&sort=group`);
    await page.waitForSelector('.member');
    expect(await page.$$eval('.group', (els) => els.map((e) => e.getAttribute('data-group')))).toEqual(['0', '1']);
    expect(await page.$$eval('.group.degenerate', (els) => els.map((e) => e.getAttribute('data-group')))).toEqual([
      '1',
    ]);
    expect(
      await page.$$eval('.group.degenerate .group-head .chip.kind-group', (els) => els.map((e) => e.textContent)),
    ).toEqual(['equal rewards']);
    expect(await page.$$eval('.member .vdot.reward', (els) => els.length)).toBe(8);
  });

  it('shows appended lines and a new step folder within a few seconds, and moves no row already shown', async () => {
    const before = await memberIds();
    const file = path.join(dir, 'slime', 'samples.jsonl');
    // A half-written last line first: it must neither show nor be reported.
    fs.appendFileSync(file, `${SLIME.slice(8, 12).join('\n')}\n${SLIME[12]!.slice(0, 500)}`);
    fs.mkdirSync(path.join(dir, 'verl', 'step_3'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'verl', 'step_3', 'agent_loop.jsonl'), `${VERL.join('\n')}\n`);
    await page.waitForFunction((n) => document.querySelectorAll('.member').length === n, 12 + VERL.length, {
      timeout: 15_000,
    });
    expect(await page.$$('.banner.warning')).toHaveLength(0);
    fs.appendFileSync(file, `${SLIME[12]!.slice(500)}\n${SLIME.slice(13).join('\n')}\n`);
    await page.waitForFunction((n) => document.querySelectorAll('.member').length === n, SLIME.length + VERL.length, {
      timeout: 15_000,
    });
    const after = await memberIds();
    expect(after.slice(0, before.length)).toEqual(before);
    expect(await page.$$('.banner.warning')).toHaveLength(0);
    expect(await page.$$eval('.group.degenerate', (els) => els.length)).toBe(4);
    await rowsDrawn(page);
    await page.screenshot({
      path: path.join(SCREENSHOT_DIR, 'groups.png'),
      clip: { x: 0, y: 0, width: 1280, height: 1060 },
    });
  });

  it('walks within a group with j/k and across groups with J/K', async () => {
    const cursor = () =>
      page.$eval('.member.cursor', (e) => [e.closest('.group')!.getAttribute('data-group'), e.getAttribute('data-id')]);
    const first = await cursor();
    await page.keyboard.press('j');
    const second = await cursor();
    expect(second[0]).toBe(first[0]);
    expect(second[1]).not.toBe(first[1]);
    for (let i = 0; i < 6; i++) await page.keyboard.press('j');
    expect((await cursor())[0]).toBe(first[0]); // j stops at the group's last sample
    await page.keyboard.press('J');
    expect((await cursor())[0]).toBe('1');
    await page.keyboard.press('K');
    expect(await cursor()).toEqual(first);
  });
});

describe('a trajectory page opened from the grouped overview', () => {
  it('walks the group with j/k and jumps to the next group with J', async () => {
    await page.goto(`${server.url}#/?by=group&sort=group`);
    await page.waitForSelector('.member.cursor');
    const groups = await page.$$eval('.group', (els) =>
      els.map((g) => [...g.querySelectorAll('.member')].map((m) => m.getAttribute('data-id')!)),
    );
    await page.keyboard.press('Enter');
    const idInUrl = () => decodeURIComponent(/#\/t\/([^?]+)/.exec(page.url())?.[1] ?? '');
    await page.waitForFunction(
      (id) => window.location.hash.startsWith(`#/t/${encodeURIComponent(id)}`),
      groups[0]![0]!,
    );
    await page.keyboard.press('k'); // the group's first sample: nowhere to go back to
    // Two frames after the key: a move would have reached the URL by now (no guessed delay).
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    expect(idInUrl()).toBe(groups[0]![0]);
    await page.keyboard.press('j');
    await page.waitForFunction(
      (id) => window.location.hash.startsWith(`#/t/${encodeURIComponent(id)}`),
      groups[0]![1]!,
    );
    await page.keyboard.press('J');
    await page.waitForFunction(
      (id) => window.location.hash.startsWith(`#/t/${encodeURIComponent(id)}`),
      groups[1]![0]!,
    );
    await page.keyboard.press('K');
    await page.waitForFunction(
      (id) => window.location.hash.startsWith(`#/t/${encodeURIComponent(id)}`),
      groups[0]![0]!,
    );
  });
});

describe('the run page', () => {
  it('draws a trend per step and opens the overview filtered to a clicked step', async () => {
    await page.goto(`${server.url}#/run`);
    await page.waitForFunction(() => document.querySelectorAll('table.steps tbody tr').length === 3, undefined, {
      timeout: 10_000,
    });
    expect(await page.$$eval('table.steps tbody tr', (els) => els.map((e) => e.getAttribute('data-step')))).toEqual([
      '0',
      '1',
      '3',
    ]);
    // A chart per trend, its x axis labelled with the run's steps.
    await page.waitForSelector('[data-testid="trend-reward"] canvas');
    expect(await page.locator('.trends .uplot').count()).toBeGreaterThanOrEqual(8);
    const ticks = (await page.locator('[data-testid="trend-reward"] .uplot').getAttribute('data-axis-0'))!.split(' ');
    expect(ticks.map(Number).every((s) => s >= 0 && s <= 3)).toBe(true);
    expect(ticks).toEqual(expect.arrayContaining(['0', '3']));
    expect(await page.$$eval('table.steps svg.hist', (els) => els.length)).toBe(6);
    await page.click('table.steps tr[data-step="1"] .step-link');
    await page.waitForFunction(() => window.location.hash.includes('step=1'));
    await page.waitForFunction(() => document.querySelectorAll('.member').length === 11, undefined, {
      timeout: 10_000,
    });
    expect(await page.$$eval('.group', (els) => els.map((e) => e.getAttribute('data-step')))).toEqual(['1', '1', '1']);
  });
});
