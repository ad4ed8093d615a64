// Synthetic RL runs of any size, in rollscope's native JSONL, for the benchmarks.
//
// Real where it matters: every trajectory is built by the demo's rollout builder
// (server/demo/build.ts) with the real tokenizer and chat template, images are real PNG files
// (the demo's geometry diagrams, resized with sharp) whose pad counts come from the image math,
// and each record carries a slime-layout training sample. GRPO-like: groups of G samples share
// one prompt (system + question + image).
//
// Fast enough for multi-GB runs: only `distinct` trajectories go through the tokenizer; the
// rest of the run varies them cheaply while keeping every record as valid as its base:
// - each group gets its own prompt by swapping a few question words for other question words;
// - each sample swaps a few answer words for other answer words.
// A swap replaces a token id by another everywhere it occurs (prompt ids, generated ids, the
// sample) and the word in the message text. It keeps the tokenization canonical because both
// words are single tokens of the form " word" (Qwen's pre-tokenizer makes ` ?\p{L}+` one chunk,
// so " word" followed by a non-letter is always that one token), and the question and answer
// vocabularies are disjoint from each other and from every fixed text (system prompt, tool
// results), so a swapped id never lands where the text was not swapped.
//
// `node bin/tsx.js bench/generate.ts --size 200MB [--out FILE] ...` (see USAGE below).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { z } from 'zod';
import type { Message, Trajectory } from '../server/model/trajectory.ts';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { buildTrajectory, trainingSample, type BuildMode, type Script, type ScriptTurn } from '../server/demo/build.ts';
import { DIAGRAMS, renderDiagram, type DiagramName } from '../server/demo/diagrams.ts';
import { DEMO_MODELS } from '../server/demo/scenarios.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

export const GenerateOptions = z.object({
  /** The JSONL file to write (its folder also gets `images/`). */
  out: z.string().default(path.join(os.tmpdir(), 'rollscope-bench', 'run.rollscope.jsonl')),
  /** Stop after this many trajectories... */
  trajectories: z.number().int().positive().optional(),
  /** ...or once the file holds at least this many bytes (whole groups). One of the two is needed. */
  targetBytes: z.number().int().positive().optional(),
  turns: z.number().int().positive().default(3),
  /** Generated tokens per turn (approximately: answers are drawn word by word). */
  tokensPerTurn: z.number().int().min(8).default(300),
  imagesPerTrajectory: z.number().int().nonnegative().default(2),
  /** Share of trajectories with a planted fault (an error-level finding). */
  faultyShare: z.number().min(0).max(1).default(0.1),
  /** GRPO group size: samples that share one prompt. */
  groupSize: z.number().int().positive().default(8),
  /** Trajectories built with the tokenizer; the rest vary them (rounded up to whole groups). */
  distinct: z.number().int().positive().default(256),
  profile: z.enum(['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl']).default('qwen2.5-vl'),
  /** Several model generations in one run, prompt by prompt in turn (overrides `profile`). */
  profiles: z.array(z.enum(['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl'])).optional(),
  /** rollscope's native JSONL, or slime `Sample.to_dict()` records (what a slime run dumps). */
  format: z.enum(['native', 'slime']).default('native'),
  /**
   * How samples after the distinct ones vary them: `swap` swaps a few words (each group its own
   * prompt); `repeat` repeats each distinct group as it is with fresh indices and group ids.
   */
  vary: z.enum(['swap', 'repeat']).default('swap'),
  /** Images as base64 `data:` URLs inside each record instead of files beside it. */
  inlineImages: z.boolean().default(false),
  /** Scale of the image sizes (1: 480–1024 px a side). */
  imageScale: z.number().positive().max(4).default(1),
  seed: z.number().int().default(1),
});
export type GenerateOptions = z.input<typeof GenerateOptions>;
type BuiltinName = z.infer<typeof GenerateOptions>['profile'];

