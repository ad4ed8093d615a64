// The logprob view and the run's ratio histogram in the browser, on the slime train dump fixture
// (test/fixtures/torch/generate.py: sample 2 has one 3-nat spike at response token 40).
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { checkPaths, type CheckedTrajectory } from '../../server/pipeline.ts';
import { logprobMismatch } from '../../server/analysis/logprob-mismatch.ts';
import { findVisionSpans } from '../../server/analysis/vision-spans.ts';
import { SCREENSHOT_DIR, openInspector, type InspectorSession, rowsDrawn } from './support.ts';

const TRAIN = path.join('test', 'fixtures', 'torch', 'train_data_0.pt');
const SPIKE_ID = 'rollout-0/sample-2';

let session: InspectorSession;
let page: Page;
let spike: CheckedTrajectory;

beforeAll(async () => {
  for await (const ev of checkPaths([TRAIN], {}))
    if (ev.type === 'trajectory' && ev.checked.trajectory.id === SPIKE_ID) spike = ev.checked;
  session = await openInspector({ serveArgs: [TRAIN] });
  page = session.page;
});

afterAll(async () => {
  await session?.close();
});

/** Absolute index of response token `k` of the training sample. */
const responseToken = (c: CheckedTrajectory, k: number) =>
  c.trajectory.sample!.tokens.length - c.trajectory.sample!.responseLength! + k;

