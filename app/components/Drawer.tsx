// A trajectory opened beside the run table (`#/?…&open=ID`): what is wrong with it and its
// conversation, without leaving the table. Esc or × closes it; "open page" (or Enter on the
// table) opens its page with the list it came from.
import { useEffect } from 'react';
import { useDetail, useOpenTrajectory, useTrajectoryError } from '../stores/trajectory.ts';
import type { TrajectorySummary } from '../../server/http/api.ts';
import { formatCount } from '../format.ts';
import { RootCause } from './RootCause.tsx';
import { MessagesView } from './MessagesView.tsx';
import { statusOf } from './RunTable.tsx';
import { reasonWords } from './reasons.ts';

export function Drawer({
  id,
  summary,
  href,
  close,
}: {
  id: string;
  summary: TrajectorySummary | undefined;
  href: string;
  close(): void;
}) {
  const open = useOpenTrajectory();
  const detail = useDetail();
  const error = useTrajectoryError();
  useEffect(() => {
    void open(id);
  }, [id, open]);
  const s = detail?.summary.id === id ? detail.summary : summary;
  const shown = detail?.summary.id === id ? detail : null;
  return (
    <aside className="drawer" aria-label={`trajectory ${id}`} data-testid="drawer">
      <header className="drawer-head">
        <a className="drawer-id" href={href}>
          {id}
        </a>
        {s && <span className={`health health-${s.health}`}>{s.health === 'ok' ? 'clean' : s.health}</span>}
        <span className="spacer" />
        <a className="button" href={href} data-testid="drawer-open">
          open page ↗
        </a>
        <button type="button" className="close" aria-label="close the drawer" onClick={close}>
          ×
        </button>
      </header>
      {s && (
        <p className="muted small drawer-facts">
          {s.format}
          {s.step !== null ? ` · step ${s.step}` : ''}
          {s.group !== null ? ` · group ${s.group}${s.sample !== null ? ` #${s.sample}` : ''}` : ''}
          {s.reward !== null ? ` · reward ${s.reward}` : ''}
          {s.advantage !== null ? ` · advantage ${Number(s.advantage.toFixed(3))}` : ''} · {formatCount(s.turns)}{' '}
          {s.turns === 1 ? 'turn' : 'turns'} · {formatCount(s.responseTokens ?? 0)} response tokens
          {statusOf(s) ? ` · ${statusOf(s)}` : ''}
        </p>
      )}
      {s && s.rejects.length > 0 && (
        <p className="small drawer-rejects">
          <b>Rejected by export:</b> {s.rejects.map(reasonWords).join('; ')}
        </p>
      )}
      {error && <div className="banner error">{error}</div>}
      {!shown && !error && <p className="muted">loading…</p>}
      {shown && <RootCause detail={shown} compact />}
      {shown && <MessagesView detail={shown} compact />}
    </aside>
  );
}