export interface GeneratedRun {
  file: string;
  bytes: number;
  trajectories: number;
  groups: number;
  /** Trajectories with a planted fault, by fault kind. */
  faulty: number;
  faults: Record<string, number>;
  /** Sum of the training-sample lengths (the canonical stream of every trajectory). */
  sampleTokens: number;
  /** Trajectories built with the tokenizer. */
  distinct: number;
  buildSeconds: number;
  writeSeconds: number;
}

const FAULTS = [
  'legacy-rerender',
  'drop-newline-after-eos',
  'shift-loss-mask',
  'nan-logprob',
  'drop-first-logprob',
] as const;
type FaultKind = (typeof FAULTS)[number];
/** Faults that need a second turn (they break the prefix between turns). */
const MULTI_TURN_FAULTS: readonly FaultKind[] = ['legacy-rerender', 'drop-newline-after-eos'];
/** Faults a slime record shows (it keeps the trainer's sample, not the engine's per-turn prompts). */
const SAMPLE_FAULTS: readonly FaultKind[] = ['legacy-rerender', 'shift-loss-mask', 'nan-logprob', 'drop-first-logprob'];
const MODEL_NAMES = { ...DEMO_MODELS, 'qwen2-vl': 'Qwen/Qwen2-VL-7B-Instruct' } as const;

const SYSTEM =
  'You are a geometry tutor. Tools: calculator(expression) evaluates arithmetic; zoom(box) returns the region ' +
  '[left, top, right, bottom] of the figure, enlarged. Call a tool with <tool_call>{"name": ..., "arguments": ...}</tool_call>. ' +
  'Finish with "Answer: <value>".';
const TOOL_TEXT = (v: string) => `Result: ${v}`;
const ZOOM_TEXT = 'Region enlarged.';
const IMAGE_SIZES: readonly (readonly [number, number])[] = [
  [640, 480],
  [800, 600],
  [512, 512],
  [1024, 768],
  [480, 640],
  [896, 672],
];
/** The stand-in NaN logprob: a finite double that JSON.stringify prints as this exact text, turned into `NaN` on write. */
const NAN_STAND_IN = -1.2345678e300;
const NAN_STAND_IN_TEXT = JSON.stringify(NAN_STAND_IN);

/** mulberry32: small, fast, reproducible. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
/** Zipf-like draw (P(rank k) ∝ 1/k): word frequencies as in real text. */
const pickZipf = <T>(r: () => number, xs: readonly T[]): T =>
  xs[Math.min(xs.length - 1, Math.floor(Math.exp(r() * Math.log(xs.length + 1))) - 1)]!;

interface Vocab {
  /** word → its single token id (the token is " word"). */
  id: Map<string, number>;
  question: string[];
  answer: string[];
}

/**
 * Lowercase words that are one token with their leading space, split into two disjoint lists and
 * kept away from the fixed texts, so a swap never touches a token the text does not show.
 */
async function swappableVocab(profile: ModelProfile): Promise<Vocab> {
  const tok = profile.tokenizer;
  const fixed = new Set(`${SYSTEM} ${TOOL_TEXT('')} ${ZOOM_TEXT}`.toLowerCase().match(/[a-z]+/g) ?? []);
  const candidates: string[] = [];
  for (let id = 0; id < tok.vocabSize; id++) {
    if (tok.isAdded(id)) continue;
    const bytes = tok.pieceBytes(id);
    if (bytes.length < 5 || bytes.length > 11 || bytes[0] !== 0x20) continue;
    let letters = true;
    for (let i = 1; i < bytes.length; i++) if (bytes[i]! < 0x61 || bytes[i]! > 0x7a) letters = false;
    if (!letters) continue;
    const word = String.fromCharCode(...bytes.subarray(1));
    if (!fixed.has(word)) candidates.push(word);
  }
  // Keep only words the tokenizer really encodes as that one token on their own.
  const encoded = await tok.encodeBatch(candidates.map((w) => ` ${w}`));
  const id = new Map<string, number>();
  candidates.forEach((w, i) => {
    const ids = encoded[i]!;
    if (ids.length === 1) id.set(w, ids[0]!);
  });
  // By id: byte-level BPE ranks frequent words first, so a Zipf draw over this order reads like text
  // (and exercises the tokenizer's word cache as real text does).
  const words = [...id.keys()].sort((a, b) => id.get(a)! - id.get(b)!);
  return { id, question: words.filter((_, i) => i % 2 === 0), answer: words.filter((_, i) => i % 2 === 1) };
}