describe('logprob view', () => {
  it('highlights the spike token of sample 2 in the strip and marks it on the plot; masked tokens are dimmed', async () => {
    const at = responseToken(spike, 40);
    expect(logprobMismatch(spike.trajectory)!.firstPastThreshold).toBe(at);
    await page.goto(`${session.server.url}#/t/${encodeURIComponent(SPIKE_ID)}?view=logprobs`);
    await page.waitForSelector('[data-testid=lp-plot]');
    // One marker on the plot, at the spike.
    const marks = page.locator('[data-testid=plot-spike]');
    await expect.poll(() => marks.count()).toBe(1);
    expect(await marks.first().getAttribute('data-token')).toBe(String(at));
    // Values on the axes: token positions of the response on x, nats on y.
    const root = page.locator('[data-testid=lp-plot] .uplot');
    const xTicks = (await root.getAttribute('data-axis-0'))!.split(' ').map(Number);
    expect(xTicks.length).toBeGreaterThan(2);
    for (const x of xTicks)
      expect(x >= responseToken(spike, 0) && x < spike.trajectory.sample!.tokens.length).toBe(true);
    expect(await root.getAttribute('data-axis-1')).toContain('0.00');
    // The readout follows the cursor: over the spike it names the token, its Δ and both logprobs.
    const spikeBox = (await marks.first().boundingBox())!;
    await page.mouse.move(spikeBox.x + spikeBox.width / 2, spikeBox.y + spikeBox.height / 2);
    const readout = () =>
      page.$$eval('[data-testid=lp-plot] .u-legend .u-series', (rows) =>
        Object.fromEntries(
          rows.map((r) => [
            r.querySelector('.u-label')?.textContent?.replace(/:$/, '').trim() ?? '',
            r.querySelector('.u-value')?.textContent?.trim() ?? '',
          ]),
        ),
      );
    await expect.poll(async () => (await readout()).token).toBe(String(at));
    // The spike is the trajectory's largest |Δ| (the shared analysis), and Δ = trainer − rollout.
    const r = await readout();
    expect(Math.abs(Number(r.Δ))).toBeCloseTo(logprobMismatch(spike.trajectory)!.maxAbsDelta, 3);
    expect(Number(r.trainer) - Number(r.rollout)).toBeCloseTo(Number(r.Δ), 2);
    // The strip opens on it: selected, coloured as past the threshold (trainer lower: blue).
    const chip = page.locator(`.lp-strip .tok[data-i="${at}"]`);
    await chip.waitFor();
    expect(await chip.getAttribute('class')).toMatch(/\blp-l3\b.*\blp-neg\b.*\bselected\b/);
    expect(await page.locator('[data-testid=lp-selected]').textContent()).toContain(`token ${at}`);
    expect(await page.locator('[data-testid=lp-summary]').textContent()).toContain(`the first at token ${at}`);
    // Tokens with loss mask 0 (the tool observation after turn 0) are dimmed and never coloured.
    const mask = spike.trajectory.sample!.lossMask!;
    const offset = responseToken(spike, 0);
    const masked = mask.map((m, k) => (m === 0 ? offset + k : -1)).filter((i) => i >= 0);
    expect(masked.length).toBeGreaterThan(0);
    const near = masked.find((i) => i > at)!;
    const maskedChip = page.locator(`.lp-strip .tok[data-i="${near}"]`);
    await maskedChip.waitFor();
    const cls = (await maskedChip.getAttribute('class'))!;
    expect(cls).toContain('lp-masked');
    expect(cls).not.toMatch(/lp-l\d/);
    // Turn boundaries and image spans are on the plot.
    expect(await page.locator('[data-testid=plot-turn]').count()).toBe(spike.trajectory.turns.length);
    const responseImages = findVisionSpans(spike.trajectory.sample!.tokens, spike.profile).filter(
      (s) => s.kind === 'image' && s.end >= offset,
    );
    expect(responseImages.length).toBeGreaterThan(0);
    expect(await page.locator('[data-testid=plot-image]').count()).toBe(responseImages.length);
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'logprobs.png') });
  });

  it('a click on the plot selects that token in the strip; the ratio toggle keeps the spike past the cap', async () => {
    const at = responseToken(spike, 40);
    // Select another token first (turn 1's row of the table), then click the plot at the spike.
    await page.click('[data-testid=lp-turn-1] button');
    await expect.poll(() => page.locator('[data-testid=lp-selected]').textContent()).not.toContain(`token ${at} `);
    const box = (await page.locator('[data-testid=plot-spike]').boundingBox())!;
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await expect.poll(() => page.locator('[data-testid=lp-selected]').textContent()).toContain(`token ${at} `);
    expect(page.url()).toContain(`token=${at}`);
    await page.click('.lp .seg button:has-text("ratio")');
    // The toggle re-renders after the click returns: wait for the legend, as for the selection above.
    await expect.poll(() => page.locator('[data-testid=lp-legend]').textContent()).toContain('IS cap 2');
    await expect.poll(() => page.locator(`.lp-strip .tok[data-i="${at}"]`).getAttribute('class')).toMatch(/\blp-l3\b/);
  });

  it('a drag zooms the plot to those tokens, the marks follow, a double click shows all again', async () => {
    const at = responseToken(spike, 40);
    const n = spike.trajectory.sample!.tokens.length;
    const root = page.locator('[data-testid=lp-plot] .uplot');
    const xTicks = async () => (await root.getAttribute('data-axis-0'))!.split(' ').map(Number);
    const before = await xTicks();
    const over = (await page.locator('[data-testid=lp-plot] .u-over').boundingBox())!;
    const mark = (await page.locator('[data-testid=plot-spike]').boundingBox())!;
    const y = over.y + over.height / 2;
    await page.mouse.move(mark.x - 30, y);
    await page.mouse.down();
    await page.mouse.move(mark.x + 40, y, { steps: 5 });
    await page.mouse.up();
    await expect
      .poll(async () => Math.max(...(await xTicks())) - Math.min(...(await xTicks())))
      .toBeLessThan((Math.max(...before) - Math.min(...before)) / 2);
    // The spike's mark moved with the zoom: the readout under its new place is still its token.
    const zoomed = (await page.locator('[data-testid=plot-spike]').boundingBox())!;
    expect(Math.abs(zoomed.x - mark.x)).toBeGreaterThan(20);
    await page.mouse.move(zoomed.x + zoomed.width / 2, zoomed.y + zoomed.height / 2);
    const token = () =>
      page.locator('[data-testid=lp-plot] .u-legend .u-series').first().locator('.u-value').textContent();
    await expect.poll(token).toBe(String(at));
    await page.mouse.dblclick(over.x + over.width / 2, y);
    await expect.poll(async () => Math.max(...(await xTicks()))).toBeGreaterThan(Math.max(...before) - 1);
    expect(Math.max(...(await xTicks()))).toBeLessThan(n);
  });

  it('a click on the logprob finding opens this view at its token', async () => {
    const at = responseToken(spike, 40);
    await page.goto(`${session.server.url}#/t/${encodeURIComponent(SPIKE_ID)}`);
    await page.click('.finding:has(.kind-logprob_mismatch) .finding-open');
    await page.waitForSelector('[data-testid=lp-plot]');
    expect(page.url()).toContain('view=logprobs');
    expect(page.url()).toContain(`token=${at}`);
    expect(await page.locator('[data-testid=lp-selected]').textContent()).toContain(`token ${at} `);
  });

  it('the per-turn table gives logprobMismatch per turn', async () => {
    const m = logprobMismatch(spike.trajectory)!;
    for (const t of m.turns) {
      const row = page.locator(`[data-testid=lp-turn-${t.turn}] td`);
      expect(await row.nth(0).textContent()).toBe(String(t.tokens));
    }
    expect(await page.locator('[data-testid=lp-turn-0] td').nth(2).textContent()).toContain(`@ ${m.turns[0]!.maxAt}`);
  });
});

