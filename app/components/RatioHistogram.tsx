// The run's importance ratios exp(trainer − rollout) over trained tokens, in log-scale bins
// (server/analysis/ratio-histogram.ts), drawn with uPlot (docs/plots.md): the ratio on a log2 x
// axis, tokens on an asinh y axis (log-like, and an empty bin is 0, not a gap), the truncated-IS
// cap marked, a readout of the bin under the cursor. Each bin is also a button over its column:
// a click (or Enter) filters the run's list to the trajectories it counts (`ratioBin`). Not
// shown when no trajectory has trainer logprobs.
import { useEffect, useMemo, useRef, useState } from 'react';
import { createPortal } from 'react-dom';
import uPlot from 'uplot';
import type { ListFilterInput, RatioHistogram as Histogram } from '../../server/http/api.ts';
import { api } from '../api.ts';
import './Logprobs.css';
import { formatCount } from '../format.ts';
import { labelRoom, plotAxis } from './step-plots.ts';
import { type PlotData, type PlotOptions, UPlotChart } from './uplot.tsx';

type Bin = Histogram['bins'][number];

const ratioText = (x: number) => (x >= 1 ? `${Number(x.toPrecision(3))}` : `1/${Number((1 / x).toPrecision(3))}`);

/** A bin's ratio range as a person reads it; the open end bins as "< lo" and "≥ hi". */
export const binRangeText = (b: Bin) =>
  b.lo === 0
    ? `< ${ratioText(b.hi!)}`
    : b.hi === null
      ? `≥ ${ratioText(b.lo)}`
      : `${ratioText(b.lo)} – ${ratioText(b.hi)}`;

const COLOR = { within: '#64748b', past: '#c0262d', active: '#f59e0b' };

/**
 * Where each bin sits on the log2 axis: the closed bins are uniform in log2(ratio), and the open
 * bins at either end are drawn one bin wide past the last closed edge (their ratios run on to 0
 * and ∞, which a log axis cannot reach).
 */
function layout(bins: readonly Bin[]) {
  const closed = bins.find((b) => b.lo > 0 && b.hi !== null)!;
  const width = Math.log2(closed.hi! / closed.lo);
  const centre = (b: Bin) =>
    b.lo === 0 ? b.hi! * 2 ** (-width / 2) : b.hi === null ? b.lo * 2 ** (width / 2) : Math.sqrt(b.lo * b.hi);
  const centres = bins.map(centre);
  const min = centres[0]! * 2 ** (-width / 2);
  const max = centres[centres.length - 1]! * 2 ** (width / 2);
  /** A ratio's place across the plot, 0 (left) to 1 (right). */
  const at = (ratio: number) => (Math.log2(ratio) - Math.log2(min)) / (Math.log2(max) - Math.log2(min));
  return { centres, min, max, at };
}

