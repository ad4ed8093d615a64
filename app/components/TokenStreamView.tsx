// The token stream as chips, virtualized by rows so a 128k-token stream opens and scrolls
// smoothly. Rows break after a newline, at turn boundaries, and every ROW_TOKENS tokens; each
// image's pad run is one chip (thumbnail + count) until expanded, then one row per row of
// merged cells, so the rows of pads line up with the rows of the image.
import { memo, useEffect, useMemo, useRef } from 'react';
import { Virtuoso, type VirtuosoHandle } from 'react-virtuoso';
import type { TokenStream, TrajectoryDetail, TurnMark, VisionSpanInfo } from '../../server/http/api.ts';
import type { Params } from '../stores/route.ts';
import { useRoute } from '../stores/route.ts';
import { streamKey, useTrajectory } from '../stores/trajectory.ts';
import { useSettings } from '../stores/settings.ts';
import { useHover } from '../stores/hover.ts';
import { api } from '../api.ts';

const ROW_TOKENS = 32;

const specialSets = new WeakMap<object, Set<number>>();
/** Whether token `i` of a stream (or diff side) is an added/special token. */
export function isSpecial(s: { ids: number[]; specialIds: number[] }, i: number): boolean {
  let set = specialSets.get(s);
  if (!set) specialSets.set(s, (set = new Set(s.specialIds)));
  return set.has(s.ids[i]!);
}

const badSets = new WeakMap<TokenStream, Set<number>>();
function badSet(s: TokenStream): Set<number> {
  let set = badSets.get(s);
  if (!set) badSets.set(s, (set = new Set(s.badLogprobs)));
  return set;
}

/** The visible piece of token `i`. */
export const pieceAt = (s: { ids: number[]; pieces: Record<string, string> }, i: number): string =>
  s.pieces[s.ids[i]!] ?? '';

export type Row =
  | { kind: 'mark'; mark: TurnMark }
  | { kind: 'tokens'; start: number; end: number }
  | { kind: 'pads'; span: number }
  | { kind: 'padrow'; span: number; start: number; end: number }
  | { kind: 'cut'; span: number };

export function buildRows(
  s: Pick<TokenStream, 'ids' | 'pieces' | 'turns' | 'vision'>,
  expanded: Record<number, boolean>,
  cellsWide: (span: VisionSpanInfo) => number,
): Row[] {
  const rows: Row[] = [];
  const marks = new Map<number, TurnMark[]>();
  for (const m of s.turns) marks.set(m.index, [...(marks.get(m.index) ?? []), m]);
  const spanAt = new Map<number, number>();
  s.vision.forEach((v, i) => spanAt.set(v.padStart, i));
  let start = 0;
  const flush = (end: number) => {
    if (end > start) rows.push({ kind: 'tokens', start, end });
    start = end;
  };
  const n = s.ids.length;
  for (let i = 0; i < n; ) {
    const m = marks.get(i);
    if (m) {
      flush(i);
      for (const mark of m) rows.push({ kind: 'mark', mark });
    }
    const si = spanAt.get(i);
    if (si !== undefined && s.vision[si]!.padLength > 0) {
      flush(i);
      const span = s.vision[si]!;
      const end = span.padStart + span.padLength;
      if (expanded[span.padStart]) {
        const w = Math.max(1, cellsWide(span));
        for (let r = span.padStart; r < end; r += w)
          rows.push({ kind: 'padrow', span: si, start: r, end: Math.min(end, r + w) });
      } else rows.push({ kind: 'pads', span: si });
      if (span.end < 0) rows.push({ kind: 'cut', span: si });
      start = end;
      i = end;
      continue;
    }
    i++;
    if (pieceAt(s, i - 1).includes('⏎') || i - start >= ROW_TOKENS) flush(i);
  }
  flush(n);
  return rows;
}

