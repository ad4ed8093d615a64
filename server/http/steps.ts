// The run by rollout step (`GET /api/run/steps`): per step the counts, the histograms on run-wide
// ranges, and the trends the run page plots. Pure: from the listed summaries and the group verdicts.
// A value the step's data cannot give is null (a gap in the plot), never 0.
import type { FindingKind } from '../model/finding.ts';
import type { Histogram, HistogramRange, RunSteps, StepSummary, StepTrends, TrajectorySummary } from './api.ts';

const HISTOGRAM_BINS = 12;

/** The image-pad checks: a stated pad run, grid or placeholder range that does not fit the image. */
export const PLACEHOLDER_KINDS: readonly FindingKind[] = ['placeholder_count', 'placeholder_range', 'image_count'];

export function histogramRange(values: Iterable<number>): HistogramRange | null {
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    min = Math.min(min, v);
    max = Math.max(max, v);
  }
  if (!Number.isFinite(min)) return null;
  return { min, max, bins: min === max ? 1 : HISTOGRAM_BINS };
}

export function histogram(values: readonly number[], range: HistogramRange | null): Histogram {
  const counts = new Array<number>(range?.bins ?? 0).fill(0);
  if (range)
    for (const v of values) {
      const at = range.max === range.min ? 0 : Math.floor(((v - range.min) / (range.max - range.min)) * range.bins);
      counts[Math.min(range.bins - 1, Math.max(0, at))]!++;
    }
  return { counts, mean: mean(values), n: values.length };
}

const mean = (values: readonly number[]): number | null =>
  values.length > 0 ? values.reduce((a, b) => a + b, 0) / values.length : null;

/** The q-quantile of sorted values, linearly interpolated between closest ranks (numpy's default). */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** Population standard deviation (GRPO normalizes advantages by the group's; the trend uses the same). */
function std(values: readonly number[]): number | null {
  const m = mean(values);
  if (m === null) return null;
  return Math.sqrt(values.reduce((a, v) => a + (v - m) ** 2, 0) / values.length);
}

const rewardsOf = (ss: readonly TrajectorySummary[]) =>
  ss.flatMap((s) => (s.reward !== null && Number.isFinite(s.reward) ? [s.reward] : []));
const lengthsOf = (ss: readonly TrajectorySummary[]) =>
  ss.flatMap((s) => (s.responseTokens !== null ? [s.responseTokens] : []));

/** One step's trends from its trajectories and its groups' verdicts. */
export function stepTrends(
  ss: readonly TrajectorySummary[],
  groups: { groups: number; degenerate: number },
): StepTrends {
  const rewards = rewardsOf(ss).sort((a, b) => a - b);
  const lengths = lengthsOf(ss).sort((a, b) => a - b);
  const stated = ss.flatMap((s) => (s.truncated === null ? [] : [s.truncated]));
  const mismatches = ss.flatMap((s) => (s.mismatch ? [s.mismatch] : []));
  const share = (n: number, of: number) => (of > 0 ? n / of : null);
  return {
    prefixBreakShare: share(ss.filter((s) => (s.findings.kind.prefix_break ?? 0) > 0).length, ss.length),
    placeholderErrors: ss.filter((s) => s.placeholderErrors > 0).length,
    reward: {
      mean: mean(rewards),
      std: std(rewards),
      p10: quantile(rewards, 0.1),
      p90: quantile(rewards, 0.9),
    },
    responseTokens: { p50: quantile(lengths, 0.5), p95: quantile(lengths, 0.95) },
    truncatedShare: share(stated.filter(Boolean).length, stated.length),
    degenerateShare: share(groups.degenerate, groups.groups),
    meanAbsDelta: mean(mismatches.map((m) => m.meanAbsDelta)),
    pastCapShare: mean(mismatches.map((m) => m.pastCapShare)),
  };
}

/** The run by step, steps in order and the trajectories that state no step last. */
export function runSteps(
  all: readonly TrajectorySummary[],
  groupVerdicts: Iterable<{ step: number | null; degenerate: boolean }>,
): RunSteps {
  const rewardRange = histogramRange(rewardsOf(all));
  const lengthRange = histogramRange(lengthsOf(all));
  const byStep = new Map<number | null, TrajectorySummary[]>();
  for (const s of all) {
    const list = byStep.get(s.step);
    if (list) list.push(s);
    else byStep.set(s.step, [s]);
  }
  const groupsByStep = new Map<number | null, { groups: number; degenerate: number }>();
  for (const g of groupVerdicts) {
    const n = groupsByStep.get(g.step) ?? { groups: 0, degenerate: 0 };
    n.groups++;
    if (g.degenerate) n.degenerate++;
    groupsByStep.set(g.step, n);
  }
  const steps: StepSummary[] = [...byStep.entries()]
    .sort(([a], [b]) => (a === null ? 1 : b === null ? -1 : a - b))
    .map(([step, ss]) => {
      const health = { ok: 0, warning: 0, error: 0 };
      const findings: Record<string, number> = {};
      for (const s of ss) {
        health[s.health]++;
        for (const k of Object.keys(s.findings.kind)) findings[k] = (findings[k] ?? 0) + 1;
      }
      const g = groupsByStep.get(step) ?? { groups: 0, degenerate: 0 };
      const trends = stepTrends(ss, g);
      return {
        step,
        trajectories: ss.length,
        health,
        findings,
        groups: g.groups,
        degenerateGroups: g.degenerate,
        reward: histogram(rewardsOf(ss), rewardRange),
        length: histogram(lengthsOf(ss), lengthRange),
        logprobs: trends.meanAbsDelta,
        trends,
      };
    });
  return { steps, rewardRange, lengthRange };
}
