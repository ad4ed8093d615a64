// The run page's trends as uPlot charts: one chart per question, x the rollout step, the values
// the server computed (`StepSummary.trends`, server/http/steps.ts). A null is a gap in the line.
import type uPlot from 'uplot';
import type { StepSummary } from '../../server/http/api.ts';
import type { FindingKind } from '../../server/model/finding.ts';
import { formatCount } from '../format.ts';
import { kindLabel } from './labels.ts';
import type { PlotData, PlotOptions } from './uplot.tsx';

/** Cursor moves and zoom shared by every trend of the page. */
export const STEP_SYNC = 'rollscope-steps';

/** A colour per kind, close kinds in close hues (pads purple, breaks red, masks blue). */
export const KIND_COLOR: Readonly<Record<FindingKind, string>> = {
  prefix_break: '#c8102e',
  rerender_mismatch: '#e4572e',
  sample_mismatch: '#8f0a21',
  placeholder_count: '#7b3fb8',
  image_count: '#a672d8',
  image_truncated: '#51287d',
  placeholder_range: '#c29be8',
  length_mismatch: '#2a7fb8',
  mask_mismatch: '#5fb0e6',
  invalid_value: '#4b5563',
  logprob_mismatch: '#6b7a8f',
  logprob_shift: '#1f2937',
  trained_mismatch: '#94a3b8',
  grouping_ambiguous: '#0f766e',
  prompt_tokens_mismatch: '#14b8a6',
  chain_split: '#65a30d',
  chat_format_unrecognized: '#a16207',
  non_canonical_split: '#ca8a04',
  group: '#d08a1e',
  analysis_failed: '#000000',
  session_lost: '#be185d',
  video_timestamps: '#8b5cf6',
};
const ACCENT = '#2454c5';
const SECOND = '#d08a1e';

const pct = (v: number) => `${Number((v * 100).toPrecision(3))}%`;
const num = (digits: number) => (v: number) => (Number.isInteger(v) ? formatCount(v) : v.toFixed(digits));
const readout =
  (fmt: (v: number) => string) =>
  (_u: uPlot, v: number | null): string =>
    v === null || v === undefined ? '—' : fmt(v);

export interface StepPlot {
  key: string;
  title: string;
  /** One sentence under the title: what the value is. */
  what: string;
  /**
   * What the run does not give this chart, in a sentence, when it has nothing to draw (no value at
   * any step, or zero at every one): the page says it instead of an empty plot. Null: drawn.
   */
  missing: string | null;
  options: PlotOptions;
  data: PlotData;
  /** Series drawn but not in the legend (the moving averages: the readout gives the step's own value). */
  legendHidden: number[];
}

/** Past this many steps each line also gets its moving average, drawn bold over the faint per-step line. */
const SMOOTH_FROM = 100;

/**
 * The centred moving average over `window` steps, of the values that exist. A step without a
 * value stays without one: a gap of the data is a gap of the average too.
 */
export function movingAverage(values: readonly (number | null)[], window: number): (number | null)[] {
  const half = Math.floor(window / 2);
  const sum: number[] = [0];
  const count: number[] = [0];
  for (const v of values) {
    sum.push(sum[sum.length - 1]! + (v ?? 0));
    count.push(count[count.length - 1]! + (v === null ? 0 : 1));
  }
  return values.map((v, i) => {
    if (v === null) return null;
    const lo = Math.max(0, i - half);
    const hi = Math.min(values.length, i + half + 1);
    return (sum[hi]! - sum[lo]!) / (count[hi]! - count[lo]!);
  });
}

/**
 * An axis's tick labels, also written on the chart's root as `data-axis-N` (the canvas holds
 * them as pixels): what a test or a screen reader can read of the axes.
 */
const tickLabels =
  (axis: number, fmt: (v: number) => string) =>
  (u: uPlot, splits: number[]): string[] => {
    const out = splits.map((v) => (v === null || v === undefined ? '' : fmt(v)));
    u.root.setAttribute(`data-axis-${axis}`, out.filter(Boolean).join(' '));
    return out;
  };

/**
 * An axis in the look every plot of the app shares (font, colours, grid): `axis` numbers its tick
 * labels for the page (tickLabels), `size` is its room in pixels, `extra` overrides the rest.
 */
