// Export from the browser, end to end: filter the overview, export, and read what the browser
// downloaded (the batch and its manifest) against what the overview showed.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Download, Page } from 'playwright-core';
import { Manifest } from '../../server/export/manifest.ts';
import { readParquetRows } from '../../server/export/parquet.ts';
import type { TrajectoryList } from '../../server/http/api.ts';
import { SCREENSHOT_DIR, type ServerProcess, openInspector, type InspectorSession, rowsDrawn } from './support.ts';

const SHOTS = SCREENSHOT_DIR;
let server: ServerProcess;
let page: Page;
let runDir: string;

let session: InspectorSession;
beforeAll(async () => {
  session = await openInspector({ acceptDownloads: true });
  ({ server, page, runDir } = session);
});

afterAll(async () => {
  await session?.close();
});

async function downloaded(d: Download): Promise<Buffer> {
  const file = await d.path();
  return fs.readFileSync(file);
}

/** The number the overview says it shows ("12 shown"). */
async function shownCount(): Promise<number> {
  const text = (await page.locator('[data-testid=shown-count]').textContent()) ?? '';
  const m = /([\d,]+) shown/.exec(text);
  expect(m, text).not.toBeNull();
  return Number(m![1]!.replace(/,/g, ''));
}

describe('export from the browser', () => {
  it('the clean trajectories: the batch downloads and its manifest counts match the filter', async () => {
    const inputsBefore = fs.readdirSync(runDir, { recursive: true }).sort();
    await page.goto(server.url);
    await page.waitForSelector('tr.trow');
    await page.click('button.count.health-ok');
    await expect.poll(() => page.url()).toContain('status=ok');
    const clean = (await (await fetch(`${server.url}api/trajectories?status=ok`)).json()) as TrajectoryList;
    expect(clean.total).toBeGreaterThan(0);
    await expect.poll(shownCount).toBe(clean.total);
    const shown = await shownCount();

    await page.click('[data-testid=open-export]');
    const dialog = page.locator('[data-testid=export-dialog]');
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain(`${shown} trajector`);
    const batchDownload = page.waitForEvent('download');
    await page.click('[data-testid=export-start]');
    const batch = await batchDownload;
    await page.locator('[data-testid=export-done]').waitFor();
    expect(batch.suggestedFilename()).toMatch(/^rollscope-[\d-]+\.jsonl$/);

    const manifestDownload = page.waitForEvent('download');
    await page.click('[data-testid=download-manifest]');
    const manifest = Manifest.parse(JSON.parse((await downloaded(await manifestDownload)).toString('utf8')));
    expect(manifest.counts.read).toBe(shown);
    expect(manifest.counts.exported + manifest.counts.rejected).toBe(shown);
    expect(manifest.settings.selection).toBe('filter status="ok"');
    const rows = (await downloaded(batch))
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string });
    expect(rows.length).toBe(manifest.counts.exported);
    expect(manifest.output.file).toBe(batch.suggestedFilename());
    // Every row is one of the trajectories the filter showed.
    const ids = new Set(clean.items.map((s) => s.id));
    for (const r of rows) expect(ids.has(r.id), r.id).toBe(true);
    // What the dialog says is what the manifest says.
    expect((await page.locator('[data-testid=export-counts]').textContent())?.replace(/\s+/g, ' ')).toBe(
      `${manifest.counts.read} read = ${manifest.counts.exported} exported + ${manifest.counts.rejected} rejected`,
    );
    // Nothing was written beside the inputs.
    expect(fs.readdirSync(runDir, { recursive: true }).sort()).toEqual(inputsBefore);
    await page.click('.modal button.primary:has-text("Close")');
  });

  it('rows ticked with "select all shown" export as a selection, to Parquet, with the rejects accounted for', async () => {
    await page.goto(`${server.url}#/?sort=id&order=asc`);
    await page.waitForSelector('tr.trow');
    const all = (await (await fetch(`${server.url}api/trajectories`)).json()) as TrajectoryList;
    await expect.poll(shownCount).toBe(all.total);
    // A single tick does not open the trajectory.
    await page.locator('tr.trow td.pick input').first().check();
    expect(page.url()).not.toContain('#/t/');
    await page.locator('[data-testid=select-all]').check();
    expect(await page.locator('[data-testid=picked-count]').textContent()).toContain(`${all.total} ticked`);
    await page.click('[data-testid=open-export]');
    expect(await page.locator('.export-dialog .choice:has(input:checked)').textContent()).toContain(
      `${all.total} ticked`,
    );
    await page.click('.export-dialog button:has-text("Parquet")');
    const download = page.waitForEvent('download');
    await page.click('[data-testid=export-start]');
    const batch = await download;
    expect(batch.suggestedFilename()).toMatch(/\.parquet$/);
    await page.locator('[data-testid=export-done]').waitFor();
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SHOTS, 'export.png') });
    const rows = await readParquetRows(await downloaded(batch));
    const counts = (await page.locator('[data-testid=export-counts]').textContent())?.replace(/\s+/g, ' ') ?? '';
    const m = /(\d+) read = (\d+) exported \+ (\d+) rejected/.exec(counts);
    expect(m, counts).not.toBeNull();
    expect(Number(m![1])).toBe(all.total);
    expect(Number(m![2]) + Number(m![3])).toBe(all.total);
    expect(rows.length).toBe(Number(m![2]));
    // The demo run has broken trajectories: some are rejected, and the clean ones are all exported.
    expect(Number(m![3])).toBeGreaterThan(0);
    const exported = new Set(rows.map((r) => r.id as string));
    for (const s of all.items.filter((x) => x.health === 'ok')) expect(exported.has(s.id), s.id).toBe(true);
    const rejectsDownload = page.waitForEvent('download');
    await page.click('[data-testid=download-rejects]');
    const rejects = (await downloaded(await rejectsDownload)).toString('utf8').split('\n').filter(Boolean);
    expect(rejects.length).toBe(Number(m![3]));
  });

  it('promises what it writes: rows, rejects by reason (adding up), what re-alignment repairs (issue 33 #6)', async () => {
    await page.goto(server.url);
    await page.waitForSelector('tr.trow');
    await page.click('[data-testid=open-export]');
    const promise = page.locator('[data-testid=export-promise]');
    await promise.waitFor();
    const promisedRows = Number(await page.locator('[data-testid=promise-exported]').textContent());
    const promisedRejects = Number(await page.locator('[data-testid=promise-rejected]').textContent());
    const reasonCount = async (sel: string) =>
      (await page.locator(`${sel} li`).allTextContents()).reduce((n, t) => n + Number(/^(\d+) ×/.exec(t)![1]), 0);
    expect(await reasonCount('[data-testid=promise-reasons]')).toBe(promisedRejects);
    expect(await page.locator('[data-testid=promise-repaired]').textContent()).toMatch(
      /repaired by re-alignment: .*prefix break/,
    );
    // The button says how many rows it writes, not how many trajectories it reads.
    expect(await page.locator('[data-testid=export-start]').textContent()).toContain(
      `Write ${promisedRows} rows of ${promisedRows + promisedRejects}`,
    );
    const download = page.waitForEvent('download');
    await page.click('[data-testid=export-start]');
    await download;
    await page.locator('[data-testid=export-done]').waitFor();
    const manifestDownload = page.waitForEvent('download');
    await page.click('[data-testid=download-manifest]');
    const manifest = Manifest.parse(JSON.parse((await downloaded(await manifestDownload)).toString('utf8')));
    expect(manifest.counts.exported).toBe(promisedRows);
    expect(manifest.counts.rejected).toBe(promisedRejects);
    expect(await page.locator('[data-testid=export-surprise]').count()).toBe(0);
    expect(await reasonCount('[data-testid=export-reasons]')).toBe(manifest.counts.rejected);
    expect(await page.locator('[data-testid=export-repaired]').textContent()).toContain('repaired by re-alignment');
    await page.click('.modal button.primary:has-text("Close")');
  });

  it('"the current filter" narrowed to a step exports that step only (issue 33 #16)', async () => {
    // Narrowed as a user narrows: By step, then a click on step 3 opens the overview at that step.
    await page.goto(server.url);
    await page.click('[data-testid=open-run]');
    await page.click('table.steps tr[data-step="3"] .step-link');
    await expect.poll(() => page.url()).toContain('step=3');
    await page.locator('[data-testid=shown-count]').waitFor();
    const step3 = (await (await fetch(`${server.url}api/trajectories?step=3`)).json()) as TrajectoryList;
    const all = (await (await fetch(`${server.url}api/trajectories`)).json()) as TrajectoryList;
    expect(step3.total).toBeGreaterThan(0);
    expect(step3.total).toBeLessThan(all.total);
    await expect.poll(shownCount).toBe(step3.total);
    await page.click('[data-testid=open-export]');
    expect(await page.locator('.export-dialog').textContent()).toContain('step 3');
    const download = page.waitForEvent('download');
    await page.click('[data-testid=export-start]');
    await download;
    await page.locator('[data-testid=export-done]').waitFor();
    const manifestDownload = page.waitForEvent('download');
    await page.click('[data-testid=download-manifest]');
    const manifest = Manifest.parse(JSON.parse((await downloaded(await manifestDownload)).toString('utf8')));
    expect(manifest.counts.read).toBe(step3.total);
    expect(manifest.settings.selection).toBe('filter step=3');
    await page.click('.modal button.primary:has-text("Close")');
  });
});
