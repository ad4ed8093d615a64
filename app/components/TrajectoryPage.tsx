// One trajectory: header (health, the root cause in one line, linked to its token), a view in the
// middle (the conversation, a token stream, a diff, logprobs, the trained side, the playground),
// findings by cause and the images at the side. Opened without a view, it shows the root cause
// where it is seen (at its token), or the conversation when nothing is wrong. Its address carries
// the list it was opened from (`list=`, app/list-state.ts): j/k walk that list keeping the view,
// J/K jump groups, n/N walk the findings, Esc returns to the list with this row under the cursor.
import { useEffect, useMemo } from 'react';
import { useParams, useRouteId, type Params } from '../stores/route.ts';
import { useRun, useRunItems, useRunQuery } from '../stores/run.ts';
import {
  useDetail,
  useLoadStream,
  useOpenTrajectory,
  useTrajectory,
  useTrajectoryError,
} from '../stores/trajectory.ts';
import { useResetExpanded } from '../stores/settings.ts';
import type { TrajectoryDetail } from '../../server/http/api.ts';
import { TokenStreamView } from './TokenStreamView.tsx';
import { DiffView } from './DiffView.tsx';
import { findingParams, paramsForFinding } from '../finding-params.ts';
import { ImagePanel } from './ImagePanel.tsx';
import { Playground } from './Playground.tsx';
import { ShareButton } from './ShareButton.tsx';
import { api } from '../api.ts';
import { LogprobView } from './LogprobView.tsx';
import { CompareView, useCompareAvailable } from './CompareView.tsx';
import { formatCount } from '../format.ts';
import { decodeList, isGrouped, listKey, queryOf, type ListParams } from '../list-state.ts';
import { overviewHash, trajectoryHash } from '../navigate.ts';
import { blockStart, useKeys } from '../keyboard.ts';
import { Headline, RootCause } from './RootCause.tsx';
import { MessagesView } from './MessagesView.tsx';
import { formatHash, parseHash } from '../stores/route.ts';

export const VIEWS = ['messages', 'stream', 'diff', 'logprobs', 'compare', 'playground'] as const;
export type View = (typeof VIEWS)[number];

/** Views a shared page can show (the rest need `rollscope serve`: it does not offer them). */
const STATIC_VIEWS: readonly View[] = ['messages', 'stream', 'diff'];

/**
 * The params the page shows when the address names no view: the root cause where it is seen (its
 * view, at its token), or the conversation for a trajectory without findings.
 */
export function defaultParams(detail: TrajectoryDetail | null): Params {
  if (!detail) return {};
  const first = detail.causes.find((g) => detail.findings[g.root]!.target !== null);
  const f = first ? detail.findings[first.root]! : undefined;
  if (!f?.target || (api.transport === 'static' && !STATIC_VIEWS.includes(f.target.view as View)))
    return { view: 'messages' };
  return findingParams(first!.root) ?? { view: 'messages' };
}

const viewOf = (params: Params): View => VIEWS.find((v) => v === params.view) ?? 'messages';

/**
 * What a trajectory page asks for first: its detail and its conversation. main.tsx calls this
 * before React's first render (a page's effects run only once it has painted).
 */
export function openTrajectory(id: string, params: Params): void {
  const { open, loadStream, loadMessages } = useTrajectory.getState();
  void open(id).then(() => {
    if (params.view === 'messages' || params.view === undefined) void loadMessages();
  });
  if (params.view === 'stream' && params.stream === undefined) void loadStream('canonical', -1, true);
}

/**
 * Where j/k/J/K go from `id` in the list (undefined: nowhere). In a grouped list j/k stay within
 * the group and J/K go to the first sample of the next or previous group.
 */
function neighbour(id: string, key: 'j' | 'k' | 'J' | 'K', grouped: boolean): string | undefined {
  const items = useRun.getState().items;
  const i = items.findIndex((s) => s.id === id);
  const blockOf = (s: (typeof items)[number]) => `${s.step ?? ''}\u0000${s.group ?? ''}`;
  const sameBlock = (to: number) =>
    !grouped || (items[to] !== undefined && blockOf(items[to]!) === blockOf(items[i]!)) ? items[to]?.id : undefined;
  if (key === 'j') return i < 0 ? items[0]?.id : sameBlock(i + 1);
  if (key === 'k') return i > 0 ? sameBlock(i - 1) : undefined;
  if (i < 0) return undefined;
  const to = blockStart(items, i, key === 'J' ? 1 : -1, blockOf);
  return to === undefined ? undefined : items[to]?.id;
}

