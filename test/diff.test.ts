import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { diffTokens, type Hunk } from '../server/analysis/diff.ts';

/** Apply hunks to `a`, taking replacement tokens from `b`: must give back `b`. */
function apply(a: number[], b: number[], hunks: Hunk[]): number[] {
  const out: number[] = [];
  let ai = 0;
  for (const h of hunks) {
    out.push(...a.slice(ai, h.aStart), ...b.slice(h.bStart, h.bEnd));
    ai = h.aEnd;
  }
  return [...out, ...a.slice(ai)];
}

describe('diffTokens (Myers)', () => {
  it('one inserted token is one insertion, not a shifted tail', () => {
    const a = Array.from({ length: 1000 }, (_, i) => i);
    const b = [...a.slice(0, 500), 151645, ...a.slice(500)];
    expect(diffTokens(a, b)).toEqual([{ aStart: 500, aEnd: 500, bStart: 500, bEnd: 501 }]);
  });
  it('identical streams have no hunks; a deletion and a replacement are found', () => {
    expect(diffTokens([1, 2, 3], [1, 2, 3])).toEqual([]);
    expect(diffTokens([1, 2, 3, 4], [1, 3, 4])).toEqual([{ aStart: 1, aEnd: 2, bStart: 1, bEnd: 1 }]);
    expect(diffTokens([1, 2, 3, 4], [1, 9, 9, 4])).toEqual([{ aStart: 1, aEnd: 3, bStart: 1, bEnd: 3 }]);
  });
  it('hunks always rebuild b from a, and the edit count is minimal on small alphabets', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 40 }),
        fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 40 }),
        (a, b) => {
          const hunks = diffTokens(a, b);
          expect(apply(a, b, hunks)).toEqual(b);
          const edits = hunks.reduce((n, h) => n + (h.aEnd - h.aStart) + (h.bEnd - h.bStart), 0);
          expect(edits).toBe(a.length + b.length - 2 * lcsLength(a, b));
        },
      ),
      { numRuns: 300 },
    );
  });
});

function lcsLength(a: number[], b: number[]): number {
  const dp = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      dp[i]![j] = a[i - 1] === b[j - 1] ? dp[i - 1]![j - 1]! + 1 : Math.max(dp[i - 1]![j]!, dp[i]![j - 1]!);
  return dp[a.length]![b.length]!;
}