export function plotAxis(
  axis: number,
  size: number | ((u: uPlot, values: string[] | null, axis: number, cycle: number) => number),
  fmt: (v: number) => string,
  extra: Partial<uPlot.Axis> = {},
): uPlot.Axis {
  return {
    font: '11px system-ui, sans-serif',
    size,
    stroke: '#67707b',
    grid: { stroke: '#eef0f3' },
    ticks: { stroke: '#dde1e6' },
    values: tickLabels(axis, fmt),
    ...extra,
  };
}

/** Tick steps for whole-number axes (steps, counts): never a fraction, so no label repeats. */
export const INTEGER_INCRS = [
  1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 2.5e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6,
];

/** Room for a y axis's labels: the widest label's characters (a "100,000" is never clipped). */
export const labelRoom = (_u: uPlot, values: string[] | null): number =>
  Math.max(44, 18 + 7.5 * Math.max(0, ...(values ?? []).map((v) => (v ?? '').length)));

const faint = (color: string) => (color.startsWith('#') ? `${color}55` : color);

interface Line {
  label: string;
  values: (number | null)[];
  color: string;
  fmt: (v: number) => string;
  scale?: string;
  dash?: number[];
  width?: number;
  /** On a long run, the per-step line under the average: faint (default), or not drawn (its value still in the readout). */
  raw?: 'faint' | 'hidden';
}

function chart(opts: {
  key: string;
  title: string;
  what: string;
  steps: readonly number[];
  lines: readonly Line[];
  /** Fill between two series (indices in `lines`), e.g. the p10–p90 band. */
  band?: [number, number];
  axes: { scale: string; fmt: (v: number) => string; side?: 'left' | 'right'; integer?: boolean }[];
  height?: number;
  log?: boolean;
  /** The sentence when no step has a value (`none`) and when every value is zero (`zero`). */
  missing: { none: string; zero: string };
}): StepPlot {
  const smooth = opts.steps.length > SMOOTH_FROM;
  const window = Math.max(3, 2 * Math.round(opts.steps.length / 100) + 1);
  const averages: Line[] = smooth
    ? opts.lines.map((l) => ({
        ...l,
        label: `${l.label} (${window}-step mean)`,
        values: movingAverage(l.values, window),
      }))
    : [];
  const drawn: Line[] = smooth
    ? [
        ...opts.lines.map((l) => ({
          ...l,
          color: l.raw === 'hidden' ? 'transparent' : faint(l.color),
          width: 1,
          dash: undefined,
        })),
        ...averages,
      ]
    : [...opts.lines];
  const scales: uPlot.Scales = { x: { time: false } };
  for (const a of opts.axes)
    scales[a.scale] =
      a.scale === 'pct'
        ? { range: (_u: uPlot, _min: number | null, max: number | null) => [0, Math.max(max ?? 0, 0.05)] }
        : a.integer
          ? // Counts start at 0 and reach at least 1: a count axis never shows fractions or a made-up 0–100.
            { range: (_u: uPlot, _min: number | null, max: number | null) => [0, Math.max(1, Math.ceil(max ?? 0))] }
          : {};
  const values = opts.lines.flatMap((l) => l.values).filter((v): v is number => v !== null);
  const missing = values.length === 0 ? opts.missing.none : values.every((v) => v === 0) ? opts.missing.zero : null;
  return {
    key: opts.key,
    title: opts.title,
    what: opts.what,
    missing,
    data: [opts.steps as number[], ...drawn.map((l) => l.values)],
    legendHidden: averages.map((_, i) => 1 + opts.lines.length + i),
    options: {
      height: opts.height ?? 150,
      scales,
      cursor: { sync: { key: STEP_SYNC, setSeries: false }, drag: { x: true, y: false, dist: 4 } },
      legend: { live: true },
      padding: [8, 8, 0, 0],
      series: [
        { label: 'step', value: readout((v) => String(v)) },
        ...drawn.map(
          (l): uPlot.Series => ({
            label: l.label,
            stroke: l.color,
            width: l.width ?? 1.5,
            dash: l.dash,
            scale: l.scale ?? opts.axes[0]!.scale,
            spanGaps: false,
            points: { show: opts.steps.length <= 60, size: 5, fill: l.color },
            value: readout(l.fmt),
          }),
        ),
      ],
      // The band fills between the averages when there are (the per-step band of a long run is noise).
      bands: opts.band
        ? [
            {
              series: [
                opts.band[1] + 1 + (smooth ? opts.lines.length : 0),
                opts.band[0] + 1 + (smooth ? opts.lines.length : 0),
              ],
              fill: 'rgba(36, 84, 197, 0.14)',
            },
          ]
        : [],
      axes: [
        // Steps are whole numbers: ticks at whole steps only, each label once.
        plotAxis(0, 30, (v) => formatCount(v), { incrs: INTEGER_INCRS }),
        ...opts.axes.map(
          (a, i): uPlot.Axis =>
            plotAxis(i + 1, labelRoom, a.fmt, {
              scale: a.scale,
              side: a.side === 'right' ? 1 : 3,
              stroke: i === 0 ? '#67707b' : SECOND,
              grid: { show: i === 0, stroke: '#eef0f3' },
              ...(a.integer ? { incrs: INTEGER_INCRS } : {}),
            }),
        ),
      ],
    },
  };
}

