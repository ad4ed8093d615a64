// What the client gets: the answer it would have had from the engine directly. The ids and
// logprobs the gateway asked for on its own behalf are taken out again (set to null, as vLLM
// writes them when not asked) unless the client asked for them too; a token-in answer is given
// the chat shape the client asked for, tool calls parsed as the model family's vLLM tool parser would (hermes for Qwen).
import { randomUUID } from 'node:crypto';
import type { EngineAnswer } from './engines.ts';
import type { ChatRequest } from './protocol.ts';
import { EngineChunk } from './protocol.ts';
import { toolCallId } from './tool-calls.ts';
import type { ToolCallParser } from '../families/family.ts';

export interface ClientAsked {
  ids: boolean;
  logprobs: boolean;
  usageInStream: boolean;
}

export function clientAsked(req: {
  return_token_ids?: boolean | null;
  logprobs?: unknown;
  stream_options?: { include_usage?: boolean | null } | null;
}): ClientAsked {
  return {
    ids: req.return_token_ids === true,
    logprobs: req.logprobs === true || (typeof req.logprobs === 'number' && req.logprobs >= 0),
    usageInStream: req.stream_options?.include_usage === true,
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

/** The engine's JSON answer with what the gateway added for itself taken out. */
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
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  finishReason: string;
}

/** The assistant message of a token-in answer: tool calls parsed (the model family's parser) when the request offered tools. */
export function chatOutcome(req: ChatRequest, answer: EngineAnswer, toolCalls: ToolCallParser): ChatOutcome {
  const text = answer.text ?? '';
  const offered = Array.isArray(req.tools) && req.tools.length > 0 && req.tool_choice !== 'none';
  const parsed = offered ? toolCalls.parse(text) : { content: text, calls: [] };
  const finish = answer.finishReason ?? 'stop';
  return {
    content: parsed.content,
    toolCalls: parsed.calls.map((c) => ({ id: toolCallId(), ...c })),
    // vLLM reports a parsed tool call as the finish (serving_chat.py: `auto_tools_called`).
    finishReason: parsed.calls.length > 0 && finish === 'stop' ? 'tool_calls' : finish,
  };
}

function chatLogprobs(answer: EngineAnswer): { content: unknown[] } {
  const ids = answer.generatedIds ?? [];
  return {
    content: (answer.logprobs ?? []).map((lp, i) => {
      const token = answer.tokens?.[i] ?? `token_id:${ids[i]}`;
      return { token, logprob: lp ?? -9999, bytes: [...Buffer.from(token, 'utf8')], top_logprobs: [] };
    }),
  };
}

function usageOf(answer: EngineAnswer): Record<string, number> {
  const prompt = answer.promptTokens ?? answer.promptIds?.length ?? 0;
  const completion = answer.completionTokens ?? answer.generatedIds?.length ?? 0;
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

/** A chat completion built from a token-in answer. */
export function chatFromTokenIn(
  answer: EngineAnswer,
  o: ChatOutcome,
  asked: ClientAsked,
  model: string,
): Record<string, unknown> {
  return {
    id: `chatcmpl-${randomUUID().replace(/-/g, '')}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: messageOf(o),
        logprobs: asked.logprobs ? chatLogprobs(answer) : null,
        finish_reason: o.finishReason,
        stop_reason: null,
        token_ids: asked.ids ? (answer.generatedIds ?? null) : null,
      },
    ],
    usage: usageOf(answer),
    prompt_token_ids: asked.ids ? (answer.promptIds ?? null) : null,
  };
}

/** A whole chat answer as the stream of chunks an engine would have sent (one content delta). */
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

/**
 * A vLLM stream read chunk by chunk: each chunk goes on to the client (ids and logprobs taken out
 * unless asked) and is folded into the whole answer the capture records.
 */
export class StreamFold {
  private promptIds: number[] | undefined;
  private readonly ids: number[] = [];
  private readonly logprobs: (number | null)[] = [];
  private readonly tokens: (string | null)[] = [];
  private text = '';
  private finish: string | null = null;
  private head: Record<string, unknown> = {};
  private usage: Record<string, unknown> | undefined;
  private readonly calls = new Map<number, { id?: string; name: string; arguments: string }>();
  private sawIds = false;

  constructor(
    private readonly kind: 'chat' | 'completion',
    private readonly asked: ClientAsked,
  ) {}

  /** Fold one event; returns what the client gets (undefined: nothing to send). */
  take(data: string): string | undefined {
    if (data === '[DONE]') return data;
    let raw: unknown;
    try {
      raw = JSON.parse(data);
    } catch {
      return data;
    }
    const chunk = EngineChunk.safeParse(raw);
    if (!chunk.success) return data;
    const c = chunk.data;
    this.head = { id: c.id, model: c.model, created: (raw as { created?: unknown }).created };
    if (c.prompt_token_ids) this.promptIds = c.prompt_token_ids;
    if (c.usage) this.usage = c.usage;
    for (const choice of c.choices) {
      if ((choice.index ?? 0) !== 0) continue;
      if (choice.prompt_token_ids) this.promptIds = choice.prompt_token_ids;
      if (choice.token_ids) {
        this.sawIds = true;
        this.ids.push(...choice.token_ids);
      }
      const lp = choice.logprobs as
        | {
            content?: { token?: string | null; logprob?: number | null }[] | null;
            token_logprobs?: (number | null)[] | null;
            tokens?: (string | null)[] | null;
          }
        | null
        | undefined;
      for (const e of lp?.content ?? []) {
        this.logprobs.push(e.logprob ?? null);
        this.tokens.push(e.token ?? null);
      }
      for (const v of lp?.token_logprobs ?? []) this.logprobs.push(v);
      for (const t of lp?.tokens ?? []) this.tokens.push(t);
      this.text += choice.delta?.content ?? choice.text ?? '';
      for (const d of (choice.delta?.tool_calls ?? []) as {
        index?: number;
        id?: string;
        function?: { name?: string; arguments?: string };
      }[]) {
        const at = d.index ?? 0;
        const call = this.calls.get(at) ?? { name: '', arguments: '' };
        if (d.id) call.id = d.id;
        if (d.function?.name) call.name += d.function.name;
        if (d.function?.arguments) call.arguments += d.function.arguments;
        this.calls.set(at, call);
      }
      if (choice.finish_reason) this.finish = choice.finish_reason;
    }
    const out = raw as Record<string, unknown>;
    // The usage chunk the gateway asked for on its own behalf.
    if (!this.asked.usageInStream && c.choices.length === 0 && c.usage) return undefined;
    const client = { ...out };
    if (!this.asked.ids && 'prompt_token_ids' in client) client.prompt_token_ids = null;
    if (Array.isArray(out.choices))
      client.choices = (out.choices as Record<string, unknown>[]).map((ch) => {
        const x = { ...ch };
        if (!this.asked.ids) for (const f of ID_FIELDS) if (f in x) x[f] = null;
        if (!this.asked.logprobs && 'logprobs' in x) x.logprobs = null;
        return x;
      });
    return JSON.stringify(client);
  }

  /** The folded answer, in the shape the engine's whole answer has. */
  answer(): EngineAnswer {
    const toolCalls = [...this.calls.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => c);
    const promptIds = this.promptIds;
    const generatedIds = this.sawIds ? this.ids : undefined;
    const logprobs = this.logprobs.length > 0 ? this.logprobs : undefined;
    const usage = this.usage as { prompt_tokens?: number; completion_tokens?: number } | undefined;
    const choice =
      this.kind === 'chat'
        ? {
            index: 0,
            message: {
              role: 'assistant',
              content: this.text === '' && toolCalls.length > 0 ? null : this.text,
              tool_calls: toolCalls.map((c) => ({
                id: c.id,
                type: 'function',
                function: { name: c.name, arguments: c.arguments },
              })),
            },
            logprobs: logprobs
              ? { content: logprobs.map((lp, i) => ({ token: this.tokens[i] ?? null, logprob: lp })) }
              : null,
            finish_reason: this.finish,
            token_ids: generatedIds ?? null,
          }
        : {
            index: 0,
            text: this.text,
            logprobs: logprobs ? { token_logprobs: logprobs, tokens: this.tokens } : null,
            finish_reason: this.finish,
            token_ids: generatedIds ?? null,
            prompt_token_ids: promptIds ?? null,
          };
    const raw: Record<string, unknown> = {
      ...this.head,
      object: this.kind === 'chat' ? 'chat.completion' : 'text_completion',
      choices: [choice],
      ...(usage ? { usage } : {}),
      ...(this.kind === 'chat' ? { prompt_token_ids: promptIds ?? null } : {}),
    };
    return {
      promptIds,
      generatedIds,
      logprobs,
      tokens: this.tokens.length > 0 ? this.tokens : undefined,
      text: this.kind === 'chat' && this.text === '' && toolCalls.length > 0 ? null : this.text,
      toolCalls,
      finishReason: this.finish,
      promptTokens: usage?.prompt_tokens,
      completionTokens: usage?.completion_tokens,
      raw,
      capture: raw,
    };
  }
}
