// The run's importance ratios exp(trainer − rollout) over trained tokens, in log-scale bins
// (server/analysis/ratio-histogram.ts), the truncated-IS cap drawn; a click on a bar filters the
// run's list to the trajectories it counts (`ratioBin`). Not shown when no trajectory has trainer
// logprobs.
import { useEffect, useState } from 'react';
import type { RatioHistogram as Histogram } from '../../server/http/api.ts';
import { api } from '../api.ts';
import './Logprobs.css';
import { formatCount } from '../format.ts';

const W = 720;
const H = 130;
const LEFT = 8;
const BOTTOM = 22;

const ratioText = (x: number) => (x >= 1 ? `${Number(x.toPrecision(3))}` : `1/${Number((1 / x).toPrecision(3))}`);

export function RatioHistogram({
  active,
  onPick,
  refreshKey,
}: {
  active: number | undefined;
  onPick: (bin: number | undefined) => void;
  refreshKey: unknown;
}) {
  const [h, setH] = useState<Histogram | null>(null);
  // biome-ignore lint/correctness/useExhaustiveDependencies: refetched when the run's counts change
  useEffect(() => {
    api
      .ratios()
      .then(setH)
      .catch(() => setH(null));
  }, [refreshKey]);
  if (!h || h.trajectories === 0) return null;
  const n = h.bins.length;
  const bw = (W - LEFT * 2) / n;
  const max = Math.max(1, ...h.bins.map((b) => b.tokens));
  const height = (t: number) =>
    t === 0 ? 0 : Math.max(2, (Math.log10(1 + t) / Math.log10(1 + max)) * (H - BOTTOM - 8));
  // x of a ratio: bins are uniform in log2 between the first closed edge and the last.
  const lo = Math.log2(h.bins[1]!.lo);
  const step = Math.log2(h.bins[1]!.hi!) - lo;
  const xOf = (ratio: number) => LEFT + bw * (1 + (Math.log2(ratio) - lo) / step);
  const past = (b: Histogram['bins'][number]) => b.lo >= h.isCap || (b.hi !== null && b.hi <= 1 / h.isCap);
  const pastTokens = h.bins.filter(past).reduce((s, b) => s + b.tokens, 0);
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
          · bars: log count · click a bar to list its trajectories
        </span>
      </h2>
      <svg width={W} height={H} role="img" aria-label="histogram of importance ratios">
        {h.bins.map((b, k) => {
          const y = H - BOTTOM - height(b.tokens);
          return (
            // biome-ignore lint/a11y/useSemanticElements: an SVG bar cannot be a <button>; it takes its role and keys
            <rect
              key={b.bin}
              x={LEFT + k * bw + 1}
              y={b.tokens ? y : H - BOTTOM - 1}
              width={bw - 2}
              height={b.tokens ? height(b.tokens) : 1}
              className={`ratio-bar${past(b) ? ' past' : ''}${active === b.bin ? ' active' : ''}`}
              data-testid="ratio-bar"
              data-bin={b.bin}
              data-tokens={b.tokens}
              data-trajectories={b.trajectories}
              role="button"
              tabIndex={b.trajectories > 0 ? 0 : -1}
              aria-pressed={active === b.bin}
              onClick={() => b.trajectories > 0 && onPick(active === b.bin ? undefined : b.bin)}
              onKeyDown={(e) => {
                if ((e.key === 'Enter' || e.key === ' ') && b.trajectories > 0)
                  onPick(active === b.bin ? undefined : b.bin);
              }}
            >
              <title>
                ratio {b.lo === 0 ? '0' : ratioText(b.lo)} – {b.hi === null ? '∞' : ratioText(b.hi)}: {b.tokens} tokens
                in {b.trajectories} trajectories
              </title>
            </rect>
          );
        })}
        {[h.isCap, 1 / h.isCap].map((c) => (
          <line key={c} x1={xOf(c)} x2={xOf(c)} y1={4} y2={H - BOTTOM} className="ratio-cap" data-testid="ratio-cap" />
        ))}
        <text x={xOf(h.isCap) + 3} y={14} className="lp-axis lp-threshold-label">
          cap {h.isCap}
        </text>
        {[1 / 16, 1 / 4, 1, 4, 16].map((r) => (
          <text key={r} x={xOf(r)} y={H - 6} className="lp-axis" textAnchor="middle">
            {ratioText(r)}
          </text>
        ))}
      </svg>
    </section>
  );
}
