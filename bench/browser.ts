// Figure "browser": the inspector on one long trajectory (128k tokens, 16 images): time from
// navigation to the first token chips, and the longest main-thread task while the token stream
// is scrolled end to end (Playwright driving Debian's chromium; PerformanceObserver 'longtask').
// Targets (issue): first chips within 1 s; no task over 50 ms while scrolling.
// `node bin/tsx.js bench/browser.ts [--quick] [--keep]`
import fs from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { generateRun } from './generate.ts';
import { benchDir, isMain, REPO, round, runStandalone, type Figure } from './lib.ts';
import { launchChromium, startServe, waitForLoaded, type ServerProcess } from '../test/e2e/support.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

interface PageClock {
  firstChip?: number;
  longTasks: { start: number; duration: number }[];
}

declare global {
  interface Window {
    __rollscopeBench: PageClock;
  }
}

/**
 * Installed before the app loads: when the first chip appears, and every long task. A string, not
 * a function: the TypeScript loader wraps named functions in a helper (`__name`) that the page does
 * not have, which made the first version throw before it observed anything.
 */
const INSTRUMENT = `(() => {
  const clock = { longTasks: [] };
  window.__rollscopeBench = clock;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) clock.longTasks.push({ start: e.startTime, duration: e.duration });
  }).observe({ type: 'longtask', buffered: true });
  new MutationObserver(() => {
    if (clock.firstChip === undefined && document.querySelector('.tok')) clock.firstChip = performance.now();
  }).observe(document, { childList: true, subtree: true });
})();`;

/** Scroll the token stream to its end, one step per frame (a fast, continuous scroll). */
async function scrollToEnd(): Promise<{ steps: number; ms: number; reachedEnd: boolean }> {
  const el = document.querySelector('.rows');
  if (!el) throw new Error('no token stream scroller (.rows)');
  const t0 = performance.now();
  let steps = 0;
  let still = 0;
  for (;;) {
    const before = el.scrollTop;
    el.scrollTop = before + el.clientHeight * 0.9;
    await new Promise((r) => requestAnimationFrame(() => r(undefined)));
    steps++;
    const atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 2;
    still = el.scrollTop === before ? still + 1 : 0;
    if ((atEnd && still > 2) || still > 30 || steps > 20000)
      return { steps, ms: performance.now() - t0, reachedEnd: atEnd };
  }
}

export async function browserFigure(quick: boolean): Promise<Figure> {
  const shape = quick
    ? { turns: 4, tokensPerTurn: 2000, imagesPerTrajectory: 4 }
    : { turns: 16, tokensPerTurn: 8000, imagesPerTrajectory: 16 };
  const title = `browser: a ${quick ? 'short (quick)' : '128k-token'} trajectory with ${shape.imagesPerTrajectory} images`;
  const notMeasured = (why: string): Figure => ({
    figure: 'browser',
    title,
    status: 'not-measured',
    data: {},
    results: [{ name: 'first token chips / longest task', value: null, unit: 'ms', note: why }],
    references: [],
    targets: [],
    notes: [],
  });
  if (!fs.existsSync(CHROMIUM)) return notMeasured(`no chromium at ${CHROMIUM} (set CHROMIUM_PATH)`);
  if (!fs.existsSync(path.join(REPO, 'dist', 'app', 'index.html')))
    return notMeasured('the app is not built (npm run build)');

  const dir = path.join(benchDir(), 'browser');
  fs.rmSync(dir, { recursive: true, force: true });
  const run = await generateRun({
    out: path.join(dir, 'long.rollscope.jsonl'),
    trajectories: 1,
    groupSize: 1,
    distinct: 1,
    faultyShare: 0,
    ...shape,
  });
  const id = 'step0-p0-s0';

  let server: ServerProcess | undefined;
  let browser: Browser | undefined;
  try {
    server = await startServe([run.file]);
    await waitForLoaded(server.url);
    browser = await launchChromium();
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.addInitScript({ content: INSTRUMENT });
    await page.goto(`${server.url}#/t/${encodeURIComponent(id)}`);
    await page.waitForSelector('.tok', { timeout: 60_000 });
    const firstChip = await page.evaluate(() => window.__rollscopeBench.firstChip);
    if (firstChip === undefined) throw new Error('the page saw a chip but the instrument did not: it is not installed');
    // Let the first render settle (and the whole stream arrive), then measure the scroll alone.
    await page.waitForTimeout(1000);
    // Where the time went: when the app's requests were sent and answered (resource timing).
    const requests = await page.evaluate(() =>
      performance.getEntriesByType('resource').map((e) => ({
        name: e.name,
        start: e.startTime,
        end: (e as PerformanceResourceTiming).responseEnd,
      })),
    );
    const timing = (match: (path: string) => boolean) => {
      const r = requests.find((x) => match(new URL(x.name).pathname + new URL(x.name).search));
      return r ? `${round(r.start)}–${round(r.end)} ms` : 'not answered yet';
    };
    const breakdown = [
      `app script ${timing((p) => p.startsWith('/assets/') && p.endsWith('.js'))}`,
      `detail ${timing((p) => p === `/api/trajectories/${id}`)}`,
      `stream head ${timing((p) => p.includes('/stream?') && p.includes('head='))}`,
      `whole stream ${timing((p) => p.includes('/stream?') && !p.includes('head='))}`,
    ].join('; ');
    const scrollStart = await page.evaluate(() => performance.now());
    const scroll = await page.evaluate(scrollToEnd);
    await page.waitForTimeout(300);
    const tasks = await page.evaluate(
      (from) => window.__rollscopeBench.longTasks.filter((t) => t.start >= from),
      scrollStart,
    );
    const longest = tasks.reduce((m, t) => Math.max(m, t.duration), 0);
    const tokens = run.sampleTokens;
    return {
      figure: 'browser',
      title,
      status: 'measured',
      data: {
        tokens,
        images: shape.imagesPerTrajectory,
        turns: shape.turns,
        'record MB': round(run.bytes / 1e6, 1),
        chromium: CHROMIUM,
      },
      results: [
        {
          name: 'navigation to first token chips',
          value: firstChip,
          unit: 'ms',
          note: `requests (sent–answered): ${breakdown}`,
        },
        {
          name: 'longest long task (over 50 ms; 0 = none) while scrolling end to end',
          value: longest,
          unit: 'ms',
          note: `${tasks.length} long task(s) in ${scroll.steps} frames, ${round(scroll.ms / 1000, 1)} s${scroll.reachedEnd ? '' : '; did not reach the end'}`,
        },
      ],
      references: [],
      targets: [
        {
          name: 'first chips',
          wanted: 'the 128k-token trajectory shows its first chips within 1 s',
          measured: `${round(firstChip)} ms`,
          met: quick ? null : firstChip < 1000,
        },
        {
          name: 'smooth scroll',
          wanted: 'no main-thread task while scrolling lasts more than 50 ms',
          measured: tasks.length === 0 ? 'no task over 50 ms' : `${round(longest)} ms longest`,
          met: quick ? null : longest <= 50 && scroll.reachedEnd,
        },
      ],
      notes: [
        'Headless chromium (--disable-gpu) on this machine; the figures include the server answering the stream request.',
      ],
    };
  } finally {
    await browser?.close();
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) await runStandalone(browserFigure);
