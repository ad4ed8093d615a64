// Continuity's plan for one chat call: the token-in request (the session's previous prompt ids ⧺
// its generated ids ⧺ the canonical, EOS-aware suffix of the new messages, and every request field
// carried or translated so it means what it meant on the chat endpoint), or a fallback to the
// engine's own rendering with its reason (docs/gateway.md "continuity"). Pure planning: the gateway
// sends what this returns and writes the reason into the capture and `/metrics`.
import type { Message } from '../model/trajectory.ts';
import { imagesInMessages } from '../model/message-images.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import { collapseRuns } from '../import/chain.ts';
import { padIdsOf } from '../analysis/vision-spans.ts';
import { isObject } from '../import/importer.ts';
import type { EngineKind } from './config.ts';
import { CHAT_FIELDS, fieldFallback } from './fields.ts';
import { continuationIds } from './prompt.ts';
import type { ChatRequest } from './protocol.ts';
import { answerKey, type LastTurn } from './sessions.ts';
import type { EngineAdapter, TokenInRequest, ToolMode } from './engines.ts';
import { forcedToolSchema } from './tool-calls.ts';

/** Why a call was rendered by the engine: the `reason` label of `rollscope_gateway_fallbacks_total`. */
export type FallbackReason =
  | 'first_call'
  | 'history_edited'
  | 'answer_edited'
  | 'no_generated_ids'
  | 'reasoning_parser'
  | 'tool_choice'
  | 'template'
  | 'image_size'
  | 'engine_images'
  | `field:${string}`;

export type ContinuityPlan =
  | {
      kind: 'ids';
      request: TokenInRequest;
      /** The boundary and the rendered new messages. */
      suffixIds: number[];
      suffixChars: number;
      /** How the ids were built, for the capture. */
      description: string;
    }
  | { kind: 'fallback'; reason: FallbackReason; detail: string };

export interface ContinuityInput {
  profile: ModelProfile;
  engineKind: EngineKind;
  engine: EngineAdapter;
  body: ChatRequest;
  /** The session's previous turn, when there is one. */
  last: LastTurn | undefined;
  /** `conversationKeys(body.messages)`. */
  keys: readonly string[];
  /** Every image of the conversation, in order (undefined: its size is unknown). */
  padCounts: readonly (number | undefined)[];
  closeIds: readonly number[];
  maxModelLen: number | undefined;
  sessionId: string;
  imagesKeepIds: boolean;
  /** The engine has answered with reasoning split from the content (it runs a reasoning parser). */
  reasoningSplit: boolean;
}

const fallback = (reason: FallbackReason, detail: string): ContinuityPlan => ({ kind: 'fallback', reason, detail });

function toolMode(body: ChatRequest, engine: EngineKind): ToolMode | { error: string } {
  const tools = Array.isArray(body.tools) ? body.tools : [];
  const choice = body.tool_choice ?? (tools.length > 0 ? 'auto' : 'none');
  if (tools.length === 0 || choice === 'none') return { mode: 'none' };
  const names = tools.flatMap((t) =>
    isObject(t) && isObject(t.function) && typeof t.function.name === 'string' ? [t.function.name] : [],
  );
  if (choice === 'auto') return { mode: 'auto', names };
  if (engine === 'sglang')
    return { error: 'a forced tool_choice on SGLang: its detector builds the constraint (EBNF, structural tag)' };
  const format = body.response_format;
  if ((isObject(format) && format.type !== 'text') || body.structured_outputs)
    return { error: 'a forced tool_choice together with response_format / structured_outputs' };
  if (choice === 'required') return { mode: 'required' };
  if (isObject(choice) && isObject(choice.function) && typeof choice.function.name === 'string')
    return { mode: 'named', name: choice.function.name };
  return { error: `tool_choice ${JSON.stringify(choice)} is not one the engines take` };
}

/** The client's fields as the token-in request takes them: carried ones by name, translated ones at their `to`. */
function carriedFields(body: ChatRequest, engine: EngineKind): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(body)) {
    if (value === undefined || value === null) continue;
    const rule = CHAT_FIELDS[field]?.[engine];
    if (rule?.use === 'carried') out[field] = value;
    else if (rule?.use === 'translated' && rule.to) out[rule.to] = value;
  }
  return out;
}

