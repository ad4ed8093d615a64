// The run at a glance: counts per finding kind (a click filters), then every trajectory as a
// row of a virtualized table, sortable and filterable by kind, cause, status and text/token id.
import { useEffect, useMemo, useRef, useState } from 'react';
import { TableVirtuoso, type TableComponents, type TableVirtuosoHandle } from 'react-virtuoso';
import type { ListQueryInput, SortKey, TrajectorySummary } from '../../server/http/api.ts';
import { useGo, useParams, useSetParams } from '../stores/route.ts';
import { useLoadList, useRunError, useRunInfo, useRunItems, useRunTotal, useWhereError } from '../stores/run.ts';
import { causeLabel, kindLabel } from './labels.ts';
import { useClearPicked, usePicked, useSelection, useSetPicked, useTogglePicked } from '../stores/selection.ts';
import { useExport, useExportActions, useExportOpen } from '../stores/export.ts';
import { ExportDialog } from './ExportDialog.tsx';
import { contentKeys } from './keys.ts';
import { RunModels } from './RunModels.tsx';
import { api } from '../api.ts';
import { RatioHistogram } from './RatioHistogram.tsx';
import { useCompareAvailable } from './CompareView.tsx';
import { GroupedOverview } from './GroupedOverview.tsx';
import { formatCount } from '../format.ts';

const COLUMNS: { key: SortKey; label: string; numeric?: boolean }[] = [
  { key: 'findings', label: 'health' },
  { key: 'id', label: 'id' },
  { key: 'format', label: 'format' },
  { key: 'turns', label: 'turns', numeric: true },
  { key: 'tokens', label: 'tokens', numeric: true },
  { key: 'images', label: 'images', numeric: true },
  { key: 'reward', label: 'reward', numeric: true },
  { key: 'status', label: 'status' },
];

export function queryFromParams(p: Record<string, string>): ListQueryInput {
  return {
    kind: p.kind as ListQueryInput['kind'],
    cause: p.cause as ListQueryInput['cause'],
    status: p.status,
    q: p.q,
    ratioBin: p.ratioBin !== undefined ? Number(p.ratioBin) : undefined,
    step: p.step !== undefined && /^\d+$/.test(p.step) ? Number(p.step) : undefined,
    group: p.group,
    where: p.where,
    sort: (p.sort as SortKey | undefined) ?? 'findings',
    order: (p.order as 'asc' | 'desc' | undefined) ?? 'desc',
  };
}

/**
 * The filter expression (docs/filter.md), applied on Enter and kept in the URL (`#/?where=…`); when
 * the server refuses it, its message and the expression with the offending character marked.
 */
function WhereFilter({ where, apply }: { where: string | undefined; apply: (where: string | undefined) => void }) {
  const [text, setText] = useState(where ?? '');
  const error = useWhereError();
  // A new address (back, a link from the run page's brush) shows its own expression.
  useEffect(() => setText(where ?? ''), [where]);
  const shownError = error && error.where === where ? error : null;
  return (
    <div className="where">
      <input
        type="text"
        className={`where-input${shownError ? ' invalid' : ''}`}
        placeholder="where: reward >= 1 and not severity:error and step >= 100 (Enter applies)"
        aria-label="where"
        aria-invalid={shownError ? true : undefined}
        data-testid="where-input"
        spellCheck={false}
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter') apply(text.trim() === '' ? undefined : text);
          else if (e.key === 'Escape') setText(where ?? '');
        }}
      />
      {shownError && (
        <div className="where-error" role="alert" data-testid="where-error">
          <code className="where-expr">
            {shownError.where.slice(0, shownError.offset)}
            <mark data-testid="where-error-at">
              {shownError.where.slice(shownError.offset, shownError.offset + 1) || ' '}
            </mark>
            {shownError.where.slice(shownError.offset + 1)}
          </code>
          <span>{shownError.message.replace(/^where: /, '')}</span>
        </div>
      )}
    </div>
  );
}

function HealthDot({ health }: { health: TrajectorySummary['health'] }) {
  return <span className={`health health-${health}`}>{health === 'ok' ? 'clean' : health}</span>;
}

