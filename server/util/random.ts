// mulberry32: a small, fast, seedable PRNG, so demo runs, generated benchmarks and randomized
// tests are reproducible byte for byte. Returns floats in [0, 1); `nextUint32` the raw 32 bits.
export function mulberry32(seed: number): { next: () => number; nextUint32: () => number } {
  let a = seed >>> 0;
  const nextUint32 = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  return { next: () => nextUint32() / 4294967296, nextUint32 };
}
