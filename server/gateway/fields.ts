// Continuity's one rule: every field of the client's chat request reaches the engine with the same
// meaning, or the call falls back to the engine's own rendering and the capture says why
// (docs/gateway.md "What continuity does with each request field"). The fields are those of vLLM's
// and SGLang's chat request models and of the OpenAI SDK's chat request (their lists, with the
// commits they were read at, are in test/fixtures/engine-protocols/fields.json, and
// test/gateway-fields.test.ts fails on a field this table does not classify). Per engine, a field is
// - carried:    sent unchanged to the token-in request (vLLM `/v1/completions` takes it too);
// - translated: sent as the token-in endpoint spells it (`to`, or the code in engines.ts names it:
//               `top_logprobs` becomes `logprobs: N`, a forced `tool_choice` the structured-output
//               field `/v1/completions` takes, SGLang's fields move into `sampling_params`), or
//               applied by the gateway to the answer as the engine applies it (`parallel_tool_calls`);
// - suffix:     read to render the new messages' suffix (`messages`, `tools`, `chat_template_kwargs`);
// - fallback:   a value other than the inert one makes the call fall back, the field named;
// - ignored:    the engine's chat endpoint ignores it (not in its request model, or read only where
//               continuity never goes), so it is not sent.
// A field this table does not know falls back too (`field:unknown`): nothing reaches the engine
// with a meaning the gateway has not checked.
import { isObject } from '../import/importer.ts';
import type { EngineKind } from './config.ts';

export const FIELD_USES = ['carried', 'translated', 'suffix', 'fallback', 'ignored'] as const;
export type FieldUse = (typeof FIELD_USES)[number];

export interface FieldRule {
  use: FieldUse;
  /** What happens, in words (the table in docs/gateway.md). */
  how: string;
  /** translated: where the value goes in the token-in request (`sampling_params.max_new_tokens`); absent when code does it. */
  to?: string;
  /** fallback: values that change nothing (the default); others fall back. Default: absent, null, false, empty. */
  inert?: (v: unknown) => boolean;
}

export type FieldRules = Record<EngineKind, FieldRule>;

/** Absent, null, false, an empty list or an empty object: what a client sends for "not set". */
export function unset(v: unknown): boolean {
  return (
    v === undefined ||
    v === null ||
    v === false ||
    (Array.isArray(v) && v.length === 0) ||
    (isObject(v) && Object.keys(v).length === 0)
  );
}

const carried = (how = 'sent as is'): FieldRule => ({ use: 'carried', how });
const translated = (how: string, to?: string): FieldRule => ({ use: 'translated', how, ...(to ? { to } : {}) });
const suffix = (how: string): FieldRule => ({ use: 'suffix', how });
const fallback = (how: string, inert?: (v: unknown) => boolean): FieldRule => ({
  use: 'fallback',
  how,
  ...(inert ? { inert } : {}),
});
const ignored = (how: string): FieldRule => ({ use: 'ignored', how });
const both = (rule: FieldRule): FieldRules => ({ vllm: rule, sglang: rule });
/** SGLang's chat endpoint puts the field into `sampling_params` (protocol.py `to_sampling_params`). */
const sampling = (name: string, as = name): FieldRule =>
  translated(`into sampling_params${as === name ? '' : ` as ${as}`}`, `sampling_params.${as}`);
/** SGLang's chat endpoint passes the field to `GenerateReqInput` under the same name. */
const generateField = (name: string): FieldRule => translated('a /generate field of the same name', name);
const notInVllm = ignored('not a field of vLLM’s chat request: vLLM ignores it');
const notInSglang = ignored('not a field of SGLang’s chat request: SGLang ignores it');
const notFalse = (v: unknown) => v === undefined || v === null || v === true;

