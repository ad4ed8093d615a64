// Run-wide trajectory keys (server/model/trajectory-key.ts): the duplicate scheme, and the same
// key for a record read again, which the keys keep compactly (by file and line).
import { describe, expect, it } from 'vitest';
import { TrajectoryKeys } from '../server/model/trajectory-key.ts';

const at = (id: string, line: number, file = 'a.jsonl') => ({ id, source: { file, line } });

describe('trajectory keys', () => {
  it('names repeated ids ID#2, ID#3, skipping a stated id that takes the name', () => {
    const keys = new TrajectoryKeys();
    expect(keys.keyOf(at('x', 1))).toBe('x');
    expect(keys.keyOf(at('x#2', 2))).toBe('x#2');
    expect(keys.keyOf(at('x', 3))).toBe('x#3');
    expect(keys.keyOf(at('x', 1, 'b.jsonl'))).toBe('x#4');
  });

  it('gives a record read again its key, and a rewritten line a new one, keeping both', () => {
    const keys = new TrajectoryKeys();
    expect(keys.keyOf(at('x', 1))).toBe('x');
    expect(keys.keyOf(at('x', 2))).toBe('x#2');
    expect(keys.keyOf(at('x', 1))).toBe('x');
    expect(keys.keyOf(at('x', 2))).toBe('x#2');
    expect(keys.peek(at('y', 1))).toBeUndefined();
    expect(keys.keyOf(at('y', 1))).toBe('y');
    expect(keys.keyOf(at('x', 2, 'b.jsonl'))).toBe('x#3');
    // Line 1 of a.jsonl stated x, then y: each keeps its key; line 2 stated x only.
    expect(keys.peek(at('x', 1))).toBe('x');
    expect(keys.peek(at('y', 1))).toBe('y');
    expect(keys.keyOf(at('y', 2))).toBe('y#2');
    expect(keys.peek(at('x', 2))).toBe('x#2');
    expect(keys.peek(at('y', 2))).toBe('y#2');
    // A key taken by another id is not this id's key: `x#2` stated at line 3 is new there.
    expect(keys.keyOf(at('x#2', 3))).toBe('x#2#2');
    expect(keys.peek(at('x', 3))).toBeUndefined();
  });
});
