// Two token streams aligned token by token. The first divergence is the headline: red, large,
// its cause in words, the decoded text on both sides, and a button that jumps to it.
import { useEffect, useMemo, useRef, useState } from 'react';
import { Virtuoso, type VirtuosoHandle } from 'react-virtuoso';
import type { DiffResult, TrajectoryDetail } from '../../server/http/api.ts';
import { useSetParams, type Params } from '../stores/route.ts';
import { useDiff, useLoadDiff } from '../stores/trajectory.ts';
import { causeLabel } from './labels.ts';
import { isSpecial, joinTitle, shownPiece } from './token-rows.ts';
import { formatCount } from '../format.ts';

/** A run of one special token written once with its count (`<|pad|>×157`): a context line, not a page of pads. */
export function runsCounted(text: string): string {
  return text.replace(/(<\|[A-Za-z0-9_]+\|>)\1{2,}/g, (run, tok: string) => `${tok}×${run.length / tok.length}`);
}

function Context({ label, parts }: { label: string; parts: [string, string, string] }) {
  return (
    <div className="ctx">
      <span className="ctx-label">{label}</span>
      <code>
        <span className="muted">…{runsCounted(parts[0])}</span>
        <mark>{runsCounted(parts[1]) || '∅'}</mark>
        <span className="muted">{runsCounted(parts[2])}…</span>
      </code>
    </div>
  );
}

function rowState(d: DiffResult, r: number, aEndRow: number): 'eq' | 'del' | 'ins' | 'rep' | 'cont' {
  const a = d.rowsA[r]!;
  const b = d.rowsB[r]!;
  // In a prefix comparison, b going on after a has ended is the next observation, not a difference.
  if (a < 0 && d.prefixOnly && r > aEndRow) return 'cont';
  if (a < 0) return 'ins';
  if (b < 0) return 'del';
  return d.a.ids[a] === d.b.ids[b] ? 'eq' : 'rep';
}

export function DiffView({ detail, params }: { detail: TrajectoryDetail; params: Params }) {
  const setParams = useSetParams();
  const loadDiff = useLoadDiff();
  const fallback = detail.diffs[0];
  const a = params.a ?? fallback?.a ?? 'canonical';
  const b = params.b ?? fallback?.b ?? 'rerender';
  const turn = params.dturn !== undefined ? Number(params.dturn) : a === 'prompt' ? (fallback?.turn ?? 1) : 0;
  const d = useDiff(a, b, turn);
  const token = params.token !== undefined ? Number(params.token) : -1;
  const side = params.side === 'a' ? 'a' : 'b';

  useEffect(() => {
    void loadDiff(a, b, turn);
  }, [a, b, turn, loadDiff]);

  return (
    <div className="diff">
      <div className="toolbar">
        <label>
          compare{' '}
          <select
            value={`${a}:${b}:${turn}`}
            onChange={(e) => {
              const [na, nb, nt] = e.target.value.split(':');
              setParams({ a: na, b: nb, dturn: nt, token: undefined, side: undefined });
            }}
          >
            {detail.diffs.map((x) => (
              <option key={`${x.a}:${x.b}:${x.turn}`} value={`${x.a}:${x.b}:${x.turn}`}>
                {x.diverges ? '● ' : ''}
                {x.label}
              </option>
            ))}
          </select>
        </label>
        {d && <DiffSummary d={d} />}
      </div>
      {!d && <p className="muted">loading…</p>}
      {d && (
        <DiffBody
          d={d}
          token={token}
          side={side}
          onSelect={(t, sd) => setParams({ token: t, side: sd }, true)}
          said={detail.causes[0] ? detail.findings[detail.causes[0].root]?.message : undefined}
        />
      )}
    </div>
  );
}

export function DiffSummary({ d }: { d: DiffResult }) {
  return (
    <span className="muted small">
      {formatCount(d.a.ids.length)} vs {formatCount(d.b.ids.length)} tokens · {d.hunks.length} differing region
      {d.hunks.length === 1 ? '' : 's'}
      {d.prefixOnly ? ' · b may run on past a (the next observation)' : ''}
    </span>
  );
}

/**
 * The divergence headline and the aligned rows of one diff (also the playground's). `token` on
 * `side` is the selected token; `onSelect` is called to select one (the jump button).
 */
