// The run page's charts from the steps the server sends (app/components/step-plots.ts): the
// moving average keeps the data's gaps, a brushed x range becomes the steps inside it, and every
// series is aligned with the stated steps.
import { describe, expect, it } from 'vitest';
import type { StepSummary } from '../server/http/api.ts';
import { runSteps } from '../server/http/steps.ts';
import { TrajectorySummary } from '../server/http/api.ts';
import { brushedSteps, movingAverage, stepPlots, stepRangeWhere } from '../app/components/step-plots.ts';

describe('movingAverage', () => {
  it('averages the values that exist in the centred window and leaves a gap a gap', () => {
    expect(movingAverage([1, 2, 3, null, 5, 6], 3)).toEqual([1.5, 2, 2.5, null, 5.5, 5.5]);
    expect(movingAverage([null, null], 5)).toEqual([null, null]);
  });
});

describe('the brush', () => {
  it('covers the stated steps inside the dragged range, and says so in the filter language', () => {
    expect(brushedSteps([0, 10, 20, 30], 4.2, 27.9)).toEqual([10, 20]);
    expect(brushedSteps([0, 10, 20], 11, 19)).toBeNull();
    expect(stepRangeWhere([10, 20])).toBe('step >= 10 and step <= 20');
  });
});

describe('stepPlots', () => {
  const steps = (n: number): StepSummary[] =>
    runSteps(
      Array.from({ length: n }, (_, i) =>
        TrajectorySummary.parse({
          id: `t${i}`,
          format: 'native',
          source: { file: 'r.jsonl', line: i + 1 },
          turns: 1,
          tokens: 3,
          images: 0,
          reward: i % 7 === 3 ? null : i % 2,
          status: null,
          health: 'ok',
          findings: { kind: {}, cause: {}, severity: {} },
          headline: null,
          step: i === n - 1 ? null : i,
        }),
      ),
      [],
    ).steps;

  it('plots the stated steps only, each series as long as the steps, a step without reward as null', () => {
    const { plots } = stepPlots(steps(20));
    const reward = plots.find((p) => p.key === 'reward')!;
    expect(reward.data[0]).toEqual(Array.from({ length: 19 }, (_, i) => i));
    for (const p of plots) for (const s of p.data) expect(s.length).toBe(19);
    const mean = reward.options.series.findIndex((s) => s.label === 'mean');
    expect(reward.data[mean]![3]).toBeNull();
    expect(reward.legendHidden).toEqual([]);
  });

  it('adds a moving average past 100 steps, drawn but left out of the readout', () => {
    const { plots } = stepPlots(steps(300));
    const prefix = plots.find((p) => p.key === 'prefix')!;
    expect(prefix.options.series.map((s) => s.label)).toEqual(['step', 'prefix breaks', 'prefix breaks (7-step mean)']);
    expect(prefix.legendHidden).toEqual([2]);
  });
});

describe('a trend with nothing to draw (issue 33 #2)', () => {
  const summary = (i: number, over: Partial<TrajectorySummary>) =>
    TrajectorySummary.parse({
      id: `t${i}`,
      format: 'native',
      source: { file: 'r.jsonl', line: i + 1 },
      turns: 1,
      tokens: 3,
      images: 0,
      reward: null,
      status: null,
      health: 'ok',
      findings: { kind: {}, cause: {}, severity: {} },
      headline: null,
      step: i % 3,
      ...over,
    });

  it('says what is missing instead of plotting an all-zero or an empty series', () => {
    const { plots } = stepPlots(
      runSteps(
        Array.from({ length: 9 }, (_, i) => summary(i, { placeholderErrors: 0 })),
        [],
      ).steps,
    );
    const by = (key: string) => plots.find((p) => p.key === key)!;
    expect(by('reward').missing).toBe('the run states no rewards');
    expect(by('placeholder').missing).toMatch(/no placeholder error at any step/);
    expect(by('findings').missing).toMatch(/no trajectory has a finding/);
    const rewarded = stepPlots(
      runSteps(
        Array.from({ length: 9 }, (_, i) => summary(i, { reward: i % 2 })),
        [],
      ).steps,
    ).plots.find((p) => p.key === 'reward')!;
    expect(rewarded.missing).toBeNull();
  });

  it('ticks whole steps only, so no step label repeats, and counts from 0', () => {
    const { plots } = stepPlots(
      runSteps(
        Array.from({ length: 4 }, (_, i) => summary(i, { step: i, placeholderErrors: i % 2, health: 'error' })),
        [],
      ).steps,
    );
    const placeholder = plots.find((p) => p.key === 'placeholder')!;
    const x = placeholder.options.axes![0]!;
    expect((x.incrs as number[]).every((n) => Number.isInteger(n))).toBe(true);
    const range = placeholder.options.scales!.n!.range as unknown as (u: unknown, min: number, max: number) => number[];
    expect(range(null, 0, 0.4)).toEqual([0, 1]);
  });
});

describe('findings by kind on a long run (issue 33 #11)', () => {
  it('draws each kind’s moving average only: its per-step 0/1 line would be a barcode', () => {
    const long = runSteps(
      Array.from({ length: 300 }, (_, i) =>
        TrajectorySummary.parse({
          id: `t${i}`,
          format: 'native',
          source: { file: 'r.jsonl', line: i + 1 },
          turns: 1,
          tokens: 3,
          images: 0,
          reward: null,
          status: null,
          health: i % 5 === 0 ? 'error' : 'ok',
          findings:
            i % 5 === 0
              ? { kind: { prefix_break: 1 }, cause: {}, severity: { error: 1 } }
              : { kind: {}, cause: {}, severity: {} },
          headline: null,
          step: i,
        }),
      ),
      [],
    ).steps;
    const findings = stepPlots(long).plots.find((p) => p.key === 'findings')!;
    const series = findings.options.series.slice(1);
    expect(series.map((s) => s.label)).toEqual(['prefix break', 'prefix break (7-step mean)']);
    expect(series[0]!.stroke).toBe('transparent');
    expect(series[1]!.stroke).not.toBe('transparent');
  });
});
