// The gateway's boundaries as zod models: what clients send (OpenAI chat and completions requests
// with vLLM's extras, docs/reference/vllm-api.md), what the engines answer (vLLM chat/completions,
// SGLang's OpenAI chat and `/generate`, docs/reference/sglang.md), and the capture line it writes
// (one vLLM call-log record per call, the shape `server/import/vllm.ts` reads).
import { z } from 'zod';
import { Finding } from '../model/finding.ts';
import { Message } from '../model/trajectory.ts';

const Stop = z.union([z.string(), z.array(z.string())]).nullish();
const StreamOptions = z.object({ include_usage: z.boolean().nullish() }).passthrough();

/** Sampling fields the gateway carries over from a chat request to a token-in call. */
const Sampling = {
  model: z.string().nullish(),
  n: z.number().int().min(1).nullish(),
  stream: z.boolean().nullish(),
  stream_options: StreamOptions.nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  top_k: z.number().int().nullish(),
  min_p: z.number().nullish(),
  seed: z.number().int().nullish(),
  stop: Stop,
  stop_token_ids: z.array(z.number().int().nonnegative()).nullish(),
  presence_penalty: z.number().nullish(),
  frequency_penalty: z.number().nullish(),
  repetition_penalty: z.number().nullish(),
  skip_special_tokens: z.boolean().nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  ignore_eos: z.boolean().nullish(),
  return_token_ids: z.boolean().nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  session_id: z.string().min(1).max(256).nullish(),
  user: z.string().max(256).nullish(),
};

