// Rollout against trainer logprobs for one trajectory: the token strip coloured by Δ = trainer −
// rollout or by the importance ratio exp(Δ), a uPlot chart of Δ against position (turns, images
// and the threshold marked; a readout per token; a click selects the token), and the per-turn
// metrics. The server computes every number (views-logprobs.ts); this file only draws them.
import { useEffect, useMemo, useRef, useState } from 'react';
import { createPortal } from 'react-dom';
import { Virtuoso, type VirtuosoHandle } from 'react-virtuoso';
import { ListboxScroller } from './scroller.tsx';
import type uPlot from 'uplot';
import type { LogprobView as View } from '../../server/http/api.ts';
import { useSetParams, type Params } from '../stores/route.ts';
import { useLoadLogprobs, useLogprobs } from '../stores/trajectory.ts';
import { labelRoom, plotAxis } from './step-plots.ts';
import { isSpecial, pieceAt } from './token-rows.ts';
import { type PlotData, type PlotOptions, UPlotChart } from './uplot.tsx';
import './Logprobs.css';

type ColorBy = 'delta' | 'ratio';

/** |Δ| edges of the colour levels 1, 2, 3 (level 3 = past the threshold). */
const deltaEdges = (v: View) => [0.01, Math.min(0.1, v.thresholds.maxDelta / 2), v.thresholds.maxDelta];
/** Ratio edges (above 1; their inverses below): level 3 = past the IS cap. */
const ratioEdges = (v: View) => [1.05, Math.min(1.25, Math.sqrt(v.thresholds.isCap)), v.thresholds.isCap];

function level(v: View, i: number, by: ColorBy): number {
  const d = v.delta[i];
  if (d === null || d === undefined) return 0;
  const x = by === 'delta' ? Math.abs(d) : Math.exp(Math.abs(d));
  const edges = by === 'delta' ? deltaEdges(v) : ratioEdges(v);
  let k = 0;
  while (k < edges.length && x > edges[k]!) k++;
  return k;
}

/** Class of one token: outside the response, masked (dimmed, never divergent), or its level and sign. */
function tokClass(v: View, i: number, by: ColorBy): string {
  const m = v.mask[i];
  if (m === null || m === undefined) return ' lp-outside';
  if (m === 0) return ' lp-masked';
  const d = v.delta[i];
  if (d === null || d === undefined) return ' lp-none';
  const k = level(v, i, by);
  return k === 0 ? ' lp-l0' : ` lp-l${k} ${d > 0 ? 'lp-pos' : 'lp-neg'}`;
}

const fmt = (x: number | null | undefined, digits = 3) =>
  x === null || x === undefined ? '—' : Math.abs(x) >= 100 ? x.toExponential(2) : x.toFixed(digits);

function tokTitle(v: View, i: number): string {
  const parts = [`#${i}`, `id ${v.ids[i]}`];
  if (v.mask[i] !== null) parts.push(`mask ${v.mask[i]}`);
  if (v.rollout[i] !== null) parts.push(`rollout ${fmt(v.rollout[i])}`);
  if (v.trainer[i] !== null) parts.push(`trainer ${fmt(v.trainer[i])}`);
  if (v.delta[i] !== null) parts.push(`Δ ${fmt(v.delta[i], 4)}`, `ratio ${fmt(v.ratio[i], 4)}`);
  if (v.mask[i] === 0) parts.push('not trained (not counted)');
  return parts.join(' · ');
}

/** Rows of the strip: a row ends at a newline piece or after 32 tokens; an image span is one row of its own. */
type Row = { from: number; to: number; image?: number };

function rowsOf(v: View): Row[] {
  const rows: Row[] = [];
  let from = 0;
  let i = 0;
  const images = new Map(v.images.map((s) => [s.start, s]));
  while (i < v.ids.length) {
    const img = images.get(i);
    if (img) {
      if (i > from) rows.push({ from, to: i });
      rows.push({ from: img.start, to: img.end, image: img.image });
      i = img.end;
      from = i;
      continue;
    }
    const boundary = v.turns.some((t) => t.start === i + 1) || i + 1 === v.responseStart;
    if (pieceAt(v, i).includes('⏎') || i + 1 - from >= 32 || boundary) {
      rows.push({ from, to: i + 1 });
      from = i + 1;
    }
    i++;
  }
  if (from < v.ids.length) rows.push({ from, to: v.ids.length });
  return rows;
}

