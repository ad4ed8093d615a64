import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { PlaygroundPrefill, TokenStream, TrajectoryDetail, TrajectoryList } from '../../server/http/api.ts';
import { loadProfile } from '../../server/profiles/profile.ts';
import { visiblePiece } from '../../server/profiles/tokenizer.ts';
import { SCREENSHOT_DIR, type ServerProcess, openInspector, type InspectorSession, rowsDrawn } from './support.ts';

const SHOTS = SCREENSHOT_DIR;
let server: ServerProcess;
let page: Page;

async function api<T>(p: string): Promise<T> {
  const res = await fetch(server.url + p.replace(/^\//, ''));
  expect(res.status, p).toBe(200);
  return (await res.json()) as T;
}

let session: InspectorSession;
beforeAll(async () => {
  session = await openInspector();
  ({ server, page } = session);
});

afterAll(async () => {
  await session?.close();
});

interface Message {
  role: string;
  content: string | { type?: string; text?: string }[];
}

const tokenCount = async () =>
  Number((await page.locator('[data-testid=pg-token-count]').textContent())?.replace(/,/g, ''));

describe('playground', () => {
  it('renders a trajectory first turn to its prompt, and shows where a pasted edit parts from it', async () => {
    // A clean trajectory with an image whose first turn has messages and prompt ids.
    const clean = await api<TrajectoryList>('/api/trajectories?status=ok&sort=id&order=asc');
    let pick: { id: string; detail: TrajectoryDetail } | undefined;
    for (const s of clean.items.filter((x) => x.images > 0)) {
      const detail = await api<TrajectoryDetail>(`/api/trajectories/${encodeURIComponent(s.id)}`);
      if (detail.streams.some((st) => st.name === 'prompt' && st.turn === 0)) {
        pick = { id: s.id, detail };
        break;
      }
    }
    expect(pick).toBeDefined();
    const { id, detail } = pick!;
    // The prompt the engine saw, from the data: where turn 0's generation starts in its stream.
    const stream = await api<TokenStream>(`/api/trajectories/${encodeURIComponent(id)}/stream?name=prompt&turn=0`);
    const promptLength = stream.turns.find((m) => m.what === 'generated')!.index;

    // Opened on the trajectory, the playground starts from its first turn and renders it.
    await page.goto(`${server.url}#/t/${encodeURIComponent(id)}?view=playground`);
    await page.locator('[data-testid=pg-verdict]').waitFor();
    expect(await tokenCount()).toBe(promptLength);
    expect(await page.locator('[data-testid=pg-verdict]').textContent()).toContain(
      '✓ identical to turn 0 prompt + generation',
    );

    // Paste an edited conversation: one more sentence at the end of the last user message.
    const prefill = await api<PlaygroundPrefill>(`/api/playground/conversation?id=${encodeURIComponent(id)}`);
    const doc = JSON.parse(prefill.conversation) as { messages: Message[] };
    const last = doc.messages[doc.messages.length - 1]!;
    expect(last.role).toBe('user');
    const added = ' Answer in one word.';
    if (typeof last.content === 'string') last.content += added;
    else {
      const part = [...last.content].reverse().find((p) => p.type === 'text')!;
      part.text += added;
    }
    await page.fill('textarea[aria-label=conversation]', JSON.stringify(doc, null, 2));
    await page.click('[data-testid=pg-render]');
    const tokenizer = loadProfile(detail.profile).tokenizer;
    const addedIds = await tokenizer.encode(added);
    const extra = addedIds.length;
    await expect.poll(tokenCount).toBe(promptLength + extra);

    // The new text sits before the user turn's closing `<|im_end|>\n<|im_start|>assistant\n` (5 tokens).
    const divergesAt = promptLength - 5;
    await expect
      .poll(() => page.locator('[data-testid=pg-verdict]').textContent())
      .toContain(`differs from turn 0 prompt + generation at token ${divergesAt}`);
    await page.locator('[data-testid=divergence]').waitFor();
    expect(await page.locator('.div-where').textContent()).toContain(`at token ${divergesAt} of rendered here`);
    await page.click('[data-testid=first-divergence]');
    const row = page.locator('.drow.selected');
    await row.waitFor();
    expect(Number(await row.getAttribute('data-a'))).toBe(divergesAt);
    // The first added token on the rendered side, nothing on the trajectory's...
    expect(await row.locator('.dside').nth(0).textContent()).toBe(visiblePiece(tokenizer.piece(addedIds[0]!)));
    expect(await row.locator('.dside').nth(1).textContent()).toBe('—');
    // ...and after the added tokens both sides close the user turn together.
    const after = page.locator(`.drow[data-row="${Number(await row.getAttribute('data-row')) + extra}"] .dside`);
    expect(await after.nth(0).textContent()).toBe('<|im_end|>');
    expect(await after.nth(1).textContent()).toBe('<|im_end|>');
    await rowsDrawn(page);
    await page.screenshot({ path: path.join(SHOTS, 'playground.png') });

    // The token chips mark the same token.
    await page.click('nav.tabs button:has-text("Tokens")');
    await page.locator(`.pg-tokens .tok.flagged[data-i="${divergesAt}"]`).waitFor();
  });
});
