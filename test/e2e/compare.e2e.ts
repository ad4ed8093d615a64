// `serve ROLLOUT --trained TRAINED` in the browser: the pairs at a glance, one pair side by side.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { compareRuns } from '../../server/pipeline/compare-runs.ts';
import { SCREENSHOT_DIR, axeViolations, openInspector, type InspectorSession, rowsDrawn } from './support.ts';

const ROLLOUT = path.join('test', 'fixtures', 'torch', 'rollout_data_0.pt');
const TRAIN = path.join('test', 'fixtures', 'torch', 'train_data_0.pt');
/** The generator duplicates sample 2's <|im_end|> on the trained side. */
const DUPLICATED_EOS = 'rollout-0/sample-2';

let session: InspectorSession;
let page: Page;

beforeAll(async () => {
  session = await openInspector({ serveArgs: [ROLLOUT, '--trained', TRAIN] });
  page = session.page;
});

afterAll(async () => {
  await session?.close();
});

describe('compare view', () => {
  it('lists every pair with the fields compare finds different', async () => {
    const expected = await compareRuns([ROLLOUT], [TRAIN], {});
    // The run overview links to the pairs.
    await page.goto(session.server.url);
    await page.click('[data-testid=open-compare]');
    await page.waitForSelector('[data-testid=cmp-pair]');
    expect(await page.locator('[data-testid=cmp-pair]').count()).toBe(expected.pairs.length);
    const differing = expected.pairs.filter((p) => p.findings.length > 0).length;
    expect(await page.locator('[data-testid=cmp-run-summary]').textContent()).toContain(`${differing} different`);
    // axe-core: no serious or critical accessibility violation on the slime pairs' page.
    expect(await axeViolations(page)).toEqual([]);
  });

  it('shows the duplicated-EOS pair side by side with the first difference in words', async () => {
    await page.click(`[data-testid=cmp-pair]:has-text("${DUPLICATED_EOS}") button`);
    await page.waitForSelector('[data-testid=compare-view]');
    expect(await page.locator('[data-testid=cmp-headline]').textContent()).toContain('it differs in tokens');
    const tokens = page.locator('[data-testid=cmp-fields] tr[data-field=tokens]');
    expect(await tokens.getAttribute('data-state')).toBe('differs');
    expect(await tokens.textContent()).toContain('token 477');
    for (const f of ['loss_mask', 'logprobs'])
      expect(await page.locator(`[data-testid=cmp-fields] tr[data-field=${f}]`).getAttribute('data-state')).toBe(
        'same',
      );
    expect(await page.locator('.div-title').textContent()).toContain('duplicated end of turn');
    expect(await page.locator('.div-expl').textContent()).toContain('`<|im_end|>` appears twice');
    // Both images of the rollout, with their sha256.
    expect(await page.locator('[data-testid=cmp-image]').count()).toBe(2);
    expect(await page.locator('[data-testid=cmp-image]').first().textContent()).toMatch(/sha256 [0-9a-f]{16}…/);
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'compare.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
  });

  it('a rollout trajectory shows its own logprobs and says why there is no trainer side to compare (issue 33 #13)', async () => {
    await page.goto(`${session.server.url}#/t/${encodeURIComponent(DUPLICATED_EOS)}?view=logprobs`);
    await page.waitForSelector('[data-testid=lp-rollout-only]');
    expect(await page.locator('[data-testid=lp-summary]').textContent()).toContain('no trainer logprobs');
    expect(await page.locator('[data-testid=lp-rollout-only] .tok[class*=" lp"]').count()).toBeGreaterThan(0);
  });
});