/** The run page's trends, steps that state a number only (the stepless trajectories have no x). */
export function stepPlots(list: readonly StepSummary[]): { plots: StepPlot[]; hasLogprobs: boolean } {
  const stepped = list.filter((s): s is StepSummary & { step: number } => s.step !== null);
  const steps = stepped.map((s) => s.step);
  const kinds = [...new Set(stepped.flatMap((s) => Object.keys(s.findings)))].sort() as FindingKind[];
  const of = (f: (t: StepSummary['trends'], s: StepSummary) => number | null) => stepped.map((s) => f(s.trends, s));
  const hasLogprobs = stepped.some((s) => s.trends.meanAbsDelta !== null);
  const count = num(0);
  const plots: StepPlot[] = [
    chart({
      key: 'findings',
      title: 'findings by kind',
      what: 'trajectories with a finding of each kind',
      steps,
      lines: kinds.map((k) => ({
        label: kindLabel(k),
        values: stepped.map((s) => s.findings[k] ?? 0),
        color: KIND_COLOR[k] ?? '#8a94a3',
        fmt: count,
        // Per step, a rare kind is 0 or 1 trajectories: on a long run that is a barcode; its average reads.
        raw: 'hidden',
      })),
      axes: [{ scale: 'n', fmt: count, integer: true }],
      missing: { none: 'no trajectory has a finding at any step', zero: 'no trajectory has a finding at any step' },
    }),
    chart({
      key: 'prefix',
      title: 'prefix-break rate',
      what: 'share of the step’s trajectories whose next prompt does not extend the last',
      steps,
      lines: [
        { label: 'prefix breaks', values: of((t) => t.prefixBreakShare), color: KIND_COLOR.prefix_break, fmt: pct },
      ],
      axes: [{ scale: 'pct', fmt: pct }],
      missing: {
        none: 'no trajectory has two model calls to compare: a prefix break needs a next prompt',
        zero: 'no prefix break at any step: every next prompt extends the last prompt and its generation',
      },
    }),
    chart({
      key: 'placeholder',
      title: 'placeholder errors',
      what: 'trajectories whose image pads do not fit their images (errors)',
      steps,
      lines: [
        {
          label: 'placeholder errors',
          values: of((t) => t.placeholderErrors),
          color: KIND_COLOR.placeholder_count,
          fmt: count,
        },
      ],
      axes: [{ scale: 'n', fmt: count, integer: true }],
      missing: {
        none: 'no trajectory holds an image',
        zero: 'no placeholder error at any step: every image’s pads fit it',
      },
    }),
    chart({
      key: 'reward',
      title: 'reward',
      what: 'mean, p10–p90 band; std on the right axis',
      steps,
      lines: [
        {
          label: 'p10',
          raw: 'hidden',
          values: of((t) => t.reward.p10),
          color: 'rgba(36, 84, 197, 0.35)',
          fmt: num(3),
          width: 1,
        },
        {
          label: 'p90',
          raw: 'hidden',
          values: of((t) => t.reward.p90),
          color: 'rgba(36, 84, 197, 0.35)',
          fmt: num(3),
          width: 1,
        },
        { label: 'mean', values: of((t) => t.reward.mean), color: ACCENT, fmt: num(3), width: 2 },
        {
          label: 'std',
          raw: 'hidden',
          values: of((t) => t.reward.std),
          color: SECOND,
          fmt: num(3),
          scale: 'std',
          dash: [4, 3],
        },
      ],
      band: [0, 1],
      axes: [
        { scale: 'reward', fmt: num(2) },
        { scale: 'std', fmt: num(2), side: 'right' },
      ],
      missing: { none: 'the run states no rewards', zero: 'every stated reward is 0 at every step' },
    }),
    chart({
      key: 'length',
      title: 'response length',
      what: 'generated tokens per trajectory, p50 and p95',
      steps,
      lines: [
        { label: 'p50', values: of((t) => t.responseTokens.p50), color: ACCENT, fmt: count },
        { label: 'p95', values: of((t) => t.responseTokens.p95), color: SECOND, fmt: count, dash: [4, 3] },
      ],
      axes: [{ scale: 'tokens', fmt: count, integer: true }],
      missing: { none: 'the run states no generated tokens', zero: 'no trajectory generated a token' },
    }),
    chart({
      key: 'truncated',
      title: 'truncated',
      what: 'share stopped at the length limit, of those that state how they stopped',
      steps,
      lines: [{ label: 'truncated', values: of((t) => t.truncatedShare), color: '#b45f06', fmt: pct }],
      axes: [{ scale: 'pct', fmt: pct }],
      missing: {
        none: 'no trajectory states how it stopped (no status, no finish reason)',
        zero: 'none stopped at the length limit, at any step',
      },
    }),
    chart({
      key: 'degenerate',
      title: 'degenerate groups',
      what: 'share of the step’s GRPO groups with no learning signal (equal rewards)',
      steps,
      lines: [{ label: 'degenerate', values: of((t) => t.degenerateShare), color: KIND_COLOR.group, fmt: pct }],
      axes: [{ scale: 'pct', fmt: pct }],
      missing: {
        none: 'the run states no GRPO groups at these steps',
        zero: 'no degenerate group at any step: every group’s rewards differ',
      },
    }),
  ];
  if (hasLogprobs)
    plots.push(
      chart({
        key: 'logprobs',
        title: 'trainer − rollout logprobs',
        what: 'mean |Δ| in nats; share of tokens past the IS cap on the right axis',
        steps,
        lines: [
          { label: 'mean |Δ|', values: of((t) => t.meanAbsDelta), color: ACCENT, fmt: num(4) },
          {
            label: 'past IS cap',
            values: of((t) => t.pastCapShare),
            color: SECOND,
            fmt: pct,
            scale: 'pct',
            dash: [4, 3],
          },
        ],
        axes: [
          { scale: 'nats', fmt: num(3) },
          { scale: 'pct', fmt: pct, side: 'right' },
        ],
        missing: {
          none: 'the run states no trainer-side logprobs',
          zero: 'trainer and rollout logprobs agree exactly',
        },
      }),
    );
  return { plots, hasLogprobs };
}