interface ImageFile {
  url: string;
  width: number;
  height: number;
}

/** Real PNGs: the demo's diagrams resized to the sizes runs use; written beside the run, or inlined. */
async function imagePool(dir: string, inline: boolean, scale: number): Promise<ImageFile[]> {
  const names = Object.keys(DIAGRAMS) as DiagramName[];
  const out: ImageFile[] = [];
  if (!inline) fs.mkdirSync(path.join(dir, 'images'), { recursive: true });
  for (const [i, name] of names.entries()) {
    const png = await renderDiagram(DIAGRAMS[name]);
    for (const [w0, h0] of [IMAGE_SIZES[i % IMAGE_SIZES.length]!, IMAGE_SIZES[(i + 3) % IMAGE_SIZES.length]!]) {
      const [w, h] = [Math.round(w0 * scale), Math.round(h0 * scale)];
      const bytes = await sharp(png).resize(w, h, { fit: 'fill' }).png({ compressionLevel: 9 }).toBuffer();
      const rel = `images/${name}-${w}x${h}.png`;
      if (!inline) fs.writeFileSync(path.join(dir, rel), bytes);
      out.push({ url: inline ? `data:image/png;base64,${bytes.toString('base64')}` : rel, width: w, height: h });
    }
  }
  return out;
}

function words(r: () => number, list: readonly string[], n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(pickZipf(r, list));
  return out.join(' ');
}

/** Sentences of answer words with punctuation, about `tokens` tokens long (each word is one token). */
function answerText(r: () => number, vocab: Vocab, tokens: number): string {
  const parts: string[] = [];
  let left = tokens;
  while (left > 0) {
    const n = Math.max(1, Math.min(left - 1, 6 + Math.floor(r() * 10)));
    parts.push(`So ${words(r, vocab.answer, n)}.`);
    left -= n + 2;
  }
  return parts.join(' ');
}

interface Base {
  trajectory: Trajectory;
  fault?: FaultKind;
  /** Question words / answer words present in this trajectory's texts (candidates for swaps). */
  questionWords: string[];
  answerWords: string[];
}

function presentWords(text: string, list: ReadonlySet<string>): string[] {
  return [...new Set((text.match(/ [a-z]+(?![a-z])/g) ?? []).map((w) => w.slice(1)).filter((w) => list.has(w)))];
}

