// What went wrong with a trajectory, root cause first (TrajectoryDetail `causes`,
// server/analysis/root-cause.ts): each event named by the finding that caused it, what follows
// from it folded under it, each sentence said once. A click opens the finding where it is seen.
import type { LocatedFinding, TrajectoryDetail } from '../../server/http/api.ts';
import { causeLabel, kindLabel } from './labels.ts';

/** Where a finding is, in words: its turn and token, and the stream. */
export function findingWhere(f: LocatedFinding): string {
  const where = [f.turn >= 0 ? `turn ${f.turn}` : f.kind === 'group' ? 'its group' : 'whole trajectory'];
  if (f.index >= 0) where.push(`token ${f.index}`);
  if (f.stream) where.push(f.stream === 'prompt' ? 'prompt + generation' : f.stream);
  return where.join(' · ');
}

/**
 * What to say of finding `index` where the page already shows the headline (`headline`: the first
 * cause's sentence is on screen): nothing for the headline's own finding, only what a consequence
 * adds to its root, the whole sentence otherwise. One sentence is said once.
 */
export function findingText(detail: TrajectoryDetail, index: number, headline: boolean): string | null {
  const first = detail.causes[0];
  if (headline && first?.root === index) return null;
  for (const g of detail.causes) {
    const c = g.consequences.find((x) => x.index === index);
    if (c) return c.text;
  }
  return detail.findings[index]?.message ?? null;
}

const follow = (n: number) => `${n} finding${n === 1 ? ' follows' : 's follow'} from it`;

export function FindingHead({ f }: { f: LocatedFinding }) {
  return (
    <span className="finding-head">
      <span className={`chip kind kind-${f.kind}`}>{kindLabel(f.kind)}</span>
      {f.cause && <span className="chip cause">{causeLabel(f.cause)}</span>}
      <span className="muted small">{findingWhere(f)}</span>
    </span>
  );
}

/**
 * The headline: the first event's root, its sentence once, a link to where it is seen. `open`
 * is undefined where nothing can be opened (a finding with no place shows as text).
 */
export function Headline({ detail, open }: { detail: TrajectoryDetail; open?(index: number): void }) {
  const first = detail.causes[0];
  if (!first) return null;
  const f = detail.findings[first.root]!;
  const more = detail.causes.length - 1;
  const body = (
    <>
      <b>
        {kindLabel(f.kind)}
        {f.cause ? ` — ${causeLabel(f.cause)}` : ''}
      </b>
      : {f.message}
    </>
  );
  return (
    <div className={`banner headline ${f.severity}`} data-testid="headline">
      {open && f.target ? (
        <button type="button" className="headline-link" onClick={() => open(first.root)} data-testid="headline-link">
          {body}
          <span className="headline-go">
            {' '}
            → {f.target.token !== null ? `token ${f.target.token}` : 'where it is seen'}
          </span>
        </button>
      ) : (
        body
      )}
      {first.consequences.length > 0 && <span className="muted small"> · {follow(first.consequences.length)}</span>}
      {more > 0 && (
        <span className="muted small">
          {' '}
          · {more} other cause{more === 1 ? '' : 's'}
        </span>
      )}
    </div>
  );
}

export function RootCause({
  detail,
  active = -1,
  open,
  compact = false,
}: {
  detail: TrajectoryDetail;
  active?: number;
  open?(index: number): void;
  /** In the drawer: the first event's sentence too (no headline above it). */
  compact?: boolean;
}) {
  if (detail.findings.length === 0)
    return compact ? <p className="banner ok small">No findings: every check passed for this trajectory.</p> : null;
  return (
    <section className="panel findings root-causes" aria-label="findings by cause" data-testid="root-causes">
      <h2>
        Findings{' '}
        <span className="muted">
          ({detail.findings.length}, {detail.causes.length} cause{detail.causes.length === 1 ? '' : 's'})
        </span>
      </h2>
      <ol>
        {detail.causes.map((g, gi) => {
          const f = detail.findings[g.root]!;
          const said = gi === 0 && !compact;
          return (
            <li
              key={g.root}
              className={`finding cause-group ${f.severity}${g.root === active ? ' active' : ''}`}
              data-kind={f.kind}
              aria-current={g.root === active ? 'true' : undefined}
            >
              <button type="button" className="finding-open" onClick={() => open?.(g.root)} disabled={!open}>
                <FindingHead f={f} />
                <div className="finding-msg">
                  {said ? <span className="muted">the headline above</span> : f.message}
                </div>
              </button>
              {g.consequences.length > 0 && (
                <details className="consequences">
                  <summary className="small">{follow(g.consequences.length)}</summary>
                  <ul>
                    {g.consequences.map((c) => {
                      const cf = detail.findings[c.index]!;
                      return (
                        <li
                          key={c.index}
                          className={`finding consequence ${cf.severity}${c.index === active ? ' active' : ''}`}
                          data-kind={cf.kind}
                        >
                          <button
                            type="button"
                            className="finding-open"
                            onClick={() => open?.(c.index)}
                            disabled={!open}
                          >
                            <FindingHead f={cf} />
                            <div className="finding-msg small">{c.text}</div>
                          </button>
                        </li>
                      );
                    })}
                  </ul>
                </details>
              )}
            </li>
          );
        })}
      </ol>
      {!compact && detail.limitations.length > 0 && (
        <div className="small muted">
          <b>What this format cannot tell:</b> {detail.limitations.join('; ')}
        </div>
      )}
      {!compact && detail.notes.length > 0 && (
        <div className="small muted">
          <b>Re-alignment notes:</b> {detail.notes.join('; ')}
        </div>
      )}
    </section>
  );
}