/** Every chat request field continuity knows, per engine. */
export const CHAT_FIELDS: Record<string, FieldRules> = {
  // --- the conversation --------------------------------------------------------------------------
  messages: both(suffix('the new messages are rendered after the history; the history is the previous ids')),
  tools: both(suffix('rendered by the template, and the answer is parsed for tool calls')),
  documents: {
    vllm: suffix('passed to the template, as vLLM passes it'),
    sglang: notInSglang,
  },
  chat_template_kwargs: {
    vllm: suffix(
      'passed to the template (enable_thinking, …); keys the template does not read change nothing; a key that names a template argument vLLM sets itself falls back',
    ),
    sglang: suffix(
      'passed to the template; spaces_between_special_tokens also into sampling_params, as SGLang does; a key that names a template argument falls back',
    ),
  },
  chat_template: both(fallback('a template of the request’s own: the gateway renders with the profile’s')),
  add_generation_prompt: {
    vllm: fallback('false: a prompt without the generation prompt is not continued', notFalse),
    sglang: notInSglang,
  },
  continue_final_message: both(fallback('true: the final message is continued, not answered')),
  add_special_tokens: {
    vllm: fallback('true: special tokens added on top of the template (a BOS) are not continued'),
    sglang: notInSglang,
  },
  echo: {
    vllm: fallback('true: the answer repeats the last message'),
    sglang: notInSglang,
  },
  reasoning_effort: both(
    fallback('engine versions differ in the template arguments they derive from it (enable_thinking): not reproduced'),
  ),
  reasoning: {
    vllm: notInVllm,
    sglang: fallback('SGLang derives enable_thinking from it: not reproduced'),
  },
  include_reasoning: {
    vllm: ignored(
      'read only with a reasoning parser on the engine, whose answers continuity never continues (falls back)',
    ),
    sglang: notInSglang,
  },
  separate_reasoning: {
    vllm: notInVllm,
    sglang: ignored('read only with a reasoning parser, whose answers continuity never continues'),
  },
  stream_reasoning: {
    vllm: notInVllm,
    sglang: ignored('read only with a reasoning parser, whose answers continuity never continues'),
  },
  task: { vllm: notInVllm, sglang: fallback('a DeepSeek-V4 task token after the render: not reproduced') },
  mm_processor_kwargs: {
    vllm: suffix('image processor settings: the pad count of each image'),
    sglang: notInSglang,
  },
  media_io_kwargs: { vllm: fallback('media loading settings: not reproduced'), sglang: notInSglang },
  images_config: { vllm: notInVllm, sglang: fallback('image settings: not reproduced') },
  max_dynamic_patch: { vllm: notInVllm, sglang: fallback('image tiling: not reproduced') },
  min_dynamic_patch: { vllm: notInVllm, sglang: fallback('image tiling: not reproduced') },
  use_audio_in_video: { vllm: notInVllm, sglang: fallback('audio from video: not reproduced') },
  input_ids: { vllm: notInVllm, sglang: fallback('the client’s own prompt ids') },
  session_params: { vllm: notInVllm, sglang: fallback('SGLang’s session prompts are built by the engine') },

  // --- what the engine answers with ------------------------------------------------------------
  model: {
    vllm: carried(),
    sglang: fallback(
      'a LoRA adapter named in the model (base:adapter)',
      (v) => typeof v !== 'string' || !v.includes(':'),
    ),
  },
  n: {
    vllm: carried('every choice is answered and captured; the session continues with choice 0'),
    sglang: fallback('n > 1 is not sent as ids to /generate', (v) => v === undefined || v === null || v === 1),
  },
  stream: both(translated('the token-in call streams too (SGLang: answered whole, streamed to the client from it)')),
  stream_options: both(
    translated('include_usage is honoured by the gateway (it always asks for usage); continuous_usage_stats sent'),
  ),
  max_tokens: {
    vllm: translated('max_tokens (default: what the chat endpoint allows, max_model_len − prompt)'),
    sglang: translated('max_new_tokens (default: the context left)'),
  },
  max_completion_tokens: {
    vllm: translated('max_tokens, over max_tokens as vLLM reads them'),
    sglang: translated('max_new_tokens, over max_tokens'),
  },
  logprobs: {
    vllm: translated('logprobs: N (the gateway asks for the ids as token_id:N and decodes them for the answer)'),
    sglang: translated('return_logprob'),
  },
  top_logprobs: {
    vllm: translated('logprobs: N; the answer’s top_logprobs built from the completion’s'),
    sglang: translated('top_logprobs_num'),
  },
  return_tokens_as_token_ids: {
    vllm: translated('the gateway always asks for token_id:N; decoded unless the client asked so'),
    sglang: notInSglang,
  },
  return_token_ids: both(translated('the gateway always asks for ids; given to the client when asked')),
  return_prompt_token_ids: { vllm: notInVllm, sglang: translated('given to the client when asked') },
  return_meta_info: { vllm: notInVllm, sglang: fallback('the engine’s meta_info of a chat answer: not reproduced') },
  return_prompt_text: { vllm: fallback('the rendered prompt text: continuity sends ids'), sglang: notInSglang },
  return_token_offsets: {
    vllm: ignored('read only by the render endpoints'),
    sglang: notInSglang,
  },
  return_mm_kwargs: { vllm: ignored('read only by the render endpoints'), sglang: notInSglang },
  return_hidden_states: { vllm: notInVllm, sglang: fallback('hidden states of a chat answer: not reproduced') },
  return_routed_experts: { vllm: notInVllm, sglang: fallback('routed experts of a chat answer: not reproduced') },
  return_cached_tokens_details: { vllm: notInVllm, sglang: fallback('cache details: not reproduced') },
  routed_experts_start_len: { vllm: notInVllm, sglang: generateField('routed_experts_start_len') },
  routed_experts_prompt_start: { vllm: carried(), sglang: notInSglang },
  prompt_logprobs: { vllm: fallback('prompt logprobs sit elsewhere in a completions answer'), sglang: notInSglang },
  logprob_token_ids: { vllm: fallback('logprobs of chosen ids: answered in another shape'), sglang: notInSglang },
  tool_choice: {
    vllm: translated(
      '"auto": the answer parsed as vLLM’s hermes parser does; "none": not parsed; "required" or a named tool: structured_outputs.json from the tools, as vLLM’s chat endpoint derives it, and the answer read as it reads it',
    ),
    sglang: translated(
      '"auto": the answer parsed as SGLang’s qwen25 detector does; "none": not parsed; "required" or a named tool fall back (SGLang builds that constraint in its detector)',
    ),
  },
  parallel_tool_calls: {
    vllm: translated('false: only the first tool call is kept, as vLLM does'),
    sglang: fallback('false: not reproduced', notFalse),
  },

  // --- sampling ---------------------------------------------------------------------------------
  temperature: { vllm: carried(), sglang: sampling('temperature') },
  top_p: { vllm: carried(), sglang: sampling('top_p') },
  top_k: { vllm: carried(), sglang: sampling('top_k') },
  min_p: { vllm: carried(), sglang: sampling('min_p') },
  seed: { vllm: carried(), sglang: sampling('seed', 'sampling_seed') },
  stop: { vllm: carried(), sglang: sampling('stop') },
  stop_token_ids: { vllm: carried(), sglang: sampling('stop_token_ids') },
  stop_regex: { vllm: notInVllm, sglang: sampling('stop_regex') },
  presence_penalty: { vllm: carried(), sglang: sampling('presence_penalty') },
  frequency_penalty: { vllm: carried(), sglang: sampling('frequency_penalty') },
  repetition_penalty: { vllm: carried(), sglang: sampling('repetition_penalty') },
  logit_bias: { vllm: carried(), sglang: sampling('logit_bias') },
  min_tokens: { vllm: carried(), sglang: sampling('min_tokens', 'min_new_tokens') },
  ignore_eos: { vllm: carried(), sglang: sampling('ignore_eos') },
  skip_special_tokens: { vllm: carried(), sglang: sampling('skip_special_tokens') },
  spaces_between_special_tokens: { vllm: carried(), sglang: notInSglang },
  include_stop_str_in_output: { vllm: carried(), sglang: notInSglang },
  no_stop_trim: { vllm: notInVllm, sglang: sampling('no_stop_trim') },
  response_format: {
    vllm: carried('sent as is (/v1/completions takes it and derives the same structured output)'),
    sglang: translated('json_schema / structural_tag in sampling_params, as SGLang’s chat endpoint derives them'),
  },
  structured_outputs: { vllm: carried(), sglang: notInSglang },
  regex: { vllm: notInVllm, sglang: sampling('regex') },
  ebnf: { vllm: notInVllm, sglang: sampling('ebnf') },
  bad_words: { vllm: carried(), sglang: notInSglang },
  allowed_token_ids: { vllm: carried(), sglang: notInSglang },
  use_beam_search: { vllm: carried(), sglang: notInSglang },
  length_penalty: { vllm: carried(), sglang: notInSglang },
  watermarking: { vllm: carried(), sglang: notInSglang },
  thinking_token_budget: { vllm: carried(), sglang: notInSglang },
  repetition_detection: { vllm: carried(), sglang: notInSglang },
  truncate_prompt_tokens: { vllm: carried('sent as is: the engine cuts the same ids'), sglang: notInSglang },
  truncation_side: { vllm: carried(), sglang: notInSglang },
  stream_interval: { vllm: carried(), sglang: notInSglang },
  custom_params: { vllm: notInVllm, sglang: sampling('custom_params') },
  custom_logit_processor: { vllm: notInVllm, sglang: generateField('custom_logit_processor') },
  vllm_xargs: { vllm: carried(), sglang: notInSglang },

  // --- scheduling and routing -------------------------------------------------------------------
  priority: { vllm: carried(), sglang: generateField('priority') },
  request_id: { vllm: carried(), sglang: notInSglang },
  rid: { vllm: notInVllm, sglang: generateField('rid') },
  session_id: { vllm: carried(), sglang: generateField('session_id') },
  user: { vllm: carried('sent as is (vLLM ignores it)'), sglang: ignored('SGLang ignores it') },
  cache_salt: { vllm: carried(), sglang: generateField('cache_salt') },
  extra_key: { vllm: notInVllm, sglang: generateField('extra_key') },
  ngram_corpus_id: { vllm: notInVllm, sglang: fallback('not a /generate field') },
  lora_path: { vllm: notInVllm, sglang: generateField('lora_path') },
  kv_transfer_params: { vllm: carried(), sglang: notInSglang },
  ec_transfer_params: { vllm: carried(), sglang: notInSglang },
  bootstrap_host: { vllm: notInVllm, sglang: generateField('bootstrap_host') },
  bootstrap_port: { vllm: notInVllm, sglang: generateField('bootstrap_port') },
  bootstrap_room: { vllm: notInVllm, sglang: generateField('bootstrap_room') },
  routed_dp_rank: { vllm: notInVllm, sglang: generateField('routed_dp_rank') },
  data_parallel_rank: { vllm: notInVllm, sglang: generateField('data_parallel_rank') },
  disagg_prefill_dp_rank: { vllm: notInVllm, sglang: generateField('disagg_prefill_dp_rank') },

  // --- OpenAI request fields neither engine models (the OpenAI SDK's ChatCompletionCreateParams) ---
  audio: both(fallback('audio output is not served')),
  modalities: both(
    fallback('output modalities are not served', (v) => unset(v) || (Array.isArray(v) && v.every((m) => m === 'text'))),
  ),
  functions: both(fallback('legacy functions: not rendered by the engines')),
  function_call: both(fallback('legacy function_call: not read by the engines')),
  prediction: both(ignored('neither engine reads it')),
  metadata: both(ignored('neither engine reads it')),
  store: both(ignored('neither engine reads it')),
  service_tier: both(ignored('neither engine reads it')),
  moderation: both(ignored('neither engine reads it')),
  prompt_cache_key: both(ignored('neither engine reads it')),
  prompt_cache_options: both(ignored('neither engine reads it')),
  prompt_cache_retention: both(ignored('neither engine reads it')),
  safety_identifier: both(ignored('neither engine reads it')),
  verbosity: both(ignored('neither engine reads it')),
  web_search_options: both(fallback('web search is not served')),
};

