// The run by rollout step: a trend per step (findings by kind, reward mean, response length,
// degenerate groups, and the logprob mismatch once the data has it) and each step's reward and
// length distributions on shared axes. A click on a step opens the overview filtered to it.
import { useEffect } from 'react';
import type { StepSummary } from '../../server/http/api.ts';
import { useGo } from '../stores/route.ts';
import { useRunInfo } from '../stores/run.ts';
import { useLoadSteps, useRunSteps, useStepsError } from '../stores/steps.ts';
import { kindLabel } from './labels.ts';
import { Histogram, StackedBars, StepAxis, Trend } from './plots.tsx';
import './Run.css';

const fmtRange = (r: { min: number; max: number } | null, digits = 2) =>
  r ? `${r.min.toFixed(digits)} … ${r.max.toFixed(digits)}` : 'none stated';

export function RunPage() {
  const info = useRunInfo();
  const steps = useRunSteps();
  const error = useStepsError();
  const loadSteps = useLoadSteps();
  const go = useGo();
  const size = info?.trajectories;
  // Reload when the run grows (a run still being written).
  useEffect(() => {
    if (size !== undefined) void loadSteps();
  }, [size, loadSteps]);
  useEffect(() => {
    const t = setInterval(() => void loadSteps(), 3000);
    return () => clearInterval(t);
  }, [loadSteps]);

  const pick = (step: number | null) => {
    if (step !== null) go({ page: 'overview', id: null, params: { step: String(step), by: 'group', sort: 'group' } });
  };
  const list: readonly StepSummary[] = steps?.steps ?? [];
  const kinds = [...new Set(list.flatMap((s) => Object.keys(s.findings)))].sort();
  const hasLogprobs = list.some((s) => s.logprobs !== null);

  return (
    <div className="runpage">
      <header className="topbar">
        <a className="back" href="#/">
          ← run
        </a>
        <h1>by step</h1>
        <span className="muted small">
          {list.length} step(s) · {info?.trajectories ?? 0} trajectories{info?.loading ? ' · loading…' : ''}
        </span>
      </header>
      {error && <div className="banner error">{error}</div>}
      <section className="trends" aria-label="trends per step">
        <div className="trend-row">
          <div className="trend-label">
            findings
            <div className="legend">
              {kinds.map((k) => (
                <span key={k} className={`legend-item plot-seg-${k}`}>
                  {kindLabel(k)}
                </span>
              ))}
            </div>
          </div>
          <StackedBars
            label="trajectories with findings, by kind, per step"
            columns={list.map((s) => ({
              step: s.step,
              total: s.trajectories,
              parts: Object.fromEntries(kinds.map((k) => [k, s.findings[k] ?? 0])),
            }))}
            onPick={pick}
          />
        </div>
        <div className="trend-row">
          <div className="trend-label">
            reward mean <span className="muted small">{fmtRange(steps?.rewardRange ?? null)}</span>
          </div>
          <Trend
            label="reward mean per step"
            points={list.map((s) => ({ step: s.step, value: s.reward.mean }))}
            onPick={pick}
          />
        </div>
        <div className="trend-row">
          <div className="trend-label">
            response tokens <span className="muted small">mean</span>
          </div>
          <Trend
            label="mean response length per step"
            points={list.map((s) => ({ step: s.step, value: s.length.mean }))}
            format={(v) => v.toFixed(0)}
            onPick={pick}
          />
        </div>
        <div className="trend-row">
          <div className="trend-label">
            degenerate groups <span className="muted small">share</span>
          </div>
          <Trend
            label="share of degenerate groups per step"
            points={list.map((s) => ({ step: s.step, value: s.groups > 0 ? s.degenerateGroups / s.groups : null }))}
            format={(v) => `${Math.round(v * 100)}%`}
            onPick={pick}
          />
        </div>
        <div className="trend-row">
          <div className="trend-label">logprob mismatch</div>
          {hasLogprobs ? (
            <Trend
              label="logprob mismatch per step"
              points={list.map((s) => ({ step: s.step, value: s.logprobs }))}
              onPick={pick}
            />
          ) : (
            <span className="muted small">the run states no trainer-side logprobs</span>
          )}
        </div>
        <div className="trend-row">
          <div className="trend-label muted small">step</div>
          <StepAxis steps={list.map((s) => s.step)} onPick={pick} />
        </div>
      </section>
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
          {list.map((s) => (
            <tr key={String(s.step)} data-step={s.step ?? ''}>
              <td>
                {s.step === null ? (
                  <span className="muted">no step</span>
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