function Legend({ v, by }: { v: View; by: ColorBy }) {
  const e = by === 'delta' ? deltaEdges(v) : ratioEdges(v);
  const unit = by === 'delta' ? '|Δ|' : 'ratio';
  return (
    <span className="lp-legend" data-testid="lp-legend">
      <span className="muted small">{by === 'delta' ? 'Δ = trainer − rollout (nats):' : 'ratio = e^Δ:'}</span>
      <i className="tok lp-l0" /> {unit} ≤ {e[0]}
      <i className="tok lp-l1 lp-pos" />
      <i className="tok lp-l1 lp-neg" /> ≤ {fmt(e[1], 2)}
      <i className="tok lp-l2 lp-pos" />
      <i className="tok lp-l2 lp-neg" /> ≤ {fmt(e[2], 2)}
      <i className="tok lp-l3 lp-pos" />
      <i className="tok lp-l3 lp-neg" /> past {by === 'delta' ? `threshold ${e[2]}` : `IS cap ${e[2]} (or 1/${e[2]})`}
      <span className="muted small">
        {' '}
        red: trainer higher · blue: trainer lower · <i className="tok lp-masked">m</i> mask 0, not counted ·{' '}
        <i className="tok lp-outside">p</i> prompt
      </span>
    </span>
  );
}

const PLOT_HEIGHT = 190;

/**
 * Δ against token position on uPlot (docs/plots.md): trained tokens as a line, masked ones as grey
 * dots, the threshold, turns, images, the spikes and the selected token marked over the plot area;
 * the readout gives the token under the cursor with its rollout and trainer logprobs. A drag zooms,
 * a double click shows the whole response, a click selects the token.
 */
