// The run: the header, the counts (following the filter), the importance-ratio histogram, the
// filters, and the run table (or the run by GRPO group), a trajectory opened in a drawer beside
// it. Everything the page shows is in its address (app/list-state.ts): the filter, the order,
// the grouping, the row under the cursor (`sel`) and the drawer (`open`), so Back, a reload and
// Esc from a trajectory page give exactly this page again.
import { useEffect, useMemo, useRef, useState } from 'react';
import type { TableVirtuosoHandle } from 'react-virtuoso';
import type { RatioHistogram as Ratios, SortKey, TrajectorySummary } from '../../server/http/api.ts';
import { useParams, useRoute } from '../stores/route.ts';
import {
  useListCurrent,
  useLoadList,
  useRunError,
  useRunFacets,
  useRunInfo,
  useRunItems,
  useRunTotal,
} from '../stores/run.ts';
import { usePicked, useSelection, useSetPicked, useClearPicked, useTogglePicked } from '../stores/selection.ts';
import { useExportActions, useExportOpen } from '../stores/export.ts';
import { ExportDialog } from './ExportDialog.tsx';
import { contentKeys } from './keys.ts';
import { RunModels } from './RunModels.tsx';
import { api } from '../api.ts';
import { RatioHistogram } from './RatioHistogram.tsx';
import { useCompareAvailable } from './CompareView.tsx';
import { useAgainstRun, useLoadAgainstRun } from '../stores/against.ts';
import { GroupedOverview } from './GroupedOverview.tsx';
import { formatCount } from '../format.ts';
import {
  filterOf,
  hasFilter,
  isGrouped,
  type ListParams,
  listParamsOf,
  queryOf,
  sortOf,
  withoutFilter,
} from '../list-state.ts';
import { trajectoryHash } from '../navigate.ts';
import { useListKeys } from '../keyboard.ts';
import { FacetChips } from './FacetChips.tsx';
import { TextFilter, WhereError, WhereInput } from './FilterBar.tsx';
import { COLUMNS, type RowContext, RunTable } from './RunTable.tsx';
import { Drawer } from './Drawer.tsx';
import { binRangeText } from './RatioHistogram.tsx';
import { kindLabel, causeLabel } from './labels.ts';

/** The filter in words (the bar says what narrows the list). */
export function filterWords(lp: ListParams, ratioBin?: string): string[] {
  const out: string[] = [];
  if (lp.status)
    out.push(
      lp.status === 'ok'
        ? 'clean'
        : lp.status === 'error'
          ? 'with errors'
          : lp.status === 'warning'
            ? 'warnings only'
            : `status ${lp.status}`,
    );
  if (lp.kind) out.push(kindLabel(lp.kind));
  if (lp.cause) out.push(causeLabel(lp.cause));
  if (lp.severity) out.push(`severity ${lp.severity}`);
  if (lp.export) out.push(lp.export === 'rejected' ? 'rejected by export' : 'exported');
  if (lp.ratioBin !== undefined) out.push(`importance ratio ${ratioBin ?? `bin ${lp.ratioBin}`}`);
  if (lp.step !== undefined) out.push(`step ${lp.step}`);
  if (lp.group !== undefined) out.push(`group ${lp.group}`);
  if (lp.q) out.push(`matching “${lp.q}”`);
  if (lp.where) out.push(`where ${lp.where}`);
  return out;
}

/** `clause` and-ed to a where expression (parenthesized when the expression has an `or`). */
export function andWhere(where: string | undefined, clause: string): string {
  const w = where?.trim();
  if (!w) return clause;
  return /\bor\b/.test(w) ? `(${w}) and ${clause}` : `${w} and ${clause}`;
}

