// Small plots in plain SVG (no charting library): a trend over steps, a histogram, and the
// reward/advantage dots of a group's samples. They only draw what the server computed.
import type { ReactNode } from 'react';

export interface TrendPoint {
  step: number | null;
  value: number | null;
}

/** One value per step as a line with a dot per step; a click on a step's column picks it. */
export function Trend({
  points,
  selected,
  onPick,
  height = 56,
  width = 560,
  format = (v: number) => v.toFixed(2),
  label,
}: {
  points: readonly TrendPoint[];
  selected?: number | null;
  onPick?: (step: number | null) => void;
  height?: number;
  width?: number;
  format?: (v: number) => string;
  label: string;
}) {
  const values = points.flatMap((p) => (p.value === null ? [] : [p.value]));
  const lo = Math.min(...values, 0);
  const hi = Math.max(...values, lo + 1e-9);
  const pad = 6;
  const colW = points.length > 0 ? (width - 2 * pad) / points.length : 0;
  const x = (i: number) => pad + colW * (i + 0.5);
  const y = (v: number) => height - pad - ((v - lo) / (hi - lo)) * (height - 2 * pad);
  const line = points
    .map((p, i) => (p.value === null ? null : `${x(i).toFixed(1)},${y(p.value).toFixed(1)}`))
    .filter(Boolean)
    .join(' ');
  return (
    <svg className="plot trend" width={width} height={height} role="img" aria-label={label}>
      {points.map((p, i) => (
        // biome-ignore lint/a11y/noStaticElementInteractions: the step buttons under the plots are the keyboard way
        <rect
          key={String(p.step)}
          className={`col${p.step === selected ? ' selected' : ''}`}
          x={pad + colW * i}
          y={0}
          width={colW}
          height={height}
          onClick={() => onPick?.(p.step)}
        >
          <title>{`step ${p.step ?? '—'}: ${p.value === null ? 'no value' : format(p.value)}`}</title>
        </rect>
      ))}
      <polyline className="line" points={line} />
      {points.map((p, i) =>
        p.value === null ? null : <circle key={String(p.step)} className="dot" cx={x(i)} cy={y(p.value)} r={3} />,
      )}
    </svg>
  );
}

/** Stacked bars per step: one segment per key (finding kinds), coloured by class `seg-KEY`. */
export function StackedBars({
  columns,
  selected,
  onPick,
  height = 64,
  width = 560,
  label,
}: {
  columns: readonly { step: number | null; total: number; parts: Record<string, number> }[];
  selected?: number | null;
  onPick?: (step: number | null) => void;
  height?: number;
  width?: number;
  label: string;
}) {
  const pad = 6;
  const max = Math.max(1, ...columns.map((c) => c.total));
  const colW = columns.length > 0 ? (width - 2 * pad) / columns.length : 0;
  const barW = Math.max(2, colW * 0.7);
  return (
    <svg className="plot bars" width={width} height={height} role="img" aria-label={label}>
      {columns.map((c, i) => {
        let top = height - pad;
        const bars: ReactNode[] = [];
        for (const [k, n] of Object.entries(c.parts)) {
          const h = (n / max) * (height - 2 * pad);
          top -= h;
          bars.push(
            <rect
              key={k}
              className={`plot-seg plot-seg-${k}`}
              x={pad + colW * i + (colW - barW) / 2}
              y={top}
              width={barW}
              height={h}
            >
              <title>{`step ${c.step ?? '—'}: ${n} with ${k}`}</title>
            </rect>,
          );
        }
        return (
          // biome-ignore lint/a11y/noStaticElementInteractions: the step buttons under the plots are the keyboard way
          <g key={String(c.step)} onClick={() => onPick?.(c.step)}>
            <rect
              className={`col${c.step === selected ? ' selected' : ''}`}
              x={pad + colW * i}
              y={0}
              width={colW}
              height={height}
            />
            {bars}
          </g>
        );
      })}
    </svg>
  );
}

/** A histogram over a shared range (every step's plot has the same x axis). */
export function Histogram({
  counts,
  width = 120,
  height = 36,
  label,
}: {
  counts: readonly number[];
  width?: number;
  height?: number;
  label: string;
}) {
  const max = Math.max(1, ...counts);
  const w = counts.length > 0 ? width / counts.length : width;
  return (
    <svg className="plot hist" width={width} height={height} role="img" aria-label={label}>
      <line className="axis" x1={0} x2={width} y1={height - 0.5} y2={height - 0.5} />
      {counts.map((n, i) => (
        <rect
          // biome-ignore lint/suspicious/noArrayIndexKey: bins are positional
          key={i}
          x={i * w + 0.5}
          y={height - (n / max) * (height - 2)}
          width={Math.max(1, w - 1)}
          height={(n / max) * (height - 2)}
        >
          <title>{`${n}`}</title>
        </rect>
      ))}
    </svg>
  );
}

/** A sample's reward and advantage as two dots: colour from low (red) to high (green) over the group's range. */
export function ValueDot({ value, lo, hi, kind }: { value: number | null; lo: number; hi: number; kind: string }) {
  if (value === null) return <span className={`vdot ${kind} none`} title={`no ${kind}`} />;
  const t = hi > lo ? (value - lo) / (hi - lo) : 0.5;
  const hue = Math.round(t * 120);
  return (
    <span
      className={`vdot ${kind}`}
      style={{ background: `hsl(${hue} 65% 45%)` }}
      title={`${kind} ${Number.isInteger(value) ? value : value.toFixed(3)}`}
    />
  );
}

/** Step numbers under the trends, at the same columns (a click picks the step). */
export function StepAxis({
  steps,
  onPick,
  width = 560,
  height = 18,
}: {
  steps: readonly (number | null)[];
  onPick?: (step: number | null) => void;
  width?: number;
  height?: number;
}) {
  const pad = 6;
  const colW = steps.length > 0 ? (width - 2 * pad) / steps.length : 0;
  // Label at most ~40 columns: every k-th step on a long run.
  const every = Math.max(1, Math.ceil(steps.length / 40));
  return (
    <svg className="plot axis-steps" width={width} height={height} role="img" aria-label="steps">
      {steps.map((s, i) =>
        i % every === 0 ? (
          // biome-ignore lint/a11y/noStaticElementInteractions: the step links of the table are the keyboard way
          <text
            key={String(s)}
            x={pad + colW * (i + 0.5)}
            y={height - 5}
            textAnchor="middle"
            onClick={() => onPick?.(s)}
          >
            {s ?? '—'}
          </text>
        ) : null,
      )}
    </svg>
  );
}
