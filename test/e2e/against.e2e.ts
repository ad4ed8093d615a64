// `serve A --against B` in the browser: the pairs of a run and the same run with one template fix,
// and the fixed pair side by side at token level with the first difference marked.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { SCREENSHOT_DIR, openInspector, type InspectorSession, rowsDrawn } from './support.ts';

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
    expect(await page.locator('[data-testid=ag-pair][data-verdict=same]').count()).toBe(2);
    expect(await page.locator('[data-testid=ag-new]').count()).toBe(0);
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
  });

  it('an unchanged pair opens with its streams the same', async () => {
    await page.goto(`${session.server.url}#/against?a=geo-clean&b=geo-clean`);
    await page.waitForSelector('[data-testid=ag-pair-view]');
    expect(await page.locator('[data-testid=ag-pair-headline]').textContent()).toContain('The same findings');
    expect(await page.locator('.banner.ok').textContent()).toContain('agree token for token');
  });
});