export async function planContinuity(input: ContinuityInput): Promise<ContinuityPlan> {
  const { body, last, keys, engineKind, profile } = input;
  if (!last) return fallback('first_call', 'the first call of the session');
  if (input.reasoningSplit)
    return fallback(
      'reasoning_parser',
      'the engine splits reasoning from the content (it runs a reasoning parser), which the gateway does not reproduce',
    );
  const field = fieldFallback(body as Record<string, unknown>, engineKind);
  if (field) return fallback(field.known ? `field:${field.field}` : 'field:unknown', field.why);
  const n = last.messageKeys?.length ?? 0;
  const extendsLast =
    !!last.messageKeys &&
    keys.length > n + 1 &&
    last.messageKeys.every((k, i) => k === keys[i]) &&
    keys[n] === answerKey(last.answer);
  if (!extendsLast)
    return last.messageKeys && keys.slice(0, n).every((k, i) => k === last.messageKeys![i])
      ? fallback('answer_edited', "the assistant message is not the gateway's answer (edited or re-serialized)")
      : fallback('history_edited', 'the messages do not extend the previous call (history edited or compressed)');
  if (last.generatedIds.length === 0) return fallback('no_generated_ids', 'the previous answer has no generated ids');
  const tools = toolMode(body, engineKind);
  if ('error' in tools) return fallback('tool_choice', tools.error);
  let structuredOutputs: Record<string, unknown> | undefined;
  if (tools.mode === 'required' || tools.mode === 'named') {
    const schema = forcedToolSchema(tools.mode === 'required' ? 'required' : { name: tools.name }, body.tools ?? []);
    if ('error' in schema) return fallback('tool_choice', schema.error);
    structuredOutputs = { json: schema.schema };
  }

  const templateArgs: Record<string, unknown> = {
    ...(isObject(body.chat_template_kwargs) ? body.chat_template_kwargs : {}),
    ...(engineKind === 'vllm' && body.documents !== undefined && body.documents !== null
      ? { documents: body.documents }
      : {}),
  };
  // SGLang renders the tools only when tool_choice is not "none".
  const renderTools =
    engineKind === 'sglang' && body.tool_choice === 'none' ? undefined : (body.tools ?? undefined) || undefined;
  const imagesBefore = imagesInMessages(body.messages.slice(0, n + 1)).length;
  const cont = await continuationIds(profile, {
    last,
    history: last.messages ?? [],
    observation: body.messages.slice(n + 1) as Message[],
    tools: renderTools,
    templateArgs,
    closeIds: input.closeIds,
    padCounts: input.padCounts,
    imagesBefore,
    as: engineKind,
  });
  if ('unknown' in cont) return fallback(cont.reason, cont.unknown);

  const stream = body.stream === true;
  const maxTokens =
    body.max_completion_tokens ??
    body.max_tokens ??
    (input.maxModelLen ? input.engine.room(input.maxModelLen, cont.ids.length) : undefined);
  const request: TokenInRequest = {
    model: body.model,
    promptIds: cont.ids,
    collapsedIds: collapseRuns(cont.ids, padIdsOf(profile.ids)),
    imageUrls: imagesInMessages(body.messages).flatMap((r) => (r.url ? [r.url] : [])),
    fields: carriedFields(body, engineKind),
    ...(maxTokens !== undefined && maxTokens !== null ? { maxTokens } : {}),
    n: body.n ?? 1,
    stream,
    ...(body.logprobs ? { logprobs: body.top_logprobs ?? 0 } : {}),
    ...(structuredOutputs ? { structuredOutputs } : {}),
    ...(body.response_format ? { responseFormat: body.response_format } : {}),
    templateKwargs: isObject(body.chat_template_kwargs) ? body.chat_template_kwargs : {},
    ...(isObject(body.stream_options) && body.stream_options.continuous_usage_stats === true
      ? { continuousUsage: true }
      : {}),
    tools,
    parallelToolCalls: body.parallel_tool_calls !== false,
    sessionId: input.sessionId,
    imagesKeepIds: input.imagesKeepIds,
  };
  const plan = input.engine.tokenIn(request);
  if ('unsupported' in plan) return fallback('engine_images', plan.unsupported);
  return {
    kind: 'ids',
    request,
    suffixIds: cont.suffixIds,
    suffixChars: cont.suffixChars,
    description: `ids: previous prompt (${last.promptIds.length}) ⧺ generated (${last.generatedIds.length}) ⧺ canonical suffix (${cont.suffixIds.length})`,
  };
}
