// The conversation of a trajectory as the engine saw it (`GET /api/trajectories/ID/messages`):
// each model call's new prompt tokens (what its prompt adds to the last call's prompt ⧺
// generation) and its generation, cut into chat messages where the model family's turns open,
// decoded, with images as their pad runs, the family's reasoning tags folded as reasoning, its
// tool-call tags as a tool call and its tool-response wrapper as the tool's message
// (docs/reference/chat-templates.md, server/families/family.ts). A prompt that stops
// extending the last one shows from where it stops: what the re-rendered history put there, a
// fragment. Formats without per-call prompt ids show the re-aligned stream; records without ids
// show their messages. Findings are pinned to the message holding their token.
import type { ModelFamily, TurnGrammar } from '../families/family.ts';
import type { Finding, StreamName } from '../model/finding.ts';
import type { Message } from '../model/trajectory.ts';
import type { CheckedTrajectory, RunOptions } from '../pipeline.ts';
import type { Conversation, ConversationMessage, MessagePart, VisionSpanInfo } from './api.ts';
import { contextOf, visionSpans } from './views.ts';

type Region = [number, number];

interface Segmenting {
  c: CheckedTrajectory;
  ids: readonly number[];
  /** Generated ranges of `ids` (their vision tokens are the model's text, not images). */
  generated: readonly Region[];
  vision: readonly VisionSpanInfo[];
  stream: StreamName;
  streamTurn: number;
}

interface Tag {
  open: string;
  close: string;
  part: 'reasoning' | 'tool_call';
}

/** The blocks a family's model writes inside its text: its reasoning and its tool calls. */
function tagsOf(family: ModelFamily): Tag[] {
  const tags: Tag[] = [];
  if (family.reasoningTags) tags.push({ ...family.reasoningTags, part: 'reasoning' });
  const { open, close } = family.toolCalls;
  if (open !== '') tags.push({ open, close, part: 'tool_call' });
  return tags;
}

/** Text with the family's reasoning and tool-call blocks made parts (an unclosed block runs to the end). */
function textParts(text: string, family: ModelFamily): MessagePart[] {
  const tags = tagsOf(family);
  const out: MessagePart[] = [];
  let rest = text;
  while (rest.length > 0) {
    let first: { at: number; tag: Tag } | undefined;
    for (const tag of tags) {
      const at = rest.indexOf(tag.open);
      if (at >= 0 && (!first || at < first.at)) first = { at, tag };
    }
    if (!first) {
      out.push({ type: 'text', text: rest });
      break;
    }
    if (first.at > 0) out.push({ type: 'text', text: rest.slice(0, first.at) });
    const inner = rest.slice(first.at + first.tag.open.length);
    const end = inner.indexOf(first.tag.close);
    const body = end < 0 ? inner : inner.slice(0, end);
    rest = end < 0 ? '' : inner.slice(end + first.tag.close.length);
    if (first.tag.part === 'reasoning') out.push({ type: 'reasoning', text: body.trim() });
    else out.push(toolCall(body.trim(), family));
  }
  return out.filter((p) => p.type !== 'text' || p.text.trim() !== '');
}

function toolCall(body: string, family: ModelFamily): MessagePart {
  try {
    const call = JSON.parse(body) as { name?: unknown; arguments?: unknown };
    if (call && typeof call === 'object' && typeof call.name === 'string')
      return {
        type: 'tool_call',
        name: call.name,
        arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
      };
  } catch {
    // not JSON (Kimi's and GLM's calls are not): read by the family's tool-call parser
  }
  const { open, close } = family.toolCalls;
  const calls = family.toolCalls.parse(`${open}${body}${close}`).calls;
  if (calls.length === 1) return { type: 'tool_call', name: calls[0]!.name, arguments: calls[0]!.arguments };
  return { type: 'tool_call', name: null, arguments: body };
}

/**
 * Where the text of a message in `ids[at, end)` stops: before its end of turn and the ids the
 * template writes after it, when the message ends with them; else `end`.
 */
