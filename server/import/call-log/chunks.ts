// A streamed call's chunks folded into the response they add up to, per choice index: what a
// logged stream (`response` a list of chunks; Agent Lightning's legacy raw-chunk events,
// agentlightning/server/routes/events.py `_trim_model_request`) and the gateway's relayed streams
// hold (vLLM `ChatCompletionStreamResponse`, `CompletionStreamResponse`,
// vllm/entrypoints/openai/chat_completion/protocol.py and completion/protocol.py). One fold for
// both, chunk by chunk, so a stream is never held as a list: `prompt_token_ids` (the first chunk's,
// top level for chat, per choice for completions), `token_ids`, logprobs, text, reasoning and
// tool-call deltas (by their `index`) concatenated, the last `finish_reason` and `stop_reason`, the
// usage of the chunk that has it (a usage-only last chunk has no choices). Every choice is kept:
// a stream with `n > 1` interleaves its choices' chunks.
import { isObject } from '../importer.ts';

interface MergedCall {
  id?: string;
  type?: string;
  name: string;
  arguments: string;
}

interface Merged {
  index: number;
  chat: boolean;
  text: string[];
  reasoning?: string[];
  calls?: Map<number, MergedCall>;
  ids?: unknown[];
  prompt?: unknown;
  content?: unknown[];
  tokens?: unknown[];
  tokenLogprobs?: unknown[];
  topLogprobs?: unknown[];
  finish?: unknown;
  stop?: unknown;
}

/** Whether a logged response is the list of chunks a streamed call sent (`stream: true`). */
export function isChunkList(value: unknown): value is Record<string, unknown>[] {
  return Array.isArray(value) && value.length > 0 && value.every((c) => isObject(c) && Array.isArray(c.choices));
}

export class ChunkFold {
  private readonly byIndex = new Map<number, Merged>();
  private head: Record<string, unknown> = {};
  private prompt: unknown;
  private usage: unknown;
  private chunks = 0;

  /** Fold one chunk (a parsed `data:` event; `[DONE]` and errors are not chunks). */
  add(chunk: Record<string, unknown>): void {
    if (this.chunks++ === 0) {
      for (const k of ['id', 'model', 'created', 'object'] as const)
        if (chunk[k] !== undefined) this.head[k] = chunk[k];
    }
    if (this.prompt === undefined && Array.isArray(chunk.prompt_token_ids)) this.prompt = chunk.prompt_token_ids;
    if (isObject(chunk.usage)) this.usage = chunk.usage;
    if (!Array.isArray(chunk.choices)) return;
    chunk.choices.forEach((c: unknown, i: number) => {
      if (!isObject(c)) return;
      const index = typeof c.index === 'number' ? c.index : i;
      let m = this.byIndex.get(index);
      if (!m) this.byIndex.set(index, (m = { index, chat: false, text: [] }));
      if (isObject(c.delta)) {
        m.chat = true;
        const d = c.delta;
        if (typeof d.content === 'string') m.text.push(d.content);
        const reasoning = d.reasoning ?? d.reasoning_content;
        if (typeof reasoning === 'string') (m.reasoning ??= []).push(reasoning);
        if (Array.isArray(d.tool_calls)) for (const t of d.tool_calls) foldToolCall((m.calls ??= new Map()), t);
      } else if (typeof c.text === 'string') m.text.push(c.text);
      if (Array.isArray(c.token_ids)) (m.ids ??= []).push(...c.token_ids);
      if (m.prompt === undefined && Array.isArray(c.prompt_token_ids)) m.prompt = c.prompt_token_ids;
      const lp = c.logprobs;
      if (isObject(lp)) {
        if (Array.isArray(lp.content)) (m.content ??= []).push(...lp.content);
        if (Array.isArray(lp.tokens)) (m.tokens ??= []).push(...lp.tokens);
        if (Array.isArray(lp.token_logprobs)) (m.tokenLogprobs ??= []).push(...lp.token_logprobs);
        if (Array.isArray(lp.top_logprobs)) (m.topLogprobs ??= []).push(...lp.top_logprobs);
      }
      if (typeof c.finish_reason === 'string') m.finish = c.finish_reason;
      if (c.stop_reason !== undefined && c.stop_reason !== null) m.stop = c.stop_reason;
    });
  }

  /** Choice indices seen so far, in order. */
  get indices(): number[] {
    return [...this.byIndex.keys()].sort((a, b) => a - b);
  }

  /** The whole response the chunks so far add up to (chat or completions shape, per the chunks). */
  response(): Record<string, unknown> {
    const merged = [...this.byIndex.values()].sort((a, b) => a.index - b.index);
    const chat = merged.some((m) => m.chat) || this.head.object === 'chat.completion.chunk';
    const choices = merged.map((m) => {
      const calls = m.calls ? [...m.calls.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => c) : [];
      const text = m.text.join('');
      return {
        index: m.index,
        ...(m.chat
          ? {
              message: {
                role: 'assistant',
                content: text === '' && calls.length > 0 ? null : text,
                ...(m.reasoning ? { reasoning: m.reasoning.join('') } : {}),
                ...(calls.length > 0
                  ? {
                      tool_calls: calls.map((c) => ({
                        ...(c.id !== undefined ? { id: c.id } : {}),
                        type: c.type ?? 'function',
                        function: { name: c.name, arguments: c.arguments },
                      })),
                    }
                  : {}),
              },
            }
          : { text }),
        ...(m.ids ? { token_ids: m.ids } : {}),
        ...(m.prompt !== undefined ? { prompt_token_ids: m.prompt } : {}),
        ...(m.content || m.tokens || m.tokenLogprobs
          ? {
              logprobs: {
                ...(m.content ? { content: m.content } : {}),
                ...(m.tokens ? { tokens: m.tokens } : {}),
                ...(m.tokenLogprobs ? { token_logprobs: m.tokenLogprobs } : {}),
                ...(m.topLogprobs ? { top_logprobs: m.topLogprobs } : {}),
              },
            }
          : {}),
        ...(m.finish !== undefined ? { finish_reason: m.finish } : {}),
        ...(m.stop !== undefined ? { stop_reason: m.stop } : {}),
      };
    });
    const { object: _, ...head } = this.head;
    return {
      ...head,
      object: chat ? 'chat.completion' : 'text_completion',
      ...(this.prompt !== undefined ? { prompt_token_ids: this.prompt } : {}),
      choices,
      ...(this.usage !== undefined ? { usage: this.usage } : {}),
    };
  }
}

/** A tool-call delta: the first of an `index` carries its id, type and name, later ones arguments. */
function foldToolCall(calls: Map<number, MergedCall>, delta: unknown): void {
  if (!isObject(delta)) return;
  const at = typeof delta.index === 'number' ? delta.index : calls.size;
  const call = calls.get(at) ?? { name: '', arguments: '' };
  if (typeof delta.id === 'string') call.id = delta.id;
  if (typeof delta.type === 'string') call.type = delta.type;
  const fn = isObject(delta.function) ? delta.function : undefined;
  if (typeof fn?.name === 'string') call.name += fn.name;
  if (typeof fn?.arguments === 'string') call.arguments += fn.arguments;
  calls.set(at, call);
}

/** The response a logged stream's chunks add up to. */
export function responseOfChunks(chunks: readonly Record<string, unknown>[]): Record<string, unknown> {
  const fold = new ChunkFold();
  for (const c of chunks) fold.add(c);
  return fold.response();
}
