// `rollscope serve DIR` on a gateway's capture folder while an agent runs through the gateway: the
// session appears in the inspector, named by its session id, and its prefix break shows once the
// re-rendering agent's second turn is captured.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { REFERENCE_IDS } from '../support/engine-reference.ts';
import { type EngineStandin, startEngineStandin } from '../support/engine-standin.ts';
import { exited, MODEL, post, spawnGateway, tempDir } from '../support/gateway-harness.ts';
import { type InspectorSession, openInspector, rowsDrawn, SCREENSHOT_DIR, type ServerProcess } from './support.ts';

let engine: EngineStandin;
let gateway: Awaited<ReturnType<typeof spawnGateway>>;
let session: InspectorSession;
let server: ServerProcess;
let page: Page;

beforeAll(async () => {
  engine = await startEngineStandin({
    engine: 'vllm',
    model: MODEL,
    // " will" as " w" + "ill": the re-rendered history loses the model's split.
    script: (_c, i) =>
      i === 0 ? { ids: [40, 289, 483, 990, 432, 13, REFERENCE_IDS.imEnd] } : { text: 'Square both legs and add.' },
  });
  const out = tempDir('gw-live');
  gateway = await spawnGateway(['--upstream', engine.url, '--listen', '127.0.0.1:0', '--out', out, '--mode', 'guard']);
  session = await openInspector({ serveArgs: [out] });
  ({ server, page } = session);
});

afterAll(async () => {
  await session?.close();
  gateway?.child.kill('SIGTERM');
  if (gateway) await exited(gateway.child);
  await engine?.close();
});

describe('serve on a live gateway capture', () => {
  it('shows the session as the agent runs, and its break once the second turn is in', async () => {
    await page.goto(server.url);
    const messages: Record<string, unknown>[] = [
      { role: 'user', content: 'How do you find the hypotenuse of a right triangle?' },
    ];
    const url = `${gateway.url}/v1/chat/completions`;
    const first = await post(url, { model: MODEL, messages }, { 'x-session-id': 'live-geo-1' });
    expect(first.status).toBe(200);
    const row = page.locator('tr.trow[data-id="live-geo-1"]');
    await row.waitFor();
    expect(await row.getAttribute('class')).not.toMatch(/health-row-error/);

    messages.push(
      { role: 'assistant', content: first.json.choices[0].message.content },
      { role: 'user', content: 'Go on.' },
    );
    const second = await post(url, { model: MODEL, messages }, { 'x-session-id': 'live-geo-1' });
    expect(second.headers.get('x-rollscope-findings')).not.toBe('0');
    await page.waitForSelector('tr.trow[data-id="live-geo-1"].health-row-error');
    await page.waitForSelector('button.count[data-kind="prefix_break"]');
    expect(await page.locator('button.count[data-kind="prefix_break"] b').textContent()).toBe('1');
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'gateway-live.png') });

    // The trajectory opens at the break the gateway flagged (its id opens its page; a row click, the drawer).
    await row.locator('td.id a').click();
    await page.waitForFunction(() => window.location.hash.startsWith('#/t/live-geo-1'));
    await page.waitForSelector("text=turn 1's prompt stops extending turn 0");
  });
});
