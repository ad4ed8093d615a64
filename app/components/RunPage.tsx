// The run by rollout step: a trend per question (findings by kind, prefix breaks, placeholder
// errors, reward mean and p10–p90, response length p50/p95, truncation, degenerate groups, the
// logprob mismatch), drawn with uPlot (docs/plots.md) from what the server computed per step
// (server/http/steps.ts). A drag on a trend zooms every trend; a drag on the step strip lists that
// step range's trajectories (the overview's `where`); a click on a step opens the overview at it.
import { useCallback, useEffect, useMemo } from 'react';
import type { StepSummary } from '../../server/http/api.ts';
import { parseHash, useGo, useParams, useSetParams } from '../stores/route.ts';
import { useRunInfo } from '../stores/run.ts';
import { useLoadSteps, useRunSteps, useStepsError } from '../stores/steps.ts';
import { Histogram } from './plots.tsx';
import { brushedSteps, brushPlot, type StepPlot, stepPlots, stepRangeWhere } from './step-plots.ts';
import { UPlotChart, type UPlotChartProps, type XRange } from './uplot.tsx';
import './Run.css';

const fmtRange = (r: { min: number; max: number } | null, digits = 2) =>
  r ? `${r.min.toFixed(digits)} … ${r.max.toFixed(digits)}` : 'none stated';

/** Rows of the step table drawn at most: the zoomed window's steps, the first of them. */
const TABLE_ROWS = 200;

/** One plot of the run page with its caption: a trend, or the step strip (its brush lists a step range). */
function TrendPanel({
  plot,
  className,
  dataPlot,
  ...chart
}: { plot: StepPlot; className?: string; dataPlot?: string } & Omit<
  UPlotChartProps,
  'options' | 'data' | 'legendHidden'
>) {
  return (
    <figure
      className={`trend-panel${className ? ` ${className}` : ''}${plot.missing ? ' trend-missing' : ''}`}
      data-plot={dataPlot ?? plot.key}
    >
      <figcaption>
        <b>{plot.title}</b> <span className="muted small">{plot.what}</span>
      </figcaption>
      {plot.missing ? (
        <p className="trend-none" data-testid={`missing-${plot.key}`}>
          {plot.missing}
        </p>
      ) : (
        <UPlotChart options={plot.options} data={plot.data} legendHidden={plot.legendHidden} {...chart} />
      )}
    </figure>
  );
}

/** The zoom as the address states it (`zoom=A-B`, whole steps), or null. */
function zoomOf(param: string | undefined): XRange {
  const m = /^(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)$/.exec(param ?? '');
  if (!m) return null;
  const min = Number(m[1]);
  const max = Number(m[2]);
  return min < max ? { min, max } : null;
}

