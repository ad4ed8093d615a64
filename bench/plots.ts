// Figure "plots": which charting library draws the run page. uPlot against Observable Plot, each
// bundled by esbuild into a page of its own and driven by Playwright on Debian's chromium:
// - the run page's trends at 1,000 steps (10 plots, 1,000 points each, a few gaps),
// - one series of 10^5 points,
// each timed from the call to the frame after it is painted; then the cursor crosses the plot in
// 120 moves (one per frame) while a PerformanceObserver records long tasks and a frame loop the gaps between frames; and the minified,
// gzipped bundle of each library. Targets (issue 23): no task over 50 ms while hovering.
// Observable Plot is not a dependency: install it for the comparison with
// `npm install --no-save @observablehq/plot@0.6.17`; without it its figures say "not measured".
// `node bin/tsx.js bench/plots.ts [--quick]`
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, startServe, waitForLoaded } from '../test/e2e/support.ts';
import { writeLongRun } from '../test/fixtures/generate-long-run.ts';
import { benchDir, isMain, REPO, round, runStandalone, type Figure, type Measure, type Target } from './lib.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const TREND_PLOTS = 10;
const HOVER_MOVES = 120;

type Library = 'uplot' | 'plot';

/**
 * Each page exposes `draw(kind, n)`: build the data (not timed), draw, wait for the frame after the
 * paint, and answer the milliseconds. The cursor readout is each library's own: uPlot's cursor and
 * legend, Observable Plot's pointer-driven tip and rule.
 */
const ENTRIES: Record<Library, string> = {
  uplot: `
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
window.draw = async (kind, n, plots) => {
  const root = document.getElementById('root');
  root.replaceChildren();
  const xs = Float64Array.from({ length: n }, (_, i) => i);
  const series = Array.from({ length: plots }, (_, p) =>
    Array.from({ length: n }, (_, i) => (i % 97 === 13 ? null : Math.sin(i / 40 + p) + 0.1 * Math.cos(i * 7.1))),
  );
  const t0 = performance.now();
  for (let p = 0; p < plots; p++) {
    const el = document.createElement('div');
    root.append(el);
    new uPlot(
      {
        width: 900,
        height: kind === 'trends' ? 110 : 400,
        scales: { x: { time: false } },
        series: [{ label: 'step' }, { label: 'value', stroke: '#3465a4', spanGaps: false, points: { show: false } }],
        axes: [{}, {}],
      },
      [xs, series[p]],
      el,
    );
  }
  await frame();
  return performance.now() - t0;
};
`,
  plot: `
import * as Plot from '@observablehq/plot';
const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
window.draw = async (kind, n, plots) => {
  const root = document.getElementById('root');
  root.replaceChildren();
  const series = Array.from({ length: plots }, (_, p) =>
    Array.from({ length: n }, (_, i) => ({
      step: i,
      value: i % 97 === 13 ? null : Math.sin(i / 40 + p) + 0.1 * Math.cos(i * 7.1),
    })),
  );
  const t0 = performance.now();
  for (let p = 0; p < plots; p++) {
    const data = series[p];
    root.append(
      Plot.plot({
        width: 900,
        height: kind === 'trends' ? 110 : 400,
        marks: [
          Plot.lineY(data, { x: 'step', y: 'value', stroke: '#3465a4' }),
          Plot.ruleX(data, Plot.pointerX({ x: 'step', stroke: '#888' })),
          Plot.tip(data, Plot.pointerX({ x: 'step', y: 'value' })),
        ],
      }),
    );
  }
  await frame();
  return performance.now() - t0;
};
`,
};

const PACKAGE: Record<Library, string> = { uplot: 'uplot', plot: '@observablehq/plot' };
const LABEL: Record<Library, string> = { uplot: 'uPlot', plot: 'Observable Plot' };

/** Long tasks, and the gaps between animation frames (a slow pointer handler shows in both). */
const INSTRUMENT = `(() => {
  window.__longTasks = [];
  window.__frames = [];
  const tick = (t) => { window.__frames.push(t); requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, duration: e.duration });
  }).observe({ type: 'longtask', buffered: true });
})();`;