async function buildBase(
  profile: ModelProfile,
  vocab: Vocab,
  o: z.infer<typeof GenerateOptions>,
  prompt: { question: string; images: ImageFile[] },
  id: string,
  r: () => number,
  fault: FaultKind | undefined,
  profileName: BuiltinName,
): Promise<Base> {
  const [first, ...rest] = prompt.images;
  // Images the tools return, one per observation while they last; the others go with the question.
  const inObservations = rest.slice(0, Math.max(0, o.turns - 1));
  const inPrompt = [...(first ? [first] : []), ...rest.slice(inObservations.length)];
  const messages: Message[] = [
    { role: 'system', content: SYSTEM },
    {
      role: 'user',
      content: [...inPrompt.map((img) => ({ type: 'image', image: img.url })), { type: 'text', text: prompt.question }],
    },
  ];
  const turns: ScriptTurn[] = [];
  for (let k = 0; k < o.turns; k++) {
    const last = k === o.turns - 1;
    const body = answerText(r, vocab, Math.max(1, o.tokensPerTurn - (last ? 4 : 30)));
    if (last) {
      turns.push({ answer: `${body}\nAnswer: ${Math.floor(r() * 100)}` });
      continue;
    }
    const zoom = inObservations[k];
    const a = 2 + Math.floor(r() * 50);
    const b = 2 + Math.floor(r() * 50);
    const call = zoom
      ? `<tool_call>\n{"name": "zoom", "arguments": {"box": [0, 0, ${a * 4}, ${b * 4}]}}\n</tool_call>`
      : `<tool_call>\n{"name": "calculator", "arguments": {"expression": "${a} * ${b}"}}\n</tool_call>`;
    const observation: Message[] = zoom
      ? [
          {
            role: 'tool',
            content: [
              { type: 'image', image: zoom.url },
              { type: 'text', text: ZOOM_TEXT },
            ],
          },
        ]
      : [{ role: 'tool', content: TOOL_TEXT(String(a * b)) }];
    turns.push({ answer: `${body}\n${call}`, observation });
  }
  const script: Script = {
    id,
    messages,
    images: [...inPrompt, ...inObservations].map(({ url, width, height }) => ({ url, width, height })),
    turns,
    logprobSeed: Math.floor(r() * 2 ** 31),
  };
  const mode: BuildMode = fault === 'legacy-rerender' ? 'legacy' : 'canonical';
  let traj = await buildTrajectory(profile, script, mode);
  let sample = trainingSample(traj, profile);
  const { eos, newline } = qwenNamed(profile.ids);
  switch (fault) {
    case 'drop-newline-after-eos': {
      // The observation appended right after `<|im_end|>`, without the template's newline.
      const prev = traj.turns[0]!;
      const at = prev.promptIds!.length + prev.generatedIds!.length;
      const turnsOut = traj.turns.map((t, k) => {
        if (k === 0) return t;
        const p = t.promptIds!;
        if (p[at - 1] !== eos || p[at] !== newline) throw new Error(`${id}: no <|im_end|>\\n at token ${at}`);
        return { ...t, promptIds: [...p.slice(0, at), ...p.slice(at + 1)] };
      });
      // The sample stays canonical (built before the fault), as in the demo run: the engine's prompts broke, not the trainer's row.
      traj = { ...traj, turns: turnsOut };
      break;
    }
    case 'shift-loss-mask':
      sample = { ...sample, lossMask: [0, ...sample.lossMask!.slice(0, -1)] };
      break;
    case 'nan-logprob': {
      const lps = sample.logprobs!.slice();
      const at = sample.lossMask!.indexOf(1) + 3;
      lps[at] = NAN_STAND_IN;
      sample = { ...sample, logprobs: lps };
      break;
    }
    case 'drop-first-logprob':
      sample = { ...sample, logprobs: sample.logprobs!.slice(1) };
      break;
    default:
      break;
  }
  const text = JSON.stringify(traj.turns.at(-1)!.messages ?? []);
  const qSet = new Set(vocab.question);
  const aSet = new Set(vocab.answer);
  return {
    trajectory: { ...traj, sample, model: MODEL_NAMES[profileName] },
    fault,
    questionWords: presentWords(prompt.question, qSet),
    answerWords: presentWords(text, aSet),
  };
}