/** Index of the row that holds token `t`. */
export function rowOfToken(rows: readonly Row[], s: TokenStream, t: number): number {
  return rows.findIndex((r) => {
    if (r.kind === 'tokens' || r.kind === 'padrow') return t >= r.start && t < r.end;
    if (r.kind === 'pads') {
      const v = s.vision[r.span]!;
      return t >= v.padStart && t < v.padStart + v.padLength;
    }
    return false;
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
      className={`tok${colorClass(s, i, by)}${isSpecial(s, i) ? ' special' : ''}${selected ? ' selected' : ''}${lit ? ' lit' : ''}${pad ? ' pad' : ''}${flag ? ' flagged' : ''}`}
      data-i={i}
      data-pad={pad ? `${pad.image}:${pad.k}` : undefined}
      title={flag ? `${tokTitle(s, i, pad)}\n⚠ ${flag}` : tokTitle(s, i, pad)}
    >
      {pad ? '' : pieceAt(s, i) || '∅'}
    </span>
  );
}

/** Token index → message of the finding that points at it (in the stream shown). */
type Flags = Map<number, string>;

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
  const toggle = useSettings((st) => st.toggleExpanded);
  const span = row.kind === 'pads' || row.kind === 'padrow' ? s.vision[row.span]! : undefined;
  const litPad = useHover((h) => (span && h.image === span.image && h.pad !== null ? h.pad : -1));
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
        {v.expectedPads !== null ? ` of ${v.expectedPads}` : ''} pads, no &lt;|vision_end|&gt;
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
        <button
          className={`padrun${bad || v.end < 0 || flagged ? ' bad' : ''}${holdsToken || (litPad >= 0 && useHover.getState().from === 'image') ? ' lit' : ''}`}
          data-span={v.image}
          onClick={() => toggle(v.padStart, true)}
          title="show every pad token"
        >
          {v.image >= 0 && (
            <img
              src={api.previewUrl(trajectoryId, v.image, 96)}
              alt=""
              onError={(e) => ((e.target as HTMLImageElement).style.display = 'none')}
            />
          )}
          <span>
            <b>
              {v.kind} {v.image}
            </b>{' '}
            · {v.padLength} pads
            {v.gridThw ? ` · grid [${v.gridThw.join(', ')}]` : ''}
            {bad && <span className="badnote"> · expected {v.expectedPads}</span>}
            {v.end < 0 && <span className="badnote"> · cut: no &lt;|vision_end|&gt;</span>}
          </span>
          <span className="muted small">▸ expand</span>
        </button>
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
        <button className="link small" onClick={() => toggle(v.padStart, false)}>
          ▾ collapse image {v.image}
        </button>
      )}
      {out}
    </div>
  );
});

export function TokenStreamView({ detail, params }: { detail: TrajectoryDetail; params: Params }) {
  const setParams = useRoute((r) => r.set);
  const { streams, loadStream } = useTrajectory();
  const { expanded, toggleExpanded } = useSettings();
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
  const s = streams[streamKey(name, turn)];
  const ref = useRef<VirtuosoHandle>(null);
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
  const merge = detail.images[0]?.settings.mergeSize ?? 2;
  const rows = useMemo(
    () => (s ? buildRows(s, expanded, (v) => (v.gridThw ? v.gridThw[2] / merge : 32)) : []),
    [s, expanded, merge],
  );

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
  }, [s, token, rows, expanded, toggleExpanded]);

  // Event delegation: one handler for all chips instead of one per token.
  const hover = useHover((h) => h.hover);
  const onClick = (e: React.MouseEvent) => {
    const el = (e.target as HTMLElement).closest<HTMLElement>('.tok');
    if (el?.dataset.i) setParams({ token: el.dataset.i }, true);
  };
  const onOver = (e: React.MouseEvent) => {
    const pad = (e.target as HTMLElement).closest<HTMLElement>('.tok.pad')?.dataset.pad;
    const cur = useHover.getState();
    if (pad) {
      const [image, k] = pad.split(':').map(Number) as [number, number];
      if (cur.image !== image || cur.pad !== k) hover(image, k, 'stream');
    } else if (cur.from === 'stream') hover(null, null, null);
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
                {st.label} ({st.length.toLocaleString()})
              </option>
            ))}
          </select>
        </label>
        <span className="seg" role="group" aria-label="colour by">
          <button className={colorBy === 'mask' ? 'active' : ''} onClick={() => setColorBy('mask')}>
            loss mask
          </button>
          <button className={colorBy === 'logprob' ? 'active' : ''} onClick={() => setColorBy('logprob')}>
            logprob
          </button>
        </span>
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
        <span className="muted small">{s ? `${s.ids.length.toLocaleString()} tokens` : 'loading…'}</span>
        {token >= 0 && s && (
          <span className="small selected-info" data-testid="selected-token">
            token #{token} · id {s.ids[token]} · “{pieceAt(s, token)}”
          </span>
        )}
      </div>
      {s && (
        <div
          className="rowswrap"
          onClick={onClick}
          onMouseOver={onOver}
          onMouseLeave={() => useHover.getState().from === 'stream' && hover(null, null, null)}
        >
          <Virtuoso
            ref={ref}
            className="rows"
            data={rows}
            increaseViewportBy={400}
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
