// SGLang native `/generate` logs (docs/reference/sglang.md): JSONL, one call per line,
// `{"request": GenerateReqInput, "response": output}` plus whatever ids the logger added, or a bare
// output. Shapes (sgl-project/sglang):
// - request, `python/sglang/srt/managers/io_struct.py` `GenerateReqInput`: `input_ids` (or `text`),
//   `image_data`, `sampling_params`, `rid` (one per call), `return_logprob`,
//   `session_params {id, rid, offset, replace}` (SGLang's own session);
// - output, `python/sglang/srt/managers/tokenizer_manager.py` (`_handle_batch_output`: `out_dict =
//   {"text", "output_ids", "meta_info"}`; `add_logprob_to_meta_info`): `meta_info` holds `id`,
//   `prompt_tokens`, `completion_tokens`, `cached_tokens`, `finish_reason` as `{"type": "stop" |
//   "length" | "abort", "matched"?: id | str, "length"?: n}`, and with `return_logprob`
//   `output_token_logprobs` as `[logprob, token_id, text | null]` triples (`input_token_logprobs`
//   likewise for the prompt). With `n > 1` or a batch the response is a list of outputs.
// This is what slime (`slime/rollout/sglang_rollout.py`) and AReaL (`areal/engine/sglang_remote.py`)
// read. Calls are grouped like vLLM's (call-log/group.ts `trajectoriesFromCalls`: explicit ids, including
// `session_params.id`, else prefix chaining with ambiguities reported).
import { z } from 'zod';
import type { ImageRef, ReadError, TrajectoryInput } from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { zodErrors } from './read/validate.ts';
import { bytesUrl, LogprobValues, TokenIdValues } from './turns-from-mask.ts';
import { explicitId, markSamplesOfOneRequest, type LoggedCall } from './call-log/read.ts';
import { trajectoriesFromCalls, type CallLogFormat } from './call-log/group.ts';

type TurnInput = TrajectoryInput['turns'][number];

const FinishReason = z.union([z.object({ type: z.string() }).passthrough(), z.string(), z.null()]);
/** `[logprob, token_id, text]`: the logprob may be any value (a finding), the id read leniently too. */
const LogprobTriple = z.array(z.unknown()).min(2);
const MetaInfo = z
  .object({
    id: z.string().optional(),
    prompt_tokens: z.number().int().nonnegative().optional(),
    completion_tokens: z.number().int().nonnegative().optional(),
    finish_reason: FinishReason.optional(),
    output_token_logprobs: z.array(LogprobTriple).nullable().optional(),
  })
  .passthrough();
const Output = z
  .object({
    text: z.string().nullable().optional(),
    output_ids: TokenIdValues.nullable().optional(),
    meta_info: MetaInfo,
  })
  .passthrough();
type Output = z.infer<typeof Output>;
const Request = z
  .object({
    input_ids: z.unknown().optional(),
    text: z.unknown().optional(),
    image_data: z.unknown().optional(),
    model: z.string().optional(),
  })
  .passthrough();

const SGLANG_LOG: CallLogFormat = {
  format: 'sglang',
  noPromptIds:
    'the prompt was sent as text (no input_ids): SGLang tokenized it, so the prompt ids it saw are not in the log and prefix checks cannot run',
  noGeneratedIds: 'no generated token ids: only the text is known',
};

/** An SGLang output object: `meta_info` with any of its characteristic fields. */
function looksLikeOutput(x: unknown): boolean {
  if (!isObject(x) || !isObject(x.meta_info)) return false;
  const m: Record<string, unknown> = x.meta_info;
  return 'output_ids' in x || 'prompt_tokens' in m || 'finish_reason' in m || 'output_token_logprobs' in m;
}

function looksLikeRequest(x: unknown): boolean {
  return isObject(x) && ('input_ids' in x || 'text' in x) && ('sampling_params' in x || 'return_logprob' in x);
}

/** A flat list of token ids, or undefined (a batch `[[...], ...]` takes its `index`-th prompt). */
function idsOf(value: unknown, index: number): unknown[] | undefined {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  if (Array.isArray(value[0])) return Array.isArray(value[index]) ? (value[index] as unknown[]) : undefined;
  return value;
}

/**
 * One `image_data` item as SGLang loads it (`load_image` in python/sglang/srt/utils): an
 * `ImageData` dict's `url`; an http(s) URL, a `data:` URL, or a name ending in an image suffix
 * (a file) as it is; any other string is the image's bytes in base64 (slime's
 * `encode_image_for_rollout_engine` sends them so in some versions).
 */