export function RunPage() {
  const info = useRunInfo();
  const steps = useRunSteps();
  const error = useStepsError();
  const loadSteps = useLoadSteps();
  const go = useGo();
  const params = useParams();
  const setParams = useSetParams();
  const revision = info?.revision;
  // Reload when the run changes (a run still being written): the app polls the run's info, whose
  // revision moves with every change; polling the steps themselves would parse them every time.
  useEffect(() => {
    if (revision !== undefined) void loadSteps();
  }, [revision, loadSteps]);

  const pick = useCallback(
    (step: number | null) => {
      if (step !== null) go({ page: 'overview', id: null, params: { step: String(step), by: 'group', sort: 'group' } });
    },
    [go],
  );
  const list: readonly StepSummary[] = steps?.steps ?? [];
  const { plots, hasLogprobs } = useMemo(() => stepPlots(list), [list]);
  const brush = useMemo(() => brushPlot(list), [list]);
  // The zoom is in the address (`zoom=A-B`): a reload or a link shows the same steps.
  const zoom = useMemo(() => zoomOf(params.zoom), [params.zoom]);
  const setZoom = useCallback(
    (z: XRange) => {
      // A brush navigates away while the synced charts still zoom: the zoom is this page's only.
      if (parseHash(window.location.hash).page !== 'run') return;
      setParams({ zoom: z ? `${Math.round(z.min * 100) / 100}-${Math.round(z.max * 100) / 100}` : undefined }, true);
    },
    [setParams],
  );
  const stated = useMemo(() => list.flatMap((s) => (s.step === null ? [] : [s.step])), [list]);
  const onBrush = useCallback(
    (lo: number, hi: number) => {
      const range = brushedSteps(stated, lo, hi);
      if (range) go({ page: 'overview', id: null, params: { where: stepRangeWhere(range) } });
    },
    [stated, go],
  );
  const unstepped = list.find((s) => s.step === null);
  const shown = list.filter((s) => zoom === null || s.step === null || (s.step >= zoom.min && s.step <= zoom.max));
  const rows = shown.slice(0, TABLE_ROWS);

  return (
    <div className="runpage">
      <header className="topbar">
        <a className="back" href="#/">
          ← run
        </a>
        <h1>by step</h1>
        <span className="muted small">
          {stated.length} {stated.length === 1 ? 'step' : 'steps'}
          {unstepped ? ` (and ${unstepped.trajectories} trajectories that state none)` : ''} · {info?.trajectories ?? 0}{' '}
          trajectories{info?.loading ? ' · loading…' : ''}
          {stated.length >= 2 ? ' · drag across a plot to zoom, double-click to show all' : ''}
        </span>
        {zoom && (
          <button type="button" className="link" data-testid="zoom-reset" onClick={() => setZoom(null)}>
            steps {Math.ceil(zoom.min)}–{Math.floor(zoom.max)} · show all
          </button>
        )}
      </header>
      {error && <div className="banner error">{error}</div>}
      {steps && stated.length < 2 && (
        <p className="banner" data-testid="no-trends">
          {stated.length === 0
            ? 'The run states no rollout steps (no slime rollout_id, no step_<n>/ folder, no policy version): there is no trend to plot. The table below gives the whole run’s reward and length distributions.'
            : `The run states one rollout step (step ${stated[0]}): a trend needs two or more. The table below gives that step’s distributions.`}
        </p>
      )}
      {stated.length >= 2 && (
        <section className="trends" aria-label="trends per step">
          {plots.map((p) => (
            <TrendPanel
              key={p.key}
              plot={p}
              zoom={zoom}
              onZoom={setZoom}
              onPick={pick}
              label={`${p.title} per step`}
              testId={`trend-${p.key}`}
            />
          ))}
          {!hasLogprobs && (
            <figure className="trend-panel trend-missing" data-plot="logprobs">
              <figcaption>
                <b>trainer − rollout logprobs</b>
              </figcaption>
              <p className="trend-none" data-testid="missing-logprobs">
                the run states no trainer-side logprobs (a slime train dump, a verl batch with old_log_probs, or
                --trained)
              </p>
            </figure>
          )}
          <TrendPanel
            plot={brush}
            className="brush-panel"
            dataPlot="brush"
            zoom={zoom}
            onZoom={setZoom}
            onPick={pick}
            onSelect={onBrush}
            label="trajectories per step; drag to list a step range"
            testId="step-brush"
          />
        </section>
      )}
      {shown.length > rows.length && (
        <p className="muted small table-note" data-testid="steps-table-note">
          the first {rows.length} of {shown.length} steps{zoom ? ' in the zoomed range' : ''}; zoom the plots to list
          others
        </p>
      )}
      <table className="steps" aria-label="steps">
        <thead>
          <tr>
            <th>step</th>
            <th className="num">trajectories</th>
            <th>health</th>
            <th className="num">groups</th>
            <th>reward ({fmtRange(steps?.rewardRange ?? null)})</th>
            <th>response tokens ({fmtRange(steps?.lengthRange ?? null, 0)})</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((s) => (
            <tr key={String(s.step)} data-step={s.step ?? ''}>
              <td>
                {s.step === null ? (
                  <span className="muted">no step stated</span>
                ) : (
                  <button type="button" className="link step-link" onClick={() => pick(s.step)}>
                    step {s.step}
                  </button>
                )}
              </td>
              <td className="num">{s.trajectories}</td>
              <td className="small">
                {s.health.ok > 0 && <span className="health health-ok">{s.health.ok}</span>}{' '}
                {s.health.warning > 0 && <span className="health health-warning">{s.health.warning}</span>}{' '}
                {s.health.error > 0 && <span className="health health-error">{s.health.error}</span>}
              </td>
              <td className="num">
                {s.groups}
                {s.degenerateGroups > 0 && (
                  <span className="degenerate-mark" title="groups with no learning signal">
                    {' '}
                    ({s.degenerateGroups} degenerate)
                  </span>
                )}
              </td>
              <td>
                <Histogram label={`reward distribution, step ${s.step}`} counts={s.reward.counts} />
                <span className="muted small">
                  {' '}
                  {s.reward.mean === null ? '—' : `mean ${s.reward.mean.toFixed(2)}`}
                </span>
              </td>
              <td>
                <Histogram label={`response length distribution, step ${s.step}`} counts={s.length.counts} />
                <span className="muted small">
                  {' '}
                  {s.length.mean === null ? '—' : `mean ${s.length.mean.toFixed(0)}`}
                </span>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
