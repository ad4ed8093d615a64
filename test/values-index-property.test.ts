// The index convention (docs/check-json.md, "Where `index` points") as a property, in every
// format that carries per-token values: generated multi-call rollouts (2 or 3 calls, an image or
// none, next prompts built the canonical way or re-rendered the legacy way), rendered with the real
// Qwen2.5-VL tokenizer and template, written as each format writes them, with a bad value planted
// in every call: a logprob that is NaN, "NaN", null, infinite or positive, a generated id of -100,
// past the vocabulary or fractional, a loss-mask value of 2, a logprob array one short. For each
// planted value there must be a finding of its kind and field whose `turn` is its call and whose
// `index` is the token's position in the stated stream (`canonical` for a call's own values,
// `sample` for a stored sample's), and that stream must hold the token there.
//
// Requests with n > 1 at the first call (vLLM, SGLang) hold the property for each sample.
//
// Where each token is expected is derived from the built conversation, not from the checks: a
// call's generation starts in the canonical stream where that call's prompt ends when the prompts
// are built the canonical way (buildTrajectory), and the stored sample is cut from the turns alone
// (trainingSample), so call k's generation starts there at its prompt's length too.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory, streamTokens } from '../server/pipeline.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import type { Finding, StreamName } from '../server/model/finding.ts';
import type { FormatName, Message, Trajectory } from '../server/model/trajectory.ts';
import { buildTrajectory, trainingSample, type Script } from './support/build.ts';
import { arealRecord, slimeRecord, verlRecord, type FullSample } from './fixtures/generate-trainers.ts';
import { pngDataUrl, trainingSampleFields, wire } from './fixtures/generate-prime-rl.ts';
import { textExportRow } from './support/export-row.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';
import { replayingOneCase } from './support/property-seed.ts';

const profile = loadProfile('qwen2.5-vl');
const VOCAB = profile.tokenizer.vocabSize;
const EOS = qwenNamed(profile.ids).eos;
const MODEL = 'Qwen/Qwen2.5-VL-7B-Instruct';
const PYTHON = '/usr/bin/python3';
const TORCH_WRITE = path.join(import.meta.dirname, 'support', 'torch_write.py');
const hasTorch = spawnSync(PYTHON, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0;
const RUNS = 25;

let dir = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-index-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const LOGPROB_FAULTS = ['lp-nan', 'lp-nan-string', 'lp-null', 'lp-positive', 'lp-inf'] as const;
const ID_FAULTS = ['id-ignore-index', 'id-past-vocab', 'id-fraction'] as const;
const CALL_FAULTS = [...LOGPROB_FAULTS, ...ID_FAULTS, 'lp-short'] as const;
type LogprobFault = (typeof LOGPROB_FAULTS)[number];
type IdFault = (typeof ID_FAULTS)[number];
type CallFault = (typeof CALL_FAULTS)[number];
/** How JSON writers (Python's json.dumps included) write each bad logprob. */
const RAW: Record<LogprobFault, string> = {
  'lp-nan': 'NaN',
  'lp-nan-string': '"NaN"',
  'lp-null': 'null',
  'lp-positive': '0.75',
  'lp-inf': 'Infinity',
};
const LOGPROB_VALUE: Record<LogprobFault, number | null> = {
  'lp-nan': Number.NaN,
  'lp-nan-string': Number.NaN,
  'lp-null': null,
  'lp-positive': 0.75,
  'lp-inf': Number.POSITIVE_INFINITY,
};
const BAD_ID: Record<IdFault, number> = { 'id-ignore-index': -100, 'id-past-vocab': VOCAB + 7, 'id-fraction': 151.5 };
const SAMPLE_FIELDS = ['logprobs', 'tokens', 'lossMask'] as const;
type SampleField = (typeof SAMPLE_FIELDS)[number];

const SYSTEM: Message = { role: 'system', content: 'You are a careful geometry tutor. Answer briefly.' };
const QUESTIONS = [
  'A right triangle has legs 3 and 4. How long is its hypotenuse?',
  'What is the area of a square with side 7?',
  'In the figure, which angle is the largest?',
];
const ANSWERS = [
  'The hypotenuse is',
  'By Pythagoras, the answer is',
  'I will compute it step by step: 6 * 8 / 2 =',
  'Looking at the figure, the value is',
];
const FOLLOW_UPS = ['Why?', 'Show the computation.', 'And the perimeter?'];
const IMAGES = [
  { width: 280, height: 210 },
  { width: 140, height: 140 },
];

const Case = fc.record({
  question: fc.constantFrom(...QUESTIONS),
  answers: fc.array(fc.tuple(fc.constantFrom(...ANSWERS), fc.nat(999)), { minLength: 2, maxLength: 3 }),
  followUps: fc.array(fc.constantFrom(...FOLLOW_UPS), { minLength: 2, maxLength: 2 }),
  image: fc.option(fc.constantFrom(...IMAGES), { nil: undefined }),
  /** The logged prompts re-rendered from decoded text (a duplicated <|im_end|> per turn), not extended. */
  legacy: fc.boolean(),
  callFaults: fc.array(fc.constantFrom(...CALL_FAULTS), { minLength: 3, maxLength: 3 }),
  /** Where in each call's generation (a fraction of it; the closing token is never planted on). */
  at: fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { minLength: 3, maxLength: 3 }),
  /** The sample's field each call's bad value goes to (one per field: each field reports its first). */
  sampleFields: fc.shuffledSubarray([...SAMPLE_FIELDS], { minLength: 3, maxLength: 3 }),
  sampleLogprob: fc.constantFrom(...LOGPROB_FAULTS),
  sampleId: fc.constantFrom(...ID_FAULTS),
  sampleShort: fc.boolean(),
  grouping: fc.constantFrom('keyed', 'chained'),
  vllmChat: fc.constantFrom('token-ids', 'token-strings'),
  agentLightning: fc.constantFrom('v0.2-rollout', 'completed-rollout', 'events'),
});
type Case = typeof Case extends fc.Arbitrary<infer T> ? T : never;

