// The store's token set (a token-id query over the run without holding the streams): distinct
// ids packed as sorted varint deltas must answer exactly as a set of the ids would.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { packedHasToken, packedTokenSet } from '../server/analysis/index-facts.ts';

describe('packed token sets', () => {
  it('answers every id as the set of the streams does, across streams and at the edges of varints', () => {
    const id = fc.oneof(
      fc.integer({ min: 0, max: 200 }),
      fc.integer({ min: 0, max: 152_000 }),
      fc.constantFrom(127, 128, 16_383, 16_384, 2 ** 21, 2 ** 28, 2 ** 32 - 1),
    );
    fc.assert(
      fc.property(fc.array(fc.option(fc.array(id), { nil: undefined })), fc.array(id), (streams, probes) => {
        const packed = packedTokenSet(streams);
        const all = new Set(streams.flatMap((s) => s ?? []));
        for (const x of [...all, ...probes]) expect(packedHasToken(packed, x)).toBe(all.has(x));
        expect(packed.length).toBeLessThanOrEqual(all.size * 5);
      }),
      { numRuns: 300 },
    );
  });

  it('a set computed after another holds only its own ids', () => {
    const first = packedTokenSet([[5, 9, 151_643]]);
    const second = packedTokenSet([[7]]);
    expect(packedHasToken(first, 9)).toBe(true);
    expect(packedHasToken(second, 9)).toBe(false);
    expect(packedHasToken(second, 5)).toBe(false);
    expect(packedHasToken(second, 7)).toBe(true);
  });

  it('skips what is not a token id', () => {
    const packed = packedTokenSet([[-1, 1.5, Number.NaN, 2 ** 32, 3]]);
    expect(packedHasToken(packed, 3)).toBe(true);
    expect(packed.length).toBe(1);
  });

  it('is about a byte per id for a vocabulary-sized spread', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => i * 150);
    expect(packedTokenSet([ids]).length).toBeLessThan(2 * ids.length);
  });
});
