// What the client gets: the answer it would have had from the engine directly. The ids and
// logprobs the gateway asked for on its own behalf are taken out again (set to null, as vLLM
// writes them when not asked) unless the client asked for them too; a token-in answer is given
// the chat shape the client asked for, every choice, tool calls read as the engine's chat endpoint
// reads them (the model family's parser; tool-calls.ts), logprobs in the chat shape with the client's top_logprobs. Streams
// are relayed chunk by chunk, folded into the whole answer the capture records by the one
// streamed-chunk fold (server/import/call-log/chunks.ts).
import { randomUUID } from 'node:crypto';
import { ChunkFold } from '../import/call-log/chunks.ts';
import { isObject } from '../import/importer.ts';
import { type ChoiceAnswer, type EngineAnswer, legacyTop, type ToolMode } from './engines.ts';
import { namedToolCall, parseRequiredToolCalls, type ParsedToolCalls, ToolCallHold, toolCallId } from './tool-calls.ts';
import type { ToolCallParser } from '../families/family.ts';

export interface ClientAsked {
  ids: boolean;
  logprobs: boolean;
  usageInStream: boolean;
  /** `return_tokens_as_token_ids`: logprob tokens written `token_id:N`. */
  tokenIds: boolean;
  /** Chat `top_logprobs` (0 when not asked). */
  topLogprobs: number;
}

export function clientAsked(req: {
  return_token_ids?: boolean | null;
  logprobs?: unknown;
  top_logprobs?: unknown;
  return_tokens_as_token_ids?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
}): ClientAsked {
  return {
    ids: req.return_token_ids === true,
    logprobs: req.logprobs === true || (typeof req.logprobs === 'number' && req.logprobs >= 0),
    usageInStream: req.stream_options?.include_usage === true,
    tokenIds: req.return_tokens_as_token_ids === true,
    topLogprobs: typeof req.top_logprobs === 'number' ? req.top_logprobs : 0,
  };
}

const ID_FIELDS = ['prompt_token_ids', 'token_ids'] as const;
/** SGLang's extras the gateway asks for. */
const SGLANG_FIELDS = ['meta_info'] as const;

/** Take `field` out the way the engine leaves out what nobody asked for. */
function unset(o: Record<string, unknown>, field: string, unasked: 'null' | 'omit'): void {
  if (!(field in o)) return;
  if (unasked === 'null') o[field] = null;
  else delete o[field];
}

/** The engine's JSON answer (or one streamed chunk of it) with what the gateway added for itself taken out. */
export function stripAnswer(
  raw: Record<string, unknown>,
  asked: ClientAsked,
  unasked: 'null' | 'omit' = 'null',
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...raw };
  if (!asked.ids) for (const f of ID_FIELDS) unset(out, f, unasked);
  if (Array.isArray(raw.choices))
    out.choices = raw.choices.map((c: Record<string, unknown>) => {
      const choice = { ...c };
      if (!asked.ids) for (const f of ID_FIELDS) unset(choice, f, unasked);
      for (const f of SGLANG_FIELDS) unset(choice, f, 'omit');
      if (!asked.logprobs && 'logprobs' in choice) choice.logprobs = null;
      return choice;
    });
  return out;
}

export interface ChatOutcome {
  index: number;
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  finishReason: string;
}

/**
 * Whose reading of a free ("auto") tool call: the model family's parser (`ModelFamily.toolCalls`) as
 * the engine runs it: vLLM's parser, or SGLang's detector for the family where it differs.
 */
export interface ToolReader {
  parser: ToolCallParser;
  engine: 'vllm' | 'sglang';
}

/** How the engine's chat endpoint reads a generated text for the request's tool choice. */
export function readTools(text: string, tools: ToolMode, reader: ToolReader): ParsedToolCalls & { found: boolean } {
  switch (tools.mode) {
    case 'none':
      return { content: text, calls: [], found: false };
    case 'required':
      return { ...parseRequiredToolCalls(text), found: true };
    case 'named':
      return { ...namedToolCall(tools.name, text), found: true };
    case 'auto':
      if (reader.engine === 'sglang' && reader.parser.sglang) return reader.parser.sglang(text, tools.names);
      {
        const parsed = reader.parser.parse(text);
        return { ...parsed, found: parsed.calls.length > 0 };
      }
  }
}