/** A planted value and where the checks must report it. */
interface Plant {
  kind: Finding['kind'];
  field?: string;
  stream: StreamName;
  turn: number;
  index: number;
  /** The token the stream must hold at `index`. */
  token: number;
}

interface Built {
  /** The conversation with every next prompt built the canonical way: where each token is expected. */
  canonical: Trajectory;
  /** The prompts as the logs hold them (canonical, or the legacy re-render). */
  logged: Trajectory;
  answers: string[];
  imageUrl?: string;
}

const imageUrls = new Map<string, string>();
async function imageUrl(size: { width: number; height: number }): Promise<string> {
  const key = `${size.width}x${size.height}`;
  let url = imageUrls.get(key);
  if (!url) imageUrls.set(key, (url = await pngDataUrl(size.width, size.height, 90)));
  return url;
}

async function build(c: Case): Promise<Built> {
  const url = c.image ? await imageUrl(c.image) : undefined;
  const first: Message = url
    ? {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url } },
          { type: 'text', text: c.question },
        ],
      }
    : { role: 'user', content: c.question };
  const answers = c.answers.map(([a, n]) => `${a} ${n}.`);
  const script: Script = {
    id: 'index-property',
    messages: [SYSTEM, first],
    images: c.image ? [c.image] : [],
    turns: answers.map((answer, k) => ({
      answer,
      ...(k + 1 < answers.length ? { observation: [{ role: 'user', content: c.followUps[k]! }] } : {}),
    })),
  };
  const canonical = await buildTrajectory(profile, script, 'canonical');
  const logged = c.legacy ? await buildTrajectory(profile, script, 'legacy') : canonical;
  return { canonical, logged, answers, ...(url ? { imageUrl: url } : {}) };
}

/** Where in call k's generation the value is planted: never its closing token. */
const position = (c: Case, k: number, length: number) => Math.floor(c.at[k]! * (length - 1));

// ---------------------------------------------------------------------------------------------
// Calls: vLLM, SGLang, Agent Lightning, native turns. Each call's own values, on `canonical`.

interface PlantedCall {
  promptIds: number[];
  generatedIds: number[];
  /** Numbers, or a marker string that the JSON text replaces by the raw value. */
  logprobs: (number | string)[];
  messages: Message[];
  answer: string;
  finishReason: string;
}

interface PlantedCalls {
  calls: PlantedCall[];
  plants: Plant[];
  /** JSON text of a record with the markers written as the raw values. */
  json: (record: unknown) => string;
  raws: Map<string, string>;
}

/**
 * Every call with its fault, as the logs would hold it: a bad generated id also stands in every
 * later prompt (the engine's next prompt holds the ids it generated), so the calls still chain.
 * `allowed` maps a fault to one the format can write.
 */
