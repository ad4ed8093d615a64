// The run as a table: a row per trajectory with the columns RL engineers walk a run by (step,
// group, sample, reward, advantage, response tokens, turns, images, status, findings), sortable
// by any of them, virtualized (100k rows scroll). A column the run never states is not drawn.
// A value's "=" narrows the list to it through the `where` filter; a click on a row opens it in
// the drawer beside the table, its id (or Enter) opens its page.
import type { ReactNode } from 'react';
import { TableVirtuoso, type TableComponents, type TableVirtuosoHandle } from 'react-virtuoso';
import type { RejectReason, RunInfo, SortKey, TrajectorySummary } from '../../server/http/api.ts';
import { formatCount } from '../format.ts';
import { causeLabel, kindLabel } from './labels.ts';
import { REASON_WORDS } from './reasons.ts';

export interface RowContext {
  cursor: number;
  peeked: string | undefined;
  picked: ReadonlySet<string>;
  /** The view of the table: the findings, or (rejected by export) the reasons. */
  rejectedView: boolean;
  columns: readonly Column[];
  peek(id: string, index: number): void;
  open(id: string): void;
  toggle(id: string): void;
  narrow(clause: string): void;
  hrefOf(id: string): string;
}

export interface Column {
  key: string;
  label: string;
  /** What the column holds (the header's tooltip). */
  title: string;
  sort?: SortKey;
  numeric?: boolean;
  className?: string;
  /** Whether the run gives the column anything to show. */
  shown?(info: RunInfo): boolean;
  cell(s: TrajectorySummary, ctx: RowContext): ReactNode;
  /** The `where` clause that narrows the list to this row's value (null: none). */
  where?(s: TrajectorySummary): string | null;
}

const num = (v: number | null, digits = 3) =>
  v === null ? '—' : Number.isInteger(v) ? formatCount(v) : Number(v.toFixed(digits)).toString();

/** A string as the filter language writes it (docs/filter.md: a quoted string). */
const quoted = (s: string) => JSON.stringify(s);

