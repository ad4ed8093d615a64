// The overview's filter expression (docs/filter.md) in the browser: typed and applied on Enter,
// kept in the URL, the rows exactly those the list API selects for it, other filters still
// combined with it, and an expression that does not parse shown with its offending character.
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrajectoryList } from '../../server/http/api.ts';
import { type InspectorSession, type ServerProcess, openInspector, rowsDrawn, SCREENSHOT_DIR } from './support.ts';

let session: InspectorSession;
let server: ServerProcess;
let page: Page;

beforeAll(async () => {
  session = await openInspector();
  ({ server, page } = session);
});

afterAll(async () => {
  await session?.close();
});

async function listed(query: string): Promise<string[]> {
  const list = (await (
    await fetch(`${server.url}api/trajectories?${query}&sort=id&order=asc`)
  ).json()) as TrajectoryList;
  return list.items.map((s) => s.id);
}

/** The `where` param of the address's hash (`#/?where=…`). */
const whereInUrl = () => new URLSearchParams(new URL(page.url()).hash.split('?')[1] ?? '').get('where');

const rowIds = () => page.$$eval('tr.trow', (els) => els.map((e) => e.getAttribute('data-id')!).sort());

async function typeWhere(text: string): Promise<void> {
  const input = page.locator('[data-testid=where-input]');
  await input.fill(text);
  await input.press('Enter');
}

describe('the overview filter expression', () => {
  it('applies on Enter, keeps the expression in the URL and shows exactly the rows it selects', async () => {
    await page.goto(server.url);
    await page.waitForSelector('tr.trow');
    const all = await rowIds();
    const where = 'kind:prefix_break and not cause:missing_eos';
    const expected = (await listed(`where=${encodeURIComponent(where)}`)).sort();
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThan(all.length);
    await typeWhere(where);
    await expect.poll(() => whereInUrl()).toBe(where);
    await expect.poll(rowIds).toEqual(expected);
    // Reloading the address gives the same rows and the expression back in the input.
    await page.reload();
    await page.waitForSelector('tr.trow');
    await expect.poll(rowIds).toEqual(expected);
    expect(await page.inputValue('[data-testid=where-input]')).toBe(where);
    // Another filter (a finding-kind count) combines with it.
    await page.click('button.count[data-kind=prefix_break]');
    await expect.poll(() => page.url()).toContain('kind=prefix_break');
    await expect.poll(rowIds).toEqual(expected);
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'overview-where.png') });
  });

  it.each([
    // A group's fields: the demo's group of four at step 3, one wrong answer among them.
    ['group.size = 4 and group.reward_mean < 1 and reward >= 1', 3],
    // As the run page's brush writes it.
    ['step >= 3 and step <= 3', 7],
    // The vLLM call logs state no step.
    ['step = null and reward >= 1', 3],
  ])('opens from a link: %s', async (where, count) => {
    const expected = (await listed(`where=${encodeURIComponent(where)}`)).sort();
    if (count !== null) expect(expected).toHaveLength(count);
    else expect(expected.length).toBeGreaterThan(0);
    await page.goto(`${server.url}#/?where=${encodeURIComponent(where)}`);
    await page.waitForSelector('[data-testid=where-input]');
    await expect.poll(rowIds).toEqual(expected);
    expect(await page.inputValue('[data-testid=where-input]')).toBe(where);
    expect(await page.locator('[data-testid=where-error]').count()).toBe(0);
  });

  it('an expression that does not parse: the message, the offending character marked, the last rows kept, the bar in place (issue 33 #9)', async () => {
    await page.goto(server.url);
    await page.waitForSelector('tr.trow');
    const before = await rowIds();
    const shownBefore = await page.locator('[data-testid=shown-count]').textContent();
    const bar = await page.locator('.filters').boundingBox();
    // The placeholder fits its input: no word cut.
    const fits = await page.$eval('[data-testid=where-input]', (el) => {
      const input = el as HTMLInputElement;
      const style = getComputedStyle(input);
      const ctx = document.createElement('canvas').getContext('2d')!;
      ctx.font = `${style.fontSize} ${style.fontFamily}`;
      const room = input.clientWidth - Number.parseFloat(style.paddingLeft) - Number.parseFloat(style.paddingRight);
      return ctx.measureText(input.placeholder).width <= room;
    });
    expect(fits).toBe(true);
    const where = 'reward >= 1 and kind:prefix_brake';
    await typeWhere(where);
    const error = page.locator('[data-testid=where-error]');
    await error.waitFor();
    expect(await error.textContent()).toContain('unknown kind "prefix_brake"');
    expect(await page.locator('[data-testid=where-error-at]').textContent()).toBe('p');
    // The marked character is the one the server's offset names.
    const res = await fetch(`${server.url}api/trajectories?where=${encodeURIComponent(where)}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; offset: number };
    expect(where[body.offset]).toBe('p');
    expect(body.offset).toBe(where.indexOf('prefix_brake'));
    expect(await page.locator('.where-expr').textContent()).toBe(where);
    // The table keeps the last list it could show, and the bar does not move.
    expect(await rowIds()).toEqual(before);
    expect(await page.locator('[data-testid=shown-count]').textContent()).toContain(
      shownBefore!.replace(' · loading…', ''),
    );
    expect(await page.locator('.filters').boundingBox()).toEqual(bar);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'overview-where-error.png') });
    // Fixed and applied again, the error goes and the rows follow.
    await typeWhere('reward >= 1 and kind:prefix_break');
    await expect.poll(() => error.count()).toBe(0);
    await expect
      .poll(rowIds)
      .toEqual((await listed(`where=${encodeURIComponent('reward >= 1 and kind:prefix_break')}`)).sort());
  });
});