function plantCalls(
  c: Case,
  b: Built,
  allowed: (f: CallFault) => CallFault = (f) => f,
  /** Tells the markers of several samples apart. */
  tag = '',
): PlantedCalls {
  const raws = new Map<string, string>();
  const calls: PlantedCall[] = b.logged.turns.map((t, k) => ({
    promptIds: [...t.promptIds!],
    generatedIds: [...t.generatedIds!],
    logprobs: [...(t.generatedLogprobs as number[])],
    messages: t.messages!,
    answer: b.answers[k]!,
    finishReason: t.finishReason ?? 'stop',
  }));
  const plants: Plant[] = [];
  calls.forEach((call, k) => {
    const fault = allowed(c.callFaults[k]!);
    const gen = b.canonical.turns[k]!.generatedIds!;
    const start = b.canonical.turns[k]!.promptIds!.length;
    const j = position(c, k, gen.length);
    if (fault === 'lp-short') {
      call.logprobs.pop();
      plants.push({ kind: 'length_mismatch', stream: 'canonical', turn: k, index: start + gen.length - 1, token: EOS });
    } else if (fault.startsWith('id-')) {
      const bad = BAD_ID[fault as IdFault];
      const at = b.logged.turns[k]!.promptIds!.length + j;
      call.generatedIds[j] = bad;
      for (const later of calls.slice(k + 1)) {
        expect(later.promptIds[at], 'a later prompt holds the generated id').toBe(gen[j]);
        later.promptIds[at] = bad;
      }
      plants.push({
        kind: 'invalid_value',
        field: `turns.${k}.generatedIds`,
        stream: 'canonical',
        turn: k,
        index: start + j,
        token: bad,
      });
    } else {
      const marker = `__RAW_${tag}${k}__`;
      raws.set(marker, RAW[fault as LogprobFault]);
      call.logprobs[j] = marker;
      plants.push({
        kind: 'invalid_value',
        field: `turns.${k}.generatedLogprobs`,
        stream: 'canonical',
        turn: k,
        index: start + j,
        token: gen[j]!,
      });
    }
  });
  const json = (record: unknown) => withRaws(JSON.stringify(record), raws);
  return { calls, plants, json, raws };
}

/** JSON text with each marker string written as its raw value. */
function withRaws(text: string, raws: ReadonlyMap<string, string>): string {
  for (const [marker, raw] of raws) text = text.replaceAll(`"${marker}"`, raw);
  return text;
}

const piece = (id: number) => profile.tokenizer.decodeSync([id]);
const jsonl = (p: PlantedCalls, records: unknown[]) => `${records.map(p.json).join('\n')}\n`;

/** One chat completions call; `choices` are the samples of one prompt (`n` = their number). */
function vllmChatLine(c: Case, choices: readonly PlantedCall[], id: string, keyed: boolean) {
  const asStrings = c.vllmChat === 'token-strings';
  const d = choices[0]!;
  return {
    ...(keyed ? { trajectory_id: 'index-property' } : {}),
    request: {
      model: MODEL,
      messages: d.messages,
      logprobs: true,
      ...(choices.length > 1 ? { n: choices.length } : {}),
      ...(asStrings ? { return_tokens_as_token_ids: true } : { return_token_ids: true }),
    },
    response: {
      id,
      object: 'chat.completion',
      model: MODEL,
      choices: choices.map((x, index) => ({
        index,
        message: { role: 'assistant', content: x.answer, tool_calls: [] },
        logprobs: {
          content: x.logprobs.map((lp, i) => ({
            token: asStrings ? `token_id:${x.generatedIds[i]}` : piece(x.generatedIds[i]!),
            logprob: lp,
            top_logprobs: [],
          })),
        },
        finish_reason: x.finishReason,
        ...(asStrings ? {} : { token_ids: x.generatedIds }),
      })),
      usage: { prompt_tokens: d.promptIds.length, completion_tokens: d.generatedIds.length },
      ...(asStrings ? {} : { prompt_token_ids: d.promptIds }),
    },
  };
}

function vllmChat(c: Case, p: PlantedCalls): string {
  // Without prompt ids the calls cannot chain: they name their conversation.
  const keyed = c.grouping === 'keyed' || c.legacy || c.vllmChat === 'token-strings';
  return jsonl(
    p,
    p.calls.map((d, k) => vllmChatLine(c, [d], `chatcmpl-${k}`, keyed)),
  );
}

function vllmCompletions(c: Case, p: PlantedCalls): string {
  return jsonl(
    p,
    p.calls.map((d, k) => ({
      ...(c.grouping === 'keyed' || c.legacy ? { trajectory_id: 'index-property' } : {}),
      request: { model: MODEL, prompt: d.promptIds, logprobs: 1, return_token_ids: true },
      response: {
        id: `cmpl-${k}`,
        object: 'text_completion',
        model: MODEL,
        choices: [
          {
            index: 0,
            text: d.answer,
            logprobs: { tokens: d.generatedIds.map(piece), token_logprobs: d.logprobs },
            finish_reason: d.finishReason,
            prompt_token_ids: d.promptIds,
            token_ids: d.generatedIds,
          },
        ],
        usage: { prompt_tokens: d.promptIds.length, completion_tokens: d.generatedIds.length },
      },
    })),
  );
}

