// The inspector end to end: the real server on a real run, the built app in chromium.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { checkPaths } from '../../server/pipeline.ts';
import type { ImageInfo, TrajectoryDetail, TrajectoryList } from '../../server/http/api.ts';
import {
  SCREENSHOT_DIR,
  startServe,
  waitForLoaded,
  type ServerProcess,
  openInspector,
  type InspectorSession,
  rowsDrawn,
} from './support.ts';

const SHOTS = SCREENSHOT_DIR;
let server: ServerProcess;
let page: Page;
let runDir: string;

async function api<T>(p: string): Promise<T> {
  const res = await fetch(server.url + p.replace(/^\//, ''));
  expect(res.status, p).toBe(200);
  return (await res.json()) as T;
}

let session: InspectorSession;
beforeAll(async () => {
  session = await openInspector();
  ({ server, page, runDir } = session);
});

afterAll(async () => {
  await session?.close();
});

describe('run overview', () => {
  it('lists every trajectory with the finding counts the checks give', async () => {
    // Expected counts straight from the shared pipeline, independent of the server.
    const perKind: Record<string, number> = {};
    let trajectories = 0;
    for await (const ev of checkPaths([runDir], {})) {
      if (ev.type !== 'trajectory') continue;
      trajectories++;
      for (const k of new Set(ev.checked.findings.map((f) => f.kind))) perKind[k] = (perKind[k] ?? 0) + 1;
    }
    expect(trajectories).toBeGreaterThan(1);
    // The list is virtualized: a window tall enough for the whole demo run renders every row.
    const viewport = page.viewportSize()!;
    await page.setViewportSize({ width: viewport.width, height: 2400 });
    await page.goto(server.url);
    await page.waitForSelector('tr.trow');
    await expect.poll(() => page.locator('tr.trow').count()).toBe(trajectories);
    await page.setViewportSize(viewport);
    for (const [kind, n] of Object.entries(perKind)) {
      expect(await page.locator(`button.count[data-kind="${kind}"] b`).textContent(), kind).toBe(String(n));
    }
    // The group findings are the run's (a group's samples judged together), not one trajectory's checks.
    const grouped = await api<TrajectoryList>('/api/trajectories?kind=group');
    expect(await page.locator('button.count[data-kind="group"] b').textContent()).toBe(String(grouped.total));
    expect(await page.locator('button.count[data-kind]:not([data-kind="group"])').count()).toBe(
      Object.keys(perKind).length,
    );
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SHOTS, 'overview.png') });
    // A click on a count filters the table to exactly those trajectories.
    const [kind, n] = Object.entries(perKind)[0]!;
    await page.click(`button.count[data-kind="${kind}"]`);
    await expect.poll(() => page.locator('tr.trow').count()).toBe(n);
    expect(page.url()).toContain(`kind=${kind}`);
  });
});

describe('diff', () => {
  it('"first divergence" on the duplicated-EOS trajectory lands on the extra <|im_end|>', async () => {
    const list = await api<TrajectoryList>('/api/trajectories?cause=duplicated_eos');
    const id = list.items[0]!.id;
    const detail = await api<TrajectoryDetail>(`/api/trajectories/${encodeURIComponent(id)}`);
    const finding = detail.findings.find((f) => f.cause === 'duplicated_eos')!;
    await page.goto(`${server.url}#/t/${encodeURIComponent(id)}`);
    await page.click('.tabs button:has-text("Diff")');
    await page.waitForSelector('[data-testid=divergence]');
    expect(await page.locator('.div-title').textContent()).toContain('duplicated end of turn');
    await page.click('[data-testid=first-divergence]');
    const row = page.locator('.drow.selected');
    await row.waitFor();
    // The selected row holds an <|im_end|> on the re-rendered/next-prompt side and nothing on the other...
    expect(await row.locator('.dside').nth(1).textContent()).toBe('<|im_end|>');
    expect(await row.locator('.dside').nth(0).textContent()).toBe('—');
    // ...right after the generated <|im_end|> both sides share.
    const rowIndex = Number(await row.getAttribute('data-row'));
    const prev = page.locator(`.drow[data-row="${rowIndex - 1}"] .dside`);
    expect(await prev.nth(0).textContent()).toBe('<|im_end|>');
    expect(await prev.nth(1).textContent()).toBe('<|im_end|>');
    // The index agrees with the finding's.
    const b = Number(await row.getAttribute('data-b'));
    expect(b).toBe(finding.index);
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SHOTS, 'diff.png') });
  });

  it('a click on a finding opens where the server says it is seen: its diff, at its token', async () => {
    const list = await api<TrajectoryList>('/api/trajectories?kind=prefix_break');
    const id = list.items[0]!.id;
    const detail = await api<TrajectoryDetail>(`/api/trajectories/${encodeURIComponent(id)}`);
    const finding = detail.findings.find((f) => f.kind === 'prefix_break')!;
    expect(finding.target).toMatchObject({ view: 'diff', a: 'prompt', b: 'prompt', side: 'b' });
    await page.goto(`${server.url}#/t/${encodeURIComponent(id)}?view=stream`);
    await page.click('.finding[data-kind="prefix_break"] button');
    const row = page.locator('.drow.selected');
    await row.waitFor();
    expect(Number(await row.getAttribute('data-b'))).toBe(finding.index);
    expect(page.url()).toContain('view=diff');
  });
});