export function FindingChips({ s }: { s: TrajectorySummary }) {
  const kinds = Object.entries(s.findings.kind);
  if (kinds.length === 0) return <span className="muted">no findings</span>;
  return (
    <>
      {kinds.map(([k, n]) => (
        <span key={k} className={`chip kind kind-${k}`} title={s.headline ?? ''}>
          {kindLabel(k)}
          {n > 1 ? ` ×${n}` : ''}
        </span>
      ))}
      {Object.keys(s.findings.cause).map((c) => (
        <span key={c} className="chip cause">
          {causeLabel(c)}
        </span>
      ))}
    </>
  );
}

interface RowContext {
  cursor: number;
  open(id: string): void;
  picked: ReadonlySet<string>;
}

// Stable component types (defined once), so scrolling and re-renders do not remount rows. A click
// anywhere on a row opens it (but the checkbox cell, which ticks it); by keyboard, j/k and Enter
// do, and the id is a link.
const TABLE_COMPONENTS: TableComponents<TrajectorySummary, RowContext> = {
  TableRow: ({ item, context, ...rest }) => (
    <tr
      {...rest}
      data-id={item.id}
      className={`trow health-row-${item.health}${rest['data-index'] === context.cursor ? ' cursor' : ''}${context.picked.has(item.id) ? ' picked' : ''}`}
      onClick={(e) => {
        if (!(e.target as HTMLElement).closest('.pick')) context.open(item.id);
      }}
    />
  ),
};