/** One /generate call; several `choices` (`sampling_params.n`) are a list of outputs for the one prompt. */
function sglangGenerateLine(b: Built, choices: readonly PlantedCall[], rid: string, keyed: boolean) {
  const d = choices[0]!;
  const outputs = choices.map((x) => ({
    text: x.answer,
    output_ids: x.generatedIds,
    meta_info: {
      id: rid,
      finish_reason: { type: 'stop', matched: EOS },
      prompt_tokens: x.promptIds.length,
      completion_tokens: x.generatedIds.length,
      output_token_logprobs: x.logprobs.map((lp, i) => [lp, x.generatedIds[i], null]),
    },
  }));
  return {
    request: {
      input_ids: d.promptIds,
      ...(b.imageUrl ? { image_data: [b.imageUrl] } : {}),
      sampling_params: { temperature: 1.0, max_new_tokens: 512, ...(choices.length > 1 ? { n: choices.length } : {}) },
      return_logprob: true,
      rid,
      ...(keyed ? { session_params: { id: 'index-property', rid: null, offset: null, replace: null } } : {}),
    },
    response: outputs.length > 1 ? outputs : outputs[0],
  };
}

function sglangGenerate(c: Case, b: Built, p: PlantedCalls): string {
  const keyed = c.grouping === 'keyed' || c.legacy;
  return jsonl(
    p,
    p.calls.map((d, k) => sglangGenerateLine(b, [d], `rid-${k}`, keyed)),
  );
}

function sglangOpenAi(c: Case, p: PlantedCalls): string {
  return jsonl(
    p,
    p.calls.map((d, k) => ({
      ...(c.grouping === 'keyed' || c.legacy ? { trajectory_id: 'index-property' } : {}),
      request: { model: MODEL, messages: d.messages, logprobs: true, return_token_ids: true },
      response: {
        id: `sgl-${k}`,
        object: 'chat.completion',
        model: MODEL,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: d.answer, reasoning_content: null, tool_calls: null },
            logprobs: {
              content: d.logprobs.map((lp, i) => ({ token: piece(d.generatedIds[i]!), logprob: lp, top_logprobs: [] })),
            },
            finish_reason: d.finishReason,
            matched_stop: EOS,
            token_ids: d.generatedIds,
            prompt_token_ids: d.promptIds,
          },
        ],
        usage: { prompt_tokens: d.promptIds.length, completion_tokens: d.generatedIds.length, reasoning_tokens: 0 },
      },
    })),
  );
}

function agentLightning(c: Case, b: Built, p: PlantedCalls): string {
  const urls = b.imageUrl ? [b.imageUrl] : undefined;
  switch (c.agentLightning) {
    case 'v0.2-rollout':
      // agentlightning/adapter/triplet.py: raw_content as unflattened gen_ai.prompt.* attributes.
      return `${p.json({
        rollout_id: 'index-property',
        final_reward: 1.0,
        triplets: p.calls.map((d) => ({
          prompt: {
            token_ids: d.promptIds,
            raw_content: Object.fromEntries(
              d.messages.map((m, i) => [
                String(i),
                { role: m.role, content: typeof m.content === 'string' ? m.content : JSON.stringify(m.content) },
              ]),
            ),
            ...(urls ? { image_urls: urls } : {}),
          },
          response: {
            token_ids: d.generatedIds,
            raw_content: { '0': { role: 'assistant', content: d.answer, finish_reason: d.finishReason } },
            logprobs: d.logprobs.map((lp, i) => ({ token: piece(d.generatedIds[i]!), logprob: lp })),
          },
          reward: null,
          metadata: { agent_name: 'tutor' },
        })),
      })}\n`;
    case 'completed-rollout':
      // agentlightning/verl/agl_rollout_manager.py CompletedRollout.
      return `${p.json({
        rollout_id: 'index-property',
        data_id: 'task-1',
        step: 2,
        sample_idx_in_step: 0,
        final_reward: 1.0,
        triplets: p.calls.map((d) => ({
          prompt: { token_ids: d.promptIds },
          response: { token_ids: d.generatedIds, log_probs: d.logprobs },
          reward: null,
          metadata: { server: { model: MODEL } },
          ...(urls ? { image_urls: urls } : {}),
        })),
        events: [],
        triplet_events: [],
        rollout_state: 'succeeded',
      })}\n`;
    case 'events':
      // GET /rollouts/{id}/events?format=triplet (agentlightning/server/routes/events.py).
      return jsonl(
        p,
        p.calls.map((d) => ({
          event_type: 'model_request',
          rollout_id: 'index-property',
          attempt_id: 'attempt-0',
          data: {
            prompt_token_ids: d.promptIds,
            response_token_ids: d.generatedIds,
            response_log_probs: d.logprobs,
            server: { model: MODEL },
          },
        })),
      );
  }
}

