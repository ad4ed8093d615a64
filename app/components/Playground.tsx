// The playground: paste an OpenAI-style conversation, render it with the run's model profile
// (the server's `renderConversation`, as `rollscope render`), see the text, the tokens with each
// image's pads expanded, the ids, and where they part from one of a trajectory's streams.
import { useEffect, useId, useMemo, useRef, useState } from 'react';
import { Virtuoso, type VirtuosoHandle } from 'react-virtuoso';
import { ListboxScroller } from './scroller.tsx';
import type { PlaygroundResult, TrajectoryDetail } from '../../server/http/api.ts';
import type { StreamName } from '../../server/model/finding.ts';
import { usePlaygroundActions, usePlaygroundView } from '../stores/playground.ts';
import { useRunInfo } from '../stores/run.ts';
import { useParams, useSetParams } from '../stores/route.ts';
import { focusChipSoon } from './TokenStreamView.tsx';
import { buildRows, isSpecial, joinClass, joinTitle, pieceAt, shownPiece } from './token-rows.ts';
import { DiffBody, DiffSummary } from './DiffView.tsx';
import { causeLabel } from './labels.ts';
import './Playground.css';
import { formatCount } from '../format.ts';

type Tab = 'tokens' | 'text' | 'ids' | 'diff';

const PLACEHOLDER = `{"messages": [
  {"role": "user", "content": [
    {"type": "image", "width": 640, "height": 480},
    {"type": "text", "text": "What is in the picture?"}
  ]}
], "tools": []}`;

/** Token chips of the rendered ids: rows break after newlines; each image's pad run is one chip. */
function TokenChips({ r, flagged }: { r: PlaygroundResult; flagged: number }) {
  const rows = useMemo(
    () => buildRows({ ids: r.ids, pieces: r.pieces, joins: r.joins, turns: [], vision: r.vision }, {}),
    [r],
  );
  const [selected, setSelected] = useState(-1);
  const listbox = useRef<HTMLDivElement>(null);
  const virtuoso = useRef<VirtuosoHandle>(null);
  // Keyboard selection: bring the selected chip into view and move focus to it (roving tabindex).
  useEffect(() => {
    const box = listbox.current;
    if (selected < 0 || !box?.contains(document.activeElement)) return;
    const row = rows.findIndex((x) => x.kind === 'tokens' && selected >= x.start && selected < x.end);
    if (row >= 0) virtuoso.current?.scrollIntoView({ index: row });
    focusChipSoon(box, selected);
  }, [selected, rows]);
  // One handler for every chip: a click selects the chip's token, ←/→ the previous/next one.
  const onClick = (e: React.MouseEvent) => {
    const i = (e.target as HTMLElement).closest<HTMLElement>('.tok')?.dataset.i;
    if (i !== undefined) setSelected(Number(i));
  };
  const onKeyDown = (e: React.KeyboardEvent) => {
    const step = e.key === 'ArrowLeft' ? -1 : e.key === 'ArrowRight' ? 1 : 0;
    if (step === 0 || r.ids.length === 0) return;
    e.preventDefault();
    setSelected((t) => Math.max(0, Math.min(r.ids.length - 1, t < 0 ? 0 : t + step)));
  };
  return (
    <div className="pg-tokens">
      <div className="small pg-selected" data-testid="pg-selected-token">
        {selected >= 0 ? (
          <>
            token #{selected} · id {r.ids[selected]} · “{pieceAt(r, selected)}”
          </>
        ) : (
          <span className="muted">click a token for its index and id</span>
        )}
      </div>
      <div
        ref={listbox}
        className="rowswrap"
        role="listbox"
        aria-label="rendered tokens"
        tabIndex={0}
        onClick={onClick}
        onKeyDown={onKeyDown}
      >
        <Virtuoso
          components={{ Scroller: ListboxScroller }}
          ref={virtuoso}
          className="rows"
          data={rows}
          increaseViewportBy={400}
          itemContent={(_, row) => {
            if (row.kind === 'tokens') {
              const out = [];
              for (let i = row.start; i < row.end; i++) {
                out.push(
                  <span
                    key={i}
                    data-i={i}
                    className={`tok${isSpecial(r, i) ? ' special' : ''}${i === flagged ? ' flagged' : ''}${i === selected ? ' selected' : ''}${joinClass(r, i)}`}
                    role="option"
                    aria-selected={i === selected}
                    tabIndex={i === selected ? 0 : -1}
                    title={`#${i} · id ${r.ids[i]}${joinTitle(r, i)}${i === flagged ? '\n⚠ first divergence' : ''}`}
                  >
                    {shownPiece(r, i) || '∅'}
                  </span>,
                );
              }
              return <div className="row">{out}</div>;
            }
            if (row.kind === 'pads') {
              const v = r.vision[row.span]!;
              const img = r.images[v.image];
              return (
                <div className="row">
                  <span
                    className={`padchip${flagged >= v.padStart && flagged < v.padStart + v.padLength ? ' bad' : ''}`}
                    data-span={v.image}
                    title={`tokens #${v.padStart}–#${v.padStart + v.padLength - 1}`}
                  >
                    <b>image {v.image}</b> · {v.padLength} pads
                    {v.gridThw ? ` · grid [${v.gridThw.join(', ')}]` : ''}
                    {img
                      ? ` · ${img.width}×${img.height} → ${img.resizedWidth}×${img.resizedHeight} (${img.source})`
                      : ''}
                  </span>
                </div>
              );
            }
            return <div />;
          }}
        />
      </div>
    </div>
  );
}

