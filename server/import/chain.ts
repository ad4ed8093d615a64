// Grouping single LLM calls into trajectories when the data names no trajectory: prefix
// chaining as Agent Lightning's `trajectory-strict` aggregation does it. A call continues a
// chain when its prompt starts with the chain's last prompt ⧺ generated ids
// (microsoft/agent-lightning: agentlightning/verl/rollout_adapter.py, `ids_startswith(prompt_ids,
// current_context)` in `get_train_data_batch`; the v0.2 daemon's `strict_startswith_with_log`).
//
// Agent Lightning splits a chain where that rule fails and trains the pieces as separate
// samples. rollscope must show the break instead, so a call that clearly continues a chain
// (it carries the chain's initial prompt, and its conversation extends the chain's) is
// attached to it anyway; the core prefix check then reports the break as `prefix_break`.
//
// Cost: every call scans its prompt once against hash indexes of chain ends and of chains'
// first prompts (O(prompt length) map lookups), so grouping is linear in the tokens read.
// Candidate verification compares tokens only on a hash hit.
import type { FileContext } from './importer.ts';

export interface ChainCall {
  promptIds: readonly number[];
  generatedIds: readonly number[];
  /** The conversation the client sent: evidence that a call which breaks the rule still continues a chain. */
  messages?: readonly unknown[];
  /** The answer as text (the assistant message that a continuing conversation repeats). */
  answerText?: string;
}

export interface Chain {
  /** Indices into the calls, in call order. */
  calls: number[];
  /** Positions in `calls` (>= 1) of calls attached although their prompt does not extend the chain. */
  breaks: number[];
  /**
   * Calls that continued several chains equally well (identical contexts: two sessions with the
   * same temperature-0 turns): `call` went to the oldest candidate; every candidate lists it, with
   * the position its next turn had and the other candidates (indices into the returned chains).
   */
  ambiguous: { call: number; position: number; others: number[] }[];
}

export interface ChainOptions {
  /**
   * Placeholder token ids whose run lengths may legitimately differ between calls (an image
   * processed with other settings): runs are collapsed before judging "same initial prompt".
   */
  padIds?: readonly number[];
}

/** The image and video pad ids of the profiles the calls' models will be checked with. */
export function padIdsOf(ctx: FileContext, models: Iterable<string | undefined>): number[] {
  const ids = new Set<number>();
  for (const model of new Set(models)) {
    const v = ctx.visionIds(model);
    if (v) for (const pad of v.pads) ids.add(pad);
  }
  return [...ids];
}

// Rolling hash over token ids in 32-bit integer arithmetic (each step a bijection of the previous
// value, so prefixes that differ in their last token never collide); hits are verified on tokens.
const SEED = 0x811c9dc5 | 0;
const step = (h: number, x: number): number => Math.imul(h ^ (x + 0x9e3779b9), 0x85ebca6b) | 0;

function extendHash(h: number, ids: readonly number[]): number {
  for (let i = 0; i < ids.length; i++) h = step(h, ids[i]!);
  return h;
}

function stringHash(s: string): number {
  let h = SEED;
  for (let i = 0; i < s.length; i++) h = step(h, s.charCodeAt(i));
  return h;
}

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Length of `ids` with placeholder runs collapsed, without building it. */
function collapsedLength(ids: readonly number[], padIds: readonly number[]): number {
  if (padIds.length === 0) return ids.length;
  let n = 0;
  for (let i = 0; i < ids.length; i++) if (!(i > 0 && ids[i] === ids[i - 1] && padIds.includes(ids[i]!))) n++;
  return n;
}

/** Runs of a placeholder id collapsed to one token. */
export function collapseRuns(ids: readonly number[], padIds: readonly number[]): number[] {
  if (padIds.length === 0) return ids.slice();
  const out: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    const t = ids[i]!;
    if (i > 0 && t === ids[i - 1] && padIds.includes(t)) continue;
    out.push(t);
  }
  return out;
}