function native(b: Built, p: PlantedCalls): string {
  return `${p.json({
    id: 'index-property',
    source: { file: 'built', line: 1, format: 'native' },
    model: MODEL,
    turns: p.calls.map((d) => ({
      messages: d.messages,
      promptIds: d.promptIds,
      generatedIds: d.generatedIds,
      generatedLogprobs: d.logprobs,
      finishReason: d.finishReason,
    })),
    images: b.imageUrl ? [{ url: b.imageUrl }] : [],
  })}\n`;
}

/** Call formats: which faults each can write (the others become one it can). */
const CALL_FORMATS: {
  format: FormatName;
  file: string;
  write: (c: Case, b: Built, p: PlantedCalls) => string;
  allowed?: (c: Case) => (f: CallFault) => CallFault;
}[] = [
  {
    format: 'vllm',
    file: 'chat.jsonl',
    write: (c, _b, p) => vllmChat(c, p),
    // "token_id:N" strings hold only ids that are non-negative integers, and are the ids: one fewer
    // logprob entry is one fewer id.
    allowed: (c) => (f) =>
      c.vllmChat === 'token-strings' && (f === 'id-ignore-index' || f === 'id-fraction')
        ? 'id-past-vocab'
        : c.vllmChat === 'token-strings' && f === 'lp-short'
          ? 'lp-null'
          : f,
  },
  { format: 'vllm', file: 'completions.jsonl', write: (c, _b, p) => vllmCompletions(c, p) },
  { format: 'sglang', file: 'generate.jsonl', write: sglangGenerate },
  { format: 'sglang-openai', file: 'openai.jsonl', write: (c, _b, p) => sglangOpenAi(c, p) },
  { format: 'agent-lightning', file: 'agl.jsonl', write: agentLightning },
  { format: 'native', file: 'calls.rollscope.jsonl', write: (_c, b, p) => native(b, p) },
];

// ---------------------------------------------------------------------------------------------
// Stored samples: slime, verl, AReaL, prime-rl, slime train dumps, export rows. On `sample`.

interface PlantedSample {
  tokens: number[];
  /** Over the response (from `offset`). */
  mask: number[];
  /** Over the response; numbers or markers. */
  logprobs: (number | string)[];
  offset: number;
  grids: [number, number, number][];
  plants: Plant[];
  raws: Map<string, LogprobFault>;
}

/**
 * The sample cut from the turns, with one bad value per call, each in a field of its own (each
 * field reports its first bad value), and the logprobs one short when the case says so.
 * `allowed` maps a fault to one the format can write.
 */
function plantSample(
  c: Case,
  b: Built,
  allowed: { logprob?: (f: LogprobFault) => LogprobFault; id?: (f: IdFault) => IdFault } = {},
): PlantedSample {
  const s = trainingSample(b.canonical, profile);
  const offset = s.tokens.length - s.responseLength!;
  const out: PlantedSample = {
    tokens: [...s.tokens],
    mask: [...s.lossMask!],
    logprobs: [...s.logprobs!] as (number | string)[],
    offset,
    grids: s.imageGridThw ?? [],
    plants: [],
    raws: new Map(),
  };
  b.canonical.turns.forEach((t, k) => {
    const field: SampleField = c.sampleFields[k]!;
    const gen = t.generatedIds!;
    const index = t.promptIds!.length + position(c, k, gen.length);
    const plant = (f: string, token: number): Plant => ({
      kind: 'invalid_value',
      field: `sample.${f}`,
      stream: 'sample',
      turn: k,
      index,
      token,
    });
    expect(out.tokens[index], 'the sample holds the call’s generation after its prompt').toBe(
      gen[index - t.promptIds!.length],
    );
    if (field === 'logprobs') {
      const marker = `__RAW_${k}__`;
      out.raws.set(marker, (allowed.logprob ?? ((f) => f))(c.sampleLogprob));
      out.logprobs[index - offset] = marker;
      out.plants.push(plant('logprobs', out.tokens[index]!));
    } else if (field === 'tokens') {
      out.tokens[index] = BAD_ID[(allowed.id ?? ((f) => f))(c.sampleId)];
      out.plants.push(plant('tokens', out.tokens[index]!));
    } else {
      out.mask[index - offset] = 2;
      out.plants.push(plant('lossMask', out.tokens[index]!));
    }
  });
  if (c.sampleShort) {
    out.logprobs.pop();
    const last = out.tokens.length - 1;
    out.plants.push({
      kind: 'length_mismatch',
      stream: 'sample',
      turn: b.canonical.turns.length - 1,
      index: last,
      token: out.tokens[last]!,
    });
  }
  return out;
}

