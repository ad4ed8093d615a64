// The token stream as chips, virtualized by rows (token-rows.ts) so a 128k-token stream opens and
// scrolls smoothly; rows of chips are drawn a few per frame (drawn-soon.ts).
import { memo, useEffect, useMemo, useRef } from 'react';
import { Virtuoso, type VirtuosoHandle } from 'react-virtuoso';
import { ListboxScroller } from './scroller.tsx';
import type { TokenStream, TrajectoryDetail } from '../../server/http/api.ts';
import { useSetParams, type Params } from '../stores/route.ts';
import { useLoadStream, useStream } from '../stores/trajectory.ts';
import { useExpandedRuns, useToggleExpanded } from '../stores/settings.ts';
import { useCellHovered, useHover, useLitPad, useSetHover } from '../stores/hover.ts';
import { api } from '../api.ts';
import { onRowsWaiting, useDrawnSoon } from './drawn-soon.ts';
import { formatCount } from '../format.ts';
import {
  buildRows,
  derivedOnce,
  isSpecial,
  joinAt,
  joinClass,
  joinTitle,
  pieceAt,
  rowOfToken,
  type Row,
  shownPiece,
} from './token-rows.ts';

/** Rows drawn before the list has measured its viewport: about one screen. */
const INITIAL_ROWS = 40;

const badSet = derivedOnce((s: TokenStream) => new Set(s.badLogprobs));

/** Focus the chip of token `i` in `box` as soon as it is rendered (after a scroll, a frame or two later). */
export function focusChipSoon(box: HTMLElement, i: number, frames = 5): void {
  requestAnimationFrame(() => {
    const chip = box.querySelector<HTMLElement>(`.tok[data-i="${i}"]`);
    if (chip) chip.focus({ preventScroll: true });
    else if (frames > 1) focusChipSoon(box, i, frames - 1);
  });
}

/** Colour class of a token: by loss mask (trained / not), or by logprob in ten buckets of p = exp(logprob). */
function colorClass(s: TokenStream, i: number, by: 'mask' | 'logprob'): string {
  if (by === 'mask') {
    const m = s.lossMask?.[i];
    if (m === null || m === undefined) return '';
    return m === 1 ? ' m1' : ' m0';
  }
  const lp = s.logprobs?.[i];
  if (badSet(s).has(i)) return ' lpbad';
  if (lp === null || lp === undefined) return ' lpnone';
  return ` lp${Math.min(9, Math.floor(Math.exp(Math.min(0, lp)) * 10))}`;
}

function tokTitle(s: TokenStream, i: number, pad?: { image: number; k: number }): string {
  const lp = s.logprobs?.[i];
  const m = s.lossMask?.[i];
  const lpText = badSet(s).has(i)
    ? ' · logprob invalid (NaN/∞/positive)'
    : lp !== null && lp !== undefined
      ? ` · logprob ${lp.toFixed(3)}`
      : '';
  return `#${i} · id ${s.ids[i]}${m !== undefined && m !== null ? ` · mask ${m}` : ''}${lpText}${pad ? ` · image ${pad.image} pad ${pad.k}` : ''}`;
}

/** One token chip: a plain span (no hooks) — a 128k-token stream renders thousands of these while scrolling. */
function tok(
  s: TokenStream,
  i: number,
  by: 'mask' | 'logprob',
  selected: boolean,
  flags: Flags,
  lit = false,
  pad?: { image: number; k: number },
) {
  const flag = flags.get(i);
  return (
    <span
      key={i}
      className={`tok${colorClass(s, i, by)}${isSpecial(s, i) ? ' special' : ''}${selected ? ' selected' : ''}${lit ? ' lit' : ''}${pad ? ' pad' : ''}${flag ? ' flagged' : ''}${joinClass(s, i)}`}
      role="option"
      aria-selected={selected}
      tabIndex={selected ? 0 : -1}
      data-i={i}
      data-pad={pad ? `${pad.image}:${pad.k}` : undefined}
      title={`${tokTitle(s, i, pad)}${joinTitle(s, i)}${flag ? `\n⚠ ${flag}` : ''}`}
    >
      {pad ? '' : shownPiece(s, i) || '∅'}
    </span>
  );
}

