// Agent Lightning (microsoft/agent-lightning) triplets and events (docs/reference/frameworks.md). Two generations:
// - v0.2.x: `Triplet{prompt: {token_ids, raw_content?, image_urls?}, response: {token_ids,
//   raw_content?, logprobs?}, reward?, metadata}` (agentlightning/adapter/triplet.py
//   `span_to_triplet`: `raw_content` is the unflattened `gen_ai.prompt.*` attributes, message
//   content possibly a JSON string; `logprobs` the parsed `logprobs.content`), one per line, as a
//   JSON array, or in a rollout object `{rollout_id, final_reward, triplets}`.
// - current: `GET /rollouts/{id}/events?format=triplet` returns Events whose `model_request` data
//   is trimmed to `{prompt_token_ids, response_token_ids, response_log_probs, server: {model,
//   version}}`, the last event kept per identical prompt (agentlightning/server/routes/events.py);
//   the rollout manager's `CompletedRollout{rollout_id, triplets, final_reward, events,
//   triplet_events, ...}` holds `Triplet{prompt: {token_ids}, response: {token_ids, log_probs},
//   reward, metadata, image_urls?}` (agentlightning/verl/agl_rollout_manager.py, read by
//   agentlightning/verl/rollout_adapter.py). Raw `model_request` events (`data.request`,
//   `data.response` = the vLLM response) are read like a vLLM log line.
// The calls of a rollout are aggregated with the strict prefix rule (chain.ts), as the
// `trajectory` aggregation level does, except that breaks are kept and reported.
import { z } from 'zod';
import type { ImageRef, Message, ReadError, TrajectoryInput } from '../model/trajectory.ts';
import { Message as MessageSchema } from '../model/trajectory.ts';
import type { FileContext, Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { zodErrors } from './read/validate.ts';
import { chainCalls, padIdsOf, uniqueIds, type Chain } from './chain.ts';
import { LogprobValues, TokenIdValues } from './turns-from-mask.ts';
import type { Finding } from '../model/finding.ts';
import { imagesOfTurns, readLoggedCall } from './call-log/read.ts';

type TurnInput = TrajectoryInput['turns'][number];

/** Ids and logprobs as written (-100, NaN, "NaN", null kept): bad values are findings at their index, not read errors. */
const TokenIdArray = TokenIdValues;
const AnyNumber = z.custom<number>((v) => typeof v === 'number', { message: 'expected a number' });
/** A logprob, or a vLLM logprob entry `{"token", "logprob"}` (v0.2 `logprobs`). */
const LogprobEntries = z
  .array(z.unknown())
  .transform((xs) => LogprobValues.parse(xs.map((x) => (isObject(x) ? (x.logprob ?? null) : x))));

const Triplet = z
  .object({
    prompt: z
      .object({
        token_ids: TokenIdArray,
        raw_content: z.unknown().optional(),
        image_urls: z.array(z.string()).nullable().optional(),
      })
      .passthrough(),
    response: z
      .object({
        token_ids: TokenIdArray,
        raw_content: z.unknown().optional(),
        logprobs: LogprobEntries.nullable().optional(),
        log_probs: LogprobValues.nullable().optional(),
      })
      .passthrough(),
    reward: AnyNumber.nullable().optional(),
    metadata: z.record(z.string(), z.unknown()).nullable().optional(),
    image_urls: z.array(z.string()).nullable().optional(),
  })
  .passthrough();
type Triplet = z.infer<typeof Triplet>;

const TrimmedRequest = z
  .object({
    prompt_token_ids: TokenIdArray,
    response_token_ids: TokenIdArray,
    response_log_probs: LogprobValues.nullable().optional(),
    server: z.object({ model: z.string().nullable().optional() }).passthrough().nullable().optional(),
  })
  .passthrough();

const REWARD_EVENTS = new Set(['reward', 'rollout_reward', 'final_reward']);

interface AglCall {
  line: number;
  /** Rollout the call belongs to (calls are only chained within one rollout). */
  rollout?: string;
  /** The attempt of the rollout that made the call (events' `attempt_id`): a retried rollout's attempts are episodes apart. */
  attempt?: string;
  /** The GRPO group of the rollout (`data_id`: the task all `rollout.n` rollouts of one sample share). */
  group?: string;
  /** The trainer step the rollout was made at (CompletedRollout `step`). */
  step?: number;
  turn: TurnInput;
  /** Image URLs of the call's prompt, history included (Agent Lightning's `image_urls`). */
  imageUrls?: string[];
  reward?: number;
  /** `final_reward` of the rollout object the call was read from (it outranks a reward found by rollout id). */
  rolloutReward?: number;
  model?: string;
  /** From a `model_request` event: deduplicated by prompt as the triplet endpoint does. */
  event: boolean;
}

interface Collected {
  calls: AglCall[];
  errors: ReadError[];
  /** Final reward per rollout ('' for calls outside any rollout). */
  finalRewards: Map<string, number>;
}

interface Where {
  file: string;
  line: number;
  /** Field path of the item inside its record ('' at the top). */
  within: string;
  rollout?: string;
  attempt?: string;
  group?: string;
  step?: number;
  /** `final_reward` of the enclosing rollout object. */
  rolloutReward?: number;
}

const join = (...parts: string[]) => parts.filter(Boolean).join('.');

/** `{"0": {...}, "1": {...}}` (unflattened OpenTelemetry attributes) or a list, as a list. */
function listOf(x: unknown): unknown[] | undefined {
  if (Array.isArray(x)) return x;
  if (!isObject(x)) return undefined;
  const keys = Object.keys(x).filter((k) => /^\d+$/.test(k));
  if (keys.length === 0) return undefined;
  return keys.sort((a, b) => Number(a) - Number(b)).map((k) => x[k]);
}

/** Prompt messages from `raw_content`; content lists that tracing serialised to JSON strings are parsed back (as triplet.py's `extract_prompt_image_urls` does). */
export function messagesOfRawContent(raw: unknown): Message[] | undefined {
  const entries = listOf(raw) ?? (isObject(raw) && typeof raw.role === 'string' ? [raw] : undefined);
  if (!entries) return undefined;
  const out: Message[] = [];
  for (const e of entries) {
    if (!isObject(e) || typeof e.role !== 'string') return undefined;
    let content: unknown = e.content;
    if (typeof content === 'string' && content.trimStart().startsWith('[')) {
      try {
        const parsed: unknown = JSON.parse(content);
        if (Array.isArray(parsed) && parsed.every((p) => isObject(p) && typeof p.type === 'string')) content = parsed;
      } catch {
        // Plain text that merely starts with "[".
      }
    } else if (isObject(content)) content = listOf(content) ?? content;
    const m = MessageSchema.safeParse({ ...e, content });
    if (!m.success) return undefined;
    out.push(m.data);
  }
  return out;
}

function completionOf(raw: unknown): { text?: string; finishReason?: string } {
  const first = (listOf(raw) ?? [raw])[0];
  if (!isObject(first)) return {};
  return {
    ...(typeof first.content === 'string' ? { text: first.content } : {}),
    ...(typeof first.finish_reason === 'string' ? { finishReason: first.finish_reason } : {}),
  };
}

function modelOf(...candidates: unknown[]): string | undefined {
  for (const c of candidates) {
    if (typeof c === 'string' && c !== '') return c;
    if (isObject(c) && typeof c.model === 'string' && c.model !== '') return c.model;
  }
  return undefined;
}

const idString = (v: unknown): string | undefined =>
  typeof v === 'string' && v !== '' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : undefined;

/**
 * The GRPO group a rollout (or a triplet) states: the `data_id` the trainer gives the `rollout.n`
 * rollouts of one sample (CompletedRollout `data_id`, agentlightning/verl/agl_rollout_manager.py;
 * the task metadata and input of the v0.2/v0.3 daemon, agentlightning/verl/daemon.py
 * `task_metadata = {"data_id", "is_train"}`, `original_sample["data_id"]`; the v1 server reads
 * `input.data_id` or `input.instance_id`, agentlightning/server/routes/rollouts.py `_data_id_of`),
 * or a `group_id` a logger wrote.
 */
function groupOf(value: Record<string, unknown>): string | undefined {
  const inner = (key: string) => (isObject(value[key]) ? (value[key] as Record<string, unknown>) : undefined);
  const task = inner('task');
  const places = [value, inner('metadata'), inner('input'), task, isObject(task?.metadata) ? task.metadata : undefined];
  for (const field of ['group_id', 'data_id'] as const)
    for (const place of places) {
      const id = idString(place?.[field]);
      if (id !== undefined) return id;
    }
  return idString(inner('input')?.instance_id);
}

function failedCall(data: Record<string, unknown>): boolean {
  // agl_rollout_manager.py skips `status == "error"` and `http_status >= 400`.
  return data.status === 'error' || (typeof data.http_status === 'number' && data.http_status >= 400);
}

function readTriplet(value: unknown, at: Where, out: Collected): void {
  if (isObject(value) && isObject(value.prompt) && (value.response === undefined || value.response === null)) {
    out.errors.push({
      file: at.file,
      line: at.line,
      field: join(at.within, 'response'),
      message: `${join(at.within, 'response')}: missing (a triplet needs the response token ids)`,
    });
    return;
  }
  const parsed = Triplet.safeParse(value);
  if (!parsed.success) {
    out.errors.push(...zodErrors(at.file, at.line, parsed.error, at.within));
    return;
  }
  const t: Triplet = parsed.data;
  const meta = t.metadata ?? {};
  const messages = messagesOfRawContent(t.prompt.raw_content);
  const completion = completionOf(t.response.raw_content);
  const logprobs = t.response.log_probs ?? t.response.logprobs ?? undefined;
  const finishReason =
    completion.finishReason ?? (typeof meta.finish_reason === 'string' ? meta.finish_reason : undefined);
  const imageUrls = t.image_urls ?? t.prompt.image_urls ?? undefined;
  const rollout =
    at.rollout ??
    (typeof t.rollout_id === 'string'
      ? t.rollout_id
      : typeof meta.rollout_id === 'string'
        ? meta.rollout_id
        : undefined);
  const model = modelOf(meta.request, meta.response, meta.server, meta.model);
  const group = at.group ?? groupOf(t);
  out.calls.push({
    line: at.line,
    ...(rollout !== undefined ? { rollout } : {}),
    ...(at.attempt !== undefined ? { attempt: at.attempt } : {}),
    ...(group !== undefined ? { group } : {}),
    ...(at.step !== undefined ? { step: at.step } : {}),
    turn: {
      ...(messages ? { messages } : {}),
      ...(t.prompt.token_ids.length > 0 ? { promptIds: t.prompt.token_ids } : {}),
      generatedIds: t.response.token_ids,
      ...(logprobs ? { generatedLogprobs: logprobs } : {}),
      ...(completion.text !== undefined ? { generatedText: completion.text } : {}),
      ...(finishReason ? { finishReason } : {}),
    },
    ...(imageUrls && imageUrls.length > 0 ? { imageUrls } : {}),
    ...(typeof t.reward === 'number' && finiteReward(t.reward, join(at.within, 'reward'), at, out) !== undefined
      ? { reward: t.reward }
      : {}),
    ...(at.rolloutReward !== undefined ? { rolloutReward: at.rolloutReward } : {}),
    ...(model ? { model } : {}),
    event: false,
  });
}

/** The rollout, attempt, group and step a call read at `at` belongs to. */
function ownership(at: Where): Pick<AglCall, 'rollout' | 'attempt' | 'group' | 'step'> {
  return {
    ...(at.rollout !== undefined ? { rollout: at.rollout } : {}),
    ...(at.attempt !== undefined ? { attempt: at.attempt } : {}),
    ...(at.group !== undefined ? { group: at.group } : {}),
    ...(at.step !== undefined ? { step: at.step } : {}),
  };
}

function readTrimmed(value: Record<string, unknown>, at: Where, event: boolean, out: Collected): void {
  if (failedCall(value)) return;
  const parsed = TrimmedRequest.safeParse(value);
  if (!parsed.success) {
    out.errors.push(...zodErrors(at.file, at.line, parsed.error, at.within));
    return;
  }
  const d = parsed.data;
  // A call that answered without token ids (no return_token_ids, or an abort) is trimmed to empty
  // lists, and the rollout manager drops it (agl_rollout_manager.py `_build_completed_rollout`:
  // `if not response_token_ids: continue`): no sample, so no turn to chain the rollout's calls through.
  if (d.response_token_ids.length === 0) {
    const field = join(at.within, 'response_token_ids');
    out.errors.push({
      file: at.file,
      line: at.line,
      field,
      message: `${field}: empty (the call returned no token ids: was return_token_ids set?); Agent Lightning trains no sample from it, so it is not loaded`,
    });
    return;
  }
  const model = modelOf(d.server);
  out.calls.push({
    line: at.line,
    ...ownership(at),
    ...(at.rolloutReward !== undefined ? { rolloutReward: at.rolloutReward } : {}),
    turn: {
      ...(d.prompt_token_ids.length > 0 ? { promptIds: d.prompt_token_ids } : {}),
      generatedIds: d.response_token_ids,
      ...(d.response_log_probs ? { generatedLogprobs: d.response_log_probs } : {}),
    },
    ...(model ? { model } : {}),
    event,
  });
}

function readEvent(value: Record<string, unknown>, at: Where, out: Collected): void {
  const rollout = typeof value.rollout_id === 'string' ? value.rollout_id : at.rollout;
  // Events are recorded per attempt (agentlightning/server/routes/events.py `record_event(rollout_id, attempt_id, ...)`).
  const attempt = idString(value.attempt_id) ?? at.attempt;
  const here: Where = {
    ...at,
    ...(rollout !== undefined ? { rollout } : {}),
    ...(attempt !== undefined ? { attempt } : {}),
  };
  const data = value.data;
  if (!isObject(data)) {
    out.errors.push({
      file: at.file,
      line: at.line,
      field: join(at.within, 'data'),
      message: `${join(at.within, 'data')}: an event needs a "data" object`,
    });
    return;
  }
  if (value.event_type === 'model_request') {
    if ('prompt_token_ids' in data || 'response_token_ids' in data)
      return readTrimmed(data, { ...here, within: join(at.within, 'data') }, true, out);
    if (failedCall(data)) return;
    const { calls, errors } = readLoggedCall(data, at.file, at.line, join(at.within, 'data'));
    out.errors.push(...errors);
    // Agent Lightning trains on the first choice only (events.py `_trim_model_request`).
    const first = calls[0];
    if (first) {
      const model = first.model ?? modelOf(data.model, data.server);
      out.calls.push({
        line: at.line,
        ...ownership(here),
        // Tools ride on the turn, as in vLLM logs: the chat template renders them into the system turn.
        turn: first.tools && first.tools.length > 0 ? { ...first.turn, tools: first.tools } : first.turn,
        ...(model ? { model } : {}),
        event: true,
      });
    }
    return;
  }
  if (typeof value.event_type === 'string' && REWARD_EVENTS.has(value.event_type)) {
    const key = typeof data.value === 'number' ? 'value' : typeof data.reward === 'number' ? 'reward' : undefined;
    const reward = key ? finiteReward(data[key] as number, join(at.within, 'data', key), at, out) : undefined;
    if (reward !== undefined) out.finalRewards.set(rollout ?? '', reward);
  }
  // Other event types are opaque pass-through (agentlightning/schemas.py `Event`).
}

/**
 * A rollout-wide reward applies to every trajectory of the rollout: a NaN or infinite one
 * would make all of them fail validation, including the valid records that share the
 * rollout id. It is reported on its own line instead and not applied.
 */
function finiteReward(value: number, field: string, at: Where, out: Collected): number | undefined {
  if (Number.isFinite(value)) return value;
  out.errors.push({ file: at.file, line: at.line, field, message: `${field}: ${value} is not a reward; not applied` });
  return undefined;
}

function readRollout(value: Record<string, unknown>, at: Where, out: Collected): void {
  const id =
    typeof value.rollout_id === 'string' || typeof value.rollout_id === 'number'
      ? String(value.rollout_id)
      : (at.rollout ?? `line ${at.line}${at.within ? ` ${at.within}` : ''}`);
  const finalReward =
    typeof value.final_reward === 'number'
      ? finiteReward(value.final_reward, join(at.within, 'final_reward'), at, out)
      : undefined;
  const group = groupOf(value) ?? at.group;
  const step = typeof value.step === 'number' && Number.isInteger(value.step) && value.step >= 0 ? value.step : at.step;
  // The calls carry their rollout's reward: keyed by rollout id only, another record reusing the id would replace it.
  const here: Where = {
    ...at,
    rollout: id,
    ...(finalReward !== undefined ? { rolloutReward: finalReward } : {}),
    ...(group !== undefined ? { group } : {}),
    ...(step !== undefined ? { step } : {}),
  };
  if (finalReward !== undefined) out.finalRewards.set(id, finalReward);
  if (Array.isArray(value.triplets) && value.triplets.length > 0) {
    const from = out.calls.length;
    value.triplets.forEach((t, i) => readTriplet(t, { ...here, within: join(at.within, 'triplets', String(i)) }, out));
    withRequestsOfEvents(out.calls.slice(from), value.events, here);
    return;
  }
  // No triplets (a rollout that produced none, or a dump without them): fall back to its events.
  const field = Array.isArray(value.triplet_events) && value.triplet_events.length > 0 ? 'triplet_events' : 'events';
  const events = value[field];
  // A rollout with nothing to read must not vanish without a word: every record gives a trajectory or an error.
  if (!Array.isArray(events) || events.length === 0) {
    out.errors.push({
      file: at.file,
      line: at.line,
      ...(at.within ? { field: at.within } : {}),
      message: `rollout ${id} holds no triplets and no events: nothing to inspect`,
    });
    return;
  }
  events.forEach((e, i) => readItem(e, { ...here, within: join(at.within, field, String(i)) }, out));
}

/**
 * The current generation's triplets keep token ids only (`_build_completed_rollout`:
 * `prompt={"token_ids"}`), while the rollout's raw `events` keep each call's request as the
 * gateway forwarded it (agentlightning/server/proxy.py `_capture_event`): messages with their
 * images, tools, `mm_processor_kwargs`. A triplet takes what its own call's event says (the event
 * whose prompt and response ids are the triplet's), so its images are checked and its prompt can be
 * re-rendered. Events that do not read are the triplets' business no more: they add nothing.
 */
function withRequestsOfEvents(triplets: AglCall[], events: unknown, at: Where): void {
  if (!Array.isArray(events) || triplets.every((c) => c.turn.messages)) return;
  const raw: Collected = { calls: [], errors: [], finalRewards: new Map() };
  events.forEach((e, i) => {
    if (isObject(e) && e.event_type === 'model_request' && isObject(e.data) && 'request' in e.data)
      readEvent(e, { ...at, within: join(at.within, 'events', String(i)) }, raw);
  });
  const key = (t: TurnInput) => `${(t.promptIds ?? []).join(',')}|${(t.generatedIds ?? []).join(',')}`;
  const byIds = new Map<string, TurnInput>();
  for (const c of raw.calls) if (c.turn.messages) byIds.set(key(c.turn), c.turn);
  for (const c of triplets) {
    const r = c.turn.messages ? undefined : byIds.get(key(c.turn));
    if (!r) continue;
    c.turn = {
      ...c.turn,
      messages: r.messages,
      ...(c.turn.generatedText === undefined && r.generatedText !== undefined
        ? { generatedText: r.generatedText }
        : {}),
      ...(c.turn.finishReason === undefined && r.finishReason ? { finishReason: r.finishReason } : {}),
      ...(r.tools ? { tools: r.tools } : {}),
      ...(r.processor ? { processor: r.processor } : {}),
      ...(r.statedPromptTokens !== undefined ? { statedPromptTokens: r.statedPromptTokens } : {}),
    };
  }
}

function readItem(value: unknown, at: Where, out: Collected): void {
  if (Array.isArray(value)) {
    // An empty list would load nothing and say nothing.
    if (value.length === 0) {
      out.errors.push({
        file: at.file,
        line: at.line,
        ...(at.within ? { field: at.within } : {}),
        message: `${at.within || 'record'}: an empty list (no triplet, event or rollout)`,
      });
      return;
    }
    // A JSON line holding a list: one rollout's triplets or events.
    const rollout = at.rollout ?? `line ${at.line}`;
    value.forEach((v, i) => readItem(v, { ...at, rollout, within: join(at.within, String(i)) }, out));
    return;
  }
  const field = at.within || undefined;
  if (!isObject(value)) {
    out.errors.push({
      file: at.file,
      line: at.line,
      ...(field ? { field } : {}),
      message: `${field ?? 'record'}: not a JSON object`,
    });
    return;
  }
  if ('triplets' in value) return readRollout(value, at, out);
  if (typeof value.event_type === 'string') return readEvent(value, at, out);
  if ('prompt_token_ids' in value || 'response_token_ids' in value) return readTrimmed(value, at, false, out);
  if ('prompt' in value) return readTriplet(value, at, out);
  out.errors.push({
    file: at.file,
    line: at.line,
    ...(field ? { field } : {}),
    message: `${field ?? 'record'}: not an Agent Lightning triplet ({"prompt", "response"}), event ({"event_type", "data"}) or rollout ({"rollout_id", "triplets"})`,
  });
}

/** The triplet endpoint keeps only the last `model_request` per identical prompt (events.py `_dedupe_model_requests_by_prompt_token_ids`). */
function dedupeEvents(calls: readonly AglCall[]): AglCall[] {
  const last = new Map<string, number>();
  calls.forEach((c, i) => {
    if (c.event) last.set((c.turn.promptIds ?? []).join(','), i);
  });
  return calls.filter((c, i) => !c.event || last.get((c.turn.promptIds ?? []).join(',')) === i);
}

/** Images in order of appearance: each call's URLs repeat the history's, so only the new tail of each later call counts. */
function imagesOfCalls(calls: readonly AglCall[]): ImageRef[] {
  if (!calls.some((c) => c.imageUrls)) return imagesOfTurns(calls.map((c) => c.turn));
  const images: ImageRef[] = [];
  let seen = 0;
  for (const c of calls) {
    if (!c.imageUrls) continue;
    images.push(...c.imageUrls.slice(seen).map((url) => ({ url })));
    seen = Math.max(seen, c.imageUrls.length);
  }
  return images;
}

/** Context tail kept for classifying a split (the check decodes it); longer tails are cut. */
const MAX_SPLIT_TAIL = 4096;

/**
 * `chain_split` on both sides of every place a rollout's calls stop extending each other: Agent
 * Lightning's `trajectory-strict` merge starts a new sample there (agentlightning/verl/daemon.py,
 * v0.2 `strict_startswith_with_log`, which logs it as a merge mismatch and classifies it as
 * template / retoken / others; server/analysis/sources.ts classifies it the same way with the
 * tokenizer). The later chain's finding points at the first token its prompt departs from the
 * context it broke from (the open chain sharing the longest prefix) and carries that context's
 * tail (`expected`), so the check can decode both sides.
 */
function splitFindings(calls: readonly AglCall[], chains: readonly Chain[], rollout: string): Finding[][] {
  const out: Finding[][] = chains.map(() => []);
  for (let k = 1; k < chains.length; k++) {
    const f = chains[k]!.calls[0]!;
    const prompt = calls[f]!.turn.promptIds ?? [];
    let best: { chain: number; call: number; shared: number; context: number[] } | undefined;
    for (let j = 0; j < chains.length; j++) {
      const before = chains[j]!.calls.filter((c) => c < f);
      const last = before[before.length - 1];
      if (j === k || last === undefined) continue;
      const context = [...(calls[last]!.turn.promptIds ?? []), ...(calls[last]!.turn.generatedIds ?? [])];
      let shared = 0;
      while (shared < prompt.length && shared < context.length && prompt[shared] === context[shared]) shared++;
      if (!best || shared > best.shared || (shared === best.shared && last > best.call))
        best = { chain: j, call: last, shared, context };
    }
    if (!best || prompt.length === 0) continue;
    const call = (i: number) => `call ${i + 1} (line ${calls[i]!.line})`;
    out[k]!.push({
      kind: 'chain_split',
      severity: 'warning',
      turn: 0,
      index: best.shared,
      stream: 'prompt',
      expected: best.context.slice(best.shared, best.shared + MAX_SPLIT_TAIL),
      message: `rollout ${rollout}: ${call(f)} does not extend ${call(best.call)} from token ${best.shared} on; Agent Lightning's trajectory-strict merge starts a new training sample here (a merge mismatch)`,
    });
    const position = chains[best.chain]!.calls.indexOf(best.call);
    out[best.chain]!.push({
      kind: 'chain_split',
      severity: 'warning',
      turn: position,
      index: -1,
      message: `rollout ${rollout} continues in ${call(f)}, whose prompt does not extend this conversation after turn ${position}: Agent Lightning trains the rest as a separate sample (a merge mismatch; see the rollout's next chain)`,
    });
  }
  return out;
}

/** How a rollout's trajectory relates to its attempts: the attempt, and the later one that retried it. */
interface AttemptOf {
  attempt?: string;
  retriedBy?: string;
}

function assemble(
  file: string,
  members: readonly AglCall[],
  breaks: readonly number[],
  rollout: string | undefined,
  finalReward: number | undefined,
  part: string,
  sourceFindings: readonly Finding[] = [],
  relatedCalls: readonly AglCall[] = [],
  attempt: AttemptOf = {},
): TrajectoryInput {
  const first = members[0]!;
  const group = members.find((c) => c.group !== undefined)?.group;
  const step = members.find((c) => c.step !== undefined)?.step;
  const turns = members.map((c) => c.turn);
  const lines = [...new Set(members.map((c) => c.line))];
  // Lines of the rollout's other chains its split findings name.
  const related = [...new Set(relatedCalls.map((c) => c.line))].filter((l) => !lines.includes(l)).sort((a, b) => a - b);
  const tripletReward = [...members].reverse().find((c) => c.reward !== undefined)?.reward;
  const reward = members.find((c) => c.rolloutReward !== undefined)?.rolloutReward ?? finalReward ?? tripletReward;
  const model = members.find((c) => c.model)?.model;
  const limitations: string[] = [];
  if (!turns.some((t) => t.messages))
    limitations.push('token ids only (no messages): the conversation cannot be re-rendered to compare against');
  if (turns.some((t) => !t.promptIds))
    limitations.push('a triplet has no prompt token ids (Agent Lightning did not record them): prefix checks skip it');
  // The trainer reads a rollout's last attempt only (events.py reads `rollout.status.last_attempt_id`):
  // an attempt that was retried is no sample of the rollout's group.
  if (attempt.retriedBy !== undefined)
    limitations.push(
      `attempt ${attempt.attempt} of rollout ${rollout} was retried (attempt ${attempt.retriedBy} came after it): Agent Lightning trains a rollout's last attempt, so this one is not counted in its group${group !== undefined ? ` ${group}` : ''}`,
    );
  const inGroup = group !== undefined && attempt.retriedBy === undefined;
  return {
    id: `${rollout ?? `line ${first.line}`}${part}`,
    source: { file, line: first.line, format: 'agent-lightning', ...(lines.length > 1 ? { lines } : {}) },
    ...(model ? { model } : {}),
    ...(inGroup ? { group } : {}),
    ...(step !== undefined ? { step } : {}),
    turns,
    images: imagesOfCalls(members),
    ...(reward !== undefined ? { reward } : {}),
    limitations,
    meta: {
      groupedBy: rollout !== undefined ? 'rollout, then strict prefix chain' : 'strict prefix chain',
      ...(rollout !== undefined ? { rollout } : {}),
      ...(attempt.attempt !== undefined ? { attempt: attempt.attempt } : {}),
      ...(breaks.length > 0 ? { attachedAfterBreak: breaks } : {}),
      ...(related.length > 0 ? { relatedLines: related } : {}),
    },
    ...(sourceFindings.length > 0 ? { sourceFindings: [...sourceFindings] } : {}),
  };
}

/** The trajectories of one attempt of a rollout: its calls chained by the strict prefix rule, each chain one. */
function trajectoriesOfAttempt(
  ctx: FileContext,
  rollout: string | undefined,
  calls: readonly AglCall[],
  finalReward: number | undefined,
  attempt: AttemptOf,
): { firstCall: AglCall; trajectory: TrajectoryInput }[] {
  const chains = chainCalls(
    calls.map((c) => ({
      promptIds: c.turn.promptIds ?? [],
      generatedIds: c.turn.generatedIds ?? [],
      messages: c.turn.messages,
      answerText: c.turn.generatedText,
    })),
    {
      padIds: padIdsOf(
        ctx,
        calls.map((c) => c.model),
      ),
    },
  );
  const splits = rollout !== undefined && chains.length > 1 ? splitFindings(calls, chains, rollout) : [];
  return chains.map((ch, k) => {
    const members = ch.calls.map((i) => calls[i]!);
    const part =
      (attempt.attempt !== undefined ? ` (attempt ${attempt.attempt})` : '') +
      (rollout !== undefined && chains.length > 1 ? ` (chain ${k + 1} of ${chains.length})` : '');
    const others = splits[k]?.length
      ? chains.filter((_, j) => j !== k).flatMap((o) => o.calls.map((i) => calls[i]!))
      : [];
    return {
      firstCall: members[0]!,
      trajectory: assemble(ctx.file, members, ch.breaks, rollout, finalReward, part, splits[k], others, attempt),
    };
  });
}

export const agentLightningImporter: Importer = {
  format: 'agent-lightning',
  description:
    'Agent Lightning triplets ({"prompt": {"token_ids"}, "response": {"token_ids"}}), rollouts with "triplets", and events?format=triplet',
  container: 'jsonl',
  sniff(record) {
    if (Array.isArray(record)) return record.length > 0 ? agentLightningImporter.sniff(record[0]) : 'an empty list';
    if (!isObject(record)) return 'not a JSON object';
    if ('triplets' in record && ('rollout_id' in record || 'final_reward' in record)) return true;
    if (typeof record.event_type === 'string' && isObject(record.data)) {
      return record.event_type === 'model_request' || REWARD_EVENTS.has(record.event_type)
        ? true
        : `event_type "${record.event_type}" is not a model_request or reward event`;
    }
    if (Array.isArray(record.prompt_token_ids) && Array.isArray(record.response_token_ids)) return true;
    if (
      isObject(record.prompt) &&
      'token_ids' in record.prompt &&
      isObject(record.response) &&
      'token_ids' in record.response
    )
      return true;
    return 'no triplet ({"prompt": {"token_ids"}, "response": {"token_ids"}}), event or rollout with "triplets"';
  },
  importRecords(records, ctx): ImportResult {
    const { file } = ctx;
    const out: Collected = { calls: [], errors: [], finalRewards: new Map() };
    // Items of a whole-file JSON array share line 1: name them by their index instead.
    const perLine = new Map<number, number>();
    for (const r of records) perLine.set(r.line, (perLine.get(r.line) ?? 0) + 1);
    const seenOnLine = new Map<number, number>();
    for (const r of records) {
      const index = seenOnLine.get(r.line) ?? 0;
      seenOnLine.set(r.line, index + 1);
      readItem(r.value, { file, line: r.line, within: (perLine.get(r.line) ?? 0) > 1 ? String(index) : '' }, out);
    }

    const byRollout = new Map<string | undefined, AglCall[]>();
    for (const c of out.calls) {
      const list = byRollout.get(c.rollout);
      if (list) list.push(c);
      else byRollout.set(c.rollout, [c]);
    }
    const order = new Map(out.calls.map((c, i) => [c, i] as const));
    const found: { first: number; trajectory: TrajectoryInput }[] = [];
    for (const [rollout, ofRollout] of byRollout) {
      // A retried rollout's attempts are episodes apart; the last one (its calls come last) is the one trained.
      const byAttempt = new Map<string | undefined, AglCall[]>();
      for (const c of ofRollout) {
        const list = byAttempt.get(c.attempt);
        if (list) list.push(c);
        else byAttempt.set(c.attempt, [c]);
      }
      const lastAttempt = ofRollout[ofRollout.length - 1]!.attempt;
      const finalReward = out.finalRewards.get(rollout ?? '');
      for (const [attempt, all] of byAttempt) {
        const of: AttemptOf =
          byAttempt.size > 1 ? { attempt, ...(attempt !== lastAttempt ? { retriedBy: lastAttempt } : {}) } : {};
        for (const trajectory of trajectoriesOfAttempt(ctx, rollout, dedupeEvents(all), finalReward, of))
          found.push({ first: order.get(trajectory.firstCall) ?? 0, trajectory: trajectory.trajectory });
      }
    }
    found.sort((a, b) => a.first - b.first);
    const unique = uniqueIds();
    return { trajectories: found.map((f) => ({ ...f.trajectory, id: unique(f.trajectory.id) })), errors: out.errors };
  },
};