const sampleJson = (s: PlantedSample, record: unknown) => {
  let text = JSON.stringify(record);
  for (const [marker, fault] of s.raws) text = text.replaceAll(`"${marker}"`, RAW[fault]);
  return text;
};
const zeros = (n: number) => new Array<number>(n).fill(0);

/** The record builders of the trainer fixtures take a full-scope sample. */
function fullSample(b: Built, s: PlantedSample): FullSample {
  return {
    name: 'clean-multi',
    messages: b.canonical.turns[0]!.messages!,
    tokens: s.tokens,
    promptLength: s.offset,
    mask: [...zeros(s.offset), ...s.mask],
    logprobs: [...zeros(s.offset), ...(s.logprobs as number[])],
    versions: s.tokens.map(() => 1),
    grids: s.grids,
    responseText: '',
    numTurns: b.canonical.turns.length * 2,
  };
}

function slime(b: Built, s: PlantedSample): string {
  const rec = slimeRecord(fullSample(b, s), 0, b.imageUrl ? [b.imageUrl] : []);
  return `${sampleJson(s, { ...rec, tokens: s.tokens, loss_mask: s.mask, rollout_log_probs: s.logprobs })}\n`;
}

function verl(b: Built, s: PlantedSample): string {
  const rec = verlRecord(fullSample(b, s), b.imageUrl ? [b.imageUrl] : []);
  return `${sampleJson(s, {
    ...rec,
    prompt_ids: s.tokens.slice(0, s.offset),
    response_ids: s.tokens.slice(s.offset),
    response_mask: s.mask,
    response_logprobs: s.logprobs,
  })}\n`;
}

function areal(b: Built, s: PlantedSample): string {
  const rec = arealRecord(fullSample(b, s), 7, qwenNamed(profile.ids));
  return `[${sampleJson(s, {
    ...rec,
    input_ids: [s.tokens],
    loss_mask: [[...zeros(s.offset), ...s.mask]],
    logprobs: [[...zeros(s.offset), ...s.logprobs]],
    // A row of another length than input_ids is a fault only without an attention mask to cut it.
    attention_mask: undefined,
  })}]\n`;
}

function exportRow(s: PlantedSample): string {
  const row = textExportRow(
    { tokens: s.tokens, mask: [...zeros(s.offset), ...s.mask], logprobs: zeros(s.tokens.length) },
    s.offset,
  );
  return `${sampleJson(s, { ...row, rollout_log_probs: s.logprobs })}\n`;
}

/** prime-rl's TrainingSample (msgpack): arrays over every token; a null logprob is nil, "NaN" a float NaN. */
function primeRl(b: Built, s: PlantedSample): Uint8Array {
  const pads = s.tokens.map((t) => (t === qwenNamed(profile.ids).imagePad ? 1 : 0));
  const f = trainingSampleFields({
    name: 'index-property',
    tokens: s.tokens,
    mask: [...zeros(s.offset), ...s.mask],
    logprobs: zeros(s.tokens.length),
    mmTokenTypeIds: pads,
    grids: s.grids,
    imageUrls: b.imageUrl ? [b.imageUrl] : [],
    refs: [],
    envName: 'geometry',
    advantage: 0.5,
  });
  const logprob = (x: number | string) => {
    if (typeof x === 'number') return wire.floats([x]).subarray(1);
    const v = LOGPROB_VALUE[s.raws.get(x)!];
    return v === null ? wire.nil() : wire.floats([v]).subarray(1);
  };
  f[1] = wire.list(
    [...zeros(s.offset), ...s.mask].map((m) => (m === 0 || m === 1 ? wire.bools([m]) : wire.ints([m])).subarray(1)),
  );
  f[2] = wire.list([...zeros(s.offset), ...s.logprobs].map(logprob));
  return wire.struct(f);
}

/** slime's train dump (format_version 2) as torch.save writes it: tensors of ids, masks and logprobs. */
function slimeTrainObject(s: PlantedSample): unknown {
  const lps = s.logprobs.map((x) => (typeof x === 'number' ? x : LOGPROB_VALUE[s.raws.get(x)!]));
  return {
    format_version: 2,
    rollout_id: 0,
    rank: 0,
    samples: [
      {
        sample_index: 0,
        rollout_position: 0,
        data_parallel_rank: 0,
        tokens: { tensor: 'int64', values: s.tokens },
        loss_masks: { tensor: 'int64', values: s.mask },
        rollout_log_probs: { tensor: 'float32', values: lps },
        response_lengths: s.tokens.length - s.offset,
        total_lengths: s.tokens.length,
        rewards: 1.0,
      },
    ],
  };
}

