// Small inline plots in plain SVG, a few dozen elements each: a step's histogram in a table row
// and the reward/advantage dots of a group's samples. The trends over steps are uPlot charts
// (step-plots.ts). They only draw what the server computed.

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
