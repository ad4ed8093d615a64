// The V8 heap-growth bound the command line sets (server/cli/heap.ts), and that a user's own choice wins.
import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_PERCENT, heapGrowthFlag } from '../server/cli/heap.ts';

describe('heap growth bound', () => {
  it('is set unless node was given its own', () => {
    expect(heapGrowthFlag([], '')).toBe(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
    expect(heapGrowthFlag(['--heap-growing-percent=50'], '')).toBeUndefined();
    expect(heapGrowthFlag(['--heap_growing_percent=50'], '')).toBeUndefined();
    expect(heapGrowthFlag([], '--max-old-space-size=4096 --heap-growing-percent=300')).toBeUndefined();
    expect(heapGrowthFlag(['--max-old-space-size=4096'], '--inspect')).toBe(
      `--heap-growing-percent=${HEAP_GROWING_PERCENT}`,
    );
  });
});
