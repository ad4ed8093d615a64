// The stream view's rows (app/components/token-rows.ts) on random streams: every token in exactly
// one row, in order; rows break after a newline, before a turn mark or image, every ROW_TOKENS
// tokens, and never inside a character split across tokens.
import { describe, expect, it } from 'vitest';
import type { TokenStream } from '../server/http/api.ts';
import { buildRows, ROW_TOKENS, type Row } from '../app/components/token-rows.ts';

type Stream = Pick<TokenStream, 'ids' | 'pieces' | 'turns' | 'vision' | 'joins'>;

function randomStream(seed: number): Stream {
  let x = seed * 2654435761 + 1;
  const rand = (k: number) => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x % k;
  };
  const pieces: Record<string, string> = { 0: '·a', 1: 'b', 2: '⏎', 3: '.⏎⏎', 4: '<|im_end|>', 5: '<|image_pad|>' };
  const n = 50 + rand(800);
  const ids: number[] = [];
  const vision: Stream['vision'] = [];
  const joins: Stream['joins'] = [];
  while (ids.length < n) {
    const r = rand(100);
    if (r < 1) {
      // An image's pad run; now and then cut (no vision_end).
      const padLength = 1 + rand(60);
      const cellsWide = rand(3) === 0 ? undefined : 1 + rand(12);
      vision.push({
        kind: 'image',
        image: vision.length,
        start: ids.length - 1,
        end: rand(5) === 0 ? -1 : ids.length + padLength,
        padStart: ids.length,
        padLength,
        expectedPads: padLength,
        gridThw: null,
        cellsWide,
      } as Stream['vision'][number]);
      for (let k = 0; k < padLength; k++) ids.push(5);
    } else if (r < 12) {
      const len = 2 + rand(3);
      joins.push({ start: ids.length, end: ids.length + len, text: '√' });
      for (let k = 0; k < len; k++) ids.push(1);
    } else if (r < 14)
      ids.push(2 + rand(2)); // a newline now and then: rows also fill up
    else ids.push([0, 1, 4][rand(3)]!);
  }
  const turns: Stream['turns'] = [];
  // Turns start anywhere but inside a split character (a turn's text is whole characters).
  for (let k = 0; k < 1 + rand(6); k++) {
    const index = rand(ids.length);
    if (!joins.some((j) => index > j.start && index < j.end))
      turns.push({ index, what: 'generated', turn: k } as Stream['turns'][number]);
  }
  turns.push({ index: 0, what: 'prompt', turn: -1 } as Stream['turns'][number]);
  return { ids, pieces, turns, vision, joins };
}

/** The tokens a row holds (pad rows: their span's pads). */
function tokensOf(row: Row, s: Stream): [number, number] | undefined {
  if (row.kind === 'tokens' || row.kind === 'padrow') return [row.start, row.end];
  if (row.kind === 'pads') {
    const v = s.vision[row.span]!;
    return [v.padStart, v.padStart + v.padLength];
  }
  return undefined;
}

describe('buildRows', () => {
  for (const expandAll of [false, true])
    it(`covers every token once, in order, with the breaks the view promises${expandAll ? ' (images expanded)' : ''}`, () => {
      let heldByJoin = 0;
      let filled = 0;
      for (let seed = 1; seed <= 300; seed++) {
        const s = randomStream(seed);
        const expanded = Object.fromEntries(s.vision.map((v) => [v.padStart, expandAll]));
        const rows = buildRows(s, expanded);
        let next = 0;
        const inJoin = (i: number) => s.joins.some((j) => i > j.start && i < j.end);
        const spanStarting = (i: number) => s.vision.find((v) => v.padStart === i);
        for (const [r, row] of rows.entries()) {
          const t = tokensOf(row, s);
          if (row.kind === 'mark') {
            // A mark stands right before the row that starts at its index.
            const after = rows.slice(r + 1).find((x) => tokensOf(x, s));
            if (after) expect(tokensOf(after, s)![0], `seed ${seed}`).toBe(row.mark.index);
            continue;
          }
          if (!t) continue;
          const [a, b] = t;
          expect(a, `seed ${seed} row ${r}`).toBe(next);
          expect(b).toBeGreaterThan(a);
          next = b;
          if (row.kind === 'tokens') {
            expect(inJoin(a), `seed ${seed}: a row starts inside a split character`).toBe(false);
            const lastEndsLine = s.pieces[s.ids[b - 1]!]!.includes('⏎');
            const full = b - a >= ROW_TOKENS;
            const beforeSomething =
              b === s.ids.length || spanStarting(b) !== undefined || s.turns.some((m) => m.index === b);
            expect(lastEndsLine || full || beforeSomething || inJoin(b), `seed ${seed} row ${a}–${b}`).toBe(true);
            if (full) filled++;
            // Longer than ROW_TOKENS only to keep a split character whole, and no longer than that.
            if (b - a > ROW_TOKENS) heldByJoin++;
            for (let k = a + ROW_TOKENS; k < b; k++) expect(inJoin(k), `seed ${seed} row ${a}–${b} at ${k}`).toBe(true);
            // No newline inside a row but at its end (unless a split character holds it there).
            for (let i = a; i < b - 1; i++)
              if (s.pieces[s.ids[i]!]!.includes('⏎')) expect(inJoin(i + 1), `seed ${seed} at ${i}`).toBe(true);
          }
          if (row.kind === 'padrow') {
            const v = s.vision[row.span]!;
            expect(b - a).toBeLessThanOrEqual(Math.max(1, v.cellsWide ?? ROW_TOKENS));
          }
        }
        expect(next, `seed ${seed}`).toBe(s.ids.length);
        // Every mark is drawn, but one inside a pad run (the run is one row).
        const insidePads = (i: number) => s.vision.some((v) => i > v.padStart && i < v.padStart + v.padLength);
        const drawn = rows.filter((row) => row.kind === 'mark').length;
        expect(drawn, `seed ${seed}`).toBe(s.turns.filter((m) => !insidePads(m.index)).length);
      }
      // The random streams reach the cases above, or the test proves nothing.
      expect(filled).toBeGreaterThan(50);
      expect(heldByJoin).toBeGreaterThan(5);
    });
});