/** torch tensors hold neither null nor a "NaN" string, and int64 ids are whole non-negative numbers. */
const TORCH_ALLOWED = {
  logprob: (f: LogprobFault): LogprobFault => (f === 'lp-null' || f === 'lp-nan-string' ? 'lp-nan' : f),
  id: (_f: IdFault): IdFault => 'id-past-vocab',
};
/** msgpack ints are whole numbers. */
const MSGPACK_ALLOWED = { id: (f: IdFault): IdFault => (f === 'id-fraction' ? 'id-past-vocab' : f) };

// ---------------------------------------------------------------------------------------------

async function verify(label: string, file: string, format: FormatName, calls: number, plants: Plant[]) {
  const loaded = await loadFile(file);
  expect(loaded.errors, `${label}: no read error`).toEqual([]);
  expect(loaded.format, label).toBe(format);
  expect(loaded.trajectories, `${label}: one trajectory`).toHaveLength(1);
  await verifyTrajectory(label, loaded.trajectories[0]!, calls, plants);
}

/** Every plant is a finding of its kind and field, at its call and its token, and the stated stream holds that token there. */
async function verifyTrajectory(label: string, t: Trajectory, calls: number, plants: Plant[]) {
  const checked = await analyzeTrajectory(t, {}, [dir]);
  expect(checked.trajectory.turns, `${label}: one turn per call`).toHaveLength(calls);
  const shown = checked.findings.map((f) => `${f.kind} ${f.field ?? ''} turn ${f.turn} ${f.stream}@${f.index}`);
  verified += plants.length;
  for (const p of plants) {
    const f = checked.findings.find(
      (x) =>
        x.kind === p.kind &&
        (p.field === undefined || x.field === p.field) &&
        x.turn === p.turn &&
        x.stream === p.stream &&
        x.index === p.index,
    );
    expect(
      f,
      `${label}: ${p.kind} ${p.field ?? ''} turn ${p.turn} ${p.stream}@${p.index} among ${shown.join('; ')}`,
    ).toBeDefined();
    const tokens = streamTokens(checked, f!.stream, f!.turn);
    expect(
      Object.is(tokens?.[f!.index], p.token),
      `${label}: the ${p.stream} stream holds the token at ${p.index}`,
    ).toBe(true);
  }
}

let serial = 0;
let verified = 0;
const caseDir = () => {
  const d = path.join(dir, `case-${serial++}`);
  fs.mkdirSync(d, { recursive: true });
  return d;
};