export function statusOf(s: TrajectorySummary): string | null {
  return s.status ?? (s.finishReason ? `finish: ${s.finishReason}` : null);
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
        <span key={k} className={`chip kind kind-${k}`}>
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

function Reasons({ s }: { s: TrajectorySummary }) {
  if (s.rejects.length === 0) return <span className="muted">exported</span>;
  return (
    <>
      {s.rejects.map((r) => (
        <span key={r} className="chip reason" data-reason={r}>
          {REASON_WORDS[r as RejectReason] ?? r}
        </span>
      ))}
      {s.headline && <span className="muted small"> {s.headline}</span>}
    </>
  );
}

export const COLUMNS: readonly Column[] = [
  {
    key: 'health',
    label: 'health',
    title: 'errors first, then warnings, then clean; more findings first',
    sort: 'findings',
    cell: (s) => <HealthDot health={s.health} />,
  },
  {
    key: 'id',
    label: 'id',
    title: 'the trajectory id (and its format)',
    sort: 'id',
    className: 'id',
    cell: (s, ctx) => (
      <>
        <a
          href={ctx.hrefOf(s.id)}
          onClick={(e) => {
            e.preventDefault();
            e.stopPropagation();
            ctx.open(s.id);
          }}
        >
          {s.id}
        </a>{' '}
        <span className="muted small fmt">{s.format}</span>
      </>
    ),
  },
  {
    key: 'step',
    label: 'step',
    title: 'the rollout step the data states',
    sort: 'step',
    numeric: true,
    shown: (i) => i.stated.step > 0,
    cell: (s) => num(s.step),
    where: (s) => (s.step === null ? null : `step = ${s.step}`),
  },
  {
    key: 'group',
    label: 'group',
    title: 'the GRPO group (samples of one prompt); sorting groups them',
    sort: 'group',
    className: 'grp',
    shown: (i) => i.stated.group > 0,
    cell: (s) => <span title={s.group ?? ''}>{s.group ?? '—'}</span>,
    where: (s) => (s.group === null ? null : `group = ${quoted(s.group)}`),
  },
  {
    key: 'sample',
    label: '#',
    title: 'its place among its group’s samples',
    sort: 'sample',
    numeric: true,
    shown: (i) => i.stated.group > 0,
    cell: (s) => num(s.sample),
  },
  {
    key: 'reward',
    label: 'reward',
    title: 'the reward the data states',
    sort: 'reward',
    numeric: true,
    shown: (i) => i.stated.reward > 0,
    cell: (s) => num(s.reward),
    where: (s) => (s.reward === null ? null : `reward = ${s.reward}`),
  },
  {
    key: 'advantage',
    label: 'adv',
    title: 'the advantage the trainer stored',
    sort: 'advantage',
    numeric: true,
    shown: (i) => i.stated.advantage > 0,
    cell: (s) => num(s.advantage),
  },
  {
    key: 'response',
    label: 'resp tok',
    title: 'generated (response) tokens',
    sort: 'response',
    numeric: true,
    cell: (s) => num(s.responseTokens),
  },
  {
    key: 'turns',
    label: 'turns',
    title: 'model calls',
    sort: 'turns',
    numeric: true,
    cell: (s) => formatCount(s.turns),
    where: (s) => `turns = ${s.turns}`,
  },
  {
    key: 'images',
    label: 'img',
    title: 'images in the conversation',
    sort: 'images',
    numeric: true,
    cell: (s) => formatCount(s.images),
  },
  {
    key: 'status',
    label: 'status',
    title: 'the status the data states, else the last finish reason',
    sort: 'status',
    className: 'status',
    cell: (s) => statusOf(s) ?? <span className="muted">—</span>,
    where: (s) => (s.status === null ? null : `status = ${quoted(s.status)}`),
  },
  {
    key: 'findings',
    label: 'findings',
    title: 'the kinds of its findings (rejected by export: why export leaves it out)',
    className: 'findings',
    cell: (s, ctx) => (ctx.rejectedView ? <Reasons s={s} /> : <FindingChips s={s} />),
  },
];

// Stable component types (defined once), so scrolling and re-renders do not remount rows. A click
// on a row opens it in the drawer (but on its checkbox, which ticks it, or a link).
const TABLE_COMPONENTS: TableComponents<TrajectorySummary, RowContext> = {
  TableRow: ({ item, context, ...rest }) => (
    <tr
      {...rest}
      data-id={item.id}
      className={`trow health-row-${item.health}${rest['data-index'] === context.cursor ? ' cursor' : ''}${context.picked.has(item.id) ? ' picked' : ''}${context.peeked === item.id ? ' peeked' : ''}`}
      onClick={(e) => {
        const t = e.target as HTMLElement;
        if (!t.closest('.pick') && !t.closest('a') && !t.closest('button')) context.peek(item.id, rest['data-index']);
      }}
    />
  ),
};

export function RunTable({
  items,
  ctx,
  sort,
  order,
  sortBy,
  allPicked,
  somePicked,
  pickAll,
  tableRef,
}: {
  items: readonly TrajectorySummary[];
  ctx: RowContext;
  sort: SortKey;
  order: 'asc' | 'desc';
  sortBy(key: SortKey): void;
  allPicked: boolean;
  somePicked: boolean;
  pickAll(): void;
  tableRef: React.RefObject<TableVirtuosoHandle | null>;
}) {
  const columns = ctx.columns;
  return (
    <TableVirtuoso
      ref={tableRef}
      className="table runtable"
      data={items}
      computeItemKey={(_, s) => s.id}
      fixedHeaderContent={() => (
        <tr>
          <th className="pick">
            <input
              type="checkbox"
              aria-label="select all shown"
              title="select all shown"
              data-testid="select-all"
              checked={allPicked}
              ref={(el) => {
                if (el) el.indeterminate = somePicked;
              }}
              onChange={pickAll}
            />
          </th>
          {columns.map((c) => (
            <th
              key={c.key}
              className={`${c.numeric ? 'num ' : ''}col-${c.key}`}
              aria-sort={c.sort && sort === c.sort ? (order === 'asc' ? 'ascending' : 'descending') : undefined}
              title={c.title}
            >
              {c.sort ? (
                <button type="button" className="sort" data-sort={c.sort} onClick={() => sortBy(c.sort!)}>
                  {c.label}
                  {sort === c.sort ? (c.sort === 'group' ? ' ▤' : order === 'asc' ? ' ▲' : ' ▼') : ''}
                </button>
              ) : (
                c.label
              )}
            </th>
          ))}
        </tr>
      )}
      itemContent={(_, s) => (
        <>
          <td className="pick">
            <input
              type="checkbox"
              aria-label={`select ${s.id}`}
              checked={ctx.picked.has(s.id)}
              onChange={() => ctx.toggle(s.id)}
            />
          </td>
          {columns.map((c) => {
            const clause = c.where?.(s) ?? null;
            return (
              <td key={c.key} className={`${c.numeric ? 'num ' : ''}col-${c.key} ${c.className ?? ''}`}>
                {c.cell(s, ctx)}
                {clause && (
                  <button
                    type="button"
                    className="narrow"
                    title={`only ${clause} (adds it to the where filter)`}
                    aria-label={`only ${clause}`}
                    onClick={(e) => {
                      e.stopPropagation();
                      ctx.narrow(clause);
                    }}
                  >
                    =
                  </button>
                )}
              </td>
            );
          })}
        </>
      )}
      context={ctx}
      components={TABLE_COMPONENTS}
    />
  );
}