/** Token sequences indexed by (length, hash); entries may go stale and are re-verified on lookup. */
class PrefixIndex {
  private readonly byLength = new Map<number, Map<number, number[]>>();
  add(length: number, hash: number, chain: number): void {
    let byHash = this.byLength.get(length);
    if (!byHash) this.byLength.set(length, (byHash = new Map()));
    const list = byHash.get(hash);
    if (list) list.push(chain);
    else byHash.set(hash, [chain]);
  }
  /** Calls `visit(length, chains)` for every indexed (length, hash) that is a prefix hash of `ids`; returns the hash of all of `ids`. */
  scan(ids: readonly number[], visit: (length: number, chains: readonly number[]) => void): number {
    let h = SEED;
    for (let len = 1; len <= ids.length; len++) {
      h = step(h, ids[len - 1]!);
      const byHash = this.byLength.get(len);
      if (!byHash) continue;
      const chains = byHash.get(h);
      if (chains) visit(len, chains);
    }
    return h;
  }
}

interface ChainState {
  calls: number[];
  breaks: number[];
  ambiguous: { call: number; position: number; others: number[] }[];
  /** The context is the last prompt ⧺ last generated ids; its length and hash recognise stale index entries. */
  lastPrompt: readonly number[];
  lastGenerated: readonly number[];
  contextLength: number;
  contextHash: number;
  firstCollapsed: number[];
  lastPromptCollapsedLength: number;
  lastMessages?: readonly unknown[];
  lastAnswer?: string;
  /** Hash of the JSON of `lastMessages`, computed when first needed. */
  lastMessagesHash?: number;
}

/** Prefix hashes of a conversation, one per message count (JSON text of each message). */
function messagePrefixHashes(messages: readonly unknown[]): { hashes: number[]; json: string[] } {
  const json = messages.map((m) => JSON.stringify(m) ?? 'null');
  const hashes = [SEED];
  for (const s of json) hashes.push(step(hashes[hashes.length - 1]!, stringHash(s)));
  return { hashes, json };
}

function assistantText(message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const m = message as { role?: unknown; content?: unknown };
  if (m.role !== 'assistant') return undefined;
  if (typeof m.content === 'string') return m.content;
  if (Array.isArray(m.content)) {
    return m.content
      .map((p: unknown) =>
        typeof p === 'string'
          ? p
          : typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string'
            ? (p as { text: string }).text
            : '',
      )
      .join('');
  }
  return undefined;
}

/**
 * Group calls (in the order they were made) into chains. A call extends the chain whose last
 * context (prompt ⧺ generated ids) its prompt starts with, the longest such context winning;
 * otherwise it is attached to a chain it clearly continues; otherwise it starts a new chain.
 *
 * "Clearly continues" means all of: its prompt, placeholder runs collapsed, starts with the
 * chain's first prompt and is longer than the chain's last prompt; and either its messages
 * strictly extend the chain's last messages, or (no messages on either side) it shares the
 * chain's whole last prompt (the break lies in the generated ids or after them). Among several
 * candidates (GRPO siblings share the initial prompt) the one whose answer the conversation
 * repeats wins, then the longest common prefix with the chain's context.
 */