describe('run histogram of importance ratios', () => {
  it('draws the cap, and a click on a bar lists the trajectories it counts', async () => {
    await page.goto(session.server.url);
    await page.waitForSelector('[data-testid=ratio-histogram]');
    expect(await page.locator('[data-testid=ratio-cap]').count()).toBe(2);
    // The spike's ratio e^-3 ≈ 0.05 is alone below 1/16: one token, one trajectory.
    const bar = page.locator('[data-testid=ratio-bar][data-bin="0"]');
    expect(await bar.getAttribute('data-tokens')).toBe('1');
    // The caps sit at ratios 1/2 and 2 on the log axis: equally far left and right of the plot's middle.
    const plot = (await page.locator('[data-testid=ratio-plot] .u-over').boundingBox())!;
    const capX = await page
      .locator('[data-testid=ratio-cap]')
      .evaluateAll((els) => els.map((e) => e.getBoundingClientRect().left));
    const middle = plot.x + plot.width / 2;
    expect(Math.abs(middle - capX[0]! - (capX[1]! - middle))).toBeLessThan(3);
    expect(capX[1]! - middle).toBeGreaterThan(plot.width / 20);
    // Values on the axes: the ratio's powers of 2 on x, token counts on y.
    const root = page.locator('[data-testid=ratio-plot] .uplot');
    expect(await root.getAttribute('data-axis-0')).toBe('1/16 1/8 1/4 1/2 1 2 4 8 16');
    expect((await root.getAttribute('data-axis-1'))?.length).toBeGreaterThan(0);
    // The readout follows the cursor: the open bin below 1/16 holds the spike.
    await bar.hover();
    const readout = () => page.locator('[data-testid=ratio-plot] .u-legend').textContent();
    await expect.poll(readout).toContain('< 1/16');
    expect(await readout()).toContain('1 in 1 trajectories');
    await rowsDrawn(page);
    await page.screenshot({
      path: path.join(SCREENSHOT_DIR, 'ratios.png'),
      clip: { x: 0, y: 0, width: 1440, height: 420 },
    });
    await bar.click();
    await expect.poll(() => page.locator('tr.trow').count()).toBe(1);
    expect(page.url()).toContain('ratioBin=0');
    expect(await page.locator('tr.trow').first().textContent()).toContain(SPIKE_ID);
    // The bar at ratio ≈ 1 counts every trajectory.
    const bins = await page
      .locator('[data-testid=ratio-bar]')
      .evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-trajectories'))));
    expect(Math.max(...bins)).toBeGreaterThan(1);
  });
});
