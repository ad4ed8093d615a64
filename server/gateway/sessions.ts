// Which conversation a call belongs to, and what the gateway remembers of it. A session is named
// by a header (`x-session-id` unless configured), else the body's `session_id` or `user`; without
// any, by its messages: a request whose messages extend exactly one known session's (its messages,
// then the answer the gateway gave; of several, those with the longest history) is that session's
// next turn. Two candidates (two sessions with the same turns so far, GRPO siblings at temperature
// 0) start a new session with a
// `grouping_ambiguous` finding, never a guess. Completions without an id are matched the same way
// on their prompt text. Sessions idle past the TTL, or the oldest past the cap, are forgotten.
import { createHash, randomUUID } from 'node:crypto';
import type { Finding } from '../model/finding.ts';
import type { Message } from '../model/trajectory.ts';
import type { CaptureFile } from './capture.ts';

export type SessionSource = 'header' | 'session_id' | 'user' | 'messages' | 'prompt' | 'new';

/** A tool call as the gateway answered it (arguments as the JSON text it sent). */
export interface AnsweredToolCall {
  name: string;
  arguments: string;
}

/** What the session's last turn was, as far as the next call needs it. */
export interface LastTurn {
  /** The prompt ids the engine ran (image pads expanded). */
  promptIds: number[];
  generatedIds: number[];
  finishReason?: string;
  /** The request's messages (chat) and their exact keys (`conversationKeys`). */
  messages?: Message[];
  messageKeys?: string[];
  tools?: unknown[];
  /** The answer as the client received it. */
  answer: { content: string | null; toolCalls: AnsweredToolCall[] };
  /** The prompt as text (the chat template's render, or a completions prompt) and its ids, one pad per image. */
  text?: string;
  textIds?: number[];
}

export interface SessionImage {
  /** Digest of the URL as the request carried it (data URLs are long). */
  key: string;
  padCount?: number;
  problem?: string;
}

export interface Session {
  id: string;
  from: SessionSource;
  file: CaptureFile;
  created: number;
  lastUsed: number;
  /** Turns recorded (calls that returned a generation). */
  turns: number;
  calls: number;
  last?: LastTurn;
  /** Every image of the conversation so far, in order. */
  images: SessionImage[];
  findings: { turn: number; call: string; finding: Finding }[];
  /** The key this session is indexed under for message-prefix matching. */
  continuationKey?: string;
}

export interface Identified {
  session: Session;
  created: boolean;
  /** Findings about the grouping itself (ambiguity, lost state). */
  findings: Finding[];
}

/** Sessions keep at most this many findings for `GET /rollscope/sessions/ID` (the capture has all). */
const KEPT_FINDINGS = 200;
const LONG_STRING = 256;

const digest = (s: string) => createHash('sha1').update(s).digest('base64url');
const short = (s: string) => (s.length > LONG_STRING ? `#${digest(s)}` : s);

function textOf(content: unknown): string | null {
  if (content === null || content === undefined) return null;
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((p) =>
        typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string'
          ? (p as { text: string }).text
          : '',
      )
      .join('');
  return JSON.stringify(content);
}

/** JSON with object keys sorted: the same value written by two clients gives the same text. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (typeof v === 'object' && v !== null)
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

function argumentsValue(args: unknown): unknown {
  if (typeof args !== 'string') return args ?? {};
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

function toolCallsOf(m: Record<string, unknown>): AnsweredToolCall[] {
  if (!Array.isArray(m.tool_calls)) return [];
  return m.tool_calls.map((c) => {
    const fn = (typeof c === 'object' && c !== null ? (c as { function?: unknown }).function : undefined) as
      | { name?: unknown; arguments?: unknown }
      | undefined;
    return { name: String(fn?.name ?? ''), arguments: canonicalJson(argumentsValue(fn?.arguments)) };
  });
}

/**
 * What identifies a message for matching: its role, its text or parts (image URLs by digest), its
 * tool calls (arguments as parsed JSON) and tool fields; not the fields a client library adds or
 * drops (`refusal: null`, an empty `tool_calls`). `loose` trims an assistant's text (an agent that
 * strips the answer still continues the conversation; continuity then sees an edited history).
 */
export function messageKey(m: Message, loose = false): string {
  const r = m as Record<string, unknown>;
  const content = Array.isArray(r.content)
    ? r.content.map((p) => {
        const part = p as Record<string, unknown>;
        if (typeof part.text === 'string') return { text: short(part.text) };
        const image = part.image_url ?? part.image;
        const url = typeof image === 'string' ? image : (image as { url?: unknown } | undefined)?.url;
        if (typeof url === 'string') return { image: short(url) };
        return { part: short(canonicalJson(part)) };
      })
    : textOf(r.content);
  const text = typeof content === 'string' ? (loose && r.role === 'assistant' ? content.trim() : content) : content;
  return canonicalJson({
    role: r.role,
    content: text === '' ? null : typeof text === 'string' ? short(text) : text,
    tool_calls: toolCallsOf(r),
    tool_call_id: r.tool_call_id,
    name: r.name,
    reasoning_content: r.reasoning_content ?? r.reasoning,
  });
}

