// The app's count format: the same text as en-US `toLocaleString`, without loading Intl.
import { describe, expect, it } from 'vitest';
import { formatCount } from '../app/format.ts';
import { mulberry32 } from '../server/util/random.ts';

describe('formatCount', () => {
  it('groups digits as en-US toLocaleString does', () => {
    const values = [0, 1, 12, 123, 999, 1000, 1234, 12345, 123456, 138090, 1_000_000, 9_007_199_254_740_991];
    const random = mulberry32(500);
    for (let i = 0; i < 500; i++) values.push(Math.floor(random.next() * 10 ** (1 + (i % 15))));
    for (const n of [...values, ...values.filter((v) => v > 0).map((v) => -v)])
      expect(formatCount(n), String(n)).toBe(n.toLocaleString('en-US'));
  });
  it('leaves what is not a safe integer to String', () => {
    expect(formatCount(1.5)).toBe('1.5');
    expect(formatCount(Number.NaN)).toBe('NaN');
  });
});