export function DiffBody({
  d,
  token,
  side,
  onSelect,
  said,
  agree,
}: {
  d: DiffResult;
  token: number;
  side: 'a' | 'b';
  onSelect(token: number, side: 'a' | 'b'): void;
  /** What the page's headline already says: the divergence's explanation is not said again. */
  said?: string;
  /** When the streams agree but that is no good news (both sides carry the same fault): the words instead. */
  agree?: string;
}) {
  const ref = useRef<VirtuosoHandle>(null);
  const selectedRow = useMemo(() => {
    if (token < 0) return -1;
    const rows = side === 'a' ? d.rowsA : d.rowsB;
    return rows.indexOf(token);
  }, [d, token, side]);
  const aEndRow = useMemo(() => d.rowsA.lastIndexOf(d.a.ids.length - 1), [d]);
  const hunkRows = useMemo(() => new Set(d.hunks.map((h) => h.row)), [d]);
  // Long stretches of equal rows fold into one line (an image's pads, a shared history); the
  // selected row and the first divergence are never folded away, and a fold opens on a click.
  const [opened, setOpened] = useState<ReadonlySet<number>>(new Set());
  const keep = useMemo(() => [selectedRow, d.divergence?.row ?? -1].filter((r) => r >= 0), [selectedRow, d.divergence]);
  const items = useMemo(() => foldedRows(d, aEndRow, keep, opened), [d, aEndRow, keep, opened]);
  const itemOfRow = useMemo(() => {
    const m = new Map<number, number>();
    items.forEach((it, i) => {
      if (it.kind === 'row') m.set(it.row, i);
    });
    return m;
  }, [items]);

  useEffect(() => {
    const at = itemOfRow.get(selectedRow);
    if (at !== undefined) ref.current?.scrollToIndex({ index: at, align: 'center' });
  }, [selectedRow, itemOfRow]);
  // Opened without a token: show the rows around the first divergence (still marked, not selected).
  // Opened on a token (a finding, a link): start there, as the diff may arrive after the token was set.
  const firstItem = itemOfRow.get(d.divergence?.row ?? -1);
  const initialLocation =
    selectedRow >= 0 && itemOfRow.has(selectedRow)
      ? { index: itemOfRow.get(selectedRow)!, align: 'center' as const }
      : { index: firstItem !== undefined ? Math.max(0, firstItem - 6) : 0, align: 'start' as const };

  const jump = () => {
    if (!d.divergence) return;
    const dv = d.divergence;
    // Land on the first token that differs: the extra one on b, else the missing one on a.
    const bRow = d.rowsB[dv.row]!;
    if (bRow >= 0) onSelect(bRow, 'b');
    else onSelect(d.rowsA[dv.row]!, 'a');
    const at = itemOfRow.get(dv.row);
    if (at !== undefined) ref.current?.scrollToIndex({ index: at, align: 'center' });
  };
  const folded = items.filter((it) => it.kind === 'fold').length;

  return (
    <>
      {d.divergence && (
        <div className="divergence" data-testid="divergence">
          <div className="div-head">
            <span className="div-title">First divergence: {causeLabel(d.divergence.cause)}</span>
            <button type="button" className="jump" data-testid="first-divergence" onClick={jump}>
              ⤓ Jump to first divergence
            </button>
          </div>
          {said?.includes(d.divergence.explanation) ? (
            <div className="div-expl muted small" data-testid="divergence-said">
              (the headline above says why)
            </div>
          ) : (
            <div className="div-expl">{d.divergence.explanation}</div>
          )}
          <div className="div-where small">
            at token {d.divergence.aIndex} of <b>{d.a.label}</b> and token {d.divergence.bIndex} of <b>{d.b.label}</b>
          </div>
          <Context label={d.a.label} parts={d.divergence.textA} />
          <Context label={d.b.label} parts={d.divergence.textB} />
        </div>
      )}
      {!d.divergence &&
        (agree ? (
          <div className="banner warning" data-testid="agree-persists">
            {agree}
          </div>
        ) : (
          <div className="banner ok">These streams agree token for token{d.prefixOnly ? ' (b extends a)' : ''}.</div>
        ))}
      <div className="diffhead">
        <span className="ix">#</span>
        <span className="dside">{d.a.label}</span>
        <span className="dside">{d.b.label}</span>
        <span className="ix">#</span>
        <span className="muted small">
          {folded > 0 ? `${folded} equal stretch${folded === 1 ? '' : 'es'} folded` : ''}
        </span>
      </div>
      <Virtuoso
        ref={ref}
        className="rows diffrows"
        data={items}
        computeItemKey={(_, it) => (it.kind === 'row' ? `r${it.row}` : `f${it.from}`)}
        initialTopMostItemIndex={initialLocation}
        increaseViewportBy={400}
        itemContent={(_, it) => {
          if (it.kind === 'fold')
            return (
              <button
                type="button"
                className="drow fold"
                data-testid="diff-fold"
                data-from={it.from}
                data-to={it.to}
                onClick={() => setOpened((prev) => new Set(prev).add(it.from))}
                title="show these rows"
              >
                <span className="ix">{d.rowsA[it.from]! >= 0 ? d.rowsA[it.from] : ''}</span>
                <span className="fold-text">
                  ⋯ {formatCount(it.to - it.from)} equal {foldWords(d, it.from, it.to)} · show
                </span>
              </button>
            );
          const r = it.row;
          const ai = d.rowsA[r]!;
          const bi = d.rowsB[r]!;
          const st = rowState(d, r, aEndRow);
          const first = d.divergence?.row === r;
          return (
            <div
              className={`drow ${st}${r === selectedRow ? ' selected' : ''}${first ? ' first' : ''}${hunkRows.has(r) ? ' hunkstart' : ''}`}
              data-row={r}
              data-a={ai}
              data-b={bi}
            >
              <span className="ix">{ai >= 0 ? ai : ''}</span>
              <span
                className={`dside${ai >= 0 && isSpecial(d.a, ai) ? ' special' : ''}`}
                title={ai >= 0 ? `id ${d.a.ids[ai]}${joinTitle(d.a, ai)}` : 'nothing on this side'}
              >
                {ai >= 0 ? shownPiece(d.a, ai) : st === 'ins' ? '—' : ''}
              </span>
              <span
                className={`dside${bi >= 0 && isSpecial(d.b, bi) ? ' special' : ''}`}
                title={bi >= 0 ? `id ${d.b.ids[bi]}${joinTitle(d.b, bi)}` : 'nothing on this side'}
              >
                {bi >= 0 ? shownPiece(d.b, bi) : st === 'del' ? '—' : ''}
              </span>
              <span className="ix">{bi >= 0 ? bi : ''}</span>
              {first && <span className="firstflag">◀ first divergence</span>}
            </div>
          );
        }}
      />
    </>
  );
}