/** The key of the assistant message that repeats an answer. */
export function answerKey(answer: LastTurn['answer'], loose = false): string {
  return messageKey(
    {
      role: 'assistant',
      content: answer.content,
      tool_calls: answer.toolCalls.map((c) => ({
        type: 'function',
        function: { name: c.name, arguments: c.arguments },
      })),
    },
    loose,
  );
}

/** Keys of a conversation's messages; `loose` trims assistant texts (for telling sessions apart only). */
export function conversationKeys(messages: readonly Message[], loose = false): string[] {
  return messages.map((m) => messageKey(m, loose));
}

/** Whether `messages` hold an assistant turn: a conversation already under way. */
export function hasHistory(messages: readonly Message[] | undefined): boolean {
  return !!messages?.some((m) => m.role === 'assistant');
}

// Prefix keys are chained digests: key(k) names the first k messages (or a text's first k characters).
function chain(prev: string, next: string): string {
  return createHash('sha1').update(prev).update('\u0000').update(next).digest('base64url');
}

function prefixKeys(keys: readonly string[]): string[] {
  const out: string[] = [];
  let k = '';
  for (const key of keys) out.push((k = chain(k, key)));
  return out;
}

/** The key the call that continues `last` will be found under: its messages and the answer, or its prompt text and the answer. */
function continuationKeyOf(last: LastTurn): string | undefined {
  if (last.messages) {
    const prefix = prefixKeys([...conversationKeys(last.messages, true), answerKey(last.answer, true)]);
    return `m:${prefix[prefix.length - 1]}`;
  }
  if (last.text !== undefined && last.answer.content !== null) return `t:${digest(last.text + last.answer.content)}`;
  return undefined;
}

export interface SessionStoreOptions {
  ttlMs: number;
  maxSessions: number;
  /** A new session's capture file. */
  fileFor(): CaptureFile;
  /** A forgotten session's file. */
  release(file: CaptureFile): void;
  /** Prefix of generated session ids (the replica), so replicas never hand out the same one. */
  idPrefix: string;
  /** The header that names a session (for the advice in `grouping_ambiguous`). */
  sessionHeader: string;
  now?: () => number;
  /**
   * The texts a re-rendered conversation may close an answer with (the model family's stop tokens,
   * `ModelFamily` grammar `stops`, as text): a completions prompt continues a session
   * where one of them follows the session's prompt and answer. Default: any special token written `<|…`.
   */
  turnEnds?: () => readonly string[];
}

export class SessionStore {
  /** In least-recently-used order (a touched session is moved to the end). */
  private readonly sessions = new Map<string, Session>();
  /** Continuation keys (message prefix or prompt text) to the sessions waiting on them. */
  private readonly waiting = new Map<string, Set<string>>();
  private evictedCount = 0;

  constructor(private readonly opts: SessionStoreOptions) {}

  get size(): number {
    return this.sessions.size;
  }

  get evicted(): number {
    return this.evictedCount;
  }

  get(id: string): Session | undefined {
    this.evictIdle();
    return this.sessions.get(id);
  }

  all(): Session[] {
    return [...this.sessions.values()];
  }

  /**
   * The session of a call. `explicit` is the id a header or body field gives; `messages` (chat) or
   * `promptText` (completions) are matched against waiting sessions when there is none.
   */
  identify(
    explicit: { id: string; from: SessionSource } | undefined,
    messages: readonly Message[] | undefined,
    promptText?: string,
  ): Identified {
    this.evictIdle();
    const now = this.now();
    if (explicit) {
      const known = this.sessions.get(explicit.id);
      if (known) return { session: this.touch(known, now), created: false, findings: [] };
      const findings: Finding[] = [];
      if (hasHistory(messages))
        findings.push({
          kind: 'session_lost',
          severity: 'warning',
          turn: 0,
          index: -1,
          message: `session ${explicit.id} arrives with ${messages!.filter((m) => m.role === 'assistant').length} earlier answer(s) this gateway does not hold (it restarted, or the session was forgotten after its TTL or past the session cap): it starts afresh here and its prefix is not checked against the earlier turns`,
        });
      return { session: this.create(explicit.id, explicit.from, now), created: true, findings };
    }
    const candidates = messages
      ? this.candidatesByMessages(messages)
      : promptText !== undefined
        ? this.candidatesByText(promptText)
        : [];
    if (candidates.length === 1) return { session: this.touch(candidates[0]!, now), created: false, findings: [] };
    const from: SessionSource = messages ? 'messages' : promptText !== undefined ? 'prompt' : 'new';
    const session = this.create(`${this.opts.idPrefix}-${randomUUID()}`, candidates.length > 1 ? 'new' : from, now);
    if (candidates.length <= 1) return { session, created: true, findings: [] };
    const others = candidates.map((c) => c.id);
    return {
      session,
      created: true,
      findings: [
        {
          kind: 'grouping_ambiguous',
          severity: 'error',
          turn: 0,
          index: -1,
          actual: { alsoContinues: others },
          message: `the ${messages ? 'messages' : 'prompt'} of this call extend${candidates.length > 1 ? '' : 's'} ${candidates.length} sessions equally (${others.join(', ')}: identical turns so far), so the gateway cannot tell which it continues and starts session ${session.id}; send an ${this.opts.sessionHeader} header (or session_id) with each call`,
        },
      ],
    };
  }

