// The Messages view: the conversation as the engine saw it (server/http/views-messages.ts) — each
// call's new prompt messages and the model's generation, roles, text, images inline (hover: its
// pad run; click: the run in the token view), tool calls and results, reasoning folded, each
// generation marked and linked to its tokens, findings pinned to the message they concern.
import { useEffect } from 'react';
import type { ConversationMessage, MessagePart, TrajectoryDetail } from '../../server/http/api.ts';
import { useLoadMessages, useMessages } from '../stores/trajectory.ts';
import { useSetHover } from '../stores/hover.ts';
import { api } from '../api.ts';
import { formatCount } from '../format.ts';
import { FindingHead, findingText } from './RootCause.tsx';

/** Where a message's tokens open in the token view. */
export function tokenParams(m: ConversationMessage, at?: number): Record<string, string> | null {
  if (!m.tokens) return null;
  return {
    view: 'stream',
    stream: m.tokens.stream,
    ...(m.tokens.stream === 'prompt' ? { turn: String(m.tokens.turn) } : {}),
    token: String(at ?? m.tokens.start),
  };
}

function ImagePart({
  part,
  trajectoryId,
  detail,
  go,
  compact,
}: {
  part: Extract<MessagePart, { type: 'image' }>;
  trajectoryId: string;
  detail: TrajectoryDetail;
  go?: () => void;
  compact: boolean;
}) {
  const hover = useSetHover();
  const info = detail.images[part.image];
  const wrong = part.expectedPads !== null && part.padLength !== null && part.expectedPads !== part.padLength;
  const width = compact ? 160 : 240;
  return (
    <figure
      className={`msg-image${wrong ? ' wrong' : ''}`}
      onMouseEnter={() => hover(part.image, 0, 'stream')}
      onMouseLeave={() => hover(null, null, null)}
      data-testid="msg-image"
      data-image={part.image}
    >
      {info?.hasPreview ? (
        <img
          src={api.previewUrl(trajectoryId, part.image, width * 2)}
          alt={`attachment ${part.image} of the conversation`}
          width={width}
        />
      ) : (
        <div className="msg-noimg">{info?.unavailable ?? 'image not available'}</div>
      )}
      <figcaption className="small">
        image {part.image}
        {info?.width ? ` · ${info.width}×${info.height}` : ''}
        {part.padLength !== null && (
          <>
            {' · '}
            <button type="button" className="link padrun-link" onClick={go} disabled={!go} data-testid="msg-padrun">
              {formatCount(part.padLength)} pad tokens at {part.padStart}–{(part.padStart ?? 0) + part.padLength - 1}
            </button>
            {wrong && <b className="bad"> · its size gives {formatCount(part.expectedPads!)}</b>}
          </>
        )}
      </figcaption>
      {part.padLength !== null && (
        <div className="padrun-strip" aria-hidden="true" title="its pad run: one mark per pad token">
          <span
            className="padrun-fill"
            style={{
              width: `${Math.min(100, (100 * part.padLength) / Math.max(part.padLength, part.expectedPads ?? 0))}%`,
            }}
          />
          {wrong && (
            <span
              className="padrun-expected"
              style={{
                left: `${Math.min(100, (100 * part.expectedPads!) / Math.max(part.padLength, part.expectedPads!))}%`,
              }}
            />
          )}
        </div>
      )}
    </figure>
  );
}

function Part({
  part,
  m,
  trajectoryId,
  detail,
  goTo,
  compact,
}: {
  part: MessagePart;
  m: ConversationMessage;
  trajectoryId: string;
  detail: TrajectoryDetail;
  goTo?: (params: Record<string, string>) => void;
  compact: boolean;
}) {
  switch (part.type) {
    case 'text':
      return <div className="msg-text">{part.text}</div>;
    case 'reasoning':
      return (
        <details className="msg-reasoning">
          <summary className="small">reasoning ({formatCount(part.text.length)} characters)</summary>
          <div className="msg-text">{part.text}</div>
        </details>
      );
    case 'tool_call':
      return (
        <div className="msg-toolcall" data-testid="msg-toolcall">
          <span className="small muted">tool call</span> <code className="tool-name">{part.name ?? '(not JSON)'}</code>
          <pre className="tool-args">{part.arguments}</pre>
        </div>
      );
    case 'image': {
      const params = tokenParams(m, part.padStart ?? undefined);
      return (
        <ImagePart
          part={part}
          trajectoryId={trajectoryId}
          detail={detail}
          compact={compact}
          go={goTo && params ? () => goTo(params) : undefined}
        />
      );
    }
  }
}

