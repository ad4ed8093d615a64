// Rows of token chips drawn a few per frame. A screen of a token stream is ~1,000 chips, and
// drawing them (React, then style, layout and paint of every chip) takes 60–200 ms on a 2-core
// machine: one long task when the stream opens and one per frame while it is scrolled fast. So a
// row mounts as its plain text (one element, cheap to lay out and paint) and is queued; each
// animation frame draws queued rows as chips until a small time budget is spent. A row that
// scrolls away before its turn leaves the queue unseen. Measured by bench/browser.ts.
import { useEffect, useState } from 'react';
import { flushSync } from 'react-dom';

/** Script time per frame spent drawing rows; style, layout and paint of what it drew come on top (~3×). */
const BUDGET_MS = 5;

/** Rows waiting, in the order they mounted (top of the screen first). */
const waiting = new Set<() => void>();
const busyListeners = new Set<(busy: boolean) => void>();
let frame: number | null = null;

function setBusy(busy: boolean): void {
  for (const listen of busyListeners) listen(busy);
}

function drawSome(): void {
  frame = null;
  const start = performance.now();
  for (const draw of waiting) {
    waiting.delete(draw);
    // Synchronously, so the time it took is known and the budget holds.
    flushSync(draw);
    if (performance.now() - start >= BUDGET_MS) break;
  }
  if (waiting.size > 0) frame = requestAnimationFrame(drawSome);
  else setBusy(false);
}

function enqueue(draw: () => void): void {
  if (waiting.size === 0) setBusy(true);
  waiting.add(draw);
  frame ??= requestAnimationFrame(drawSome);
}

function dequeue(draw: () => void): void {
  if (!waiting.delete(draw) || waiting.size > 0) return;
  if (frame !== null) cancelAnimationFrame(frame);
  frame = null;
  setBusy(false);
}

/**
 * Whether a row may draw its chips now. `now`: draw at once (it holds the selected token, which
 * keyboard focus and a deep link need as a real chip). Otherwise false until the row's turn.
 */
export function useDrawnSoon(now: boolean): boolean {
  const [drawn, setDrawn] = useState(now);
  useEffect(() => {
    if (drawn || now) return;
    const draw = () => setDrawn(true);
    enqueue(draw);
    return () => dequeue(draw);
  }, [drawn, now]);
  return drawn || now;
}

/**
 * Call `listen(true)` when rows start waiting and `listen(false)` when all are drawn (a list's
 * `aria-busy`; tests wait for it before a screenshot). Returns the unsubscribe function.
 */
export function onRowsWaiting(listen: (busy: boolean) => void): () => void {
  busyListeners.add(listen);
  listen(waiting.size > 0);
  return () => busyListeners.delete(listen);
}
