// Issue 33 walked as a user does on the demo run: every step is a click or a key from the page the
// one before it left (the only address typed is the server's own), and every assertion is on what
// the page shows. The first visit's pages are each checked with axe-core, at 1440 and at 1024 px.
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrajectoryList } from '../../server/http/api.ts';
import { axeViolations, type InspectorSession, openInspector, rowsDrawn, SCREENSHOT_DIR } from './support.ts';

let session: InspectorSession;
let page: Page;
let url: string;

async function api<T>(p: string): Promise<T> {
  const res = await fetch(url + p.replace(/^\//, ''));
  expect(res.status, p).toBe(200);
  return (await res.json()) as T;
}

/** expect.poll with room for a machine under load (its own default gives up after one second). */
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn);
const hash = () => decodeURIComponent(new URL(page.url()).hash);

beforeAll(async () => {
  // Tall enough that the virtualized table renders every one of the demo's 22 rows.
  session = await openInspector({ viewport: { width: 1440, height: 2400 } });
  page = session.page;
  url = session.server.url;
});
afterAll(async () => {
  await session?.close();
});

describe('the demo walked by click and key (issue 33)', () => {
  it('"by group" by click lists each trajectory once, in one "no group" bucket at most (#1)', async () => {
    await page.goto(url);
    await poll(() => page.locator('tr.trow').count()).toBe(22);
    await page.getByRole('button', { name: 'by group', exact: true }).click();
    await poll(() => page.locator('.member').count()).toBe(22);
    const ids = await page.$$eval('.member', (els) => els.map((e) => e.getAttribute('data-id')));
    expect(new Set(ids).size).toBe(22);
    const heads = await page.$$eval('.group-head', (els) => els.map((e) => e.textContent ?? ''));
    expect(heads.filter((h) => /no group/.test(h)).length).toBeLessThanOrEqual(1);
    expect(hash()).toContain('by=group');
    // The groups' marks are explained, and a group of one sample is flagged (#14).
    await page.getByTestId('group-legend').waitFor();
    expect(await page.getByTestId('group-alone').count()).toBeGreaterThan(0);
    await page.getByRole('button', { name: 'table', exact: true }).click();
    await poll(() => page.locator('tr.trow').count()).toBe(22);
  });

  it('the overview is a run table: its columns, a legend, sorted by step on a click (#10)', async () => {
    await page.goto(url);
    await poll(() => page.locator('tr.trow').count()).toBe(22);
    const heads = (await page.$$eval('.runtable thead th', (els) => els.map((e) => e.textContent ?? ''))).join(' ');
    for (const col of ['STEP', 'GROUP', 'REWARD', 'ADV', 'RESP TOK', 'TURNS', 'IMG', 'STATUS', 'FINDINGS'])
      expect(heads.toUpperCase()).toContain(col);
    // Every row says its status (empty for vLLM rows before the fix).
    const status = await page.$$eval('.runtable tbody tr.trow td.col-status', (els) => els.map((e) => e.textContent));
    expect(status.length).toBe(22);
    expect(status.every((s) => (s ?? '').trim().length > 0)).toBe(true);
    expect(await page.getByTestId('counts-legend').textContent()).toMatch(/finding/);
    await page.click('.runtable thead button.sort[data-sort="step"]');
    await poll(() => hash()).toContain('sort=step');
    const stepsShown = async () =>
      // A cell's text, and its "=" button that narrows the filter to it.
      (await page.$$eval('.runtable tbody tr.trow td.col-step', (els) => els.map((e) => e.textContent ?? '')))
        .map((s) => s.replace(/=$/, '').trim())
        .filter((s) => /^\d+$/.test(s))
        .map(Number);
    await poll(async () => (await stepsShown()).length).toBeGreaterThan(10);
    const known = await stepsShown();
    const up = [...known].sort((a, b) => a - b).join(',');
    const down = [...known].sort((a, b) => b - a).join(',');
    expect([up, down]).toContain(known.join(','));
  });

  it('Esc keeps the list, j/k keep the view, reload and Back keep the state (#5)', async () => {
    await page.goto(url);
    await poll(() => page.locator('tr.trow').count()).toBe(22);
    await page.click('button.count[data-kind="prefix_break"]');
    const filtered = (await api<TrajectoryList>('/api/trajectories?kind=prefix_break')).items.map((s) => s.id);
    expect(filtered.length).toBeGreaterThan(2);
    await poll(() => page.locator('tr.trow').count()).toBe(filtered.length);
    const order = await page.$$eval('tr.trow', (els) => els.map((e) => e.getAttribute('data-id')));
    await page.keyboard.press('j');
    await page.keyboard.press('Enter');
    await poll(hash).toMatch(new RegExp(`^#/t/${order[1]}`));
    // A diff under review stays a diff on the next trajectory, and the one before.
    await page.getByRole('tab', { name: /^Diff/ }).click();
    await poll(hash).toContain('view=diff');
    await page.keyboard.press('j');
    await poll(hash).toMatch(new RegExp(`^#/t/${order[2]}\\?.*view=diff`));
    await page.keyboard.press('k');
    await poll(hash).toMatch(new RegExp(`^#/t/${order[1]}\\?.*view=diff`));
    // A reload opens the same trajectory on the same view, and j still walks the filtered list.
    const before = hash();
    await page.reload();
    await page.getByRole('tab', { name: /^Diff/, selected: true }).waitFor();
    expect(hash()).toBe(before);
    // Esc: back to the list as it was, the filter and its rows kept.
    await page.keyboard.press('Escape');
    await poll(hash).toMatch(/^#\/(\?|$)/);
    expect(hash()).toContain('kind=prefix_break');
    await poll(() => page.locator('tr.trow').count()).toBe(filtered.length);
    // Back returns to the trajectory's diff; Back again, Forward twice, and the list is the filtered one.
    await page.goBack();
    await poll(hash).toBe(before);
    await page.getByRole('tab', { name: /^Diff/, selected: true }).waitFor();
    await page.goForward();
    await poll(() => page.locator('tr.trow').count()).toBe(filtered.length);
    await page.reload();
    await poll(() => page.locator('tr.trow').count()).toBe(filtered.length);
    expect(hash()).toContain('kind=prefix_break');
  });

  it('a clean trajectory opens on its Messages: roles, the first message, each turn linked to its tokens', async () => {
    await page.goto(url);
    await poll(() => page.locator('tr.trow').count()).toBe(22);
    await page.click('tr.trow[data-id="geo-005-clean-zoom"] td.col-id a');
    await poll(hash).toMatch(/^#\/t\/geo-005-clean-zoom/);
    await page.getByTestId('messages').waitFor();
    expect(await page.getByRole('tab', { name: 'Messages', selected: true }).count()).toBe(1);
    const roles = await page.$$eval('[data-testid=message]', (els) => els.map((e) => e.getAttribute('data-role')));
    expect(roles).toEqual(['system', 'user', 'assistant', 'tool', 'assistant']);
    expect(await page.locator('[data-testid=message]').first().textContent()).toContain('You are a geometry tutor');
    expect(await page.locator('[data-testid=message].generated').count()).toBe(2);
    expect(await page.getByTestId('msg-toolcall').count()).toBe(1);
    expect(await page.getByTestId('msg-image').count()).toBe(2);
    // The image's pad run opens the token view at its first pad.
    await page.getByTestId('msg-padrun').first().click();
    await poll(hash).toContain('view=stream');
    expect(hash()).toMatch(/token=72\b/);
  });

  it('a trajectory with findings opens at the root cause, named first, each sentence said once (#4, #13)', async () => {
    await page.goto(url);
    await poll(() => page.locator('tr.trow').count()).toBe(22);
    await page.click('tr.trow[data-id="geo-020-vision-token-generated"] td.col-id a');
    await poll(hash).toMatch(/^#\/t\/geo-020-vision-token-generated/);
    const headline = page.getByTestId('headline');
    await headline.waitFor();
    // The cause, "model wrote vision tokens", heads the page; what follows from it is folded under it.
    expect(await headline.textContent()).toMatch(/^image count — model wrote vision tokens/);
    expect(await headline.textContent()).toContain('1 finding follows from it');
    expect(await page.locator('.root-causes .cause-group').count()).toBe(1);
    // The headline's sentence is not repeated in the findings panel.
    const sentence = ((await headline.textContent()) ?? '').slice(0, 60);
    const text = (await page.locator('body').textContent()) ?? '';
    expect(text.split(sentence).length - 1).toBe(1);
    // The headline is a link to its token, and that token is selected in the view it opens (#13).
    await page.getByTestId('headline-link').click();
    await poll(hash).toMatch(/token=288\b/);
    expect(text).not.toMatch(/\b1 turns\b/);
  });

  it('a diff folds its equal stretches, says what they hold, and opens one on a click (#12)', async () => {
    await page.goto(url);
    await poll(() => page.locator('tr.trow').count()).toBe(22);
    await page.click('tr.trow[data-id="geo-003-dup-eos"] td.col-id a');
    // Opened at its root cause, a prefix break: the diff of turn 0 against turn 1's prompt.
    await page.getByRole('tab', { name: /^Diff/, selected: true }).waitFor();
    const fold = page.getByTestId('diff-fold').first();
    await fold.waitFor();
    expect(await fold.textContent()).toMatch(/⋯ 531 equal tokens “<\|im_start\|>system.*· show/);
    // The first divergence is never folded away.
    expect(await page.locator('.drow.first').count()).toBe(1);
    const last = Number(await fold.getAttribute('data-to')) - 1;
    expect(await page.locator(`.drow[data-row="${last}"]`).count()).toBe(0);
    await fold.click();
    await poll(() => page.getByTestId('diff-fold').count()).toBe(0);
    // The stretch's rows are rows again: its last, just above the divergence, is drawn.
    await page.locator(`.drow[data-row="${last}"]`).waitFor({ state: 'attached' });
    // Its Messages: the conversation as the engine saw it, what the re-rendered history put after
    // the generated <|im_end|> named where it departs (the README's picture).
    await page.getByRole('tab', { name: /^Messages/ }).click();
    await page.getByTestId('messages').waitFor();
    expect(await page.getByTestId('messages').textContent()).toContain('<|im_end|>');
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'messages.png') });
    await page.setViewportSize({ width: 1440, height: 2400 });
  });

  it('the playground keeps each conversation to its own page, and an edit clears its error (#7)', async () => {
    await page.goto(url);
    await page.getByRole('link', { name: 'Playground' }).click();
    await poll(hash).toMatch(/^#\/playground/);
    const box = page.locator('textarea[aria-label=conversation]');
    await box.fill('{"messages": [ not json');
    await page.getByTestId('pg-render').click();
    await page.getByTestId('pg-error').waitFor();
    await box.fill('{"messages": [{"role": "user", "content": "hello"}]}');
    await poll(() => page.getByTestId('pg-error').count()).toBe(0);
    await box.fill('{"messages": [ not json');
    await page.getByTestId('pg-render').click();
    await page.getByTestId('pg-error').waitFor();
    // A trajectory's Playground tab shows its conversation, not the free page's, and no stale error;
    // a vLLM log's conversation is the request vLLM took (its image an image_url part), so it renders.
    await page.goBack();
    await poll(hash).not.toMatch(/^#\/playground/);
    await page.goto(url);
    await poll(() => page.locator('tr.trow').count()).toBe(22);
    await page.click('tr.trow[data-id="geo-005-clean-zoom"] td.col-id a');
    await page.getByRole('tab', { name: 'Playground' }).click();
    await page.getByTestId('pg-verdict').waitFor();
    expect(await page.getByTestId('pg-error').count()).toBe(0);
    expect(await box.inputValue()).toContain('geometry tutor');
    // Any built-in profile may render it, not only the run's first.
    expect(await page.getByTestId('pg-profile').locator('option').count()).toBeGreaterThan(1);
  });

  it('By step draws no empty plot on the demo: each trend a chart or a sentence (#2)', async () => {
    await page.goto(url);
    await page.getByRole('link', { name: 'By step' }).click();
    await poll(hash).toMatch(/^#\/run/);
    await page.waitForSelector('.trends figure.trend-panel');
    const panels = page.locator('.trends figure.trend-panel:not(.brush-panel)');
    await poll(() => panels.count()).toBeGreaterThanOrEqual(8);
    await page.waitForFunction(() =>
      [...document.querySelectorAll('.trends figure.trend-panel:not(.brush-panel)')].every(
        (p) => p.querySelector('.uplot canvas, .trend-none') !== null,
      ),
    );
    for (const panel of await panels.all())
      expect((await panel.locator('.uplot').count()) + (await panel.locator('.trend-none').count())).toBe(1);
    expect(await page.locator('body').textContent()).not.toMatch(/1 step\(s\)/);
  });
});

/** The pages a user reaches from the overview by clicks, each with what shows it has loaded. */
async function visitEach(p: Page, visit: (name: string) => Promise<void>): Promise<void> {
  await p.goto(url);
  await poll(() => p.locator('tr.trow').count()).toBeGreaterThan(0);
  await visit('overview');
  await p.getByRole('button', { name: 'by group', exact: true }).click();
  await p.locator('.member').first().waitFor();
  await visit('by group');
  await p.getByRole('button', { name: 'table', exact: true }).click();
  // A click on the row (not its id) opens it in the drawer beside the table; the drawer's id, its page.
  await p.click('tr.trow[data-id="geo-003-dup-eos"] td.col-status');
  await p.getByTestId('drawer').waitFor();
  await visit('drawer');
  await p.getByTestId('drawer').locator('a.drawer-id').click();
  await p.locator('.drow').first().waitFor();
  await rowsDrawn(p);
  await visit('diff');
  for (const tab of ['Messages', 'Tokens', 'Logprobs', 'Playground']) {
    await p.getByRole('tab', { name: new RegExp(`^${tab}`) }).click();
    await p.waitForLoadState('networkidle');
    await rowsDrawn(p);
    await visit(tab);
  }
  await p.keyboard.press('Escape');
  // A clean trajectory: its side panel holds only images (a scrolling region with nothing focusable).
  // Found by typing its name in the filter (a short window shows few rows).
  await p.getByLabel('filter by text').fill('clean-zoom');
  await p.keyboard.press('Enter');
  await p.click('tr.trow[data-id="geo-005-clean-zoom"] td.col-id a');
  await p.getByTestId('messages').waitFor();
  await visit('clean trajectory');
  await p.keyboard.press('Escape');
  await p.getByLabel('filter by text').fill('');
  await p.keyboard.press('Enter');
  await p.getByRole('button', { name: /Keys/ }).click();
  await visit('key help');
  await p.keyboard.press('Escape');
  await p.getByRole('link', { name: 'By step' }).click();
  await p.waitForSelector('.trends figure.trend-panel');
  await p.waitForLoadState('networkidle');
  await visit('by step');
  await p.goBack();
  await p.getByRole('link', { name: 'Playground' }).click();
  await p.locator('textarea[aria-label=conversation]').waitFor();
  await visit('playground');
  await p.goBack();
  await p.locator('tr.trow').first().waitFor();
  await p.getByRole('button', { name: /Export/ }).click();
  await p.getByRole('dialog').waitFor();
  await visit('export dialog');
}

describe('every page, at 1440 and at 1024 px', () => {
  for (const width of [1440, 1024]) {
    it(`axe-core finds no serious or critical violation at ${width} px, and no header wraps (#15)`, async () => {
      const p = await session.browser.newPage({ viewport: { width, height: width === 1024 ? 768 : 900 } });
      p.on('pageerror', (e) => {
        throw e;
      });
      const found: string[] = [];
      const wrapped: string[] = [];
      try {
        await visitEach(p, async (name) => {
          for (const v of await axeViolations(p))
            found.push(`${name}: ${v.id} (${v.impact}) ${v.help} at ${v.targets.join(', ')}`);
          // One line of header: no wrapped title, tabs or toolbar.
          const bar = p.locator('header.topbar').first();
          if ((await bar.count()) > 0) {
            const h = (await bar.boundingBox())!.height;
            if (h > 56) wrapped.push(`${name}: header ${h}px tall`);
          }
          if (name === 'diff' && width === 1024) {
            // The diff gives its rows the room: more than the six rows of issue 33 #15.
            expect(await p.locator('.drow').count()).toBeGreaterThanOrEqual(12);
          }
        });
      } finally {
        await p.close();
      }
      expect(found).toEqual([]);
      expect(wrapped).toEqual([]);
    });
  }
});