/** Fields translated by code (engines.ts, continuity.ts, answer.ts) rather than moved to a `to` path. */
export const TRANSLATED_IN_CODE = [
  'stream',
  'stream_options',
  'max_tokens',
  'max_completion_tokens',
  'logprobs',
  'top_logprobs',
  'return_tokens_as_token_ids',
  'return_token_ids',
  'return_prompt_token_ids',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
] as const;

/** Template arguments vLLM and SGLang set themselves: a `chat_template_kwargs` key naming one falls back. */
export const RESERVED_TEMPLATE_KWARGS = [
  'messages',
  'tools',
  'documents',
  'add_generation_prompt',
  'continue_final_message',
  'chat_template',
  'tokenize',
  'reasoning_effort',
] as const;

/** A request field that makes continuity fall back, with why; undefined when every field has its meaning on the token-in call. */
export function fieldFallback(
  body: Record<string, unknown>,
  engine: EngineKind,
): { field: string; known: boolean; why: string } | undefined {
  for (const [field, value] of Object.entries(body)) {
    if (value === undefined) continue;
    const rules = CHAT_FIELDS[field];
    if (!rules)
      return {
        field,
        known: false,
        why: `the request field ${field} is not one continuity knows the meaning of on the token-in call`,
      };
    const rule = rules[engine];
    if (rule.use !== 'fallback') continue;
    if ((rule.inert ?? unset)(value)) continue;
    return { field, known: true, why: `${field}: ${rule.how}` };
  }
  const kwargs = body.chat_template_kwargs;
  if (isObject(kwargs)) {
    const reserved = RESERVED_TEMPLATE_KWARGS.find((k) => k in kwargs);
    if (reserved)
      return {
        field: 'chat_template_kwargs',
        known: true,
        why: `chat_template_kwargs.${reserved} names a template argument the engine sets itself`,
      };
  }
  return undefined;
}