describe('every finding about a call’s response is at its token and its call, in every format', () => {
  it('calls: vLLM chat and completions, SGLang /generate and OpenAI-compatible, Agent Lightning, native', async () => {
    const before = verified;
    await fc.assert(
      fc.asyncProperty(Case, async (c) => {
        const b = await build(c);
        const d = caseDir();
        for (const target of CALL_FORMATS) {
          const p = plantCalls(c, b, target.allowed?.(c));
          const file = path.join(d, target.file);
          fs.writeFileSync(file, target.write(c, b, p));
          const label = `${target.format} ${target.file} (${JSON.stringify({ ...c, at: undefined })})`;
          await verify(label, file, target.format, b.canonical.turns.length, p.plants);
        }
      }),
      { numRuns: RUNS },
    );
    // Every run planted a value in each of its two or three calls, in every format.
    if (!replayingOneCase) expect(verified - before).toBeGreaterThanOrEqual(RUNS * CALL_FORMATS.length * 2);
  });

  it('n > 1 at the first call (vLLM chat, SGLang /generate): each sample a trajectory of the group, its values at its tokens and calls', async () => {
    const before = verified;
    const Fork = fc.record({
      c: Case,
      engine: fc.constantFrom('vllm', 'sglang'),
      // Which sample's later call is logged first, call by call.
      order: fc.array(fc.boolean(), { minLength: 2, maxLength: 2 }),
    });
    await fc.assert(
      fc.asyncProperty(Fork, async ({ c: drawn, engine, order }) => {
        const c: Case = { ...drawn, legacy: false, vllmChat: 'token-ids' };
        // Two samples of one prompt: the same question, other answers.
        const samples = [await build(c), await build({ ...c, answers: c.answers.map(([a, n]) => [a, n + 1]) })];
        const planted = samples.map((b, i) =>
          plantCalls(
            { ...c, callFaults: [...c.callFaults.slice(i), ...c.callFaults.slice(0, i)] },
            b,
            undefined,
            `s${i}`,
          ),
        );
        const keyed = c.grouping === 'keyed';
        const line = (choices: PlantedCall[], k: number, s: number) =>
          engine === 'vllm'
            ? vllmChatLine(c, choices, `chatcmpl-${k}-${s}`, keyed)
            : sglangGenerateLine(samples[0]!, choices, `rid-${k}-${s}`, keyed);
        const records = [line([planted[0]!.calls[0]!, planted[1]!.calls[0]!], 0, 0)];
        for (let k = 1; k < c.answers.length; k++) {
          const first = order[k - 1] ? 1 : 0;
          records.push(
            line([planted[first]!.calls[k]!], k, first),
            line([planted[1 - first]!.calls[k]!], k, 1 - first),
          );
        }
        const raws = new Map([...planted[0]!.raws, ...planted[1]!.raws]);
        const file = path.join(caseDir(), 'samples.jsonl');
        fs.writeFileSync(file, `${records.map((r) => withRaws(JSON.stringify(r), raws)).join('\n')}\n`);
        const loaded = await loadFile(file);
        const label = `${engine} n = 2 (${JSON.stringify({ ...c, at: undefined })})`;
        expect(loaded.errors, label).toEqual([]);
        const base = keyed ? 'index-property' : 'line 1';
        expect(
          loaded.trajectories.map((t) => t.id),
          label,
        ).toEqual([`${base}#0`, `${base}#1`]);
        const group = keyed ? 'index-property call 0' : engine === 'vllm' ? 'chatcmpl-0-0' : 'rid-0-0';
        for (const [i, t] of loaded.trajectories.entries()) {
          expect(t.group, label).toBe(group);
          await verifyTrajectory(`${label} sample ${i}`, t, c.answers.length, planted[i]!.plants);
        }
      }),
      { numRuns: RUNS },
    );
    if (!replayingOneCase) expect(verified - before).toBeGreaterThanOrEqual(RUNS * 2 * 2);
  });

  it('stored samples: slime, verl, AReaL, prime-rl, export rows', async () => {
    const before = verified;
    await fc.assert(
      fc.asyncProperty(Case, async (c) => {
        const b = await build(c);
        const d = caseDir();
        const targets: { format: FormatName; file: string; s: PlantedSample; bytes: string | Uint8Array }[] = [];
        const s = plantSample(c, b);
        targets.push({ format: 'slime', file: 'samples.jsonl', s, bytes: slime(b, s) });
        targets.push({ format: 'verl', file: 'agent_loop.jsonl', s, bytes: verl(b, s) });
        targets.push({ format: 'areal', file: 'trajectories.json', s, bytes: areal(b, s) });
        const m = plantSample(c, b, MSGPACK_ALLOWED);
        targets.push({ format: 'prime-rl', file: 'rank_0.bin', s: m, bytes: wire.list([primeRl(b, m)]) });
        if (!b.imageUrl) targets.push({ format: 'export', file: 'batch.jsonl', s, bytes: exportRow(s) });
        for (const t of targets) {
          const file = path.join(d, t.file);
          fs.writeFileSync(file, t.bytes);
          const label = `${t.format} ${t.file} (${JSON.stringify({ ...c, at: undefined })})`;
          await verify(label, file, t.format, b.canonical.turns.length, t.s.plants);
        }
      }),
      { numRuns: RUNS },
    );
    if (!replayingOneCase) expect(verified - before).toBeGreaterThanOrEqual(RUNS * 4 * 2);
  });

  it.skipIf(!hasTorch && !process.env.CI)('slime train dumps written by the real torch.save', async () => {
    // One Python process writes every dump (importing torch takes seconds), then each is checked.
    const cases = fc.sample(Case, { numRuns: RUNS });
    const written: { file: string; calls: number; plants: Plant[]; object: unknown }[] = [];
    for (const c of cases) {
      const b = await build(c);
      const s = plantSample(c, b, TORCH_ALLOWED);
      const file = path.join(caseDir(), 'train_data_0.pt');
      written.push({ file, calls: b.canonical.turns.length, plants: s.plants, object: slimeTrainObject(s) });
    }
    const items = written.map((w) => ({ path: w.file, object: w.object }));
    // Python's json reads NaN and Infinity; JSON.stringify would write null.
    const text = JSON.stringify(items, (_k, v) =>
      typeof v === 'number' && !Number.isFinite(v) ? `__${Number.isNaN(v) ? 'NaN' : 'Infinity'}__` : v,
    ).replace(/"__(NaN|Infinity)__"/g, '$1');
    const r = spawnSync(PYTHON, [TORCH_WRITE], { input: text, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const before = verified;
    for (const [i, w] of written.entries())
      await verify(`slime-train case ${i} (${JSON.stringify(cases[i])})`, w.file, 'slime-train', w.calls, w.plants);
    if (!replayingOneCase) expect(verified - before).toBeGreaterThanOrEqual(RUNS * 2);
  });
});