export function chainCalls(calls: readonly ChainCall[], opts: ChainOptions = {}): Chain[] {
  const padIds = opts.padIds ?? [];
  const chains: ChainState[] = [];
  const ends = new PrefixIndex();
  const firsts = new PrefixIndex();

  /** The chain's context (last prompt ⧺ last generated ids) is a prefix of `ids`. */
  const contextIsPrefix = (c: ChainState, ids: readonly number[]): boolean => {
    const p = c.lastPrompt;
    const g = c.lastGenerated;
    if (ids.length < p.length + g.length || commonPrefix(ids, p) !== p.length) return false;
    for (let j = 0; j < g.length; j++) if (ids[p.length + j] !== g[j]) return false;
    return true;
  };

  const setEnd = (id: number, call: ChainCall, promptHash: number) => {
    const c = chains[id]!;
    c.lastPrompt = call.promptIds;
    c.lastGenerated = call.generatedIds;
    c.contextLength = call.promptIds.length + call.generatedIds.length;
    c.contextHash = extendHash(promptHash, call.generatedIds);
    c.lastPromptCollapsedLength = collapsedLength(call.promptIds, padIds);
    c.lastMessages = call.messages;
    c.lastAnswer = call.answerText;
    c.lastMessagesHash = undefined;
    if (c.contextLength > 0) ends.add(c.contextLength, c.contextHash, id);
  };

  const markAmbiguous = (candidates: readonly number[], index: number) => {
    for (const id of candidates) {
      const c = chains[id]!;
      c.ambiguous.push({ call: index, position: c.calls.length, others: candidates.filter((o) => o !== id) });
    }
  };

  calls.forEach((call, index) => {
    const prompt = call.promptIds;

    // 1. The strict rule: the longest chain context the prompt starts with (oldest chain on ties).
    let strict = -1;
    let strictLength = 0;
    let tied: number[] = [];
    const promptHash = ends.scan(prompt, (length, ids) => {
      for (const id of ids) {
        const c = chains[id]!;
        if (c.contextLength !== length || !contextIsPrefix(c, prompt)) continue;
        if (strict >= 0 && length === strictLength) {
          if (!tied.includes(id)) tied.push(id);
          if (id > strict) continue;
        } else tied = [id];
        strict = id;
        strictLength = length;
      }
    });
    if (strict >= 0) {
      if (tied.length > 1) markAmbiguous(tied, index);
      chains[strict]!.calls.push(index);
      setEnd(strict, call, promptHash);
      return;
    }

    // 2. A call that breaks the rule but clearly continues a chain.
    const collapsed = collapseRuns(prompt, padIds);
    let best = -1;
    let bestScore: [number, number] = [-1, -1];
    let bestTied: number[] = [];
    if (collapsed.length > 0) {
      let own: { hashes: number[]; json: string[] } | undefined;
      firsts.scan(collapsed, (length, ids) => {
        for (const id of ids) {
          const c = chains[id]!;
          if (c.firstCollapsed.length !== length || collapsed.length <= c.lastPromptCollapsedLength) continue;
          if (commonPrefix(collapsed, c.firstCollapsed) !== length) continue;
          const shared = commonPrefix(collapsed, collapseRuns([...c.lastPrompt, ...c.lastGenerated], padIds));
          let answerRepeated = 0;
          if (call.messages && c.lastMessages) {
            const n = c.lastMessages.length;
            if (n >= call.messages.length) continue;
            own ??= messagePrefixHashes(call.messages);
            c.lastMessagesHash ??= messagePrefixHashes(c.lastMessages).hashes[n]!;
            if (own.hashes[n] !== c.lastMessagesHash) continue;
            if (c.lastMessages.some((m, i) => (JSON.stringify(m) ?? 'null') !== own!.json[i])) continue;
            // A re-rendering client may append the stop token or strip whitespace: compare trimmed heads.
            const said = assistantText(call.messages[n]);
            const answer = c.lastAnswer?.trim();
            if (said !== undefined && answer && said.trim().startsWith(answer)) answerRepeated = 1;
          } else if (shared < c.lastPromptCollapsedLength) continue;
          const score: [number, number] = [answerRepeated, shared];
          if (score[0] > bestScore[0] || (score[0] === bestScore[0] && score[1] > bestScore[1])) {
            best = id;
            bestScore = score;
            bestTied = [id];
          } else if (score[0] === bestScore[0] && score[1] === bestScore[1]) {
            bestTied.push(id);
            if (id < best) best = id;
          }
        }
      });
    }
    if (best >= 0) {
      if (bestTied.length > 1) markAmbiguous(bestTied, index);
      const c = chains[best]!;
      c.breaks.push(c.calls.length);
      c.calls.push(index);
      setEnd(best, call, promptHash);
      return;
    }

    // 3. A new chain.
    const id = chains.length;
    chains.push({
      calls: [index],
      breaks: [],
      ambiguous: [],
      lastPrompt: [],
      lastGenerated: [],
      contextLength: 0,
      contextHash: SEED,
      firstCollapsed: collapsed,
      lastPromptCollapsedLength: 0,
    });
    if (collapsed.length > 0) firsts.add(collapsed.length, extendHash(SEED, collapsed), id);
    setEnd(id, call, promptHash);
  });

  return chains.map((c) => ({ calls: c.calls, breaks: c.breaks, ambiguous: c.ambiguous }));
}

/** Trajectory ids made unique within a file, as everywhere: a repeated id gets `#2`, `#3`, ... */
export { uniqueIds } from '../model/trajectory-key.ts';