export function Overview() {
  const params = useParams();
  const setParams = useSetParams();
  const go = useGo();
  const info = useRunInfo();
  const items = useRunItems();
  const total = useRunTotal();
  const loadList = useLoadList();
  const error = useRunError();
  const query = useMemo(() => queryFromParams(params), [params]);
  const hasTrained = useCompareAvailable();
  const picked = usePicked();
  const togglePicked = useTogglePicked();
  const setPicked = useSetPicked();
  const clearPicked = useClearPicked();
  const exportOpen = useExportOpen();
  const { show: showExport } = useExportActions();
  const errorKeys = useMemo(
    () => contentKeys(info?.errors ?? [], (e) => `${e.file}:${e.line}:${e.field ?? ''}:${e.message}`),
    [info?.errors],
  );
  const allShownPicked = items.length > 0 && items.every((s) => picked.has(s.id));
  const someShownPicked = !allShownPicked && items.some((s) => picked.has(s.id));
  // Reload when the run grows (files still loading or being written, a trajectory read again with
  // more turns), once the run is known.
  const runRevision = info?.revision;

  useEffect(() => {
    if (runRevision !== undefined) void loadList(query);
  }, [query, loadList, runRevision]);

  const open = (id: string) => go({ page: 'trajectory', id, params: { view: 'stream' } });
  const [cursor, setCursor] = useState(0);
  // Keys can arrive faster than React re-renders: the handler reads the cursor from a ref.
  const cursorRef = useRef(0);
  const table = useRef<TableVirtuosoHandle>(null);
  // One listener for the page's lifetime, reading the latest rows through refs: keys pressed
  // right after the rows appear must not race a re-subscription.
  const itemsRef = useRef(items);
  itemsRef.current = items;
  const grouped = params.by === 'group';
  const groupedRef = useRef(grouped);
  groupedRef.current = grouped;
  const openRef = useRef(open);
  openRef.current = open;
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const rows = itemsRef.current;
      if (
        e.target instanceof HTMLInputElement ||
        e.metaKey ||
        e.ctrlKey ||
        e.altKey ||
        rows.length === 0 ||
        groupedRef.current ||
        useExport.getState().open
      )
        return;
      const move = (to: number) => {
        const c = Math.max(0, Math.min(rows.length - 1, to));
        cursorRef.current = c;
        setCursor(c);
        table.current?.scrollIntoView({ index: c });
      };
      const at = cursorRef.current;
      if (e.key === 'j') move(at + 1);
      else if (e.key === 'k') move(at - 1);
      else if (e.key === 'Enter' && rows[at]) openRef.current(rows[at].id);
      else if (e.key === 'x' && rows[at]) useSelection.getState().toggle(rows[at].id);
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);
  const sortBy = (key: SortKey) =>
    setParams({ sort: key, order: query.sort === key && query.order === 'desc' ? 'asc' : 'desc' }, true);

  return (
    <div className="overview">
      <header className="topbar">
        <h1>
          rollscope{' '}
          <span
            className="muted small"
            title={info?.files.map((f) => `${f.file} (${f.format ?? '?'}, ${f.trajectories})`).join('\n')}
          >
            {info?.demo ? 'demo run' : info?.files.map((f) => f.file.split(/[\\/]/).pop()).join(', ')}
          </span>
        </h1>
        <span className="muted small">
          {info ? (
            <>
              {info.trajectories} trajectories · <RunModels info={info} />
              {info.loading ? ' · loading…' : ''}
            </>
          ) : (
            'loading…'
          )}
        </span>
        <span className="spacer" />
        <a className="toplink" href="#/run" data-testid="open-run">
          By step
        </a>
        {hasTrained && (
          <a className="toplink" href="#/compare" data-testid="open-compare">
            Trained side
          </a>
        )}
        {/* The playground and export run on the server: not in a shared page. */}
        {api.transport === 'http' && (
          <a className="toplink" href="#/playground">
            Playground
          </a>
        )}
      </header>
      {error && <div className="banner error">{error}</div>}
      {info && (
        <section className="counts" aria-label="finding counts">
          <button
            type="button"
            className={`count health-ok ${params.status === 'ok' ? 'active' : ''}`}
            onClick={() =>
              setParams({ status: params.status === 'ok' ? undefined : 'ok', kind: undefined, cause: undefined }, true)
            }
          >
            <b>{info.health.ok}</b> clean
          </button>
          <button
            type="button"
            className={`count health-error ${params.status === 'error' ? 'active' : ''}`}
            onClick={() =>
              setParams(
                { status: params.status === 'error' ? undefined : 'error', kind: undefined, cause: undefined },
                true,
              )
            }
          >
            <b>{info.health.error}</b> with errors
          </button>
          {info.health.warning > 0 && (
            <button
              type="button"
              className={`count health-warning ${params.status === 'warning' ? 'active' : ''}`}
              onClick={() =>
                setParams(
                  { status: params.status === 'warning' ? undefined : 'warning', kind: undefined, cause: undefined },
                  true,
                )
              }
            >
              <b>{info.health.warning}</b> warnings only
            </button>
          )}
          {Object.entries(info.counts.kind)
            .sort((a, b) => b[1] - a[1])
            .map(([k, n]) => (
              <button
                type="button"
                key={k}
                data-kind={k}
                className={`count kind kind-${k} ${params.kind === k ? 'active' : ''}`}
                onClick={() => setParams({ kind: params.kind === k ? undefined : k, status: undefined }, true)}
              >
                <b>{n}</b> {kindLabel(k)}
              </button>
            ))}
          {Object.entries(info.counts.cause).map(([c, n]) => (
            <button
              type="button"
              key={c}
              data-cause={c}
              className={`count cause ${params.cause === c ? 'active' : ''}`}
              onClick={() => setParams({ cause: params.cause === c ? undefined : c }, true)}
            >
              <b>{n}</b> {causeLabel(c)}
            </button>
          ))}
        </section>
      )}
      <RatioHistogram
        active={query.ratioBin as number | undefined}
        onPick={(bin) => setParams({ ratioBin: bin }, true)}
        refreshKey={info?.trajectories}
      />
      <div className="filters">
        <input
          type="search"
          placeholder="filter by id, file, message or token id…"
          defaultValue={params.q ?? ''}
          onChange={(e) => setParams({ q: e.target.value || undefined }, true)}
          aria-label="filter"
        />
        <WhereFilter where={params.where} apply={(where) => setParams({ where })} />
        <span className="muted small">
          {items.length < total ? `${formatCount(items.length)} of ` : ''}
          {formatCount(total)} shown{query.kind ? ` · kind ${kindLabel(query.kind)}` : ''}
          {query.cause ? ` · cause ${causeLabel(query.cause)}` : ''}
          {query.status ? ` · status ${query.status}` : ''}
          {query.ratioBin !== undefined ? ` · importance-ratio bar ${query.ratioBin}` : ''}
          {query.step !== undefined ? ` · step ${query.step}` : ''}
          {query.group !== undefined ? ` · group ${query.group}` : ''}
          {query.where ? ` · where ${query.where}` : ''}
        </span>
        <button
          type="button"
          className={`link by-group${grouped ? ' active' : ''}`}
          data-testid="toggle-groups"
          aria-pressed={grouped}
          onClick={() => setParams(grouped ? { by: undefined, sort: undefined } : { by: 'group', sort: 'group' }, true)}
        >
          {grouped ? 'flat list' : 'by group'}
        </button>
        {(query.kind ||
          query.cause ||
          query.status ||
          query.q ||
          query.ratioBin !== undefined ||
          query.step !== undefined ||
          query.group ||
          query.where) && (
          <button
            type="button"
            className="link"
            onClick={() =>
              setParams(
                {
                  kind: undefined,
                  cause: undefined,
                  status: undefined,
                  q: undefined,
                  ratioBin: undefined,
                  step: undefined,
                  group: undefined,
                  where: undefined,
                },
                true,
              )
            }
          >
            clear filters
          </button>
        )}
        {picked.size > 0 && (
          <span className="small" data-testid="picked-count">
            {formatCount(picked.size)} selected
            <button type="button" className="link" onClick={clearPicked}>
              clear
            </button>
          </span>
        )}
        {api.transport === 'http' && (
          <button
            type="button"
            className="export-button"
            data-testid="open-export"
            onClick={showExport}
            disabled={!info}
          >
            Export…
          </button>
        )}
        <span className="muted small keys">
          {grouped ? 'j/k in a group · J/K groups · o folds · Enter opens' : 'j/k move · x select · Enter opens'}
        </span>
      </div>
      {exportOpen && (
        <ExportDialog
          filter={{
            kind: query.kind,
            cause: query.cause,
            status: query.status,
            q: query.q,
            ratioBin: query.ratioBin as number | undefined,
            where: query.where,
          }}
          shown={total}
        />
      )}
      {info && info.errors.length > 0 && (
        <details className="banner warning">
          <summary>{info.errors.length} records could not be read</summary>
          <ul>
            {info.errors.slice(0, 50).map((e, i) => (
              <li key={errorKeys[i]}>
                {e.file}:{e.line}
                {e.field ? ` (${e.field})` : ''}: {e.message}
              </li>
            ))}
          </ul>
        </details>
      )}
      {grouped && <GroupedOverview items={items} open={open} step={query.step as number | undefined} />}
      <TableVirtuoso
        ref={table}
        className={grouped ? 'table hidden' : 'table'}
        data={grouped ? [] : items}
        fixedHeaderContent={() => (
          <tr>
            <th className="pick">
              <input
                type="checkbox"
                aria-label="select all shown"
                title="select all shown"
                data-testid="select-all"
                checked={allShownPicked}
                ref={(el) => {
                  if (el) el.indeterminate = someShownPicked;
                }}
                onChange={() =>
                  setPicked(
                    items.map((s) => s.id),
                    !allShownPicked,
                  )
                }
              />
            </th>
            {COLUMNS.map((c) => (
              <th
                key={c.key}
                className={c.numeric ? 'num' : ''}
                aria-sort={query.sort === c.key ? (query.order === 'asc' ? 'ascending' : 'descending') : 'none'}
              >
                <button type="button" className="sort" onClick={() => sortBy(c.key)}>
                  {c.label}
                  {query.sort === c.key ? (query.order === 'asc' ? ' ▲' : ' ▼') : ''}
                </button>
              </th>
            ))}
            <th>findings</th>
          </tr>
        )}
        itemContent={(_, s) => (
          <>
            <td className="pick">
              <input
                type="checkbox"
                aria-label={`select ${s.id}`}
                checked={picked.has(s.id)}
                onChange={() => togglePicked(s.id)}
              />
            </td>
            <td>
              <HealthDot health={s.health} />
            </td>
            <td className="id">
              <a
                href={`#/t/${encodeURIComponent(s.id)}?view=stream`}
                onClick={(e) => {
                  e.preventDefault();
                  open(s.id);
                }}
              >
                {s.id}
              </a>
            </td>
            <td>{s.format}</td>
            <td className="num">{s.turns}</td>
            <td className="num">{formatCount(s.tokens)}</td>
            <td className="num">{s.images}</td>
            <td className="num">{s.reward ?? '—'}</td>
            <td>{s.status ?? ''}</td>
            <td className="findings" title={s.headline ?? ''}>
              <FindingChips s={s} />
            </td>
          </>
        )}
        context={{ cursor, open, picked }}
        components={TABLE_COMPONENTS}
      />
    </div>
  );
}