/** The strip under the trends that brushes a step range: trajectories and errors per step. */
export function brushPlot(list: readonly StepSummary[]): StepPlot {
  const stepped = list.filter((s): s is StepSummary & { step: number } => s.step !== null);
  const count = num(0);
  const p = chart({
    key: 'brush',
    title: 'steps',
    what: 'drag across steps to list their trajectories; click a step to open it',
    steps: stepped.map((s) => s.step),
    lines: [
      { label: 'trajectories', values: stepped.map((s) => s.trajectories), color: '#8a94a3', fmt: count },
      { label: 'with errors', values: stepped.map((s) => s.health.error), color: KIND_COLOR.prefix_break, fmt: count },
    ],
    axes: [{ scale: 'n', fmt: count, integer: true }],
    missing: { none: 'no step', zero: 'no trajectory' },
    height: 110,
  });
  // A drag here selects steps (the page lists them), it does not zoom.
  p.options.cursor = { ...p.options.cursor, drag: { x: true, y: false, dist: 4, setScale: false } };
  return p;
}

/** The steps a brushed x range covers: the first and last stated step inside it. */
export function brushedSteps(steps: readonly number[], lo: number, hi: number): [number, number] | null {
  const inside = steps.filter((s) => s >= lo && s <= hi);
  return inside.length === 0 ? null : [inside[0]!, inside[inside.length - 1]!];
}

/** The overview's filter for a step range (the filter language, docs: `where`). */
export const stepRangeWhere = ([a, b]: [number, number]) => `step >= ${a} and step <= ${b}`;
