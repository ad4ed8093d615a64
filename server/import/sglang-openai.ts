// SGLang's OpenAI-compatible `/v1/chat/completions` and `/v1/completions` logs
// (docs/reference/sglang.md): JSONL, `{"request", "response"}` per call, read with vLLM's call
// reader (call-log/read.ts `readLoggedCall`) because the shapes agree, grouped like vLLM's logs. What tells
// SGLang apart (sgl-project/sglang `python/sglang/srt/entrypoints/openai/protocol.py`): token ids
// are per choice (`CompletionResponseChoice` / `ChatCompletionResponseChoice.prompt_token_ids`,
// `.token_ids` with `return_token_ids: true`; vLLM's chat response has `prompt_token_ids` at the
// top level), `choices[].matched_stop` (the stop id or string that ended the generation),
// `choices[].meta_info` (the /generate meta_info, when the request asks for it),
// `sglext` (SGLang extensions), `usage.reasoning_tokens`, and request fields vLLM has not
// (`session_params`, `rid`, `return_hidden_states`). `finish_reason` may be `"abort"`.
// A request's `mm_processor_kwargs` is not read: SGLang resizes images with the server's settings
// (`--mm-process-config`, the model's preprocessor config; `python/sglang/srt/multimodal/processors/qwen_vl.py`),
// and its `GenerateReqInput` carries no per-request image settings (docs/reference/sglang.md).
import type { ReadError } from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { readLoggedCall, type LoggedCall } from './call-log/read.ts';
import { trajectoriesFromCalls, type CallLogFormat } from './call-log/group.ts';

const SGLANG_OPENAI_LOG: CallLogFormat = {
  format: 'sglang-openai',
  noPromptIds:
    'SGLang response without prompt_token_ids (the request did not set return_token_ids: true): the prompt is rendered from the messages and prefix checks cannot run',
  noGeneratedIds:
    'SGLang response without token_ids (the request did not set return_token_ids: true): only the text is known',
};

const REQUEST_ONLY_FIELDS = ['session_params', 'rid', 'return_hidden_states', 'return_routed_experts'];

/** Why a `{"request", "response": {"choices"}}` line is SGLang's, or undefined. */
export function sglangOpenAiEvidence(record: Record<string, unknown>): string | undefined {
  const r = record.response;
  if (!isObject(r) || !Array.isArray(r.choices)) return undefined;
  if ('sglext' in r) return 'response.sglext';
  if (isObject(r.usage) && 'reasoning_tokens' in r.usage) return 'response.usage.reasoning_tokens';
  if (r.choices.some((c) => isObject(c) && 'matched_stop' in c)) return 'choices[].matched_stop';
  if (r.choices.some((c) => isObject(c) && isObject(c.meta_info))) return 'choices[].meta_info';
  const req = record.request;
  if (isObject(req)) for (const f of REQUEST_ONLY_FIELDS) if (f in req) return `request.${f}`;
  return undefined;
}

export const sglangOpenAiImporter: Importer = {
  format: 'sglang-openai',
  description:
    'SGLang OpenAI-compatible logs: JSONL, {"request", "response"} per call, token ids per choice (return_token_ids)',
  container: 'jsonl',
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (!isObject(record.response) || !Array.isArray(record.response.choices))
      return 'no "response" object with "choices"';
    return sglangOpenAiEvidence(record) !== undefined
      ? true
      : 'no SGLang field (choices[].matched_stop, sglext, usage.reasoning_tokens, session_params)';
  },
  importRecords(records, ctx): ImportResult {
    const { file } = ctx;
    const errors: ReadError[] = [];
    const calls: LoggedCall[] = [];
    for (const r of records) {
      const read = readLoggedCall(r.value, file, r.line, '', { statedSettings: false });
      calls.push(...read.calls);
      // Say whose output it is, so a half-logged SGLang line is not taken for a vLLM problem.
      errors.push(...read.errors.map((e) => ({ ...e, message: `SGLang OpenAI-compatible log: ${e.message}` })));
    }
    return { trajectories: trajectoriesFromCalls(ctx, calls, SGLANG_OPENAI_LOG), errors };
  },
};
