// `serve A --against B` in the browser: the pairs of a run and the same run with one template fix,
// and the fixed pair side by side at token level with the first difference marked.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { SCREENSHOT_DIR, axeViolations, openInspector, type InspectorSession, rowsDrawn } from './support.ts';

const A = path.join('test', 'fixtures', 'vllm', 'chat-by-id.jsonl');
/** The same calls with `sess-dup-eos`'s second prompt rendered without the duplicated `<|im_end|>` (generate-diff-runs.ts). */
const B = path.join('test', 'fixtures', 'diff-runs', 'vllm-fixed', 'chat-by-id.jsonl');
const FIXED = 'sess-dup-eos';

let session: InspectorSession;
let page: Page;

beforeAll(async () => {
  session = await openInspector({ serveArgs: [A, '--against', B, '--workers', '0'] });
  page = session.page;
});

afterAll(async () => {
  await session?.close();
});

describe('run against run', () => {
  it('lists every pair, the fixed one with its break gone and nothing else changed', async () => {
    await page.goto(session.server.url);
    await page.click('[data-testid=open-against]');
    await page.waitForSelector('[data-testid=ag-pair]');
    expect(await page.locator('[data-testid=ag-pair]').count()).toBe(3);
    expect(await page.locator('[data-testid=ag-summary]').textContent()).toContain('1 fixed, 0 broke');
    const fixed = page.locator('[data-testid=ag-pair][data-verdict=fixed]');
    expect(await fixed.count()).toBe(1);
    expect(await fixed.textContent()).toContain(FIXED);
    expect(await fixed.locator('[data-testid=ag-gone]').first().textContent()).toContain('prefix break');
    expect(await page.locator('[data-testid=ag-pair][data-verdict=same]').count()).toBe(1);
    expect(await page.locator('[data-testid=ag-new]').count()).toBe(0);
    // A pair whose finding both runs have is not "the same" with an empty findings cell (issue 33 #3).
    const persists = page.locator('[data-testid=ag-pair][data-verdict=persists]');
    expect(await persists.count()).toBe(1);
    expect(await persists.locator('[data-testid=ag-kept]').count()).toBeGreaterThan(0);
    expect(await persists.locator('.ag-verdict').textContent()).toContain('persists');
    // axe-core: no serious or critical accessibility violation on the run-against-run page.
    expect(await axeViolations(page)).toEqual([]);
  });

  it('walks the pairs by keyboard: j moves the cursor, Enter opens, Esc comes back to it (issue 33 #5)', async () => {
    await page.goto(`${session.server.url}#/against`);
    await page.waitForSelector('[data-testid=ag-pair].cursor');
    const ids = await page.$$eval('[data-testid=ag-pair] td:nth-child(2)', (els) => els.map((e) => e.textContent));
    await page.keyboard.press('j');
    await expect.poll(() => page.locator('[data-testid=ag-pair].cursor td:nth-child(2)').textContent()).toBe(ids[1]);
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-testid=ag-pair-view]');
    await page.keyboard.press('Escape');
    await page.waitForSelector('[data-testid=ag-pair].cursor');
    expect(await page.locator('[data-testid=ag-pair].cursor td:nth-child(2)').textContent()).toBe(ids[1]);
  });

  it('opens the fixed pair side by side at token level with the first difference marked', async () => {
    await page.click(`[data-testid=ag-pair]:has-text("${FIXED}") button`);
    await page.waitForSelector('[data-testid=ag-pair-view]');
    expect(await page.locator('[data-testid=ag-pair-headline]').textContent()).toContain('Fixed in B: prefix break');
    // The stream shown is the first that differs: turn 1's prompt, where A repeats <|im_end|>.
    const shown = await page.locator('[data-testid=ag-stream]').inputValue();
    expect(shown).toBe('prompt:1');
    await page.waitForSelector('[data-testid=divergence]');
    expect(await page.locator('.div-title').textContent()).toContain('duplicated end of turn');
    const first = page.locator('.drow.first');
    await first.waitFor();
    expect(await first.locator('.firstflag').textContent()).toContain('first divergence');
    // A holds the extra <|im_end|> at the marked row; B has nothing there.
    expect(await first.locator('.dside').first().textContent()).toContain('<|im_end|>');
    expect(await first.getAttribute('data-b')).toBe('-1');
    expect(await first.isVisible()).toBe(true);
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'against.png') });
    expect(await axeViolations(page)).toEqual([]);
  });

  it('an unchanged clean pair opens with its streams the same', async () => {
    await page.goto(`${session.server.url}#/against?a=geo-clean&b=geo-clean`);
    await page.waitForSelector('[data-testid=ag-pair-view]');
    expect(await page.locator('[data-testid=ag-pair-headline]').textContent()).toContain('No finding on either side');
    expect(await page.locator('.banner.ok').textContent()).toContain('agree token for token');
  });

  it('a pair keeping its finding names it, and its agreeing streams are no good news (issue 33 #3)', async () => {
    await page.goto(`${session.server.url}#/against`);
    const row = page.locator('[data-testid=ag-pair][data-verdict=persists]');
    await row.waitFor();
    const kept = (await row.locator('[data-testid=ag-kept]').first().textContent())!.replace(/^= /, '');
    await row.locator('button').first().click();
    await page.waitForSelector('[data-testid=ag-pair-view]');
    const headline = await page.locator('[data-testid=ag-pair-headline]').textContent();
    expect(headline).toContain('Not fixed in B');
    expect(headline).toContain(kept);
    expect(await page.locator('.banner.ok').count()).toBe(0);
  });
});