function imageOf(v: unknown): ImageRef {
  const url = typeof v === 'string' ? v : isObject(v) && typeof v.url === 'string' ? v.url : undefined;
  if (url === undefined || url === '')
    return { unavailable: 'the log names the image but does not carry it as a URL, a file or base64 bytes' };
  if (/^https?:\/\//i.test(url) || url.startsWith('data:') || /(png|jpe?g|webp|gif)$/i.test(url)) return { url };
  return /^[A-Za-z0-9+/]+={0,2}$/.test(url) ? { url: bytesUrl(url) } : { url };
}

/**
 * The images of the `index`-th prompt: `image_data` is one item, a list (one request's images), or
 * for a batch (`input_ids` a list of prompts) one entry per prompt, each an item or a list
 * (io_struct.py `MultimodalDataInputFormat`).
 */
function imagesOf(value: unknown, index: number, batch: boolean): ImageRef[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return [imageOf(value)];
  if (!batch) return value.map(imageOf);
  const mine: unknown = value[index];
  return mine === undefined || mine === null ? [] : Array.isArray(mine) ? mine.map(imageOf) : [imageOf(mine)];
}

/** Read one line into calls (one per output), or errors that say it is SGLang output and what is missing. */
export function readSglangCall(
  value: unknown,
  file: string,
  line: number,
): { calls: LoggedCall[]; errors: ReadError[] } {
  const fail = (field: string | undefined, message: string) => ({
    calls: [],
    errors: [{ file, line, ...(field ? { field } : {}), message: `${field ?? 'record'}: ${message}` }],
  });
  if (!isObject(value)) return fail(undefined, 'not a JSON object');
  const bare = looksLikeOutput(value);
  const requestValue = bare ? undefined : value.request;
  const responseValue = bare ? value : value.response;
  const request = Request.safeParse(requestValue ?? {});
  if (!request.success) return { calls: [], errors: zodErrors(file, line, request.error, 'request') };
  if (responseValue === undefined || responseValue === null)
    return fail(
      'response',
      'missing: an SGLang /generate request without its output (the call failed, or only the request was logged)',
    );
  if (Array.isArray(responseValue) && responseValue.length === 0)
    return fail('response', 'an empty list: a batched SGLang /generate answer with no output');
  const outputs = Array.isArray(responseValue) ? responseValue : [responseValue];
  const at = (i: number) => (bare ? '' : 'response') + (Array.isArray(responseValue) ? `${bare ? '' : '.'}${i}` : '');
  const key = explicitId(value);
  const calls: LoggedCall[] = [];
  const errors: ReadError[] = [];
  const req = request.data;
  outputs.forEach((o, i) => {
    const field = at(i) || undefined;
    if (!isObject(o) || !isObject(o.meta_info)) {
      errors.push({
        file,
        line,
        ...(field ? { field } : {}),
        message: `${field ?? 'record'}: SGLang /generate output without "meta_info" (expected {"text", "output_ids", "meta_info": {"prompt_tokens", "finish_reason", "output_token_logprobs"}})`,
      });
      return;
    }
    const parsed = Output.safeParse(o);
    if (!parsed.success) {
      errors.push(...zodErrors(file, line, parsed.error, field ?? ''));
      return;
    }
    const out: Output = parsed.data;
    const triples = out.meta_info.output_token_logprobs ?? undefined;
    const generatedIds = out.output_ids ?? (triples ? TokenIdValues.parse(triples.map((t) => t[1])) : undefined);
    if (!generatedIds) {
      errors.push({
        file,
        line,
        ...(field ? { field } : {}),
        message: `${field ?? 'record'}: SGLang /generate output with no generated token ids: neither "output_ids" nor "meta_info.output_token_logprobs" (send "return_logprob": true, or log the whole output)`,
      });
      return;
    }
    const generatedLogprobs = triples ? LogprobValues.parse(triples.map((t) => t[0])) : undefined;
    const promptIds = idsOf(req.input_ids, i);
    const fr = out.meta_info.finish_reason;
    const finishReason = typeof fr === 'string' ? fr : fr?.type;
    const batch = (Array.isArray(req.input_ids) && Array.isArray(req.input_ids[0])) || Array.isArray(req.text);
    const images = imagesOf(req.image_data, i, batch);
    const turn: TurnInput = {
      ...(promptIds ? { promptIds: TokenIdValues.parse(promptIds) } : {}),
      generatedIds,
      ...(generatedLogprobs ? { generatedLogprobs } : {}),
      ...(typeof out.text === 'string' ? { generatedText: out.text } : {}),
      ...(finishReason ? { finishReason } : {}),
      ...(out.meta_info.prompt_tokens !== undefined ? { statedPromptTokens: out.meta_info.prompt_tokens } : {}),
    };
    const several = outputs.length > 1;
    calls.push({
      line,
      ...(key ? { key } : {}),
      ...(several ? { choice: i } : {}),
      turn,
      ...(req.model ? { model: req.model } : {}),
      ...(typeof value.reward === 'number' ? { reward: value.reward } : {}),
      ...(images.length > 0 ? { images } : {}),
    });
  });
  // `n > 1` gives one output per sample of the one prompt (a batch, one per prompt): the request
  // names them by its `rid` (io_struct.py GenerateReqInput; one per call).
  const rid: unknown = req.rid;
  markSamplesOfOneRequest(calls, typeof rid === 'string' && rid !== '' ? rid : `${file}:${line}`);
  return { calls, errors };
}

export const sglangImporter: Importer = {
  format: 'sglang',
  description:
    'SGLang /generate logs: JSONL, {"request": {"input_ids", ...}, "response": {"text", "output_ids", "meta_info"}} per call',
  container: 'jsonl',
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (looksLikeOutput(record)) return true;
    const r = record.response;
    if (looksLikeOutput(r) || (Array.isArray(r) && looksLikeOutput(r[0]))) return true;
    // SGLang-shaped but incomplete: read it so the errors can say what is missing.
    if (looksLikeRequest(record.request) && !(isObject(r) && 'choices' in r)) return true;
    if (isObject(r) && 'text' in r && 'meta_info' in r) return true;
    return 'no SGLang /generate output ({"text", "output_ids", "meta_info"})';
  },
  importRecords(records, ctx): ImportResult {
    const { file } = ctx;
    const out: ImportResult = { trajectories: [], errors: [] };
    const calls: LoggedCall[] = [];
    for (const r of records) {
      const { calls: c, errors } = readSglangCall(r.value, file, r.line);
      calls.push(...c);
      out.errors.push(...errors);
    }
    out.trajectories.push(...trajectoriesFromCalls(ctx, calls, SGLANG_LOG));
    return out;
  },
};