function DeltaPlot({ v, selected, onSelect }: { v: View; selected: number; onSelect: (i: number) => void }) {
  const n = v.ids.length;
  // The response is what the trainer scores: the plot spans it (the prompt is never compared).
  const x0 = Math.min(v.responseStart, n - 1);
  const t = v.thresholds.maxDelta;
  const yMax = Math.max(t * 1.5, (v.stats?.maxAbsDelta ?? 0) * 1.1);
  // The plot area (uPlot's `over`) where the marks go, and the token range it shows.
  const [plot, setPlot] = useState<{ u: uPlot; over: HTMLElement } | null>(null);
  const [range, setRange] = useState<{ min: number; max: number }>({ min: x0, max: n - 1 });

  const chart = useMemo(() => {
    const xs: number[] = [];
    const trained: (number | null)[] = [];
    const masked: (number | null)[] = [];
    const rollout: (number | null)[] = [];
    const trainer: (number | null)[] = [];
    for (let i = x0; i < n; i++) {
      const d = v.delta[i] ?? null;
      xs.push(i);
      trained.push(v.mask[i] === 0 ? null : d);
      masked.push(v.mask[i] === 0 ? d : null);
      rollout.push(v.rollout[i] ?? null);
      trainer.push(v.trainer[i] ?? null);
    }
    const data: PlotData = [xs, trained, masked, rollout, trainer];
    const value =
      (digits: number) =>
      (_u: uPlot, x: number | null): string =>
        x === null || x === undefined ? '—' : fmt(x, digits);
    // Drawn only in the readout: the logprobs themselves, on a scale of their own without an axis.
    const readoutOnly = (label: string): uPlot.Series => ({
      label,
      scale: 'logprob',
      stroke: 'transparent',
      points: { show: false },
      value: value(3),
    });
    const options: PlotOptions = {
      height: PLOT_HEIGHT,
      padding: [8, 8, 0, 0],
      scales: {
        x: { time: false, range: (_u, lo, hi) => [lo ?? x0, Math.max(hi ?? x0, (lo ?? x0) + 1)] },
        y: { range: () => [-yMax, yMax] },
        logprob: {},
      },
      cursor: { drag: { x: true, y: false, dist: 4 }, points: { show: false }, y: false },
      legend: { live: true },
      series: [
        { label: 'token', value: (_u, x) => (x === null || x === undefined ? '—' : String(x)) },
        { label: 'Δ', stroke: '#334155', width: 1.2, spanGaps: false, points: { show: false }, value: value(4) },
        {
          label: 'Δ masked',
          stroke: '#b0b0b0',
          paths: () => null,
          points: { show: true, size: 2.5, fill: '#b0b0b0', stroke: '#b0b0b0' },
          value: value(4),
        },
        readoutOnly('rollout'),
        readoutOnly('trainer'),
      ],
      axes: [plotAxis(0, 30, (x) => String(x)), plotAxis(1, labelRoom, (x) => fmt(x, 2))],
      hooks: {
        ready: [(u) => setPlot({ u, over: u.over })],
        setScale: [
          (u, key) => {
            const { min, max } = u.scales.x!;
            if (key === 'x' && min !== undefined && max !== undefined) setRange({ min, max });
          },
        ],
      },
    };
    return { data, options };
  }, [v, n, x0, yMax]);

  /** A token's place across the shown range, in % of the plot area (null when outside it). */
  const left = (i: number) => {
    const p = ((Math.max(x0, i) - range.min) / Math.max(1, range.max - range.min)) * 100;
    return p < 0 || p > 100 ? null : p;
  };
  const top = (d: number) => ((yMax - Math.max(-yMax, Math.min(yMax, d))) / (2 * yMax)) * 100;
  const pick = (x: number) => {
    const at = Math.round(x);
    // Prefer a token past the threshold within 6 px, then the nearest token with a Δ.
    const width = plot?.over.clientWidth || 600;
    const slack = Math.max(1, Math.ceil((6 / width) * (range.max - range.min)));
    const spike = v.pastThreshold.find((i) => Math.abs(i - at) <= slack);
    if (spike !== undefined) return onSelect(spike);
    for (let r = 0; r < n; r++) {
      for (const i of [at - r, at + r]) if (i >= 0 && i < n && v.delta[i] !== null) return onSelect(i);
    }
  };

  const plotted = v.images.filter((s) => s.end > x0);
  const promptImages = v.images.length - plotted.length;
  const mark = (i: number) => left(i) ?? undefined;
  return (
    <div className="lp-plot" data-testid="lp-plot">
      <UPlotChart options={chart.options} data={chart.data} onPick={pick} label="Δ against token position" />
      {plot &&
        createPortal(
          <div className="lp-marks">
            {plotted.map((s) => {
              const a = Math.max(0, left(s.start) ?? (s.start < range.min ? 0 : 100));
              const b = Math.min(100, left(s.end) ?? (s.end > range.max ? 100 : 0));
              return (
                <div
                  key={`i${s.image}`}
                  className="lp-image"
                  data-testid="plot-image"
                  style={{ left: `${a}%`, width: `${Math.max(0, b - a)}%` }}
                >
                  <span className="lp-mark-label">image {s.image}</span>
                </div>
              );
            })}
            {v.turns.map((s) =>
              mark(s.start) === undefined ? null : (
                <div
                  key={`t${s.turn}`}
                  className="lp-turn"
                  data-testid="plot-turn"
                  style={{ left: `${mark(s.start)}%` }}
                >
                  <span className="lp-mark-label">turn {s.turn}</span>
                </div>
              ),
            )}
            {[t, -t].map((d) => (
              <div key={d} className="lp-threshold" style={{ top: `${top(d)}%` }}>
                <span className="lp-mark-label">
                  {d > 0 ? '+' : '−'}
                  {t}
                </span>
              </div>
            ))}
            {v.pastThreshold.map((i) =>
              mark(i) === undefined ? null : (
                <div
                  key={i}
                  className="lp-spike"
                  data-testid="plot-spike"
                  data-token={i}
                  style={{ left: `${mark(i)}%`, top: `${top(v.delta[i]!)}%` }}
                />
              ),
            )}
            {selected >= 0 && mark(selected) !== undefined && (
              <div className="lp-cursor" data-testid="plot-cursor" style={{ left: `${mark(selected)}%` }} />
            )}
          </div>,
          plot.over,
        )}
      <div className="muted small lp-axis-note">
        response tokens {x0} … {n - 1}
        {x0 > 0
          ? ` (prompt tokens 0 … ${x0 - 1}${promptImages ? `, ${promptImages} image${promptImages > 1 ? 's' : ''}` : ''}, not compared)`
          : ''}{' '}
        · y: Δ in nats, clipped to ±{fmt(yMax, 2)} · dashed red: threshold ±{t} · grey dots: masked tokens (not counted)
        · drag to zoom, double-click to show all · click to select a token
      </div>
    </div>
  );
}