/** Replace ids and words consistently (see the header comment for why this keeps records valid). */
function applySwaps(t: Trajectory, swaps: ReadonlyMap<string, string>, vocab: Vocab): Trajectory {
  if (swaps.size === 0) return t;
  const ids = new Map<number, number>();
  for (const [from, to] of swaps) ids.set(vocab.id.get(from)!, vocab.id.get(to)!);
  const mapIds = (xs: number[] | undefined): number[] | undefined => {
    if (!xs) return xs;
    const out = xs.slice();
    for (let i = 0; i < out.length; i++) {
      const to = ids.get(out[i]!);
      if (to !== undefined) out[i] = to;
    }
    return out;
  };
  const re = new RegExp(` (${[...swaps.keys()].join('|')})(?![a-zA-Z])`, 'g');
  const mapText = (s: string) => s.replace(re, (_m, w: string) => ` ${swaps.get(w)}`);
  const mapMessage = (m: Message): Message => {
    if (typeof m.content === 'string') return { ...m, content: mapText(m.content) };
    if (Array.isArray(m.content))
      return {
        ...m,
        content: m.content.map((p) =>
          typeof p === 'string' ? mapText(p) : typeof p.text === 'string' ? { ...p, text: mapText(p.text) } : p,
        ),
      };
    return m;
  };
  // Turns share their history messages: map each distinct message object once.
  const messageMemo = new Map<Message, Message>();
  const mapMessages = (ms: Message[] | undefined) =>
    ms?.map((m) => {
      let v = messageMemo.get(m);
      if (!v) {
        v = mapMessage(m);
        messageMemo.set(m, v);
      }
      return v;
    });
  return {
    ...t,
    turns: t.turns.map((turn) => ({
      ...turn,
      messages: mapMessages(turn.messages),
      promptIds: mapIds(turn.promptIds),
      generatedIds: mapIds(turn.generatedIds),
    })),
    sample: t.sample && { ...t.sample, tokens: mapIds(t.sample.tokens)! },
  };
}

function randomSwaps(
  r: () => number,
  present: readonly string[],
  list: readonly string[],
  n: number,
  into: Map<string, string>,
): void {
  for (let i = 0; i < n && present.length > 0; i++) {
    const from = pick(r, present);
    if (!into.has(from)) into.set(from, pickZipf(r, list));
  }
}

/**
 * The standard big run: slime records with images inline as data: URLs, three Qwen-VL generations
 * prompt by prompt, a quarter of the samples faulty, and the distinct GRPO groups repeated with
 * fresh indices and group ids (as a run that revisits its prompt set each step).
 */
export const STANDARD_RUN = {
  format: 'slime',
  inlineImages: true,
  profiles: ['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl'],
  vary: 'repeat',
  distinct: 120,
  imageScale: 0.4,
  faultyShare: 0.25,
} as const satisfies GenerateOptions;

/** The trajectory as slime's `Sample.to_dict()`: the trainer's sample, the prompt messages, images inline or by path. */
function slimeRecord(t: Trajectory, groupIndex: number, index: number): Record<string, unknown> {
  const s = t.sample!;
  return {
    group_index: groupIndex,
    index,
    prompt: t.turns[0]!.messages,
    tokens: s.tokens,
    response_length: s.responseLength,
    loss_mask: s.lossMask,
    rollout_log_probs: s.logprobs,
    multimodal_inputs: { images: t.images.map((img) => img.url) },
    multimodal_train_inputs: { image_grid_thw: s.imageGridThw },
    reward: t.reward,
    status: 'completed',
    metadata: { model: t.model, ...t.meta },
  };
}