/** Token index → message of the finding that points at it (in the stream shown). */
type Flags = Map<number, string>;

/** A row of chips before its turn to be drawn: the same pieces as one line of text (pads as ▪). */
function RowText({ row, s }: { row: Row & { start: number; end: number }; s: TokenStream }) {
  let text = '';
  if (row.kind === 'padrow') text = '▪'.repeat(row.end - row.start);
  else for (let i = row.start; i < row.end; i++) text += shownPiece(s, i) || '∅';
  return (
    <div className={`row rowtext${row.kind === 'padrow' ? ' padrow' : ''}`} aria-hidden="true">
      {text}
    </div>
  );
}

const RowView = memo(function RowView({
  row,
  s,
  by,
  token,
  trajectoryId,
  flags,
}: {
  row: Row;
  s: TokenStream;
  by: 'mask' | 'logprob';
  token: number;
  trajectoryId: string;
  flags: Flags;
}) {
  const toggle = useToggleExpanded();
  const span = row.kind === 'pads' || row.kind === 'padrow' ? s.vision[row.span]! : undefined;
  const litPad = useLitPad(span?.image);
  const cellHovered = useCellHovered(span?.image);
  const chips = row.kind === 'tokens' || row.kind === 'padrow';
  // Rows of chips are drawn a few per frame (drawn-soon.ts); until then a row is its text.
  const drawn = useDrawnSoon(!chips || (token >= row.start && token < row.end));
  if (chips && !drawn) return <RowText row={row} s={s} />;
  if (row.kind === 'mark') {
    const m = row.mark;
    const label =
      m.what === 'prompt'
        ? m.turn >= 0
          ? `prompt (turn ${m.turn})`
          : 'prompt'
        : m.what === 'generated'
          ? `turn ${m.turn} · generated by the model`
          : m.what === 'observation'
            ? `turn ${m.turn} · observation`
            : 'response';
    return <div className={`mark mark-${m.what}`}>{label}</div>;
  }
  if (row.kind === 'cut') {
    const v = s.vision[row.span]!;
    return (
      <div className="mark mark-cut">
        ✂ the sequence is cut inside {v.kind} {v.image}: {v.padLength}
        {v.expectedPads !== null ? ` of ${v.expectedPads}` : ''} pads, no end token
      </div>
    );
  }
  if (row.kind === 'tokens') {
    const out = [];
    for (let i = row.start; i < row.end; i++) out.push(tok(s, i, by, i === token, flags));
    return <div className="row">{out}</div>;
  }
  const v = span!;
  if (row.kind === 'pads') {
    const bad = v.expectedPads !== null && v.expectedPads !== v.padLength;
    const holdsToken = token >= v.padStart && token < v.padStart + v.padLength;
    const flagged = [...flags.keys()].some((i) => i >= v.padStart && i < v.padStart + v.padLength);
    return (
      <div className="row">
        {/* An option of the token listbox (a listbox holds options, not buttons): Enter or a click expands it. */}
        <span
          role="option"
          aria-selected={holdsToken}
          tabIndex={-1}
          className={`padrun${bad || v.end < 0 || flagged ? ' bad' : ''}${holdsToken || cellHovered ? ' lit' : ''}`}
          data-span={v.image}
          onClick={() => toggle(v.padStart, true)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' || e.key === ' ') toggle(v.padStart, true);
          }}
          title="show every pad token"
        >
          {v.image >= 0 && (
            <img
              src={api.previewUrl(trajectoryId, v.image, 96)}
              alt=""
              onError={(e) => {
                (e.target as HTMLImageElement).style.display = 'none';
              }}
            />
          )}
          <span>
            <b>
              {v.kind} {v.image}
            </b>{' '}
            · {v.padLength} pads
            {v.gridThw ? ` · grid [${v.gridThw.join(', ')}]` : ''}
            {bad && <span className="badnote"> · expected {v.expectedPads}</span>}
            {v.end < 0 && <span className="badnote"> · cut: no end token</span>}
          </span>
          <span className="muted small">▸ expand</span>
        </span>
      </div>
    );
  }
  const out = [];
  for (let i = row.start; i < row.end; i++) {
    const k = i - v.padStart;
    out.push(tok(s, i, by, i === token, flags, k === litPad, { image: v.image, k }));
  }
  return (
    <div className="row padrow">
      {row.start === v.padStart && (
        <span
          role="option"
          aria-selected={false}
          tabIndex={-1}
          className="link small collapse-run"
          onClick={() => toggle(v.padStart, false)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' || e.key === ' ') toggle(v.padStart, false);
          }}
        >
          ▾ collapse image {v.image}
        </span>
      )}
      {out}
    </div>
  );
});

