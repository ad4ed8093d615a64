// The counts above the run table: trajectories per health, per finding kind and per divergence
// cause, and the rows export would reject — counted over what the filter selects, so they follow
// it. A click narrows the list to a count (and again widens it). A legend says what the edges mean.
import type { ListFacets } from '../../server/http/api.ts';
import type { ListParams } from '../list-state.ts';
import { formatCount } from '../format.ts';
import { causeLabel, kindLabel } from './labels.ts';

type Set = (changes: Partial<Record<keyof ListParams, string | undefined>>) => void;

export function FacetChips({ facets, lp, set }: { facets: ListFacets; lp: ListParams; set: Set }) {
  const health = (status: 'ok' | 'error' | 'warning', label: string, n: number) => (
    <button
      type="button"
      className={`count health-${status}${lp.status === status ? ' active' : ''}`}
      aria-pressed={lp.status === status}
      data-status={status}
      onClick={() => set({ status: lp.status === status ? undefined : status })}
    >
      <b>{formatCount(n)}</b> {label}
    </button>
  );
  const kinds = Object.entries(facets.counts.kind).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const causes = Object.entries(facets.counts.cause).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const rejected = lp.export === 'rejected';
  return (
    <section className="counts" aria-label="counts of the trajectories shown">
      <div className="count-row">
        {health('ok', 'clean', facets.health.ok)}
        {health('error', 'with errors', facets.health.error)}
        {(facets.health.warning > 0 || lp.status === 'warning') &&
          health('warning', 'warnings only', facets.health.warning)}
        <button
          type="button"
          className={`count rejected${rejected ? ' active' : ''}`}
          aria-pressed={rejected}
          data-testid="rejected-view"
          title="the trajectories `export` leaves out, with why (as decided from their findings, before re-aligning)"
          onClick={() => set({ export: rejected ? undefined : 'rejected' })}
        >
          <b>{formatCount(facets.export.rejected)}</b> rejected by export
        </button>
        <span className="count-sep" aria-hidden="true" />
        {kinds.map(([k, n]) => (
          <button
            type="button"
            key={k}
            data-kind={k}
            className={`count kind kind-${k}${lp.kind === k ? ' active' : ''}`}
            aria-pressed={lp.kind === k}
            onClick={() => set({ kind: lp.kind === k ? undefined : k })}
          >
            <b>{formatCount(n)}</b> {kindLabel(k)}
          </button>
        ))}
      </div>
      {causes.length > 0 && (
        <div className="count-row causes">
          <span className="muted small count-label">why streams diverge:</span>
          {causes.map(([c, n]) => (
            <button
              type="button"
              key={c}
              data-cause={c}
              className={`count cause${lp.cause === c ? ' active' : ''}`}
              aria-pressed={lp.cause === c}
              onClick={() => set({ cause: lp.cause === c ? undefined : c })}
            >
              <b>{formatCount(n)}</b> {causeLabel(c)}
            </button>
          ))}
        </div>
      )}
      <div className="count-legend muted small" data-testid="counts-legend">
        <span>
          <i className="edge kind" /> trajectories with a finding of that kind
        </span>
        <span>
          <i className="edge cause" /> of those, by the cause of their first divergence
        </span>
        <span>counts follow the filter; a click narrows to it</span>
      </div>
    </section>
  );
}