export const ChatRequest = z
  .object({
    ...Sampling,
    messages: z.array(Message).min(1),
    tools: z.array(z.unknown()).nullish(),
    tool_choice: z.unknown().optional(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().nullish(),
    max_tokens: z.number().int().positive().nullish(),
    max_completion_tokens: z.number().int().positive().nullish(),
    add_generation_prompt: z.boolean().nullish(),
    continue_final_message: z.boolean().nullish(),
    chat_template: z.string().nullish(),
    chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
    mm_processor_kwargs: z.record(z.string(), z.unknown()).nullish(),
  })
  .passthrough();
export type ChatRequest = z.infer<typeof ChatRequest>;

export const CompletionRequest = z
  .object({
    ...Sampling,
    prompt: z.union([z.string(), z.array(z.number().int().nonnegative()).min(1)]),
    logprobs: z.number().int().nonnegative().nullish(),
    max_tokens: z.number().int().nonnegative().nullish(),
    echo: z.boolean().nullish(),
  })
  .passthrough();
export type CompletionRequest = z.infer<typeof CompletionRequest>;

const Ids = z.array(z.number().int().nonnegative());
const ToolCallOut = z
  .object({
    id: z.string().nullish(),
    type: z.string().nullish(),
    function: z.object({ name: z.string(), arguments: z.string().nullish() }).passthrough(),
  })
  .passthrough();
export type ToolCallOut = z.infer<typeof ToolCallOut>;

const ChatLogprobs = z
  .object({
    content: z.array(z.object({ token: z.string().nullish(), logprob: z.number().nullish() }).passthrough()).nullish(),
  })
  .passthrough();
const LegacyLogprobs = z
  .object({
    tokens: z.array(z.string().nullable()).nullish(),
    token_logprobs: z.array(z.number().nullable()).nullish(),
  })
  .passthrough();
const Usage = z
  .object({
    prompt_tokens: z.number().int().nonnegative().nullish(),
    completion_tokens: z.number().int().nonnegative().nullish(),
  })
  .passthrough();

/** A vLLM (or SGLang OpenAI) chat completion. */
export const EngineChatResponse = z
  .object({
    id: z.string().nullish(),
    model: z.string().nullish(),
    prompt_token_ids: Ids.nullish(),
    choices: z
      .array(
        z
          .object({
            index: z.number().int().nullish(),
            message: z
              .object({
                role: z.string().nullish(),
                content: z.string().nullish(),
                tool_calls: z.array(ToolCallOut).nullish(),
              })
              .passthrough(),
            logprobs: ChatLogprobs.nullish(),
            finish_reason: z.string().nullish(),
            token_ids: Ids.nullish(),
            prompt_token_ids: Ids.nullish(),
            // SGLang `return_meta_info`: the engine's own output record (`output_token_logprobs` triples).
            meta_info: z.record(z.string(), z.unknown()).nullish(),
          })
          .passthrough(),
      )
      .min(1),
    usage: Usage.nullish(),
  })
  .passthrough();
export type EngineChatResponse = z.infer<typeof EngineChatResponse>;

/** A vLLM completion (ids per choice, legacy logprobs). */
export const EngineCompletionResponse = z
  .object({
    id: z.string().nullish(),
    model: z.string().nullish(),
    choices: z
      .array(
        z
          .object({
            index: z.number().int().nullish(),
            text: z.string().nullish(),
            logprobs: LegacyLogprobs.nullish(),
            finish_reason: z.string().nullish(),
            token_ids: Ids.nullish(),
            prompt_token_ids: Ids.nullish(),
          })
          .passthrough(),
      )
      .min(1),
    usage: Usage.nullish(),
  })
  .passthrough();
export type EngineCompletionResponse = z.infer<typeof EngineCompletionResponse>;

/** One streamed chunk of a vLLM chat or completion stream (`return_token_ids`: ids per chunk). */
export const EngineChunk = z
  .object({
    id: z.string().nullish(),
    model: z.string().nullish(),
    prompt_token_ids: Ids.nullish(),
    choices: z
      .array(
        z
          .object({
            index: z.number().int().nullish(),
            delta: z
              .object({ content: z.string().nullish(), tool_calls: z.array(z.unknown()).nullish() })
              .passthrough()
              .nullish(),
            text: z.string().nullish(),
            logprobs: z.union([ChatLogprobs, LegacyLogprobs]).nullish(),
            finish_reason: z.string().nullish(),
            token_ids: Ids.nullish(),
            prompt_token_ids: Ids.nullish(),
          })
          .passthrough(),
      )
      .default([]),
    usage: Usage.nullish(),
  })
  .passthrough();
export type EngineChunk = z.infer<typeof EngineChunk>;

/** SGLang `/generate` output (`tokenizer_manager.py` `_handle_batch_output`). */
export const SglangGenerateResponse = z
  .object({
    text: z.string().nullish(),
    output_ids: Ids.nullish(),
    meta_info: z
      .object({
        id: z.string().nullish(),
        prompt_tokens: z.number().int().nonnegative().nullish(),
        completion_tokens: z.number().int().nonnegative().nullish(),
        finish_reason: z
          .union([z.object({ type: z.string(), matched: z.unknown().optional() }).passthrough(), z.string()])
          .nullish(),
        output_token_logprobs: z.array(z.array(z.unknown())).nullish(),
      })
      .passthrough(),
  })
  .passthrough();
export type SglangGenerateResponse = z.infer<typeof SglangGenerateResponse>;

export const CALL_OUTCOMES = ['ok', 'failed', 'cancelled', 'refused'] as const;
export type CallOutcome = (typeof CALL_OUTCOMES)[number];

/**
 * One capture line: a vLLM call-log record (`request`, `response`), grouped by its top-level
 * `session_id` (`explicitId` in server/import/call-log/read.ts), with what the gateway did under `gateway`.
 * A call that failed or was cancelled has an error `response` (no `choices`): importers skip it,
 * so it is never a turn.
 */
export const CaptureLine = z
  .object({
    session_id: z.string().min(1),
    request: z.record(z.string(), z.unknown()),
    response: z.record(z.string(), z.unknown()),
    gateway: z.object({
      version: z.literal(1),
      call: z.string(),
      replica: z.string(),
      time: z.string(),
      mode: z.string(),
      engine: z.string(),
      /** The client's endpoint and the engine's. */
      endpoint: z.string(),
      upstream: z.string(),
      outcome: z.enum(CALL_OUTCOMES),
      /** Turn of the session (0-based) when the call is one; absent for failed calls. */
      turn: z.number().int().nonnegative().optional(),
      /** How the session was told: a header, a body field, the message prefix, or a new one. */
      sessionFrom: z.string(),
      /** How this call's prompt ids were built (continuity) or why they were not. */
      prompt: z.string().optional(),
      /** Continuity: why the call was rendered by the engine (the reason /metrics counts it under). */
      fallback: z.object({ reason: z.string(), detail: z.string() }).optional(),
      findings: z.array(Finding),
      notes: z.array(z.string()),
      status: z.number().int().optional(),
      ms: z.object({ gateway: z.number().nonnegative(), upstream: z.number().nonnegative() }),
    }),
  })
  .passthrough();
export type CaptureLine = z.infer<typeof CaptureLine>;