export function Overview() {
  const params = useParams();
  const lp = useMemo(() => listParamsOf(params), [params]);
  const query = useMemo(() => queryOf(lp), [lp]);
  const { sort, order } = sortOf(lp);
  const grouped = isGrouped(lp);
  const info = useRunInfo();
  const items = useRunItems();
  const total = useRunTotal();
  const facets = useRunFacets();
  const current = useListCurrent();
  const loadList = useLoadList();
  const error = useRunError();
  const hasTrained = useCompareAvailable();
  const [ratios, setRatios] = useState<Ratios | null>(null);
  const against = useAgainstRun();
  const loadAgainst = useLoadAgainstRun();
  useEffect(() => {
    if (!against) void loadAgainst();
  }, [against, loadAgainst]);
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
  // Reload when the run grows (files still loading or being written), once the run is known.
  const runRevision = info?.revision;
  useEffect(() => {
    if (runRevision !== undefined) void loadList(query);
  }, [query, loadList, runRevision]);

  /** Change the address: list params, the cursor, the drawer (`replace`: no history entry). */
  const set = (changes: Record<string, string | undefined>, replace = true) =>
    useRoute.getState().set(changes, replace);
  const setList = (changes: Partial<Record<keyof ListParams, string | undefined>>) =>
    set({ ...changes, sel: undefined }, true);

  const hrefOf = (id: string) => trajectoryHash(id, lp);
  const openPage = (id: string) => {
    // The cursor stays on the row opened: Esc on its page comes back to it.
    set({ sel: id }, true);
    window.location.hash = hrefOf(id);
  };
  // The cursor is on the row the address names (`sel`), else on the first row.
  const selAt = params.sel === undefined ? -1 : items.findIndex((s) => s.id === params.sel);
  const cursor = selAt >= 0 ? selAt : items.length > 0 ? 0 : -1;
  const table = useRef<TableVirtuosoHandle>(null);
  const setCursor = (i: number) => {
    const row = items[i];
    if (!row) return;
    set({ sel: row.id, ...(params.open !== undefined ? { open: row.id } : {}) }, true);
    table.current?.scrollIntoView({ index: i });
  };
  // Opened on a row (Esc from its page, a link): scroll it into view once the rows are there.
  const scrolledTo = useRef<string | undefined>(undefined);
  useEffect(() => {
    if (cursor < 0 || scrolledTo.current === params.sel) return;
    scrolledTo.current = params.sel;
    table.current?.scrollToIndex({ index: cursor, align: 'center' });
  }, [cursor, params.sel]);
  const peek = (id: string) => set({ open: params.open === id ? undefined : id, sel: id }, params.open !== undefined);

  useListKeys<TrajectorySummary>({
    rows: grouped ? [] : items,
    cursor,
    setCursor,
    noun: 'trajectory',
    open: (s) => openPage(s.id),
    notable: (s) => s.health !== 'ok',
    blockOf: info && info.stated.step > 0 ? (s) => String(s.step ?? '') : undefined,
    extra: [
      {
        keys: ['p', ' '],
        does: 'open or close the drawer on the trajectory',
        run: () => {
          const s = items[cursor];
          if (s) peek(s.id);
        },
      },
      {
        keys: ['x'],
        does: 'tick the trajectory (for export)',
        run: () => {
          const s = items[cursor];
          if (s) useSelection.getState().toggle(s.id);
        },
      },
      {
        keys: ['Escape'],
        does: 'close the drawer',
        run: () => {
          if (params.open !== undefined) set({ open: undefined }, false);
        },
      },
    ],
  });

  const sortBy = (key: SortKey) =>
    key === 'group'
      ? setList({ by: 'group', sort: undefined, order: undefined })
      : setList({ by: undefined, sort: key, order: sort === key && order === 'desc' ? 'asc' : 'desc' });

  const columns = useMemo(() => (info ? COLUMNS.filter((c) => !c.shown || c.shown(info)) : COLUMNS), [info]);
  const ctx: RowContext = {
    cursor,
    peeked: params.open,
    picked,
    rejectedView: lp.export === 'rejected',
    columns,
    peek: (id) => peek(id),
    open: openPage,
    toggle: togglePicked,
    narrow: (clause) => setList({ where: andWhere(lp.where, clause) }),
    hrefOf,
  };
  const allShownPicked = items.length > 0 && items.every((s) => picked.has(s.id));
  const someShownPicked = !allShownPicked && items.some((s) => picked.has(s.id));
  const runSize = info?.trajectories ?? 0;
  const ratioBin = lp.ratioBin !== undefined ? ratios?.bins.find((b) => String(b.bin) === lp.ratioBin) : undefined;
  const words = filterWords(lp, ratioBin ? binRangeText(ratioBin) : undefined);
  const drawn = params.open !== undefined ? items.find((s) => s.id === params.open) : undefined;

  return (
    <div className={`overview${params.open !== undefined ? ' with-drawer' : ''}`}>
      <header className="topbar">
        <h1>
          rollscope{' '}
          <span
            className="muted small run-name"
            title={info?.files.map((f) => `${f.file} (${f.format ?? '?'}, ${f.trajectories})`).join('\n')}
          >
            {info?.demo ? 'demo run' : info?.paths.join(', ')}
          </span>
        </h1>
        <span className="muted small run-facts">
          {info ? (
            <>
              {formatCount(runSize)} trajectories · <RunModels info={info} />
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
        {against?.available && (
          <a className="toplink" href="#/against" data-testid="open-against">
            Against B
          </a>
        )}
        {api.transport === 'http' && (
          <a className="toplink" href="#/playground">
            Playground
          </a>
        )}
        <button
          type="button"
          className="toplink keys-button"
          onClick={() => window.dispatchEvent(new KeyboardEvent('keydown', { key: '?' }))}
        >
          Keys ?
        </button>
      </header>
      {error && <div className="banner error">{error}</div>}
      {facets && <FacetChips facets={facets} lp={lp} set={setList} />}
      <RatioHistogram
        active={lp.ratioBin !== undefined ? Number(lp.ratioBin) : undefined}
        onPick={(bin) => setList({ ratioBin: bin === undefined ? undefined : String(bin) })}
        filter={filterOf(lp)}
        refreshKey={runRevision}
        onLoaded={setRatios}
      />
      <div className="filters">
        <TextFilter q={lp.q} apply={(q) => setList({ q })} />
        <WhereInput where={lp.where} apply={(where) => setList({ where })} />
        <fieldset className="seg view-seg">
          <legend className="sr-only">rows</legend>
          <button
            type="button"
            className={grouped ? '' : 'active'}
            aria-pressed={!grouped}
            data-testid="view-table"
            onClick={() => setList({ by: undefined, sort: lp.sort === 'group' ? undefined : lp.sort })}
          >
            table
          </button>
          <button
            type="button"
            className={grouped ? 'active' : ''}
            aria-pressed={grouped}
            data-testid="toggle-groups"
            onClick={() => setList({ by: 'group' })}
          >
            by group
          </button>
        </fieldset>
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
      </div>
      <WhereError where={lp.where} />
      <div className="shown-line small" data-testid="shown-line">
        <span data-testid="shown-count">
          <b>{formatCount(total)}</b> shown{hasFilter(lp) || total !== runSize ? ` of ${formatCount(runSize)}` : ''}
          {!current ? ' · loading…' : ''}
        </span>
        {words.length > 0 && <span className="muted"> · {words.join(' · ')}</span>}
        {hasFilter(lp) && (
          <button type="button" className="link" onClick={() => setList(withoutFilter(lp) as never)}>
            clear filters
          </button>
        )}
        {picked.size > 0 && (
          <span data-testid="picked-count">
            {' '}
            · {formatCount(picked.size)} ticked
            <button type="button" className="link" onClick={clearPicked}>
              clear
            </button>
          </span>
        )}
        {lp.export === 'rejected' && (
          <span className="muted" data-testid="rejected-note">
            {' '}
            · what `export` leaves out and why, from their findings before re-aligning (an image it cannot read is found
            only when it writes)
          </span>
        )}
      </div>
      {exportOpen && <ExportDialog filter={filterOf(lp)} words={words} facets={facets} shown={total} />}
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
      <div className="overview-body">
        {grouped ? (
          <GroupedOverview
            items={items}
            lp={lp}
            openPage={openPage}
            sel={params.sel}
            setSel={(id) => set({ sel: id }, true)}
          />
        ) : (
          <RunTable
            items={items}
            ctx={ctx}
            sort={sort}
            order={order}
            sortBy={sortBy}
            allPicked={allShownPicked}
            somePicked={someShownPicked}
            pickAll={() =>
              setPicked(
                items.map((s) => s.id),
                !allShownPicked,
              )
            }
            tableRef={table}
          />
        )}
        {params.open !== undefined && (
          <Drawer
            id={params.open}
            summary={drawn}
            href={hrefOf(params.open)}
            close={() => set({ open: undefined }, false)}
          />
        )}
      </div>
    </div>
  );
}