export function RatioHistogram({
  active,
  onPick,
  filter,
  refreshKey,
  onLoaded,
}: {
  active: number | undefined;
  onPick: (bin: number | undefined) => void;
  /** The overview's filter: the histogram counts what it selects (every bar kept: its own bin aside). */
  filter: ListFilterInput;
  refreshKey: unknown;
  onLoaded?: (h: Histogram | null) => void;
}) {
  const [h, setH] = useState<Histogram | null>(null);
  const { ratioBin: _, ...rest } = filter;
  const filterKey = JSON.stringify(rest);
  const loaded = useRef(onLoaded);
  loaded.current = onLoaded;
  // biome-ignore lint/correctness/useExhaustiveDependencies: refetched when the run or the filter changes
  useEffect(() => {
    let live = true;
    api
      .ratios(JSON.parse(filterKey) as ListFilterInput)
      .then((r) => {
        if (!live) return;
        setH(r);
        loaded.current?.(r);
      })
      .catch(() => live && setH(null));
    return () => {
      live = false;
    };
  }, [refreshKey, filterKey]);
  // The chart's plot area (uPlot's `over`), where the bins' buttons and the cap marks go.
  const [plot, setPlot] = useState<{ u: uPlot; over: HTMLElement } | null>(null);
  const activeRef = useRef(active);
  activeRef.current = active;

  const past = (b: Bin) => h !== null && (b.lo >= h.isCap || (b.hi !== null && b.hi <= 1 / h.isCap));

  // The readouts and colours read the latest counts from `latest`: a refetch sets new data on the
  // chart, and only another cap or other bins build a new one.
  const latest = useRef(h);
  latest.current = h;
  const shape = h && h.trajectories > 0 ? JSON.stringify([h.isCap, h.bins.map((b) => [b.lo, b.hi])]) : null;
  // A run without trained tokens (a shared page, a run with no trainer side) draws no histogram:
  // its bins are empty and have no layout.
  const data = useMemo<PlotData | null>(
    () => (h && h.trajectories > 0 ? [layout(h.bins).centres, h.bins.map((b) => b.tokens)] : null),
    [h],
  );
  const options = useMemo<PlotOptions | null>(() => {
    const first = latest.current;
    if (!shape || !first) return null;
    const bins = () => latest.current?.bins ?? first.bins;
    const isCap = first.isCap;
    const isPast = (b: Bin) => b.lo >= isCap || (b.hi !== null && b.hi <= 1 / isCap);
    const { min, max } = layout(first.bins);
    const ticks = Array.from({ length: 9 }, (_, i) => 2 ** (i - 4)).filter((r) => r >= min && r <= max);
    const options: PlotOptions = {
      height: 150,
      padding: [8, 8, 0, 0],
      scales: {
        x: { time: false, distr: 3, log: 2, range: () => [min, max] },
        y: { distr: 4, asinh: 1, range: (_u, _lo, hi) => [0, Math.max(10, (hi ?? 0) * 1.15)] },
      },
      cursor: {
        drag: { x: false, y: false },
        y: false,
        points: { show: false },
        // uPlot follows only moves whose target is the plot area itself; here the bins' buttons cover it.
        bind: { mousemove: (_u, _target, handle) => (e) => handle(e) },
      },
      legend: { live: true },
      series: [
        {
          label: 'ratio',
          value: (_u, _v, _s, idx) => (idx === null || idx === undefined ? '—' : binRangeText(bins()[idx]!)),
        },
        {
          label: 'tokens',
          stroke: COLOR.within,
          fill: COLOR.within,
          width: 0,
          paths: uPlot.paths.bars!({
            size: [0.86, Number.POSITIVE_INFINITY],
            disp: {
              fill: {
                unit: 3,
                values: () =>
                  bins().map((b) =>
                    activeRef.current === b.bin ? COLOR.active : isPast(b) ? COLOR.past : COLOR.within,
                  ),
              },
            },
          }),
          points: { show: false },
          value: (_u, _v, _s, idx) => {
            const b = idx === null || idx === undefined ? undefined : bins()[idx];
            return b ? `${formatCount(b.tokens)} in ${formatCount(b.trajectories)} trajectories` : '—';
          },
        },
      ],
      axes: [
        plotAxis(0, 30, ratioText, { splits: () => ticks }),
        plotAxis(1, labelRoom, (v) => formatCount(v), {
          // Powers of ten: uPlot's own asinh splits crowd the grid between them.
          splits: (_u, _axis, _lo, hi) => {
            const out = [0];
            for (let p = 1; p <= hi; p *= 10) out.push(p);
            return out;
          },
        }),
      ],
      hooks: { ready: [(u) => setPlot({ u, over: u.over })] },
    };
    return options;
  }, [shape]);

  // The bars' colours read `activeRef`: a pick repaints them without rebuilding the chart.
  // biome-ignore lint/correctness/useExhaustiveDependencies: redrawn when the active bin changes
  useEffect(() => {
    plot?.u.redraw(true);
  }, [active, plot]);

  if (!h || !options || !data) return null;
  const { at } = layout(h.bins);
  const n = h.bins.length;
  const pastTokens = h.bins.filter(past).reduce((s, b) => s + b.tokens, 0);
  const caps = [1 / h.isCap, h.isCap].filter((c) => at(c) > 0 && at(c) < 1);
  return (
    <section className="ratio-hist" data-testid="ratio-histogram">
      <h2>
        Importance ratios e<sup>Δ</sup> = π<sub>trainer</sub>/π<sub>rollout</sub>
        <span className="muted small">
          {' '}
          · {formatCount(h.tokens)} trained tokens in {h.trajectories} trajectories ·{' '}
          <b className={pastTokens ? 'lp-bad' : ''}>
            {formatCount(pastTokens)} past the IS cap {h.isCap}
          </b>{' '}
          · x: ratio (log scale), y: tokens · click a bar to list its trajectories
        </span>
      </h2>
      <UPlotChart options={options} data={data} label="histogram of importance ratios" testId="ratio-plot" />
      {plot &&
        createPortal(
          <>
            {caps.map((c) => (
              <div
                key={c}
                className="ratio-cap"
                data-testid="ratio-cap"
                data-ratio={c}
                style={{ left: `${at(c) * 100}%` }}
              >
                <span className="ratio-cap-label">{c === h.isCap ? `IS cap ${h.isCap}` : `1/${h.isCap}`}</span>
              </div>
            ))}
            {h.bins.map((b, k) => (
              <button
                type="button"
                key={b.bin}
                className={`ratio-bar${past(b) ? ' past' : ''}${active === b.bin ? ' active' : ''}`}
                style={{ left: `${(k / n) * 100}%`, width: `${100 / n}%` }}
                data-testid="ratio-bar"
                data-bin={b.bin}
                data-tokens={b.tokens}
                data-trajectories={b.trajectories}
                aria-label={`ratio ${binRangeText(b)}: ${b.tokens} tokens in ${b.trajectories} trajectories`}
                aria-pressed={active === b.bin}
                // Not `disabled`: a disabled button may swallow the mouse moves the readout follows.
                aria-disabled={b.trajectories === 0}
                tabIndex={b.trajectories > 0 ? 0 : -1}
                onClick={() => b.trajectories > 0 && onPick(active === b.bin ? undefined : b.bin)}
              />
            ))}
          </>,
          plot.over,
        )}
    </section>
  );
}