export function TokenStreamView({ detail, params }: { detail: TrajectoryDetail; params: Params }) {
  const setParams = useSetParams();
  const loadStream = useLoadStream();
  const expanded = useExpandedRuns();
  const toggleExpanded = useToggleExpanded();
  // Part of the address: a link can open the stream coloured by logprob.
  const colorBy = params.color === 'logprob' ? 'logprob' : 'mask';
  const setColorBy = (c: 'mask' | 'logprob') => setParams({ color: c === 'mask' ? undefined : c }, true);
  const first = detail.streams[0];
  const name = params.stream ?? first?.name ?? 'canonical';
  const turn =
    params.turn !== undefined
      ? Number(params.turn)
      : name === 'prompt'
        ? (detail.streams.find((s) => s.name === 'prompt')?.turn ?? 0)
        : -1;
  const token = params.token !== undefined ? Number(params.token) : -1;
  const s = useStream(name, turn);
  const ref = useRef<VirtuosoHandle>(null);
  const listbox = useRef<HTMLDivElement>(null);
  const trajectoryId = detail.summary.id;

  useEffect(() => {
    void loadStream(name, turn);
  }, [name, turn, loadStream]);

  const flags = useMemo(() => {
    const m: Flags = new Map();
    for (const f of detail.findings) {
      if (f.index < 0 || f.stream !== name || (name === 'prompt' && f.turn !== turn)) continue;
      m.set(f.index, m.has(f.index) ? `${m.get(f.index)}\n⚠ ${f.message}` : f.message);
    }
    return m;
  }, [detail.findings, name, turn]);
  const rows = useMemo(() => (s ? buildRows(s, expanded) : []), [s, expanded]);

  // Deep link / finding click: open the pad run that hides the token, then scroll to it.
  useEffect(() => {
    if (!s || token < 0) return;
    const span = s.vision.find((v) => token >= v.padStart && token < v.padStart + v.padLength);
    if (span && !expanded[span.padStart]) {
      toggleExpanded(span.padStart, true);
      return;
    }
    const r = rowOfToken(rows, s, token);
    if (r >= 0) ref.current?.scrollToIndex({ index: r, align: 'center' });
    // Keyboard selection: focus follows the selected chip once it is drawn (roving tabindex).
    const box = listbox.current;
    if (box?.contains(document.activeElement)) focusChipSoon(box, token);
  }, [s, token, rows, expanded, toggleExpanded]);

  // While rows wait to be drawn as chips the list is busy (assistive tech, and tests before a screenshot).
  // biome-ignore lint/correctness/useExhaustiveDependencies: the listbox is there once a stream is (`s`)
  useEffect(() => {
    const box = listbox.current;
    if (box) return onRowsWaiting((busy) => box.setAttribute('aria-busy', String(busy)));
  }, [s]);

  // Event delegation: one handler for all chips instead of one per token. The handlers read the
  // hover store when they run; nothing here renders from it.
  const hover = useSetHover();
  const onClick = (e: React.MouseEvent) => {
    const el = (e.target as HTMLElement).closest<HTMLElement>('.tok');
    if (el?.dataset.i) setParams({ token: el.dataset.i }, true);
  };
  const clearStreamHover = () => {
    if (useHover.getState().from === 'stream') hover(null, null, null);
  };
  const hoverPad = (target: EventTarget) => {
    const pad = (target as HTMLElement).closest<HTMLElement>('.tok.pad')?.dataset.pad;
    if (!pad) return clearStreamHover();
    const [image, k] = pad.split(':').map(Number) as [number, number];
    const cur = useHover.getState();
    if (cur.image !== image || cur.pad !== k) hover(image, k, 'stream');
  };
  // Keyboard: ←/→ select the previous/next token, Home/End the first/last (a pad run opens as the selection enters it).
  const onKeyDown = (e: React.KeyboardEvent) => {
    const steps: Record<string, number> = { ArrowLeft: -1, ArrowRight: 1, Home: -Infinity, End: Infinity };
    const step = steps[e.key];
    const length = s?.total ?? s?.ids.length ?? 0;
    if (!s || step === undefined || length === 0) return;
    e.preventDefault();
    setParams({ token: Math.max(0, Math.min(length - 1, token < 0 ? 0 : token + step)) }, true);
  };

  return (
    <div className="stream">
      <div className="toolbar">
        <label>
          stream{' '}
          <select
            value={`${name}:${turn}`}
            onChange={(e) => {
              const [n, t] = e.target.value.split(':');
              setParams({ stream: n, turn: n === 'prompt' ? t : undefined, token: undefined });
            }}
          >
            {detail.streams.map((st) => (
              <option key={`${st.name}:${st.turn}`} value={`${st.name}:${st.turn}`}>
                {st.label} ({formatCount(st.length)})
              </option>
            ))}
          </select>
        </label>
        <fieldset className="seg">
          <legend className="sr-only">colour by</legend>
          <button
            type="button"
            className={colorBy === 'mask' ? 'active' : ''}
            aria-pressed={colorBy === 'mask'}
            onClick={() => setColorBy('mask')}
          >
            loss mask
          </button>
          <button
            type="button"
            className={colorBy === 'logprob' ? 'active' : ''}
            aria-pressed={colorBy === 'logprob'}
            onClick={() => setColorBy('logprob')}
          >
            logprob
          </button>
        </fieldset>
        {colorBy === 'mask' ? (
          <span className="legend">
            <i style={{ background: 'var(--trained)' }} /> trained (mask 1){' '}
            <i style={{ background: 'var(--untrained)' }} /> not trained (0) <i /> no mask
          </span>
        ) : (
          <span className="legend">
            p = e<sup>logprob</sup>: <i className="lp0" /> &lt;0.1 <i className="lp3" /> 0.3 <i className="lp6" /> 0.6{' '}
            <i className="lp9" /> ≥0.9 <i className="lpnone" /> none <i className="lpbad" /> NaN/invalid
          </span>
        )}
        <span className="muted small">
          {s
            ? `${formatCount(s.total ?? s.ids.length)} tokens${s.total !== undefined ? ' (loading the rest…)' : ''}`
            : 'loading…'}
        </span>
        {token >= 0 && s && token < s.ids.length && (
          <span className="small selected-info" data-testid="selected-token">
            token #{token} · id {s.ids[token]} · “{pieceAt(s, token)}”
            {joinAt(s, token) ? ` · part of “${joinAt(s, token)!.text}”` : ''}
          </span>
        )}
      </div>
      {s && (
        // A listbox of tokens: click or ←/→ select one; the pointer over a pad lights its image cell.
        <div
          ref={listbox}
          className="rowswrap"
          role="listbox"
          aria-label={`tokens of the ${name} stream`}
          tabIndex={0}
          onClick={onClick}
          onKeyDown={onKeyDown}
          onMouseMove={(e) => hoverPad(e.target)}
          onMouseLeave={clearStreamHover}
        >
          <Virtuoso
            components={{ Scroller: ListboxScroller }}
            ref={ref}
            className="rows"
            data={rows}
            increaseViewportBy={400}
            // The first screen's rows in the first render, before the list has measured itself.
            initialItemCount={Math.min(rows.length, INITIAL_ROWS)}
            computeItemKey={(i, r) =>
              r.kind === 'mark'
                ? `m${r.mark.index}:${r.mark.what}:${i}`
                : r.kind === 'pads' || r.kind === 'cut'
                  ? `${r.kind}${r.span}`
                  : `${r.kind}${r.start}`
            }
            itemContent={(_, row) => (
              <RowView row={row} s={s} by={colorBy} token={token} trajectoryId={trajectoryId} flags={flags} />
            )}
          />
        </div>
      )}
    </div>
  );
}