function endOfTurnAt(ids: readonly number[], at: number, end: number, grammar: TurnGrammar): number {
  if (grammar.endOfTurn === undefined) return end;
  const after = grammar.afterEnd;
  const tail = after.length > 0 && after.every((id, k) => ids[end - after.length + k] === id) ? after.length : 0;
  const eot = end - tail - 1;
  if (eot >= at && ids[eot] === grammar.endOfTurn) return eot;
  return ids[end - 1] === grammar.endOfTurn && end - 1 >= at ? end - 1 : end;
}

/** The text inside a tool-response wrapper that is all of `text` (blank around it), else undefined. */
function toolResponseOf(text: string, tags: { open: string; close: string }): string | undefined {
  const t = text.trim();
  if (!t.startsWith(tags.open) || !t.endsWith(tags.close)) return undefined;
  return t
    .slice(tags.open.length, t.length - tags.close.length)
    .replace(/^\n/, '')
    .replace(/\n$/, '');
}

/**
 * Messages of `ids[from, to)`: cut where a turn opens and at the generated ranges' edges. `breakAt`:
 * where a call's new tokens start; what starts there mid-message (no turn opener: a re-rendered
 * history's remainder, a second end of turn) is a fragment, shown with its markup.
 */
function segment(
  s: Segmenting,
  from: number,
  to: number,
  turnOf: (start: number) => number,
  breakAt = -1,
): ConversationMessage[] {
  const { c, ids } = s;
  const family = c.profile.modelFamily;
  const { grammar } = c.profile.ids;
  const opens = new Set(grammar.openers);
  const cuts = new Set<number>([from, to]);
  for (let i = from; i < to; i++) if (opens.has(ids[i]!)) cuts.add(i);
  for (const [a, b] of s.generated) {
    if (a > from && a < to) cuts.add(a);
    if (b > from && b < to) cuts.add(b);
  }
  const points = [...cuts].sort((a, b) => a - b);
  const out: ConversationMessage[] = [];
  let role = 'assistant';
  // Whether the message is on the model's side of the chat (its turns' text holds reasoning and calls).
  let modelTurn = true;
  for (let k = 0; k + 1 < points.length; k++) {
    const start = points[k]!;
    const end = points[k + 1]!;
    const gen = s.generated.find(([a, b]) => start >= a && start < b);
    // What a template writes before the first turn (Gemma's BOS) frames the conversation: no message.
    if (
      !gen &&
      !opens.has(ids[start]!) &&
      start === 0 &&
      ids.slice(start, end).every((id) => c.profile.tokenizer.isSpecial(id))
    )
      continue;
    const parts: MessagePart[] = [];
    const fragment = !gen && start === breakAt && !opens.has(ids[start]!);
    // The chat markup (the turn's header, its end of turn and what follows it) frames the message: not its text.
    const header = gen || fragment ? undefined : grammar.header(ids, start);
    if (header) {
      modelTurn = header.role === 'assistant';
      const [a, b] = header.roleSpan;
      role = c.profile.tokenizer.decodeSync(ids, a, b).trim() || role;
    }
    let at = header ? Math.min(header.end, end) : start;
    const stop = fragment ? end : endOfTurnAt(ids, at, end, grammar);
    const flushText = (until: number) => {
      if (until > at) parts.push({ type: 'text', text: c.profile.tokenizer.decodeSync(ids, at, until) });
    };
    if (!gen)
      for (const v of s.vision) {
        if (v.padStart < start || v.padStart >= end) continue;
        const open = v.start >= 0 ? v.start : v.padStart;
        flushText(open);
        parts.push({
          type: 'image',
          image: v.image,
          padStart: v.padStart,
          padLength: v.padLength,
          expectedPads: v.expectedPads,
        });
        at = v.end >= 0 ? v.end + 1 : v.padStart + v.padLength;
      }
    flushText(stop);
    if (gen) role = 'assistant';
    let messageRole = role;
    // The model's blocks (reasoning, tool calls) are read in what it wrote and in its history; a
    // system prompt that describes the tool-call syntax is text.
    const modelSide = gen || modelTurn;
    let content = parts.flatMap((p) => (p.type === 'text' && modelSide ? textParts(p.text, family) : [p]));
    // A template that wraps a tool's answer in a user turn (Qwen's tool-response tags): it is the tool's.
    const wrapper = family.toolResponseTags;
    if (!gen && wrapper && content.length === 1 && content[0]!.type === 'text') {
      const tool = toolResponseOf(content[0]!.text, wrapper);
      if (tool !== undefined) {
        messageRole = 'tool';
        content = [{ type: 'text', text: tool }];
      }
    }
    content = content.filter((p) => p.type !== 'text' || p.text !== '');
    // Blank text (what the template writes after an end of turn) frames messages.
    if (content.every((p) => p.type === 'text' && p.text.trim() === '')) content = [];
    // The assistant header the prompt ends with holds nothing: its generation follows; nor does what
    // follows an end of turn where the next call's tokens start.
    if (content.length === 0 && !gen) continue;
    const turn = gen
      ? (c.alignment.turns.find((t) => t.generated[0] === gen[0])?.turn ?? turnOf(start))
      : turnOf(start);
    out.push({
      role: messageRole,
      turn,
      generated: gen !== undefined,
      fragment,
      tokens: { stream: s.stream, turn: s.streamTurn, start, end },
      parts: content,
      finishReason: gen ? (c.trajectory.turns[turn]?.finishReason ?? null) : null,
      findings: [],
    });
  }
  return out;
}

