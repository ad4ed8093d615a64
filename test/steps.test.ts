// The run page's trends per step (server/http/steps.ts): gaps where a step's data gives no value,
// quantiles as numpy/torch compute them, shares over the trajectories that state the field.
import { execFileSync, spawnSync } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TrajectorySummary } from '../server/http/api.ts';
import { quantile, runSteps, stepTrends } from '../server/http/steps.ts';

// Debian's python3-torch, as test/torch-save.test.ts uses it.
const SYSTEM_PYTHON = '/usr/bin/python3';
const hasTorch = spawnSync(SYSTEM_PYTHON, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0;

let line = 0;
function summary(over: Partial<TrajectorySummary> & { kinds?: string[] }): TrajectorySummary {
  const { kinds = [], ...rest } = over;
  line++;
  return TrajectorySummary.parse({
    id: `t${line}`,
    format: 'native',
    source: { file: 'run.jsonl', line },
    turns: 1,
    tokens: 10,
    images: 0,
    reward: null,
    status: null,
    health: kinds.length > 0 ? 'error' : 'ok',
    findings: { kind: Object.fromEntries(kinds.map((k) => [k, 1])), cause: {}, severity: {} },
    headline: null,
    ...rest,
  });
}

const mismatch = (meanAbsDelta: number, pastCapShare: number) => ({
  meanAbsDelta,
  maxAbsDelta: meanAbsDelta * 4,
  maxRatio: 1,
  pastCapShare,
  ratioBins: [],
});

describe('stepTrends', () => {
  it('is null, not zero, where no trajectory of the step states the value', () => {
    const t = stepTrends([summary({ step: 3 }), summary({ step: 3 })], { groups: 0, degenerate: 0 });
    expect(t.reward).toEqual({ mean: null, std: null, p10: null, p90: null });
    expect(t.responseTokens).toEqual({ p50: null, p95: null });
    expect(t.truncatedShare).toBeNull();
    expect(t.degenerateShare).toBeNull();
    expect(t.meanAbsDelta).toBeNull();
    expect(t.pastCapShare).toBeNull();
    expect(t.prefixBreakShare).toBe(0);
    expect(t.placeholderErrors).toBe(0);
  });

  it('counts breaks, placeholder errors, truncation among the stating, and the logprob mismatch', () => {
    const t = stepTrends(
      [
        summary({ kinds: ['prefix_break'], truncated: true, mismatch: mismatch(0.2, 0.1) }),
        summary({ kinds: ['prefix_break', 'placeholder_count'], placeholderErrors: 2, truncated: false }),
        summary({ truncated: false, mismatch: mismatch(0.4, 0.3) }),
        summary({ kinds: ['mask_mismatch'] }),
      ],
      { groups: 4, degenerate: 1 },
    );
    expect(t.prefixBreakShare).toBe(0.5);
    expect(t.placeholderErrors).toBe(1);
    expect(t.truncatedShare).toBeCloseTo(1 / 3, 12);
    expect(t.degenerateShare).toBe(0.25);
    expect(t.meanAbsDelta).toBeCloseTo(0.3, 12);
    expect(t.pastCapShare).toBeCloseTo(0.2, 12);
  });

  it('gives reward spread and length percentiles over the stated values only', () => {
    const t = stepTrends(
      [1, 2, 3, 4].map((r) => summary({ reward: r, responseTokens: r * 100 })).concat(summary({ reward: null })),
      { groups: 1, degenerate: 0 },
    );
    expect(t.reward.mean).toBe(2.5);
    expect(t.reward.std).toBeCloseTo(Math.sqrt(1.25), 12);
    expect(t.reward.p10).toBeCloseTo(1.3, 12);
    expect(t.reward.p90).toBeCloseTo(3.7, 12);
    expect(t.responseTokens.p50).toBe(250);
    expect(t.responseTokens.p95).toBeCloseTo(385, 9);
  });
});

describe('quantile', () => {
  it.skipIf(!hasTorch && !process.env.CI)(
    'agrees with torch.quantile (linear interpolation) on random samples',
    () => {
      const samples = fc.sample(
        fc.array(fc.double({ min: -1e3, max: 1e3, noNaN: true }), { minLength: 1, maxLength: 40 }),
        { numRuns: 60 },
      );
      const qs = [0, 0.1, 0.5, 0.9, 0.95, 1];
      const script = [
        'import json, sys, torch',
        'data = json.load(sys.stdin)',
        'qs = torch.tensor(data["qs"], dtype=torch.float64)',
        'print(json.dumps([torch.quantile(torch.tensor(s, dtype=torch.float64), qs).tolist() for s in data["samples"]]))',
      ].join('\n');
      const expected = JSON.parse(
        execFileSync(SYSTEM_PYTHON, ['-c', script], { input: JSON.stringify({ samples, qs }), encoding: 'utf8' }),
      ) as number[][];
      samples.forEach((s, i) => {
        const sorted = [...s].sort((a, b) => a - b);
        qs.forEach((q, j) => expect(quantile(sorted, q)).toBeCloseTo(expected[i]![j]!, 9));
      });
    },
    60_000,
  );
});

describe('runSteps', () => {
  it('orders steps, puts the stepless last, and gives each its groups', () => {
    const run = runSteps(
      [summary({ step: 2, reward: 1 }), summary({ step: null, reward: 0 }), summary({ step: 0, reward: 0.5 })],
      [
        { step: 0, degenerate: true },
        { step: 2, degenerate: false },
        { step: 2, degenerate: false },
      ],
    );
    expect(run.steps.map((s) => [s.step, s.groups, s.trends.degenerateShare])).toEqual([
      [0, 1, 1],
      [2, 2, 0],
      [null, 0, null],
    ]);
    expect(run.rewardRange).toEqual({ min: 0, max: 1, bins: 12 });
  });
});
