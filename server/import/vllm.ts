// vLLM request/response logs (docs/reference/vllm-api.md): JSONL, one line per call, `{"request", "response"}`
// plus whatever ids the logger added: chat and completions answers (with `return_token_ids`, or
// `"token_id:N"` logprob tokens), streamed calls logged as their chunks, and render +
// `/inference/v1/generate` pairs. The lines are read and grouped by the call-log module
// (call-log/read.ts, call-log/group.ts) that SGLang's logs, Agent Lightning's raw events and the
// gateway's capture share: explicit ids first, else prefix chaining (chain.ts).
import type { Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { isChunkList } from './call-log/chunks.ts';
import { readLoggedCall, type LoggedCall } from './call-log/read.ts';
import { trajectoriesFromCalls, type CallLogFormat } from './call-log/group.ts';

const VLLM_LOG: CallLogFormat = {
  format: 'vllm',
  noPromptIds:
    'no prompt_token_ids (requests sent without return_token_ids): the prompt is rendered from the messages and prefix checks cannot run',
  noGeneratedIds: 'no generated token ids (neither token_ids nor "token_id:N" logprob tokens): only the text is known',
};

export const vllmImporter: Importer = {
  format: 'vllm',
  description:
    'vLLM request/response logs: JSONL, one {"request", "response"} per call (chat, completions, render + /inference/v1/generate)',
  container: 'jsonl',
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (!('request' in record) && !('render' in record))
      return 'no "request" (a vLLM call log line is {"request": ..., "response": ...})';
    // A streamed call's response is its list of chunks.
    if (!(isObject(record.response) && Array.isArray(record.response.choices)) && !isChunkList(record.response))
      return 'no "response" object with "choices"';
    return true;
  },
  importRecords(records, ctx): ImportResult {
    const { file } = ctx;
    const out: ImportResult = { trajectories: [], errors: [] };
    const calls: LoggedCall[] = [];
    for (const r of records) {
      const { calls: c, errors } = readLoggedCall(r.value, file, r.line);
      calls.push(...c);
      out.errors.push(...errors);
    }
    out.trajectories.push(...trajectoriesFromCalls(ctx, calls, VLLM_LOG));
    return out;
  },
};
