// Python 3's `round(x)` for the processors' resize arithmetic (transformers' `smart_resize` of
// Qwen2-VL and its descendants, GLM-4.1V's): the one copy every model family imports.

/**
 * Python 3's `round(x)`: round half to even (banker's rounding). JS `Math.round` rounds halves up,
 * which changes token counts whenever a side ≡ factor/2 (mod factor), e.g. round(70/28) = 2, not 3.
 */
export function roundHalfEven(x: number): number {
  if (!Number.isFinite(x)) return x;
  const f = Math.floor(x);
  // x − floor(x) is exact in IEEE doubles, so the 0.5 comparison is exact too.
  const diff = x - f;
  if (diff < 0.5) return f;
  if (diff > 0.5) return f + 1;
  return f % 2 === 0 ? f : f + 1;
}