  /** Remember the session's last turn and index it for the call that continues it. */
  recordTurn(session: Session, last: LastTurn): void {
    if (session.continuationKey) this.unwait(session.continuationKey, session.id);
    session.last = last;
    session.turns++;
    session.continuationKey = undefined;
    // A session named by a header or body field is found by its name; only the others by their history.
    const named = session.from === 'header' || session.from === 'session_id' || session.from === 'user';
    const key = named ? undefined : continuationKeyOf(last);
    if (key) {
      session.continuationKey = key;
      let set = this.waiting.get(key);
      if (!set) this.waiting.set(key, (set = new Set()));
      set.add(session.id);
    }
  }

  addFindings(session: Session, call: string, turn: number, findings: readonly Finding[]): void {
    for (const finding of findings) session.findings.push({ turn, call, finding });
    if (session.findings.length > KEPT_FINDINGS) session.findings.splice(0, session.findings.length - KEPT_FINDINGS);
  }

  /** Forget every session (shutdown). */
  clear(): void {
    for (const s of [...this.sessions.values()]) this.forget(s);
  }

  /**
   * Sessions whose messages and answer the request's messages extend, the longest such history
   * only: a conversation that went further is more specific than one that stopped earlier.
   */
  private candidatesByMessages(messages: readonly Message[]): Session[] {
    const prefixes = prefixKeys(conversationKeys(messages, true));
    // A continuation repeats at least the previous request's messages and the answer, and adds one more.
    for (let k = prefixes.length - 1; k >= 1; k--) {
      const found = [...(this.waiting.get(`m:${prefixes[k - 1]}`) ?? [])]
        .map((id) => this.sessions.get(id))
        .filter((s): s is Session => s !== undefined);
      if (found.length > 0) return found;
    }
    return [];
  }

  private candidatesByText(text: string): Session[] {
    // A re-rendered conversation repeats the previous prompt and the answer, then closes the turn with a
    // special token: the candidates end where the text has `<|` or one of the family's stop tokens.
    const found = new Map<string, Session>();
    const cuts = new Set<number>();
    for (const end of new Set(['<|', ...(this.opts.turnEnds?.() ?? [])]))
      if (end !== '') for (let at = text.indexOf(end); at >= 0; at = text.indexOf(end, at + 1)) cuts.add(at);
    for (const at of cuts) {
      for (const id of this.waiting.get(`t:${digest(text.slice(0, at))}`) ?? []) {
        const s = this.sessions.get(id);
        if (s) found.set(id, s);
      }
    }
    return [...found.values()];
  }

  private create(id: string, from: SessionSource, now: number): Session {
    const session: Session = {
      id,
      from,
      file: this.opts.fileFor(),
      created: now,
      lastUsed: now,
      turns: 0,
      calls: 0,
      images: [],
      findings: [],
    };
    this.sessions.set(id, session);
    while (this.sessions.size > this.opts.maxSessions) {
      const oldest = this.sessions.values().next().value as Session;
      this.forget(oldest);
      this.evictedCount++;
    }
    return session;
  }

  private touch(s: Session, now: number): Session {
    s.lastUsed = now;
    this.sessions.delete(s.id);
    this.sessions.set(s.id, s);
    return s;
  }

  private evictIdle(): void {
    const limit = this.now() - this.opts.ttlMs;
    for (const s of this.sessions.values()) {
      if (s.lastUsed > limit) break;
      this.forget(s);
      this.evictedCount++;
    }
  }

  private forget(s: Session): void {
    this.sessions.delete(s.id);
    if (s.continuationKey) this.unwait(s.continuationKey, s.id);
    this.opts.release(s.file);
  }

  private unwait(key: string, id: string): void {
    const set = this.waiting.get(key);
    if (!set) return;
    set.delete(id);
    if (set.size === 0) this.waiting.delete(key);
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }
}