function pct(x: number) {
  return `${(x * 100).toFixed(x < 0.01 && x > 0 ? 2 : 1)}%`;
}

function TurnTable({ v, onSelect }: { v: View; onSelect: (i: number) => void }) {
  const s = v.stats!;
  const row = (label: string, m: typeof s | (typeof s.turns)[number], key: string) => (
    <tr key={key} data-testid={`lp-turn-${key}`}>
      <th scope="row">{label}</th>
      <td>{m.tokens}</td>
      <td>{fmt(m.meanAbsDelta, 4)}</td>
      <td>
        {m.maxAt >= 0 ? (
          <button type="button" className="link" onClick={() => onSelect(m.maxAt)} title="select this token">
            {fmt(m.maxAbsDelta, 3)} @ {m.maxAt}
          </button>
        ) : (
          '—'
        )}
      </td>
      <td>{m.k3.toExponential(2)}</td>
      <td>{fmt(m.maxRatio, 3)}</td>
      <td className={m.pastCapShare > 0 ? 'lp-bad' : ''}>{pct(m.pastCapShare)}</td>
    </tr>
  );
  return (
    <table className="lp-table" data-testid="lp-table">
      <thead>
        <tr>
          <th>turn</th>
          <th>trained tokens</th>
          <th>mean |Δ|</th>
          <th>max |Δ| @ token</th>
          <th>k3 KL</th>
          <th>max ratio</th>
          <th>past IS cap {v.thresholds.isCap}</th>
        </tr>
      </thead>
      <tbody>
        {s.turns.map((t) => row(`turn ${t.turn}`, t, String(t.turn)))}
        {row('whole trajectory', s, 'all')}
      </tbody>
    </table>
  );
}

/** A rollout logprob's colour: p = e^logprob in ten buckets, an invalid one marked. */
function rolloutClass(v: View, i: number): string {
  if (v.invalid.includes(i)) return ' lpbad';
  const m = v.mask[i];
  if (m === null || m === undefined) return ' lp-outside';
  const lp = v.rollout[i];
  if (lp === null || lp === undefined) return ' lpnone';
  return ` lp${Math.min(9, Math.floor(Math.exp(Math.min(0, lp)) * 10))}`;
}

/**
 * The rollout's logprobs alone (no trainer side to compare them with): each token coloured by its
 * probability, a NaN, infinite or positive value marked where it is, the first of them selected.
 */