interface Bundle {
  js: string;
  css: string;
  bytes: number;
  gzipBytes: number;
}

function installedVersion(lib: Library): string | null {
  const manifest = path.join(REPO, 'node_modules', PACKAGE[lib], 'package.json');
  return fs.existsSync(manifest)
    ? (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string }).version
    : null;
}

async function bundle(lib: Library): Promise<Bundle> {
  const out = await build({
    stdin: { contents: ENTRIES[lib], resolveDir: REPO, loader: 'js' },
    bundle: true,
    minify: true,
    format: 'esm',
    write: false,
    outdir: 'out',
    logLevel: 'silent',
  });
  const text = (ext: string) =>
    out.outputFiles
      .filter((f) => f.path.endsWith(ext))
      .map((f) => f.text)
      .join('\n');
  const js = text('.js');
  const css = text('.css');
  const all = Buffer.from(js + css);
  return { js, css, bytes: all.length, gzipBytes: zlib.gzipSync(all, { level: 9 }).length };
}

/** Move the cursor across the first plot's drawing area, one move per frame; the longest long task meanwhile. */
interface HoverFigures {
  longest: number;
  tasks: number;
  ms: number;
  longestFrame: number;
}

async function hover(page: Page, selector: string): Promise<HoverFigures> {
  const box = await page.locator(selector).first().boundingBox();
  if (!box) throw new Error(`no plot area (${selector}) to hover`);
  const from = await page.evaluate(() => performance.now());
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + 1, y);
  for (let i = 0; i <= HOVER_MOVES; i++) {
    await page.mouse.move(box.x + 1 + ((box.width - 2) * i) / HOVER_MOVES, y);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(undefined))));
  }
  await page.waitForTimeout(200);
  const { tasks, now, frames } = await page.evaluate((t) => {
    const w = window as unknown as { __longTasks: { start: number; duration: number }[]; __frames: number[] };
    return {
      tasks: w.__longTasks.filter((x) => x.start >= t),
      frames: w.__frames.filter((x) => x >= t),
      now: performance.now(),
    };
  }, from);
  let longestFrame = 0;
  for (let i = 1; i < frames.length; i++) longestFrame = Math.max(longestFrame, frames[i]! - frames[i - 1]!);
  return {
    longest: tasks.reduce((m, t) => Math.max(m, t.duration), 0),
    tasks: tasks.length,
    ms: now - from,
    longestFrame,
  };
}

interface LibraryFigures {
  lib: Library;
  version: string;
  bundle: Bundle;
  trends: { draw: number; hover: Awaited<ReturnType<typeof hover>> };
  big: { draw: number; hover: Awaited<ReturnType<typeof hover>> };
}

/** The plot area the cursor crosses: uPlot's `.u-over`, Observable Plot's svg. */
const HOVER_AREA: Record<Library, string> = { uplot: '.u-over', plot: 'svg' };

async function measure(browser: Browser, lib: Library, steps: number, points: number): Promise<LibraryFigures | null> {
  const version = installedVersion(lib);
  if (version === null) return null;
  const b = await bundle(lib);
  const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
  try {
    await page.setContent(
      `<!doctype html><html><head><style>${b.css}</style></head><body><div id="root"></div></body></html>`,
    );
    await page.addScriptTag({ content: INSTRUMENT });
    await page.addScriptTag({ content: b.js, type: 'module' });
    await page.waitForFunction(() => typeof (window as unknown as { draw?: unknown }).draw === 'function');
    const draw = (kind: string, n: number, plots: number) =>
      page.evaluate(
        ([k, nn, pp]) =>
          (window as unknown as { draw: (k: string, n: number, p: number) => Promise<number> }).draw(
            k as string,
            nn as number,
            pp as number,
          ),
        [kind, n, plots] as const,
      );
    // A warm-up draw: the first one also compiles the library's code.
    await draw('trends', 50, 1);
    const trendsDraw = await draw('trends', steps, TREND_PLOTS);
    const trendsHover = await hover(page, HOVER_AREA[lib]);
    const bigDraw = await draw('big', points, 1);
    const bigHover = await hover(page, HOVER_AREA[lib]);
    return {
      lib,
      version,
      bundle: b,
      trends: { draw: trendsDraw, hover: trendsHover },
      big: { draw: bigDraw, hover: bigHover },
    };
  } finally {
    await page.close();
  }
}