/** Write a run; resolves when the file is complete. */
export async function generateRun(
  input: GenerateOptions,
  onProgress?: (written: { trajectories: number; bytes: number }) => void,
): Promise<GeneratedRun> {
  const o = GenerateOptions.parse(input);
  if (o.trajectories === undefined && o.targetBytes === undefined)
    throw new Error('generateRun needs trajectories or targetBytes');
  const t0 = performance.now();
  const out = path.resolve(o.out);
  const dir = path.dirname(out);
  fs.mkdirSync(dir, { recursive: true });
  const profileNames = o.profiles?.length ? o.profiles : [o.profile];
  const profiles = profileNames.map((n) => loadProfile(n));
  // The three generations share one BPE vocabulary: the swappable words are the same ids in each.
  const vocab = await swappableVocab(profiles[0]!);
  const images = await imagePool(dir, o.inlineImages, o.imageScale);
  const r = rng(o.seed);
  const prompts = Math.max(1, Math.ceil(Math.min(o.distinct, o.trajectories ?? Infinity) / o.groupSize));
  const canFault = (f: FaultKind) =>
    (o.turns > 1 || !MULTI_TURN_FAULTS.includes(f)) && (o.format !== 'slime' || SAMPLE_FAULTS.includes(f));
  const faultKinds = FAULTS.filter(canFault);
  const bases: Base[][] = [];
  let planted = 0;
  let built = 0;
  for (let p = 0; p < prompts; p++) {
    const promptImages = Array.from({ length: o.imagesPerTrajectory }, (_, i) => images[(p * 3 + i) % images.length]!);
    const question = `In the figure, ${words(r, vocab.question, 12)}. Find x.`;
    const group: Base[] = [];
    for (let j = 0; j < o.groupSize; j++) {
      // Faults spread evenly: the i-th base is faulty when the running share falls below the target.
      const fault =
        planted < Math.round((built + 1) * o.faultyShare) ? faultKinds[planted % faultKinds.length] : undefined;
      if (fault) planted++;
      built++;
      const k = p % profiles.length;
      group.push(
        await buildBase(
          profiles[k]!,
          vocab,
          o,
          { question, images: promptImages },
          `base-${p}-${j}`,
          r,
          fault,
          profileNames[k]!,
        ),
      );
    }
    bases.push(group);
  }
  const buildSeconds = (performance.now() - t0) / 1000;

  const t1 = performance.now();
  const stream = fs.createWriteStream(out);
  const write = (s: string) =>
    stream.write(s) ? Promise.resolve() : new Promise<void>((res) => stream.once('drain', () => res()));
  const file = path.basename(out);
  const faults: Record<string, number> = {};
  let bytes = 0;
  let n = 0;
  let line = 1;
  let groups = 0;
  let sampleTokens = 0;
  let buffer = '';
  const done = () => (o.trajectories !== undefined ? n >= o.trajectories : bytes + buffer.length >= o.targetBytes!);
  outer: for (let step = 0; ; step++) {
    for (let p = 0; p < prompts; p++) {
      if (done()) break outer;
      const group = bases[p]!;
      const groupSwaps = new Map<string, string>();
      if (step > 0 && o.vary === 'swap') randomSwaps(r, group[0]!.questionWords, vocab.question, 3, groupSwaps);
      groups++;
      for (let j = 0; j < group.length; j++) {
        if (o.trajectories !== undefined && n >= o.trajectories) break;
        const base = group[j]!;
        const swaps = new Map(groupSwaps);
        if (step > 0 && o.vary === 'swap') randomSwaps(r, base.answerWords, vocab.answer, 4, swaps);
        const t = applySwaps(base.trajectory, swaps, vocab);
        const record: Trajectory = {
          ...t,
          id: `step${step}-p${p}-s${j}`,
          source: { file, line, format: 'native' },
          group: `step-${step}/prompt-${p}`,
          reward: r() < 0.5 ? 1 : 0,
          status: 'completed',
          meta: { step, prompt: p, ...(base.fault ? { plantedFault: base.fault } : {}) },
        };
        let json = JSON.stringify(o.format === 'slime' ? slimeRecord(record, groups - 1, n) : record);
        if (base.fault === 'nan-logprob') json = json.replace(NAN_STAND_IN_TEXT, 'NaN');
        buffer += `${json}\n`;
        if (base.fault) faults[base.fault] = (faults[base.fault] ?? 0) + 1;
        sampleTokens += record.sample?.tokens.length ?? 0;
        n++;
        line++;
        if (buffer.length > 1 << 20) {
          bytes += Buffer.byteLength(buffer);
          await write(buffer);
          buffer = '';
          onProgress?.({ trajectories: n, bytes });
        }
      }
    }
  }
  bytes += Buffer.byteLength(buffer);
  await write(buffer);
  await new Promise<void>((res, rej) => stream.end((e?: Error | null) => (e ? rej(e) : res())));
  return {
    file: out,
    bytes,
    trajectories: n,
    groups,
    faulty: Object.values(faults).reduce((a, b) => a + b, 0),
    faults,
    sampleTokens,
    distinct: built,
    buildSeconds,
    writeSeconds: (performance.now() - t1) / 1000,
  };
}