function RolloutOnly({
  v,
  rows,
  selected,
  select,
}: {
  v: View;
  rows: Row[];
  selected: number;
  select: (i: number) => void;
}) {
  const list = useRef<VirtuosoHandle>(null);
  const rowOfSelected = rows.findIndex((r) => selected >= r.from && selected < r.to);
  useEffect(() => {
    if (rowOfSelected >= 0) list.current?.scrollToIndex({ index: rowOfSelected, align: 'center' });
  }, [rowOfSelected]);
  const stated = v.rollout.filter((x) => x !== null).length + v.invalid.length;
  return (
    <div className="lp" data-testid="lp-rollout-only">
      <div className={`lp-summary${v.invalid.length > 0 ? ' bad' : ''}`} data-testid="lp-summary">
        <b>
          {v.invalid.length > 0
            ? `${v.invalid.length} rollout logprob${v.invalid.length === 1 ? '' : 's'} no sampler gives (NaN, ±∞ or above 0), the first at token ${v.invalid[0]}. `
            : 'Every rollout logprob is a valid log-probability. '}
        </b>
        {stated} tokens with a rollout logprob · no trainer logprobs to compare them with ({v.reason})
      </div>
      <div className="toolbar small">
        <span className="muted">p = e^logprob:</span> <i className="tok lp0">low</i> <i className="tok lp5">½</i>{' '}
        <i className="tok lp9">1</i> <i className="tok lpbad">NaN</i> invalid · <i className="tok lp-outside">p</i>{' '}
        prompt
      </div>
      {selected >= 0 && selected < v.ids.length && (
        <div className="small selected-info" data-testid="lp-selected">
          <b>token {selected}</b> <code>{pieceAt(v, selected) || '∅'}</code> ·{' '}
          {v.invalid.includes(selected) ? 'rollout logprob invalid' : `rollout ${fmt(v.rollout[selected])}`}
        </div>
      )}
      <div className="lp-strip" role="listbox" aria-label="tokens coloured by rollout logprob">
        <Virtuoso
          components={{ Scroller: ListboxScroller }}
          ref={list}
          style={{ height: 420 }}
          totalCount={rows.length}
          initialTopMostItemIndex={Math.max(0, rowOfSelected - 3)}
          itemContent={(r) => {
            const row = rows[r]!;
            if (row.image !== undefined)
              return (
                <div className="row lp-imagerow">
                  <span className="padrun">
                    image {row.image} · tokens {row.from}–{row.to - 1}
                  </span>
                </div>
              );
            const out = [];
            for (let i = row.from; i < row.to; i++)
              out.push(
                // biome-ignore lint/a11y/useKeyWithClickEvents: tokens are options of the list; the address selects too
                <span
                  key={i}
                  className={`tok${rolloutClass(v, i)}${isSpecial(v, i) ? ' special' : ''}${i === selected ? ' selected' : ''}`}
                  role="option"
                  aria-selected={i === selected}
                  tabIndex={-1}
                  data-i={i}
                  title={`#${i} · id ${v.ids[i]}${v.invalid.includes(i) ? ' · logprob invalid' : v.rollout[i] !== null ? ` · logprob ${fmt(v.rollout[i])}` : ''}`}
                  onClick={() => select(i)}
                >
                  {pieceAt(v, i) || '∅'}
                </span>,
              );
            return <div className="row">{out}</div>;
          }}
        />
      </div>
    </div>
  );
}