describe('image overlay', () => {
  it('hovering a pad token lights its cell, and hovering a cell lights its pad token', async () => {
    const list = await api<TrajectoryList>('/api/trajectories?sort=id&order=asc');
    // Prefer a trajectory whose image has a finding, so the overlay shows it; any image will do.
    const withImages = list.items.filter((s) => s.images > 0);
    const pick =
      withImages.find((s) => s.findings.kind.image_truncated) ??
      withImages.find((s) => s.findings.kind.placeholder_count) ??
      withImages[0]!;
    const image = await api<ImageInfo>(`/api/trajectories/${encodeURIComponent(pick.id)}/images/0`);
    const layout = image.layout!;
    await page.goto(`${server.url}#/t/${encodeURIComponent(pick.id)}?view=stream`);
    await page.locator('.padrun').first().click();
    // One row of pad chips per row of the image's merged cells.
    const padRows = page.locator('.row.padrow');
    await padRows.first().waitFor();
    // A row mounts as text and becomes chips a few per frame (drawn-soon.ts): count them once drawn.
    await rowsDrawn(page);
    expect(await padRows.first().locator('.tok.pad').count()).toBe(layout.cellsWide);
    const k = layout.cellsWide + 3; // row 1, col 3
    const chip = page.locator(`[data-pad="0:${k}"]`);
    await chip.hover();
    await expect.poll(() => page.locator('[data-lit-cell]').getAttribute('data-lit-cell')).toBe('1,3');

    // Reverse: the centre of cell (row 2, col 5) in the drawn image.
    const svg = page.locator('[data-testid=grid-0]');
    const box = (await svg.boundingBox())!;
    const x = box.x + (((5 + 0.5) * layout.cellSize) / layout.resizedWidth) * box.width;
    const y = box.y + (((2 + 0.5) * layout.cellSize) / layout.resizedHeight) * box.height;
    await page.mouse.move(x, y);
    const k2 = 2 * layout.cellsWide + 5;
    await expect.poll(() => page.locator(`[data-pad="0:${k2}"]`).getAttribute('class')).toContain('lit');
    expect(await page.locator('[data-lit-cell]').getAttribute('data-lit-cell')).toBe('2,5');
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SHOTS, 'overlay.png') });
  });
});

describe('deep links', () => {
  it('a link to a token opens that token, and so does a reload', async () => {
    const list = await api<TrajectoryList>('/api/trajectories?sort=tokens&order=desc');
    const pick = list.items[0]!;
    const token = pick.tokens - 3;
    const link = `${server.url}#/t/${encodeURIComponent(pick.id)}?view=stream&stream=canonical&token=${token}`;
    await page.goto(link);
    const selected = page.locator(`.tok.selected[data-i="${token}"]`);
    await selected.waitFor();
    expect(await selected.isVisible()).toBe(true);
    await page.reload();
    await page.locator(`.tok.selected[data-i="${token}"]`).waitFor();
    expect(await page.locator('[data-testid=selected-token]').textContent()).toContain(`token #${token}`);
    expect(page.url()).toBe(link);
    // By keyboard: ← selects the previous token, and focus follows it.
    await page.locator(`.tok.selected[data-i="${token}"]`).focus();
    await page.keyboard.press('ArrowLeft');
    await page.locator(`.tok.selected[data-i="${token - 1}"]`).waitFor();
    await expect
      .poll(() => page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.i))
      .toBe(String(token - 1));
    expect(page.url()).toContain(`token=${token - 1}`);
  });
});

describe('keyboard', () => {
  it('j/k/Enter walk the run in the same view, n/N walk the findings', async () => {
    const list = await api<TrajectoryList>('/api/trajectories');
    const ids = list.items.map((s) => s.id);
    await page.goto(server.url);
    await page.waitForSelector('tr.trow');
    await page.keyboard.press('j');
    await page.keyboard.press('Enter');
    const at = (id: string, step: string) =>
      expect
        .poll(() => decodeURIComponent(new URL(page.url()).hash), { message: step })
        .toMatch(new RegExp(`^#/t/${id}(\\?|$)`));
    await at(ids[1]!, 'j then Enter in the overview');
    await page.keyboard.press('j');
    await at(ids[2]!, 'j on a trajectory');
    await page.keyboard.press('k');
    await at(ids[1]!, 'k on a trajectory');
    // The first trajectory in the default order has findings (errors sort first).
    await page.goto(`${server.url}#/t/${encodeURIComponent(ids[0]!)}`);
    await page.waitForSelector('.finding');
    // It opens at its root cause; n goes on to the next finding, N back.
    await page.keyboard.press('n');
    await expect.poll(() => page.url()).toContain('finding=1');
    await expect.poll(() => page.locator('.finding.active').count()).toBe(1);
    await page.keyboard.press('N');
    await expect.poll(() => page.url()).toContain('finding=0');
  });
});

describe('serve without PATH', () => {
  it('serves the embedded demo run', async () => {
    const demo = await startServe([]);
    try {
      await waitForLoaded(demo.url);
      const info = (await (await fetch(`${demo.url}api/run`)).json()) as {
        demo: boolean;
        trajectories: number;
        health: { ok: number; error: number };
      };
      expect(info.demo).toBe(true);
      expect(info.health.ok).toBeGreaterThan(0);
      expect(info.health.error).toBeGreaterThan(0);
    } finally {
      await demo.stop();
    }
  });
});
