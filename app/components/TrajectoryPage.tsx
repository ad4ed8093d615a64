// One trajectory: header (health, what is wrong in one line), the token stream or the diff in
// the middle, findings and image overlays at the side. j/k move through the run, n jumps to the
// next finding.
import { useEffect, useMemo } from 'react';
import { useGo, useParams, useRouteId, useSetParams, type Params } from '../stores/route.ts';
import { useLoadList, useRunItems, useRunQuery } from '../stores/run.ts';
import {
  useDetail,
  useLoadStream,
  useOpenTrajectory,
  useTrajectory,
  useTrajectoryError,
} from '../stores/trajectory.ts';
import { useResetExpanded } from '../stores/settings.ts';
import { queryFromParams } from './Overview.tsx';
import { TokenStreamView } from './TokenStreamView.tsx';
import { DiffView } from './DiffView.tsx';
import { FindingsPanel } from './FindingsPanel.tsx';
import { findingParams, PLACE_PARAMS } from '../keyboard.ts';
import { ImagePanel } from './ImagePanel.tsx';
import { Playground } from './Playground.tsx';
import { causeLabel, kindLabel } from './labels.ts';
import { ShareButton } from './ShareButton.tsx';
import { api } from '../api.ts';
import { LogprobView } from './LogprobView.tsx';
import { CompareView, useCompareAvailable } from './CompareView.tsx';
import { formatCount } from '../format.ts';

/**
 * What a trajectory page asks for first: its detail and, in the stream view, the head of the
 * canonical stream. main.tsx calls this before React's first render (a page's effects run only
 * once it has painted); the page's effects ask again, answered by the same requests.
 */
export function openTrajectory(id: string, params: Params): void {
  const { open, loadStream } = useTrajectory.getState();
  void open(id);
  if (viewOf(params) === 'stream' && params.stream === undefined) void loadStream('canonical', -1, true);
}

const viewOf = (params: Params) =>
  (['diff', 'playground', 'logprobs', 'compare'] as const).find((v) => v === params.view) ?? 'stream';

export function TrajectoryPage() {
  const id = useRouteId()!;
  const params = useParams();
  const setParams = useSetParams();
  const go = useGo();
  const detail = useDetail();
  const error = useTrajectoryError();
  const open = useOpenTrajectory();
  const items = useRunItems();
  const runQuery = useRunQuery();
  const loadList = useLoadList();
  const resetExpanded = useResetExpanded();
  const loadStream = useLoadStream();
  const view = viewOf(params);
  const opensCanonical = view === 'stream' && params.stream === undefined;

  useEffect(() => {
    void open(id);
    resetExpanded();
  }, [id, open, resetExpanded]);
  // biome-ignore lint/correctness/useExhaustiveDependencies: again for each trajectory (`id`), after open() has set it
  useEffect(() => {
    // The stream view opens on the canonical stream: its first screen is asked for with the detail, not after it.
    if (opensCanonical) void loadStream('canonical', -1, true);
  }, [id, opensCanonical, loadStream]);
  useEffect(() => {
    // j/k walk the list the overview showed; opened by a deep link, walk the whole run.
    if (!runQuery) void loadList(queryFromParams({}));
  }, [runQuery, loadList]);

  const hasTrained = useCompareAvailable();
  const findings = detail?.findings ?? [];

  const neighbours = useMemo(() => {
    const i = items.findIndex((s) => s.id === id);
    return {
      prev: i > 0 ? items[i - 1]?.id : undefined,
      next: i >= 0 ? items[i + 1]?.id : items[0]?.id,
      at: i,
      count: items.length,
    };
  }, [items, id]);

  const openFinding = (index: number) => {
    const params = findingParams(index);
    if (params) setParams({ ...Object.fromEntries(PLACE_PARAMS.map((k) => [k, undefined])), ...params });
  };

  const back = () => {
    if (window.history.length > 1) history.back();
    else go({ page: 'overview', id: null, params: {} });
  };

  const worst = findings[0];
  const s = detail?.summary;
  return (
    <div className="trajectory">
      <header className="topbar">
        <button type="button" className="back" onClick={back}>
          ← run
        </button>
        <h1 className="tid">{id}</h1>
        {s && <span className={`health health-${s.health}`}>{s.health === 'ok' ? 'clean' : s.health}</span>}
        {s && (
          <span className="muted small">
            {s.format} · {s.turns} turns · {formatCount(s.tokens)} tokens · {s.images} images
            {s.reward !== null ? ` · reward ${s.reward}` : ''} · {detail?.profile}
          </span>
        )}
        <span className="spacer" />
        <span className="muted small keys">
          {neighbours.at >= 0 ? `${neighbours.at + 1}/${neighbours.count} · ` : ''}j/k trajectory · n next finding · Esc
          run
        </span>
        <ShareButton id={id} />
      </header>
      {error && <div className="banner error">{error}</div>}
      {worst && (
        <div className={`banner headline ${worst.severity}`} data-testid="headline">
          <b>
            {kindLabel(worst.kind)}
            {worst.cause ? ` — ${causeLabel(worst.cause)}` : ''}
          </b>
          : {worst.message}
        </div>
      )}
      {detail && findings.length === 0 && (
        <div className="banner ok">No findings: every check passed for this trajectory.</div>
      )}
      <div className="columns">
        <main className="main">
          <nav className="tabs">
            <button
              type="button"
              className={view === 'stream' ? 'active' : ''}
              onClick={() => setParams({ view: 'stream' })}
            >
              Token stream
            </button>
            <button
              type="button"
              className={view === 'diff' ? 'active' : ''}
              onClick={() => setParams({ view: 'diff' })}
              disabled={!detail || detail.diffs.length === 0}
            >
              Diff{detail?.diffs.some((d) => d.diverges) ? ' ●' : ''}
            </button>
            <button
              type="button"
              className={view === 'logprobs' ? 'active' : ''}
              onClick={() => setParams({ view: 'logprobs', token: undefined })}
              title="rollout against trainer logprobs, token by token"
            >
              Logprobs{findings.some((f) => f.kind === 'logprob_mismatch' || f.kind === 'logprob_shift') ? ' ●' : ''}
            </button>
            {hasTrained && (
              <button
                type="button"
                className={view === 'compare' ? 'active' : ''}
                onClick={() => setParams({ view: 'compare', token: undefined })}
                title="this rollout against what the trainer was given (serve --trained)"
              >
                Trained side
              </button>
            )}
            {/* The playground renders on the server: not in a shared page. */}
            {api.transport === 'http' && (
              <button
                type="button"
                className={view === 'playground' ? 'active' : ''}
                onClick={() => setParams({ view: 'playground' })}
                title="render a conversation and compare it with this trajectory"
              >
                Playground
              </button>
            )}
          </nav>
          {detail && view === 'stream' && <TokenStreamView detail={detail} params={params} />}
          {detail && view === 'diff' && <DiffView detail={detail} params={params} />}
          {detail && view === 'logprobs' && <LogprobView params={params} />}
          {detail && view === 'compare' && <CompareView id={id} />}
          {detail && view === 'playground' && <Playground trajectoryId={id} detail={detail} split />}
        </main>
        {/* The playground takes the full width: its conversation beside its rendering. */}
        {view !== 'playground' && (
          <aside className="side">
            {detail && (
              <FindingsPanel
                findings={findings}
                active={params.finding === undefined ? -1 : Number(params.finding)}
                onOpen={openFinding}
                limitations={detail.limitations}
                notes={detail.notes}
              />
            )}
            {detail && <ImagePanel detail={detail} findings={findings} />}
          </aside>
        )}
      </div>
    </div>
  );
}