export function TrajectoryPage() {
  const id = useRouteId()!;
  const params = useParams();
  const detail = useDetail();
  const error = useTrajectoryError();
  const open = useOpenTrajectory();
  const items = useRunItems();
  const runQuery = useRunQuery();
  const resetExpanded = useResetExpanded();
  const loadStream = useLoadStream();
  const lp: ListParams = useMemo(() => decodeList(params.list), [params.list]);
  const shown = detail?.summary.id === id ? detail : null;
  // The address's params over the defaults (a view chosen is kept; none chosen: the root cause's).
  const eff: Params = useMemo(() => {
    if (params.view !== undefined) return params;
    // A link that names a place but no view shows that place: a diff's pair, else a stream's token.
    if (params.a !== undefined && params.b !== undefined) return { view: 'diff', ...params };
    if (params.token !== undefined || params.stream !== undefined) return { view: 'stream', ...params };
    return { ...defaultParams(shown), ...params };
  }, [params, shown]);
  let view = viewOf(eff);
  if (api.transport === 'static' && !STATIC_VIEWS.includes(view)) view = 'messages';
  const hasTrained = useCompareAvailable();

  useEffect(() => {
    void open(id);
    resetExpanded();
  }, [id, open, resetExpanded]);
  // biome-ignore lint/correctness/useExhaustiveDependencies: again for each trajectory (`id`)
  useEffect(() => {
    if (view === 'stream' && eff.stream === undefined) void loadStream('canonical', -1, true);
  }, [id, view, eff.stream, loadStream]);
  // j/k walk the list the page was opened from (the whole run in its default order for a bare link).
  const wanted = useMemo(() => queryOf(lp), [lp]);
  useEffect(() => {
    if (api.transport === 'http') void useRun.getState().ensureList(wanted);
  }, [wanted]);
  const listMatches = runQuery !== null && listKey(lp) === JSON.stringify(runQuery);

  const here = (next: Params) => formatHash({ page: 'trajectory', id, params: next });
  const openFinding = (index: number) => {
    const next = paramsForFinding(eff, index);
    if (next) window.location.hash = here(next);
  };
  const goTo = (p: Record<string, string>) => {
    const next: Params = {
      ...(params.list ? { list: params.list } : {}),
      ...(params.back ? { back: params.back } : {}),
      ...p,
    };
    window.location.hash = here(next);
  };
  // Back to where it was opened from: the trained side's pairs (`back=compare`), else its list.
  const back =
    params.back === 'compare'
      ? formatHash({ page: 'compare', id: null, params: { sel: id } })
      : overviewHash(lp, { sel: id });

  const walk = async (key: 'j' | 'k' | 'J' | 'K') => {
    // A key pressed while the list loads acts on the list once it is there, never on a stale one.
    await useRun.getState().ensureList(wanted);
    // From the address as it is now, not as last drawn: j pressed again before the next trajectory
    // is drawn walks on from it.
    const now = parseHash(window.location.hash);
    if (now.page !== 'trajectory' || now.id === null) return;
    const to = neighbour(now.id, key, isGrouped(lp));
    const view = now.params.view;
    if (to !== undefined) window.location.hash = trajectoryHash(to, lp, view !== undefined ? { view } : {});
  };
  const findings = shown?.findings ?? [];
  const activeFinding = eff.finding === undefined ? -1 : Number(eff.finding);
  const stepFinding = (dir: 1 | -1) => {
    if (findings.length === 0) return;
    // From the finding the address names now (n pressed again before the page redrew), else the open one.
    const named = parseHash(window.location.hash).params.finding;
    const activeFinding = named !== undefined ? Number(named) : eff.finding === undefined ? -1 : Number(eff.finding);
    // In the order of the causes: each root, then what follows from it.
    const order = shown!.causes.flatMap((g) => [g.root, ...g.consequences.map((c) => c.index)]);
    const at = order.indexOf(activeFinding);
    const next = at < 0 ? (dir === 1 ? 0 : order.length - 1) : (at + dir + order.length) % order.length;
    openFinding(order[next]!);
  };
  useKeys(
    api.transport === 'static'
      ? [
          { keys: ['n'], does: 'next finding', run: () => stepFinding(1) },
          { keys: ['N'], does: 'previous finding', run: () => stepFinding(-1) },
        ]
      : [
          { keys: ['j'], does: 'next trajectory of the list (same view)', run: () => void walk('j') },
          { keys: ['k'], does: 'previous trajectory of the list', run: () => void walk('k') },
          { keys: ['J'], does: 'first trajectory of the next group', run: () => void walk('J') },
          { keys: ['K'], does: 'first trajectory of the previous group', run: () => void walk('K') },
          { keys: ['n'], does: 'next finding', run: () => stepFinding(1) },
          { keys: ['N'], does: 'previous finding', run: () => stepFinding(-1) },
          {
            keys: ['Escape'],
            does: 'back to the list, this trajectory under the cursor',
            run: () => {
              window.location.hash = back;
            },
          },
        ],
  );

  const position = useMemo(() => {
    if (!listMatches) return null;
    const i = items.findIndex((s) => s.id === id);
    return i < 0 ? null : { at: i, count: items.length };
  }, [items, id, listMatches]);

  const tab = (v: View, label: string, extra: { disabled?: boolean; title?: string; mark?: boolean } = {}) => (
    <button
      type="button"
      role="tab"
      aria-selected={view === v}
      className={view === v ? 'active' : ''}
      onClick={() => goTo({ view: v })}
      disabled={extra.disabled}
      title={extra.title}
      data-view={v}
    >
      {label}
      {extra.mark ? ' ●' : ''}
    </button>
  );

  const s = shown?.summary;
  return (
    <div className="trajectory">
      <header className="topbar">
        {api.transport === 'http' && (
          <a className="back" href={back} data-testid="back-to-list">
            ← run
          </a>
        )}
        <h1 className="tid" title={id}>
          {id}
        </h1>
        {s && <span className={`health health-${s.health}`}>{s.health === 'ok' ? 'clean' : s.health}</span>}
        {s && (
          <span className="muted small facts">
            {s.format} · {s.turns} {s.turns === 1 ? 'turn' : 'turns'} · {formatCount(s.tokens)} tokens · {s.images}{' '}
            {s.images === 1 ? 'image' : 'images'}
            {s.step !== null ? ` · step ${s.step}` : ''}
            {s.reward !== null ? ` · reward ${s.reward}` : ''} · {shown?.profile}
          </span>
        )}
        <span className="spacer" />
        {position && (
          <span className="muted small" data-testid="list-position">
            {position.at + 1}/{position.count}
          </span>
        )}
        <button
          type="button"
          className="toplink keys-button"
          onClick={() => window.dispatchEvent(new KeyboardEvent('keydown', { key: '?' }))}
        >
          Keys ?
        </button>
        <ShareButton id={id} />
      </header>
      {error && <div className="banner error">{error}</div>}
      {shown && <Headline detail={shown} open={openFinding} />}
      {shown && findings.length === 0 && (
        <div className="banner ok">No findings: every check passed for this trajectory.</div>
      )}
      <div className="columns">
        <main className="main">
          <div className="tabs" role="tablist" aria-label="views">
            {tab('messages', 'Messages')}
            {tab('stream', 'Tokens')}
            {tab('diff', 'Diff', {
              disabled: !shown || shown.diffs.length === 0,
              mark: shown?.diffs.some((d) => d.diverges),
            })}
            {api.transport === 'http' &&
              tab('logprobs', 'Logprobs', {
                title: 'rollout logprobs, and against the trainer’s where the data has both',
                mark: findings.some(
                  (f) =>
                    f.kind === 'logprob_mismatch' ||
                    f.kind === 'logprob_shift' ||
                    (f.kind === 'invalid_value' && (f.field ?? '').includes('logprob')),
                ),
              })}
            {api.transport === 'http' &&
              hasTrained &&
              tab('compare', 'Trained side', {
                title: 'this rollout against what the trainer was given (serve --trained)',
              })}
            {api.transport === 'http' &&
              tab('playground', 'Playground', { title: 'render a conversation and compare it with this trajectory' })}
          </div>
          {shown && view === 'messages' && (
            <MessagesView detail={shown} goTo={goTo} openFinding={openFinding} active={activeFinding} />
          )}
          {shown && view === 'stream' && <TokenStreamView detail={shown} params={eff} />}
          {shown && view === 'diff' && <DiffView detail={shown} params={eff} />}
          {shown && view === 'logprobs' && <LogprobView params={eff} />}
          {shown && view === 'compare' && <CompareView id={id} />}
          {shown && view === 'playground' && <Playground trajectoryId={id} detail={shown} split />}
        </main>
        {/* The playground takes the full width: its conversation beside its rendering. A region that
            scrolls takes the keyboard's focus (axe scrollable-region-focusable): a clean trajectory's
            side holds only its images, nothing else focusable. */}
        {view !== 'playground' && (
          // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard (WCAG 2.1.1)
          <aside className="side" aria-label="findings and images" tabIndex={0}>
            {shown && <RootCause detail={shown} active={activeFinding} open={openFinding} />}
            {shown && <ImagePanel detail={shown} findings={findings} />}
          </aside>
        )}
      </div>
    </div>
  );
}