/** The assistant message of a token-in choice, as the engine's chat endpoint would have answered it. */
export function tokenInOutcome(
  choice: ChoiceAnswer,
  tools: ToolMode,
  reader: ToolReader,
  parallelToolCalls: boolean,
): ChatOutcome {
  const parsed = readTools(choice.text ?? '', tools, reader);
  // parallel_tool_calls: false keeps the first call (vLLM `maybe_filter_parallel_tool_calls`).
  const calls = parallelToolCalls ? parsed.calls : parsed.calls.slice(0, 1);
  const finish = choice.finishReason ?? 'stop';
  // "tool_calls" for auto and required calls that stopped, "stop" for a named one (serving.py).
  const toolFinish = tools.mode === 'auto' ? parsed.found && calls.length > 0 : tools.mode === 'required';
  return {
    index: choice.index,
    content: parsed.content,
    toolCalls: calls.map((c) => ({ id: toolCallId(), ...c })),
    finishReason: toolFinish && finish === 'stop' ? 'tool_calls' : finish,
  };
}

/** One logprob token as the chat endpoint writes it: `token_id:N` when asked, else the token's text. */
function tokenText(token: string | null | undefined, asked: ClientAsked, decode: (id: number) => string): string {
  const t = token ?? '';
  const m = /^token_id:(\d+)$/.exec(t);
  if (!m || asked.tokenIds) return t;
  return decode(Number(m[1]));
}

function chatLogprobEntry(token: string, logprob: number | null | undefined) {
  return { token, logprob: Math.max(logprob ?? -9999, -9999), bytes: [...Buffer.from(token, 'utf8')] };
}

/** Chat logprobs of positions `from..to` of a choice (the top candidates the first `top_logprobs` the engine wrote). */
export function chatLogprobs(
  choice: Pick<ChoiceAnswer, 'logprobs' | 'tokens' | 'top' | 'generatedIds'>,
  asked: ClientAsked,
  decode: (id: number) => string,
  from = 0,
  to = choice.logprobs?.length ?? 0,
): { content: unknown[] } {
  const content: unknown[] = [];
  for (let i = from; i < to; i++) {
    const raw = choice.tokens?.[i] ?? (choice.generatedIds ? `token_id:${choice.generatedIds[i]}` : '');
    const token = tokenText(raw, asked, decode);
    const top = (choice.top?.[i] ?? [])
      .slice(0, Math.max(0, asked.topLogprobs))
      .map((c) => chatLogprobEntry(tokenText(c.token, asked, decode), c.logprob));
    content.push({ ...chatLogprobEntry(token, choice.logprobs?.[i]), top_logprobs: top });
  }
  return { content };
}

function usageOf(answer: EngineAnswer): Record<string, number> {
  const prompt = answer.promptTokens ?? answer.promptIds?.length ?? 0;
  const completion = answer.completionTokens ?? answer.choices.reduce((s, c) => s + (c.generatedIds?.length ?? 0), 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function messageOf(o: ChatOutcome): Record<string, unknown> {
  return {
    role: 'assistant',
    content: o.content,
    tool_calls: o.toolCalls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    })),
  };
}

const chatId = () => `chatcmpl-${randomUUID().replace(/-/g, '')}`;

/** A chat completion built from a token-in answer: every choice. */
export function chatFromTokenIn(
  answer: EngineAnswer,
  outcomes: readonly ChatOutcome[],
  asked: ClientAsked,
  model: string,
  decode: (id: number) => string,
): Record<string, unknown> {
  return {
    id: chatId(),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: answer.choices.map((choice, i) => {
      const o = outcomes[i]!;
      return {
        index: choice.index,
        message: messageOf(o),
        logprobs: asked.logprobs ? chatLogprobs(choice, asked, decode) : null,
        finish_reason: o.finishReason,
        stop_reason: choice.stopReason ?? null,
        token_ids: asked.ids ? (choice.generatedIds ?? null) : null,
      };
    }),
    usage: usageOf(answer),
    prompt_token_ids: asked.ids ? (answer.promptIds ?? null) : null,
  };
}