const commonPrefix = (a: readonly number[], b: readonly number[]) => {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
};

/** Each call's new prompt tokens and its generation, from the turns' own prompt ids. */
function fromPrompts(c: CheckedTrajectory, opts: RunOptions): ConversationMessage[] {
  const ctx = contextOf(c, opts);
  const turns = c.trajectory.turns;
  const out: ConversationMessage[] = [];
  let imageBase = 0;
  turns.forEach((t, k) => {
    const prompt = t.promptIds!;
    const ids = [...prompt, ...(t.generatedIds ?? [])];
    const prev = k > 0 ? [...turns[k - 1]!.promptIds!, ...(turns[k - 1]!.generatedIds ?? [])] : [];
    const from = k === 0 ? 0 : commonPrefix(prev, ids);
    const vision = visionSpans(ids, c, ctx);
    // Images keep the trajectory's numbering: the ones in the history are the last calls'.
    const before = vision.filter((v) => v.padStart < from).length;
    const shifted = vision.map((v) => ({ ...v, image: v.image < 0 ? v.image : v.image - before + imageBase }));
    imageBase += vision.length - before;
    const messages = segment(
      {
        c,
        ids,
        generated: t.generatedIds ? [[prompt.length, ids.length]] : [],
        vision: shifted,
        stream: 'prompt',
        streamTurn: k,
      },
      from,
      ids.length,
      () => k,
      k > 0 ? from : -1,
    );
    for (const m of messages) if (m.generated) m.turn = k;
    out.push(...messages);
  });
  return out;
}

/** The re-aligned stream cut into messages (formats that state no prompt ids per call). */
function fromCanonical(c: CheckedTrajectory, opts: RunOptions): ConversationMessage[] {
  const ids = c.alignment.tokens;
  const generated = c.alignment.turns.map((t) => t.generated);
  const turnOf = (start: number) => c.alignment.turns.filter((t) => t.generated[1] <= start).length;
  return segment(
    { c, ids, generated, vision: visionSpans(ids, c, contextOf(c, opts)), stream: 'canonical', streamTurn: -1 },
    0,
    ids.length,
    turnOf,
  );
}

/** A record's message as parts: its text, its images (numbered in order), its tool calls. */
function recordParts(m: Message, nextImage: () => number, family: ModelFamily): MessagePart[] {
  const out: MessagePart[] = [];
  const content = m.content;
  if (typeof content === 'string') out.push(...textParts(content, family));
  else if (Array.isArray(content))
    for (const p of content) {
      if (typeof p === 'string') out.push({ type: 'text', text: p });
      else if (p.type === 'text' && typeof p.text === 'string') out.push(...textParts(p.text, family));
      else if (p.type === 'image' || p.type === 'image_url' || 'image' in p || 'image_url' in p)
        out.push({ type: 'image', image: nextImage(), padStart: null, padLength: null, expectedPads: null });
    }
  for (const call of m.tool_calls ?? []) {
    const fn = (call as { function?: { name?: unknown; arguments?: unknown } }).function;
    out.push({
      type: 'tool_call',
      name: typeof fn?.name === 'string' ? fn.name : null,
      arguments: typeof fn?.arguments === 'string' ? fn.arguments : JSON.stringify(fn?.arguments ?? {}),
    });
  }
  return out;
}