/**
 * rollscope's own run page on a generated 1,000-step run (test/fixtures/generate-long-run.ts):
 * from navigation to every trend drawn, then the cursor across one trend (every trend and its
 * readout follow it), the longest task or frame gap meanwhile.
 */
export async function runPage(
  browser: Browser,
  steps: number,
): Promise<{ drawn: number; hover: HoverFigures; perMove: { median: number; p90: number; max: number } } | null> {
  if (!fs.existsSync(path.join(REPO, 'dist', 'app', 'index.html'))) return null;
  const dir = path.join(benchDir(), 'plots');
  fs.rmSync(dir, { recursive: true, force: true });
  const run = await writeLongRun(dir, steps);
  const server = await startServe([run.file]);
  try {
    await waitForLoaded(server.url);
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.addInitScript({ content: INSTRUMENT });
    const t0 = Date.now();
    await page.goto(`${server.url}#/run`);
    await page.waitForSelector('[data-testid="trend-logprobs"] canvas', { timeout: 60_000 });
    const drawn = Date.now() - t0;
    await page.waitForTimeout(500);
    const hovered = await hover(page, '[data-testid="trend-reward"] .u-over');
    // The page's own cost of a cursor move, without Playwright's round trip: 200 mousemoves sent
    // in the page, each followed by a forced style and layout, as the next frame would do.
    const perMove = await page.evaluate(() => {
      const over = document.querySelector('[data-testid="trend-reward"] .u-over') as HTMLElement;
      const b = over.getBoundingClientRect();
      const times: number[] = [];
      for (let i = 0; i < 200; i++) {
        const t = performance.now();
        const init = { clientX: b.left + (b.width * i) / 200, clientY: b.top + b.height / 2, bubbles: true };
        over.dispatchEvent(new MouseEvent('mousemove', init));
        void document.body.offsetHeight;
        times.push(performance.now() - t);
      }
      times.sort((x, y) => x - y);
      return { median: times[100]!, p90: times[180]!, max: times[199]! };
    });
    await page.close();
    return { drawn, hover: hovered, perMove };
  } finally {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function plotsFigure(quick: boolean): Promise<Figure> {
  const steps = 1000;
  const points = quick ? 10_000 : 100_000;
  const title = `plots: the run page's trends at ${steps} steps and a ${points.toLocaleString('en')}-point series, uPlot against Observable Plot`;
  if (!fs.existsSync(CHROMIUM))
    return {
      figure: 'plots',
      title,
      status: 'not-measured',
      data: {},
      results: [
        { name: 'draw / hover', value: null, unit: 'ms', note: `no chromium at ${CHROMIUM} (set CHROMIUM_PATH)` },
      ],
      references: [],
      targets: [],
      notes: [],
    };
  const browser = await launchChromium();
  let figures: (LibraryFigures | null)[];
  let page: Awaited<ReturnType<typeof runPage>>;
  try {
    figures = [];
    for (const lib of ['uplot', 'plot'] as const) figures.push(await measure(browser, lib, steps, points));
    page = await runPage(browser, quick ? 200 : steps);
  } finally {
    await browser.close();
  }
  const measures = (lib: Library, f: LibraryFigures | null): Measure[] => {
    const name = LABEL[lib];
    if (f === null) {
      const note = `${PACKAGE[lib]} is not installed (npm install --no-save ${PACKAGE[lib]})`;
      return [{ name: `${name}: draw`, value: null, unit: 'ms', note }];
    }
    const hoverNote = (h: HoverFigures) =>
      `${h.tasks} long task(s) in ${HOVER_MOVES} cursor moves, ${round(h.ms / 1000, 1)} s; longest gap between frames ${round(h.longestFrame)} ms`;
    return [
      {
        name: `${name} ${f.version}: draw ${TREND_PLOTS} trends × ${steps} steps`,
        value: round(f.trends.draw),
        unit: 'ms',
      },
      {
        name: `${name}: longest task while hovering a trend (0 = none over 50 ms)`,
        value: round(f.trends.hover.longest),
        unit: 'ms',
        note: hoverNote(f.trends.hover),
      },
      { name: `${name}: draw one series of ${points} points`, value: round(f.big.draw), unit: 'ms' },
      {
        name: `${name}: longest task while hovering the ${points}-point series`,
        value: round(f.big.hover.longest),
        unit: 'ms',
        note: hoverNote(f.big.hover),
      },
      {
        name: `${name}: bundle, minified and gzipped (JS + CSS)`,
        value: round(f.bundle.gzipBytes / 1024, 1),
        unit: 'KB',
        note: `${round(f.bundle.bytes / 1024, 1)} KB minified`,
      },
    ];
  };
  const [u, p] = figures as [LibraryFigures | null, LibraryFigures | null];
  const hoverTarget = (lib: Library, f: LibraryFigures | null): Target => {
    // A long frame gap counts too: Observable Plot's re-render of a large SVG on pointer moves is
    // style/layout/paint work that the longtask observer does not report, yet blocks the thread.
    const longest = f
      ? Math.max(f.trends.hover.longest, f.big.hover.longest, f.trends.hover.longestFrame, f.big.hover.longestFrame)
      : null;
    return {
      name: `hover (${LABEL[lib]})`,
      wanted: 'no task over 50 ms while the cursor moves across a plot (trends at 1,000 steps and 10^5 points)',
      measured: longest === null ? 'not installed' : `${round(longest)} ms longest task or frame gap`,
      met: longest === null || quick ? null : longest <= 50,
    };
  };
  return {
    figure: 'plots',
    title,
    status: u && p ? 'measured' : u || p ? 'partly-measured' : 'not-measured',
    data: { steps, 'trend plots': TREND_PLOTS, points, 'hover moves': HOVER_MOVES, chromium: CHROMIUM },
    results: [
      ...measures('uplot', u),
      ...(page
        ? [
            {
              name: `the run page (uPlot) at ${quick ? 200 : steps} steps: navigation to every trend drawn`,
              value: page.drawn,
              unit: 'ms',
            },
            {
              name: 'the run page: longest task or frame gap while the cursor crosses a trend (all 9 follow it)',
              value: round(Math.max(page.hover.longest, page.hover.longestFrame)),
              unit: 'ms',
              note: `${page.hover.tasks} long task(s) in ${HOVER_MOVES} cursor moves`,
            },
            {
              name: 'the run page: script, style and layout of one cursor move (median; 9 charts and their readouts)',
              value: round(page.perMove.median, 2),
              unit: 'ms',
              note: `p90 ${round(page.perMove.p90, 1)} ms, max ${round(page.perMove.max, 1)} ms over 200 moves sent in the page`,
            },
          ]
        : [{ name: 'the run page', value: null, unit: 'ms', note: 'the app is not built (npm run build)' }]),
    ],
    references: measures('plot', p),
    targets: [
      hoverTarget('uplot', u),
      hoverTarget('plot', p),
      {
        name: 'hover (the run page)',
        wanted: 'no task over 50 ms while the cursor moves across the run page at 1,000 steps',
        measured: page
          ? `${round(Math.max(page.hover.longest, page.hover.longestFrame))} ms longest task or frame gap`
          : 'the app is not built',
        met: page && !quick ? Math.max(page.hover.longest, page.hover.longestFrame) <= 50 : null,
      },
    ],
    notes: [
      'Each library in a page of its own (esbuild bundle); draw time from the call to the frame after the paint, after one warm-up draw.',
      'Headless chromium (--disable-gpu) on this machine; a cursor move costs ~35 ms of Playwright round trip here, so the frame gaps, not the seconds, say how the page kept up.',
    ],
  };
}

if (isMain(import.meta.url)) await runStandalone(plotsFigure);