/** A whole chat answer as the stream of chunks an engine would have sent (one content delta per choice). */
export function chatChunks(answer: Record<string, unknown>, asked: ClientAsked): string[] {
  const choices = (answer.choices as Record<string, unknown>[] | undefined) ?? [];
  const head = { id: answer.id, object: 'chat.completion.chunk', created: answer.created, model: answer.model };
  const events: string[] = [];
  for (const [i, c] of choices.entries()) {
    const message = (c.message ?? {}) as Record<string, unknown>;
    events.push(
      JSON.stringify({
        ...head,
        choices: [
          { index: c.index ?? i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
        ],
        ...(i === 0 && asked.ids ? { prompt_token_ids: answer.prompt_token_ids ?? null } : {}),
      }),
    );
    const calls = (message.tool_calls as Record<string, unknown>[] | undefined) ?? [];
    const delta: Record<string, unknown> = {};
    if (typeof message.content === 'string' && message.content !== '') delta.content = message.content;
    if (calls.length > 0) delta.tool_calls = calls.map((call, index) => ({ index, ...call }));
    events.push(
      JSON.stringify({
        ...head,
        choices: [
          {
            index: c.index ?? i,
            delta,
            logprobs: c.logprobs ?? null,
            finish_reason: c.finish_reason ?? 'stop',
            ...(asked.ids ? { token_ids: c.token_ids ?? null } : {}),
          },
        ],
      }),
    );
  }
  if (asked.usageInStream) events.push(JSON.stringify({ ...head, choices: [], usage: answer.usage ?? null }));
  events.push('[DONE]');
  return events;
}

/** A completions answer as a stream (one text delta per choice). */
export function completionChunks(answer: Record<string, unknown>, asked: ClientAsked): string[] {
  const choices = (answer.choices as Record<string, unknown>[] | undefined) ?? [];
  const head = { id: answer.id, object: 'text_completion', created: answer.created, model: answer.model };
  const events = choices.map((c, i) =>
    JSON.stringify({
      ...head,
      choices: [
        {
          index: c.index ?? i,
          text: c.text ?? '',
          logprobs: c.logprobs ?? null,
          finish_reason: c.finish_reason ?? 'stop',
          ...(asked.ids ? { prompt_token_ids: c.prompt_token_ids ?? null, token_ids: c.token_ids ?? null } : {}),
        },
      ],
    }),
  );
  if (asked.usageInStream) events.push(JSON.stringify({ ...head, choices: [], usage: answer.usage ?? null }));
  events.push('[DONE]');
  return events;
}

/** A server-sent event's data as a chunk, or undefined (`[DONE]`, an error event, text that is not JSON). */
function chunkOf(data: string): Record<string, unknown> | undefined {
  if (data === '[DONE]') return undefined;
  try {
    const v = JSON.parse(data) as unknown;
    return isObject(v) && Array.isArray(v.choices) ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The engine's own stream (its chat or completions endpoint) relayed: each chunk goes on to the
 * client with what the gateway asked for itself taken out, and is folded into the whole answer.
 */
export class RelayedStream {
  readonly fold = new ChunkFold();

  constructor(private readonly asked: ClientAsked) {}

  /** Fold one event; returns what the client gets (undefined: nothing to send). */
  take(data: string): string | undefined {
    const chunk = chunkOf(data);
    if (!chunk) return data;
    this.fold.add(chunk);
    // The usage chunk the gateway asked for on its own behalf.
    if (!this.asked.usageInStream && (chunk.choices as unknown[]).length === 0 && isObject(chunk.usage))
      return undefined;
    return JSON.stringify(stripAnswer(chunk, this.asked));
  }
}

interface ChoiceStream {
  hold?: ToolCallHold;
  text: string;
  /** Positions of this choice seen so far. */
  tokens: number;
}

/**
 * A token-in stream (vLLM `/v1/completions`) relayed as the chat stream the client asked for: a
 * role chunk per choice, then each engine chunk as a content delta with its logprobs and ids, the
 * text held back from the first call opening (the family's, `ToolCallParser.open`) on when tools are offered (or whole, for a forced
 * tool call) and read as the chat endpoint reads it when the choice finishes. Folded, it is the
 * completions answer the capture records.
 */
export class TokenInChatStream {
  readonly fold = new ChunkFold();
  readonly outcomes = new Map<number, ChatOutcome>();
  private readonly choices = new Map<number, ChoiceStream>();
  private readonly head: Record<string, unknown>;
  private promptIds: unknown;

  constructor(
    private readonly asked: ClientAsked,
    private readonly tools: ToolMode,
    private readonly reader: ToolReader,
    private readonly parallelToolCalls: boolean,
    model: string,
    private readonly decode: (id: number) => string,
  ) {
    this.head = { id: chatId(), object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model };
  }

  /** One engine event in; the client's events out. */
  take(data: string): string[] {
    if (data === '[DONE]') return ['[DONE]'];
    const chunk = chunkOf(data);
    if (!chunk) return [data];
    this.fold.add(chunk);
    const out: string[] = [];
    const choices = chunk.choices as Record<string, unknown>[];
    if (choices.length === 0 && isObject(chunk.usage)) {
      if (this.asked.usageInStream) out.push(JSON.stringify({ ...this.head, choices: [], usage: chunk.usage }));
      return out;
    }
    for (const [k, c] of choices.entries()) {
      const index = typeof c.index === 'number' ? c.index : k;
      if (this.promptIds === undefined && Array.isArray(c.prompt_token_ids)) this.promptIds = c.prompt_token_ids;
      let state = this.choices.get(index);
      if (!state) {
        state = {
          text: '',
          tokens: 0,
          ...(this.tools.mode === 'auto' && this.reader.engine === 'vllm'
            ? { hold: new ToolCallHold(this.reader.parser.open) }
            : {}),
        };
        this.choices.set(index, state);
        out.push(
          JSON.stringify({
            ...this.head,
            choices: [{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
            prompt_token_ids: this.asked.ids ? (this.promptIds ?? null) : null,
          }),
        );
      }
      const text = typeof c.text === 'string' ? c.text : '';
      state.text += text;
      const content = this.tools.mode === 'none' ? text : state.hold ? state.hold.push(text) : '';
      const lp = isObject(c.logprobs) ? c.logprobs : undefined;
      const count = Array.isArray(lp?.token_logprobs) ? lp.token_logprobs.length : 0;
      const logprobs =
        this.asked.logprobs && lp
          ? chatLogprobs(
              {
                logprobs: lp.token_logprobs as (number | null)[],
                tokens: lp.tokens as (string | null)[] | undefined,
                top: legacyTop(lp.top_logprobs),
              },
              this.asked,
              this.decode,
              0,
              count,
            )
          : null;
      state.tokens += count;
      const ids = this.asked.ids ? { token_ids: Array.isArray(c.token_ids) ? c.token_ids : null } : {};
      const finish = typeof c.finish_reason === 'string' ? c.finish_reason : null;
      if (!finish) {
        out.push(
          JSON.stringify({
            ...this.head,
            choices: [{ index, delta: content !== '' ? { content } : {}, logprobs, finish_reason: null, ...ids }],
          }),
        );
        continue;
      }
      // The choice is whole: read it as the chat endpoint would, send what was held and the tool calls.
      const outcome = tokenInOutcome(
        { index, text: state.text, toolCalls: [], finishReason: finish },
        this.tools,
        this.reader,
        this.parallelToolCalls,
      );
      this.outcomes.set(index, outcome);
      let rest = content;
      if (outcome.toolCalls.length === 0 && this.tools.mode !== 'none')
        rest += state.hold ? state.hold.held : (outcome.content ?? '');
      const delta: Record<string, unknown> = {};
      if (rest !== '') delta.content = rest;
      if (outcome.toolCalls.length > 0)
        delta.tool_calls = outcome.toolCalls.map((t, i) => ({
          index: i,
          id: t.id,
          type: 'function',
          function: { name: t.name, arguments: t.arguments },
        }));
      out.push(
        JSON.stringify({
          ...this.head,
          choices: [
            {
              index,
              delta,
              logprobs,
              finish_reason: outcome.finishReason,
              stop_reason: c.stop_reason ?? null,
              ...ids,
            },
          ],
        }),
      );
    }
    return out;
  }
}