function Verdict({ r }: { r: PlaygroundResult }) {
  const d = r.diff;
  if (!d) return null;
  if (!d.divergence) {
    return (
      <span className="verdict ok" data-testid="pg-verdict">
        ✓ identical to {d.b.label}
        {d.prefixOnly && d.b.ids.length > d.a.ids.length ? ` (its first ${formatCount(d.a.ids.length)} tokens)` : ''}
      </span>
    );
  }
  return (
    <span className="verdict bad" data-testid="pg-verdict">
      ✗ differs from {d.b.label} at token {d.divergence.aIndex}
      {d.divergence.cause !== 'other' ? `: ${causeLabel(d.divergence.cause)}` : ''}
    </span>
  );
}

/** A conversation as an address param: base64url of its UTF-8 (the address keeps what was rendered). */
export function encodeConversation(text: string): string {
  let bin = '';
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function decodeConversation(param: string): string | undefined {
  try {
    const bin = atob(param.replace(/-/g, '+').replace(/_/g, '/'));
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
}

/** Longest conversation kept in the address (a pasted data: URL image is not). */
const MAX_ADDRESS_CHARS = 16_000;

export function Playground({
  trajectoryId,
  detail,
  split = false,
  context: contextProp,
}: {
  trajectoryId: string | null;
  detail: TrajectoryDetail | null;
  split?: boolean;
  /** What the playground belongs to (default: the trajectory, else the free page): entering another starts afresh. */
  context?: string;
}) {
  const { text, result, error, busy, target, prefix, addGenerationPrompt, prefillNote, resultFor, profile } =
    usePlaygroundView();
  const pg = usePlaygroundActions();
  const info = useRunInfo();
  const params = useParams();
  const setParams = useSetParams();
  const context = contextProp ?? trajectoryId ?? 'free';
  // The conversation the address holds (a link, a reload): what was last rendered here.
  const fromAddress = params.c !== undefined ? decodeConversation(params.c) : undefined;
  const [tooLong, setTooLong] = useState(false);
  const idsId = useId();
  const tokenIdsId = useId();
  const [tab, setTab] = useState<Tab>('tokens');
  const [diffToken, setDiffToken] = useState<{ token: number; side: 'a' | 'b' }>({ token: -1, side: 'b' });
  const prefill = pg.prefill;

  // biome-ignore lint/correctness/useExhaustiveDependencies: entered once per context; the address is read then
  useEffect(() => {
    pg.enter(context, fromAddress);
    if (params.profile) pg.set({ profile: params.profile });
    if (fromAddress !== undefined) void pg.render(trajectoryId);
    else if (trajectoryId && context === trajectoryId) void prefill(trajectoryId);
  }, [context]);

  // Show the diff when there is one to show, the tokens otherwise.
  useEffect(() => {
    setTab((t) => (result?.diff ? (t === 'tokens' || t === 'diff' ? 'diff' : t) : t === 'diff' ? 'tokens' : t));
    setDiffToken({ token: -1, side: 'b' });
  }, [result]);

  const render = () => {
    // The address keeps the conversation rendered (and the profile), so a reload or a link shows it.
    const long = text.length > MAX_ADDRESS_CHARS;
    setTooLong(long);
    setParams({ c: long ? undefined : encodeConversation(text), profile: profile ?? undefined }, true);
    void pg.render(trajectoryId);
  };
  const profiles = [
    ...new Set([...(info?.models.map((m) => m.profile) ?? []), ...(info?.builtinProfiles ?? [])]),
  ].filter((p) => !p.startsWith('none:'));
  const streams = detail?.streams ?? [];
  const targetKey = target ? `${target.stream}:${target.turn}` : '';
  const diff = result?.diff && resultFor === trajectoryId ? result.diff : null;
  const pads = result ? result.vision.reduce((n, v) => n + v.padLength, 0) : 0;

  return (
    <div className={`playground${split ? ' split' : ''}`} data-testid="playground">
      <section className="pg-input">
        <div className="pg-head">
          <b>Conversation</b>
          <span className="muted small">
            OpenAI-style JSON <code>{'{"messages": [...], "tools"?: [...]}'}</code>; images as{' '}
            <code>{'{"width", "height"}'}</code> or <code>data:</code> URLs
          </span>
        </div>
        <textarea
          className="pg-text"
          aria-label="conversation"
          spellCheck={false}
          value={text}
          placeholder={PLACEHOLDER}
          onChange={(e) => pg.setText(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
              e.preventDefault();
              render();
            }
          }}
        />
        <div className="pg-controls">
          <label className="check">
            <input
              type="checkbox"
              checked={addGenerationPrompt}
              onChange={(e) => pg.set({ addGenerationPrompt: e.target.checked })}
            />{' '}
            add generation prompt
          </label>
          <label>
            compare with{' '}
            <select
              aria-label="compare with"
              value={targetKey}
              disabled={!detail}
              onChange={(e) => {
                const [stream, turn] = e.target.value.split(':');
                pg.set({ target: stream ? { stream: stream as StreamName, turn: Number(turn) } : null });
              }}
            >
              <option value="">{detail ? 'nothing' : 'open a trajectory to compare'}</option>
              {streams.map((s) => (
                <option key={`${s.name}:${s.turn}`} value={`${s.name}:${s.turn}`}>
                  {s.label} ({formatCount(s.length)})
                </option>
              ))}
            </select>
          </label>
          {target && detail && (
            <label
              className="check"
              title="the stream may go on past the rendered tokens (a prompt against prompt + generation) without that counting as a difference"
            >
              <input type="checkbox" checked={prefix} onChange={(e) => pg.set({ prefix: e.target.checked })} /> as a
              prefix
            </label>
          )}
          <label>
            profile{' '}
            <select
              aria-label="model profile"
              data-testid="pg-profile"
              value={profile ?? ''}
              onChange={(e) => pg.set({ profile: e.target.value || null })}
            >
              <option value="">
                {detail ? `the trajectory’s (${detail.profile})` : `the run’s (${info?.profile.name ?? '…'})`}
              </option>
              {profiles.map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          </label>
          <span className="spacer" />
          {trajectoryId && (
            <button
              type="button"
              className="link small"
              onClick={() => void prefill(trajectoryId, true)}
              title="replace the text with this trajectory's first-turn messages"
            >
              reset to the first turn
            </button>
          )}
          <button
            type="button"
            className="primary"
            data-testid="pg-render"
            disabled={busy || text.trim() === ''}
            onClick={render}
            title="Ctrl+Enter"
          >
            {busy ? 'Rendering…' : 'Render'}
          </button>
        </div>
        {tooLong && (
          <div className="muted small pg-note">
            This conversation is too long for the address ({formatCount(text.length)} characters): a link to this page
            will not hold it.
          </div>
        )}
        {prefillNote && !text && (
          <div className="muted small pg-note">{prefillNote}; paste a conversation to render it.</div>
        )}
      </section>
      <section className="pg-output">
        {error && (
          <div className="banner error pg-error" data-testid="pg-error">
            {error}
          </div>
        )}
        {result && (
          <>
            <div className="pg-summary" data-testid="pg-summary">
              <span>
                <b data-testid="pg-token-count">{formatCount(result.ids.length)}</b> tokens
                {result.images.length > 0
                  ? ` with ${result.images.length} image${result.images.length === 1 ? '' : 's'} expanded (${formatCount(pads)} pads; ${formatCount(result.tokenIds.length)} as tokenized)`
                  : ''}{' '}
                · {result.profile}
              </span>
              <Verdict r={{ ...result, diff }} />
            </div>
            {result.notes.map((n) => (
              <div key={n} className="muted small pg-note">
                {n}
              </div>
            ))}
            <nav className="tabs">
              {(['tokens', 'text', 'ids', 'diff'] as const).map((t) => (
                <button
                  type="button"
                  key={t}
                  className={tab === t ? 'active' : ''}
                  disabled={t === 'diff' && !diff}
                  onClick={() => setTab(t)}
                >
                  {t === 'tokens'
                    ? 'Tokens'
                    : t === 'text'
                      ? 'Text'
                      : t === 'ids'
                        ? 'Ids'
                        : `Diff${diff?.divergence ? ' ●' : ''}`}
                </button>
              ))}
            </nav>
            {tab === 'tokens' && <TokenChips r={result} flagged={diff?.divergence?.aIndex ?? -1} />}
            {tab === 'text' && <pre className="pg-rendered">{result.text}</pre>}
            {tab === 'ids' && (
              <div className="pg-ids">
                <label className="small muted" htmlFor={idsId}>
                  what the model sees: {formatCount(result.ids.length)} ids, image pads expanded
                </label>
                <textarea id={idsId} readOnly data-testid="pg-ids" value={result.ids.join(' ')} />
                <label className="small muted" htmlFor={tokenIdsId}>
                  as tokenized: {formatCount(result.tokenIds.length)} ids, one placeholder per image
                </label>
                <textarea id={tokenIdsId} readOnly value={result.tokenIds.join(' ')} />
              </div>
            )}
            {tab === 'diff' && diff && (
              <div className="diff">
                <div className="toolbar">
                  <DiffSummary d={diff} />
                </div>
                <DiffBody
                  d={diff}
                  token={diffToken.token}
                  side={diffToken.side}
                  onSelect={(token, side) => setDiffToken({ token, side })}
                />
              </div>
            )}
          </>
        )}
        {!result && !error && (
          <p className="muted pg-empty">
            {busy ? 'Rendering…' : 'Render a conversation to see its text, tokens and ids here.'}
          </p>
        )}
      </section>
    </div>
  );
}