/** The record's own messages (no ids to cut): the last call's conversation and each generated text. */
function fromMessages(c: CheckedTrajectory): ConversationMessage[] {
  const turns = c.trajectory.turns;
  let image = 0;
  const nextImage = () => image++;
  const out: ConversationMessage[] = [];
  turns.forEach((t, k) => {
    const prev = k > 0 ? (turns[k - 1]!.messages?.length ?? 0) + 1 : 0;
    for (const m of (t.messages ?? []).slice(prev))
      out.push({
        role: m.role,
        turn: k,
        generated: false,
        fragment: false,
        tokens: null,
        parts: recordParts(m, nextImage, c.profile.modelFamily),
        finishReason: null,
        findings: [],
      });
    if (t.generatedText !== undefined)
      out.push({
        role: 'assistant',
        turn: k,
        generated: true,
        fragment: false,
        tokens: null,
        parts: textParts(t.generatedText, c.profile.modelFamily),
        finishReason: t.finishReason ?? null,
        findings: [],
      });
  });
  return out;
}

/**
 * The message a finding is about: the one holding its token in its stream (a canonical index is
 * matched through the canonical spans of each turn), else its turn's generation, else none.
 */
function pin(f: Finding, messages: readonly ConversationMessage[], c: CheckedTrajectory): number {
  const holds = (m: ConversationMessage, stream: string, turn: number, i: number) =>
    m.tokens !== null &&
    m.tokens.stream === stream &&
    m.tokens.turn === turn &&
    i >= m.tokens.start &&
    i < m.tokens.end;
  if (f.index >= 0 && f.stream) {
    const turn = f.stream === 'prompt' ? f.turn : -1;
    const direct = messages.findIndex((m) => holds(m, f.stream!, turn, f.index));
    if (direct >= 0) return direct;
    if (f.stream === 'canonical') {
      // A canonical index in turn k's generation or in the observation after it.
      for (const span of c.alignment.turns) {
        const [g0, g1] = span.generated;
        const [o0, o1] = span.observation;
        const t = c.trajectory.turns[span.turn];
        const genStart = t?.promptIds?.length;
        if (f.index >= g0 && f.index < g1 && genStart !== undefined) {
          const at = messages.findIndex((m) => holds(m, 'prompt', span.turn, genStart + f.index - g0));
          if (at >= 0) return at;
        }
        const next = c.trajectory.turns[span.turn + 1];
        if (f.index >= o0 && f.index < o1 && genStart !== undefined && next?.promptIds) {
          const offset = genStart + (g1 - g0) + f.index - o0;
          const at = messages.findIndex((m) => holds(m, 'prompt', span.turn + 1, offset));
          if (at >= 0) return at;
        }
      }
    }
  }
  if (f.turn >= 0) {
    const gen = messages.findIndex((m) => m.generated && m.turn === f.turn);
    if (gen >= 0) return gen;
  }
  return -1;
}

export function conversation(c: CheckedTrajectory, opts: RunOptions): Conversation {
  const turns = c.trajectory.turns;
  const chat = c.profile.uncoveredModel === undefined;
  let source: Conversation['source'];
  let note: string | null = null;
  let messages: ConversationMessage[];
  if (chat && turns.length > 0 && turns.every((t) => t.promptIds !== undefined)) {
    source = 'prompts';
    messages = fromPrompts(c, opts);
  } else if (chat && c.alignment.tokens.length > 0) {
    source = 'canonical';
    note = 'the record states no prompt ids per model call: the conversation is the re-aligned stream';
    messages = fromCanonical(c, opts);
  } else {
    source = 'messages';
    note = chat
      ? 'the record holds no token ids: the conversation is its messages as written'
      : 'no profile covers this model: the conversation is the record’s messages as written, not tokens';
    messages = fromMessages(c);
  }
  c.findings.forEach((f, i) => {
    const at = pin(f, messages, c);
    if (at >= 0) messages[at]!.findings.push(i);
  });
  return { source, note, messages };
}