/** Progress on stderr: one line rewritten in a terminal, a line per 100 MB otherwise. */
export function progressPrinter(): (w: { trajectories: number; bytes: number }) => void {
  let shown = 0;
  return (w) => {
    if (process.stderr.isTTY)
      process.stderr.write(`\r  ${w.trajectories} trajectories, ${Math.round(w.bytes / 1e6)} MB `);
    else if (w.bytes - shown >= 100e6) {
      shown = w.bytes;
      process.stderr.write(`  ${w.trajectories} trajectories, ${Math.round(w.bytes / 1e6)} MB\n`);
    }
  };
}

/** `200MB`, `2GB`, `1.5G`, `5000000` (bytes). */
export function parseSize(s: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmg]?)i?b?$/i.exec(s.trim());
  if (!m) throw new Error(`not a size: "${s}" (try 200MB or 2GB)`);
  const unit = { '': 1, k: 1e3, m: 1e6, g: 1e9 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g'];
  return Math.round(Number(m[1]) * unit);
}

const USAGE = `node bin/tsx.js bench/generate.ts (--size 200MB | --trajectories N) [--out FILE]
  [--turns 3] [--tokens-per-turn 300] [--images 2] [--faulty 0.1] [--group 8] [--distinct 256]
  [--profile qwen2.5-vl | --profiles qwen2-vl,qwen2.5-vl,qwen3-vl] [--format native|slime] [--vary swap|repeat]
  [--inline-images] [--seed 1]
  --standard: the standard big run (slime records, images inline, mixed generations, groups repeated, many faults)`;

async function cli(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      out: { type: 'string' },
      size: { type: 'string' },
      trajectories: { type: 'string' },
      turns: { type: 'string' },
      'tokens-per-turn': { type: 'string' },
      images: { type: 'string' },
      faulty: { type: 'string' },
      group: { type: 'string' },
      distinct: { type: 'string' },
      profile: { type: 'string' },
      profiles: { type: 'string' },
      format: { type: 'string' },
      vary: { type: 'string' },
      standard: { type: 'boolean' },
      'inline-images': { type: 'boolean' },
      seed: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help || (!values.size && !values.trajectories)) {
    console.log(USAGE);
    return;
  }
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const given = (o: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
  const run = await generateRun(
    {
      ...(values.standard ? STANDARD_RUN : {}),
      ...given({
        out: values.out,
        targetBytes: values.size ? parseSize(values.size) : undefined,
        trajectories: num(values.trajectories),
        turns: num(values.turns),
        tokensPerTurn: num(values['tokens-per-turn']),
        imagesPerTrajectory: num(values.images),
        faultyShare: num(values.faulty),
        groupSize: num(values.group),
        distinct: num(values.distinct),
        profile: values.profile as GenerateOptions['profile'],
        ...(values.profiles ? { profiles: values.profiles.split(',') as BuiltinName[] } : {}),
        ...(values.format ? { format: values.format as 'native' | 'slime' } : {}),
        ...(values.vary ? { vary: values.vary as 'swap' | 'repeat' } : {}),
        ...(values['inline-images'] ? { inlineImages: true } : {}),
        seed: num(values.seed),
      }),
    },
    progressPrinter(),
  );
  console.log(JSON.stringify(run, null, 2));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  await cli(process.argv.slice(2));