export function LogprobView({ params }: { params: Params }) {
  const v = useLogprobs();
  const load = useLoadLogprobs();
  const setParams = useSetParams();
  const list = useRef<VirtuosoHandle>(null);
  useEffect(() => {
    void load();
  }, [load]);
  const by: ColorBy = params.lpby === 'ratio' ? 'ratio' : 'delta';
  const rows = useMemo(() => (v?.available || v?.rolloutOnly ? rowsOf(v) : []), [v]);
  const selected =
    params.token !== undefined
      ? Number(params.token)
      : (v?.stats?.firstPastThreshold ?? v?.stats?.maxAt ?? v?.invalid[0] ?? -1);
  const rowOfSelected = rows.findIndex((r) => selected >= r.from && selected < r.to);
  useEffect(() => {
    if (rowOfSelected >= 0) list.current?.scrollToIndex({ index: rowOfSelected, align: 'center' });
  }, [rowOfSelected]);

  if (!v) return <div className="muted">loading logprobs…</div>;
  if (!v.available && v.rolloutOnly)
    return <RolloutOnly v={v} rows={rows} selected={selected} select={(i) => setParams({ token: i }, true)} />;
  if (!v.available)
    return (
      <div className="banner" data-testid="lp-unavailable">
        No logprob view: {v.reason}
      </div>
    );
  const s = v.stats;
  const select = (i: number) => setParams({ token: i }, true);
  return (
    <div className="lp">
      <div className="toolbar">
        <fieldset className="seg">
          <legend className="sr-only">colour by</legend>
          <button type="button" className={by === 'delta' ? 'active' : ''} onClick={() => setParams({ lpby: 'delta' })}>
            Δ
          </button>
          <button type="button" className={by === 'ratio' ? 'active' : ''} onClick={() => setParams({ lpby: 'ratio' })}>
            ratio e<sup>Δ</sup>
          </button>
        </fieldset>
        <Legend v={v} by={by} />
      </div>
      {s && (
        <div className={`lp-summary${v.pastThreshold.length > 0 || s.shift ? ' bad' : ''}`} data-testid="lp-summary">
          {s.shift ? (
            <b>
              Shifted by one position: the rollout logprobs line up with the trainer's{' '}
              {s.shift.by === 1 ? 'one later' : 'one earlier'} (mean |Δ| {fmt(s.meanAbsDelta, 4)} as stored,{' '}
              {fmt(s.shift.meanAbsDeltaShifted, 4)} shifted).{' '}
            </b>
          ) : v.pastThreshold.length > 0 ? (
            <b>
              {v.pastThreshold.length} trained token{v.pastThreshold.length > 1 ? 's' : ''} past {v.thresholds.maxDelta}{' '}
              nats, the first at token {v.pastThreshold[0]}.{' '}
            </b>
          ) : (
            <b>No trained token past {v.thresholds.maxDelta} nats. </b>
          )}
          {s.tokens} trained tokens · mean |Δ| {fmt(s.meanAbsDelta, 4)} · max |Δ| {fmt(s.maxAbsDelta)} at token{' '}
          {s.maxAt} · k3 {s.k3.toExponential(2)} · max ratio {fmt(s.maxRatio)} · {pct(s.pastCapShare)} past the IS cap{' '}
          {v.thresholds.isCap}
        </div>
      )}
      <DeltaPlot v={v} selected={selected} onSelect={select} />
      {selected >= 0 && selected < v.ids.length && (
        <div className="small selected-info" data-testid="lp-selected">
          <b>token {selected}</b> <code>{pieceAt(v, selected) || '∅'}</code> · {tokTitle(v, selected)}
        </div>
      )}
      <div className="lp-strip" role="listbox" aria-label="tokens coloured by logprob mismatch">
        <Virtuoso
          components={{ Scroller: ListboxScroller }}
          ref={list}
          style={{ height: 300 }}
          totalCount={rows.length}
          initialTopMostItemIndex={Math.max(0, rowOfSelected - 3)}
          itemContent={(r) => {
            const row = rows[r]!;
            if (row.image !== undefined)
              return (
                <div className="row lp-imagerow">
                  <span className="padrun">
                    image {row.image} · tokens {row.from}–{row.to - 1} ({row.to - row.from} incl. vision markers)
                  </span>
                </div>
              );
            const out = [];
            for (let i = row.from; i < row.to; i++) {
              const turn = v.turns.find((t) => t.start === i);
              if (turn)
                out.push(
                  <span key={`t${i}`} className="lp-turnmark">
                    turn {turn.turn} ▸
                  </span>,
                );
              out.push(
                // biome-ignore lint/a11y/useKeyWithClickEvents: the plot and the table select too; tokens are options
                <span
                  key={i}
                  className={`tok${tokClass(v, i, by)}${isSpecial(v, i) ? ' special' : ''}${i === selected ? ' selected' : ''}`}
                  role="option"
                  aria-selected={i === selected}
                  tabIndex={-1}
                  data-i={i}
                  title={tokTitle(v, i)}
                  onClick={() => select(i)}
                >
                  {pieceAt(v, i) || '∅'}
                </span>,
              );
            }
            return <div className="row">{out}</div>;
          }}
        />
      </div>
      {s && <TurnTable v={v} onSelect={select} />}
    </div>
  );
}
