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
}

export interface ChainOptions {
  /**
   * Placeholder token ids whose run lengths may legitimately differ between calls (an image
   * processed with other settings): runs are collapsed before judging "same initial prompt".
   */
  padIds?: readonly number[];
}

/** `<|image_pad|>`, `<|video_pad|>`: the same ids in Qwen2-VL, Qwen2.5-VL and Qwen3-VL (formats.md §1.1). */
export const QWEN_VL_PAD_IDS: readonly number[] = [151655, 151656];

// Polynomial rolling hash mod a Mersenne prime; products stay below 2^53 so plain numbers suffice.
const MOD = 2147483647;
const BASE = 1000003;
const step = (h: number, x: number): number => (h * BASE + x + 1) % MOD;

function hashOf(ids: readonly number[]): number {
  let h = 0;
  for (const x of ids) h = step(h, x);
  return h;
}

function stringHash(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 131 + s.charCodeAt(i)) % MOD;
  return h;
}

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
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
  /** Calls `visit(length, chains)` for every indexed (length, hash) that is a prefix hash of `ids`. */
  scan(ids: readonly number[], visit: (length: number, chains: readonly number[]) => void): void {
    let h = 0;
    for (let len = 1; len <= ids.length; len++) {
      h = step(h, ids[len - 1]!);
      const byHash = this.byLength.get(len);
      if (!byHash) continue;
      const chains = byHash.get(h);
      if (chains) visit(len, chains);
    }
  }
}

interface ChainState {
  calls: number[];
  breaks: number[];
  /** Last prompt ⧺ last generated ids, and its hash (to recognise stale index entries). */
  context: readonly number[];
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
  const hashes = [0];
  for (const s of json) hashes.push((hashes[hashes.length - 1]! * BASE + stringHash(s) + 1) % MOD);
  return { hashes, json };
}

function assistantText(message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const m = message as { role?: unknown; content?: unknown };
  if (m.role !== 'assistant') return undefined;
  if (typeof m.content === 'string') return m.content;
  if (Array.isArray(m.content)) {
    return m.content.map((p: unknown) => (typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : '')).join('');
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

  const setEnd = (id: number, call: ChainCall, promptCollapsed: number[]) => {
    const c = chains[id]!;
    c.context = [...call.promptIds, ...call.generatedIds];
    c.contextHash = hashOf(c.context);
    c.lastPromptCollapsedLength = promptCollapsed.length;
    c.lastMessages = call.messages;
    c.lastAnswer = call.answerText;
    c.lastMessagesHash = undefined;
    if (c.context.length > 0) ends.add(c.context.length, c.contextHash, id);
  };

  calls.forEach((call, index) => {
    const prompt = call.promptIds;

    // 1. The strict rule: the longest chain context the prompt starts with (oldest chain on ties).
    let strict = -1;
    let strictLength = 0;
    if (prompt.length > 0) {
      ends.scan(prompt, (length, ids) => {
        for (const id of ids) {
          const c = chains[id]!;
          if (c.context.length !== length || (strict >= 0 && length === strictLength && id > strict)) continue;
          if (commonPrefix(prompt, c.context) !== length) continue;
          strict = id;
          strictLength = length;
        }
      });
    }
    const collapsed = collapseRuns(prompt, padIds);
    if (strict >= 0) {
      chains[strict]!.calls.push(index);
      setEnd(strict, call, collapsed);
      return;
    }

    // 2. A call that breaks the rule but clearly continues a chain.
    let best = -1;
    let bestScore: [number, number] = [-1, -1];
    if (collapsed.length > 0) {
      let own: { hashes: number[]; json: string[] } | undefined;
      firsts.scan(collapsed, (length, ids) => {
        for (const id of ids) {
          const c = chains[id]!;
          if (c.firstCollapsed.length !== length || collapsed.length <= c.lastPromptCollapsedLength) continue;
          if (commonPrefix(collapsed, c.firstCollapsed) !== length) continue;
          const contextCollapsed = collapseRuns(c.context, padIds);
          const shared = commonPrefix(collapsed, contextCollapsed);
          let answerRepeated = 0;
          if (call.messages && c.lastMessages) {
            const n = c.lastMessages.length;
            if (n >= call.messages.length) continue;
            own ??= messagePrefixHashes(call.messages);
            c.lastMessagesHash ??= messagePrefixHashes(c.lastMessages).hashes[n]!;
            if (own.hashes[n] !== c.lastMessagesHash) continue;
            if (c.lastMessages.some((m, i) => (JSON.stringify(m) ?? 'null') !== own!.json[i])) continue;
            const said = assistantText(call.messages[n]);
            // A re-rendering client may append the stop token or strip whitespace: compare trimmed heads.
            const answer = c.lastAnswer?.trim();
            if (said !== undefined && answer && said.trim().startsWith(answer)) answerRepeated = 1;
          } else if (shared < c.lastPromptCollapsedLength) continue;
          const score: [number, number] = [answerRepeated, shared];
          if (score[0] > bestScore[0] || (score[0] === bestScore[0] && score[1] > bestScore[1])) {
            best = id;
            bestScore = score;
          }
        }
      });
    }
    if (best >= 0) {
      const c = chains[best]!;
      c.breaks.push(c.calls.length);
      c.calls.push(index);
      setEnd(best, call, collapsed);
      return;
    }

    // 3. A new chain.
    const id = chains.length;
    chains.push({ calls: [index], breaks: [], context: [], contextHash: 0, firstCollapsed: collapsed, lastPromptCollapsedLength: 0 });
    if (collapsed.length > 0) firsts.add(collapsed.length, hashOf(collapsed), id);
    setEnd(id, call, collapsed);
  });

  return chains.map((c) => ({ calls: c.calls, breaks: c.breaks }));
}

/** Trajectory ids made unique within a file: a repeated id gets ` #2`, ` #3`, ... */
export function uniqueIds(): (base: string) => string {
  const seen = new Map<string, number>();
  return (base) => {
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return n === 1 ? base : `${base} #${n}`;
  };
}
