import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SlimeSample } from '../server/import/slime.ts';
import { LogprobValues, MaskValues, TokenIdValues } from '../server/import/turns-from-mask.ts';
import { safeParseBounded } from '../server/import/read/validate.ts';
import { TokenIds, Trajectory } from '../server/model/trajectory.ts';

/** Fresh schemas of the same shapes, never given to safeParseBounded: zod's own verdict. */
const referenceSample = () =>
  z.object({
    tokens: z.array(z.number().int().nonnegative()),
    loss_mask: z
      .array(
        z
          .union([z.number(), z.boolean()], { error: 'expected a mask value (0/1 or a boolean)' })
          .transform((v) => (v === true ? 1 : v === false ? 0 : v)),
      )
      .nullish(),
    rollout_log_probs: z.array(z.union([z.number(), z.nan()], { error: 'expected a logprob (a number)' })).nullish(),
  });

function sample(n: number) {
  const tokens = Array.from({ length: n }, (_, i) => (i % 7 === 0 ? 151655 : (i * 37) % 150000));
  return {
    tokens,
    response_length: n / 2,
    loss_mask: Array.from({ length: n / 2 }, (_, i) => i % 3 && 1),
    rollout_log_probs: Array.from({ length: n / 2 }, (_, i) => -i / 1000),
  };
}

describe('validation of long number arrays', () => {
  it('accepts a long valid array in one pass and keeps it as it is (no copy)', () => {
    const s = sample(10_000);
    const r = safeParseBounded(SlimeSample, s);
    expect(r.success).toBe(true);
    if (!r.success) return;
    expect(r.data.tokens).toBe(s.tokens);
    expect(r.data.rollout_log_probs).toBe(s.rollout_log_probs);
    expect(r.data.tokens).toEqual(referenceSample().parse(s).tokens);
    expect(r.data.loss_mask).toEqual(referenceSample().parse(s).loss_mask);
  });

  it('a bad entry anywhere in a long list still loads, as the value schema reads it alone', () => {
    // Bad values are findings, not read errors (docs/check-json.md): the record loads and the entry
    // comes out as the lenient value schema makes it of that one value (the slow path of zod).
    const cases: [string, 'tokens' | 'rollout_log_probs' | 'loss_mask', number, unknown][] = [
      ['negative id', 'tokens', 9_000, -1],
      ['fractional id', 'tokens', 5, 2.5],
      ['string id', 'tokens', 4_321, '12'],
      ['infinite id', 'tokens', 77, Number.POSITIVE_INFINITY],
      ['null logprob', 'rollout_log_probs', 4_000, null],
      ['string mask value', 'loss_mask', 100, 'x'],
    ];
    const alone = { tokens: TokenIdValues, rollout_log_probs: LogprobValues, loss_mask: MaskValues };
    for (const [name, field, at, bad] of cases) {
      const s = sample(10_000);
      (s[field] as unknown[])[at] = bad;
      const ours = safeParseBounded(SlimeSample, s);
      expect(ours.success, name).toBe(true);
      if (!ours.success) continue;
      const want = (alone[field].parse([bad]) as unknown[])[0];
      const got = (ours.data[field] as unknown[])[at];
      expect(Number.isNaN(want as number) ? Number.isNaN(got as number) : got, name).toBe(
        Number.isNaN(want as number) ? true : want,
      );
      expect((ours.data[field] as unknown[]).length, name).toBe((s[field] as unknown[]).length);
    }
  });

  it('takes NaN logprobs and boolean masks as zod does, and the same entry verdicts on every call', () => {
    const s = { ...sample(2_000), loss_mask: Array.from({ length: 1_000 }, (_, i) => i % 2 === 0) };
    s.rollout_log_probs[10] = Number.NaN;
    for (let k = 0; k < 3; k++) {
      const r = safeParseBounded(SlimeSample, s);
      expect(r.success).toBe(true);
      if (!r.success) return;
      expect(r.data.loss_mask).toEqual(referenceSample().parse(s).loss_mask);
      expect(Number.isNaN(r.data.rollout_log_probs![10])).toBe(true);
    }
    // The model holds any number as an id: its range is a check (invalid_value), not the schema's.
    expect(safeParseBounded(TokenIds, [...sample(200).tokens, -3]).success).toBe(true);
    expect(safeParseBounded(z.array(MaskValues), [[1, 0]]).success).toBe(true);
    expect(LogprobValues.safeParse([Number.NaN]).success).toBe(true);
    expect(safeParseBounded(Trajectory, { id: 'x', turns: [] }).success).toBe(
      Trajectory.safeParse({ id: 'x', turns: [] }).success,
    );
  });
});
