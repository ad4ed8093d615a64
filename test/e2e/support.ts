// Shared by the browser tests: write a run, start the real `rollscope serve` on it as a child
// process, launch Debian's chromium.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { writeFixtureRun } from './fixture.ts';
import { waitFor } from '../support/wait.ts';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
}

/** The demo run when it is part of this build, else the small fixture run. */
export async function writeRun(): Promise<{ dir: string; demo: boolean }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-e2e-'));
  const demoModule = path.resolve('server/demo/write.ts');
  if (fs.existsSync(demoModule) && process.env.ROLLSCOPE_E2E_FIXTURE !== '1') {
    const { writeDemoRun } = (await import(demoModule)) as { writeDemoRun: (dir: string) => Promise<unknown> };
    await writeDemoRun(dir);
    return { dir, demo: true };
  }
  await writeFixtureRun(dir);
  return { dir, demo: false };
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** `node bin/rollscope.js serve --no-open --port 0 ARGS`, resolved once it prints its URL. */
export function startServe(args: string[]): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['bin/rollscope.js', 'serve', '--no-open', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
      if (m)
        resolve({
          url: m[1]!,
          child,
          stop: () =>
            new Promise<void>((done) => {
              if (child.exitCode !== null) return done();
              child.once('exit', () => done());
              child.kill('SIGTERM');
            }),
        });
    });
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.once('exit', (code) => reject(new Error(`rollscope serve exited with ${code}: ${err || out}`)));
  });
}

/**
 * Resolves once every token stream on the page has drawn its rows as chips (rows come in a few per
 * frame, app/components/drawn-soon.ts): before a screenshot, so it shows the page a person sees.
 */
export async function rowsDrawn(page: Page): Promise<void> {
  await page.waitForFunction(() => document.querySelector('[aria-busy="true"]') === null);
}

export async function waitForLoaded(url: string): Promise<void> {
  await waitFor('the run to finish loading', async () => {
    const info = (await (await fetch(`${url}api/run`)).json()) as { loading: boolean };
    return !info.loading;
  });
}

/**
 * Where screenshots go: test-results/screenshots (ignored by git) on every run, so a test run
 * never edits tracked files; docs/screenshots when ROLLSCOPE_UPDATE_SCREENSHOTS=1 refreshes the
 * README's pictures.
 */
export const SCREENSHOT_DIR = path.resolve(
  process.env.ROLLSCOPE_UPDATE_SCREENSHOTS === '1' ? 'docs/screenshots' : 'test-results/screenshots',
);

export interface InspectorSession {
  runDir: string;
  server: ServerProcess;
  browser: Browser;
  page: Page;
  close(): Promise<void>;
}

/**
 * The setup every browser test shares: the demo run written to a temp folder (or `serveArgs`), the
 * real `serve` on it, chromium with one page (1440×900 unless `viewport`) that fails the test on
 * any page error, and the screenshot folder ready.
 */
export async function openInspector(
  opts: { acceptDownloads?: boolean; serveArgs?: string[]; viewport?: { width: number; height: number } } = {},
): Promise<InspectorSession> {
  // `serveArgs` serves those paths and flags instead of the written run.
  const runDir = opts.serveArgs ? '' : (await writeRun()).dir;
  const server = await startServe(opts.serveArgs ?? [runDir]);
  await waitForLoaded(server.url);
  const browser = await launchChromium();
  const page = await browser.newPage({
    viewport: opts.viewport ?? { width: 1440, height: 900 },
    acceptDownloads: opts.acceptDownloads ?? false,
  });
  page.on('pageerror', (e) => {
    throw e;
  });
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  return {
    runDir,
    server,
    browser,
    page,
    async close() {
      await browser.close();
      await server.stop();
    },
  };
}