export function MessagesView({
  detail,
  compact = false,
  goTo,
  openFinding,
  active = -1,
}: {
  detail: TrajectoryDetail;
  compact?: boolean;
  /** Open address params of this trajectory (the token view at a message). */
  goTo?: (params: Record<string, string>) => void;
  openFinding?: (index: number) => void;
  active?: number;
}) {
  const conv = useMessages();
  const load = useLoadMessages();
  const id = detail.summary.id;
  // biome-ignore lint/correctness/useExhaustiveDependencies: asked again for each trajectory (`id`)
  useEffect(() => {
    void load();
  }, [load, id]);
  if (!conv) return <p className="muted">loading the conversation…</p>;
  const pinned = new Set(conv.messages.flatMap((m) => m.findings));
  const unpinned = detail.findings.map((_, i) => i).filter((i) => !pinned.has(i));
  const pin = (i: number) => {
    const f = detail.findings[i]!;
    // The page's headline says the root cause (the drawer shows it in its list): pins say what it does not.
    const text = findingText(detail, i, !compact);
    return (
      <li key={i} className={`pin ${f.severity}${i === active ? ' active' : ''}`} data-kind={f.kind}>
        <button type="button" className="finding-open" onClick={() => openFinding?.(i)} disabled={!openFinding}>
          <FindingHead f={f} />
          {text !== null && !compact && <div className="finding-msg small">{text}</div>}
          {text === null && <span className="muted small"> · the headline</span>}
        </button>
      </li>
    );
  };
  return (
    <div className={`messages${compact ? ' compact' : ''}`} data-testid="messages">
      {conv.note && <p className="muted small msg-note">{conv.note}</p>}
      {unpinned.length > 0 && (
        <ul className="pins whole" aria-label="findings about the whole trajectory">
          {unpinned.map(pin)}
        </ul>
      )}
      {conv.messages.map((m, k) => {
        const params = tokenParams(m);
        const tokens = m.tokens ? m.tokens.end - m.tokens.start : null;
        return (
          <article
            // biome-ignore lint/suspicious/noArrayIndexKey: messages are positional (one conversation, never reordered)
            key={k}
            className={`msg role-${m.role}${m.generated ? ' generated' : ''}${m.fragment ? ' fragment' : ''}${m.findings.length > 0 ? ' flagged' : ''}`}
            data-testid="message"
            data-role={m.role}
          >
            <header className="msg-head">
              <span className="msg-role">{m.role}</span>
              {m.generated && <span className="chip generated-mark">generated</span>}
              {m.fragment && <span className="chip fragment-mark">re-rendered history</span>}
              <span className="muted small">
                turn {m.turn}
                {tokens !== null ? ` · ${formatCount(tokens)} tokens` : ''}
                {m.finishReason ? ` · finish: ${m.finishReason}` : ''}
              </span>
              <span className="spacer" />
              {params && goTo && (
                <button type="button" className="link small" onClick={() => goTo(params)} data-testid="msg-tokens">
                  tokens {m.tokens!.start}–{m.tokens!.end - 1} →
                </button>
              )}
            </header>
            {m.fragment && (
              <p className="small fragment-note">
                Where the last call’s tokens end, the next prompt continues with this, mid-message:
              </p>
            )}
            <div className="msg-body">
              {m.parts.map((p, i) => (
                <Part
                  // biome-ignore lint/suspicious/noArrayIndexKey: parts are positional
                  key={i}
                  part={p}
                  m={m}
                  trajectoryId={id}
                  detail={detail}
                  goTo={goTo}
                  compact={compact}
                />
              ))}
              {m.parts.length === 0 && <span className="muted small">(empty)</span>}
            </div>
            {m.findings.length > 0 && <ul className="pins">{m.findings.map(pin)}</ul>}
          </article>
        );
      })}
    </div>
  );
}