/** Rows shown around a difference (and kept when a stretch folds). */
const CONTEXT_ROWS = 3;
/** Equal stretches at least this long fold. */
const FOLD_FROM = 12;

type DiffItem = { kind: 'row'; row: number } | { kind: 'fold'; from: number; to: number };

/**
 * The rows as shown: each stretch of FOLD_FROM or more equal rows (`eq` or the prefix pair's
 * continuation) folded into one item, CONTEXT_ROWS kept on each side of it, unless it holds a
 * row in `keep` or was opened.
 */
export function foldedRows(
  d: DiffResult,
  aEndRow: number,
  keep: readonly number[],
  opened: ReadonlySet<number>,
): DiffItem[] {
  const n = d.rowsA.length;
  const out: DiffItem[] = [];
  let r = 0;
  while (r < n) {
    if (rowState(d, r, aEndRow) !== 'eq') {
      out.push({ kind: 'row', row: r++ });
      continue;
    }
    let end = r;
    while (end < n && rowState(d, end, aEndRow) === 'eq') end++;
    // Context rows next to a difference (or the ends) stay; the middle folds.
    const from = r === 0 ? 0 : r + CONTEXT_ROWS;
    const to = end === n ? n : end - CONTEXT_ROWS;
    const foldable = to - from >= FOLD_FROM && !opened.has(from) && !keep.some((k) => k >= from && k < to);
    for (let i = r; i < end; i++) {
      if (foldable && i === from) {
        out.push({ kind: 'fold', from, to });
        i = to - 1;
      } else out.push({ kind: 'row', row: i });
    }
    r = end;
  }
  return out;
}

/** What a folded stretch holds, in words: one token repeated (an image's pad), or its text's start. */
function foldWords(d: DiffResult, from: number, to: number): string {
  const ids = new Set<number>();
  for (let r = from; r < to && ids.size < 2; r++) {
    const a = d.rowsA[r]!;
    ids.add(a >= 0 ? d.a.ids[a]! : d.b.ids[d.rowsB[r]!]!);
  }
  const first = d.rowsA[from]! >= 0 ? shownPiece(d.a, d.rowsA[from]!) : shownPiece(d.b, d.rowsB[from]!);
  if (ids.size === 1) return first;
  let text = '';
  for (let r = from; r < to && text.length < 40; r++) {
    const a = d.rowsA[r]!;
    text += a >= 0 ? shownPiece(d.a, a) : shownPiece(d.b, d.rowsB[r]!);
  }
  return `tokens “${text.length > 40 ? `${text.slice(0, 40)}…` : text}”`;
}
