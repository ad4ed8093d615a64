// Builds trajectories the way a real rollout loop does, with the real tokenizer and template.
// Three ways of building the next turn's prompt, as frameworks do it:
// - `canonical`: keep the generated ids and append the EOS-aware observation suffix (the fix the
//   field converged on: vime #331/#341, verl agent loop, prime-rl renderers; docs/reference/prefix-stability.md);
// - `legacy`: decode each answer *with* special tokens and re-render the whole conversation, so
//   the template closes the turn a second time (vime #331's duplicated end of turn);
// - `rerender`: decode *without* special tokens (or keep the assistant message as the framework
//   parsed it) and re-render: the model's own BPE split and its tool-call text are lost.
// Used by the demo run and by the tests (test/support/build.ts re-exports it).
import type { Message, TrainingSample, Trajectory as TrajectoryType, TrajectoryInput } from '../model/trajectory.ts';
import { Trajectory } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import {
  padCountExpansions,
  renderTokens,
  observationSuffixText,
  tokenizeExpanded,
  boundaryIds,
  turnCloseIds,
  turnStopIds,
} from '../analysis/render.ts';
import { mulberry32 } from '../util/random.ts';

export interface ScriptTurn {
  /** The model's answer text (tokenized with the real tokenizer). */
  answer: string;
  /** Ended by length: no end of turn at the end of the generated ids. */
  truncated?: boolean;
  /** Messages that follow the answer (tool results, user follow-ups). */
  observation?: Message[];
  /**
   * The sampler emitted `word` (which the tokenizer encodes as one token sequence) as these
   * pieces instead: a valid but non-canonical BPE split that decoding and re-encoding loses.
   */
  split?: { word: string; pieces: string[] };
  /** The assistant message as the framework keeps it in the history (e.g. with parsed `tool_calls`); default: the decoded answer. */
  historyMessage?: Message;
  /** The model stopped with the secondary EOS (Qwen's end of text) instead of its end of turn. */
  stoppedBy?: 'endoftext';
  /** The loop closed this turn with the template's whole close (end of turn and newline), as if it had been cut by length. */
  closedAsTruncated?: boolean;
}

/**
 * The assistant content as Qwen3's chat template renders it in the history before the last user
 * turn: everything up to the reasoning's close tag dropped, leading newlines stripped
 * (`content.split(close)[-1].lstrip('\n')`).
 */
export function stripReasoning(content: string, close: string): string {
  const at = content.lastIndexOf(close);
  return at < 0 ? content : content.slice(at + close.length).replace(/^\n+/, '');
}

export interface ScriptImage {
  width: number;
  height: number;
  /** Where the image lives, relative to the data file's folder. */
  url?: string;
}

export interface Script {
  id: string;
  messages: Message[];
  /** Every image in order of appearance (the prompt's, then the ones observations return). */
  images?: ScriptImage[];
  turns: ScriptTurn[];
  /** Seed for plausible, reproducible generated logprobs; without it a fixed small pattern is used. */
  logprobSeed?: number;
}

export type BuildMode = 'canonical' | 'legacy' | 'rerender';

export async function buildTrajectory(profile: ModelProfile, script: Script, mode: BuildMode): Promise<TrajectoryType> {
  const pads = padCountExpansions(
    (script.images ?? []).map((i) => profile.modelFamily.imageTokens(i.width, i.height, profile.vision).padCount),
  );
  const eos = profile.ids.eos;
  const closeIds = await turnCloseIds(profile);
  const nextLogprob = script.logprobSeed === undefined ? undefined : logprobSampler(script.logprobSeed);
  let history: Message[] = script.messages.slice();
  let prompt = (await renderTokens(profile, history, { addGenerationPrompt: true }, pads)).expanded;
  const turns: TrajectoryInput['turns'] = [];
  for (let k = 0; k < script.turns.length; k++) {
    const st = script.turns[k]!;
    const answerIds = st.split
      ? await encodeWithSplit(profile, st.answer, st.split)
      : await profile.tokenizer.encode(st.answer);
    const secondary = profile.ids.grammar.secondaryStops[0];
    if (st.stoppedBy === 'endoftext' && secondary === undefined)
      throw new Error(`${script.id}: ${profile.name} has no secondary stop token`);
    const stop = st.stoppedBy === 'endoftext' ? secondary! : eos;
    const gen = [...answerIds, ...(st.truncated ? [] : [stop])];
    const logprobs = gen.map((_, i) => (nextLogprob ? nextLogprob() : -0.01 * ((i % 7) + 1)));
    turns.push({
      messages: history.slice(),
      promptIds: prompt,
      generatedIds: gen,
      generatedLogprobs: logprobs,
      finishReason: st.truncated ? 'length' : 'stop',
    });
    if (!st.observation) break;
    const assistant: Message =
      mode !== 'legacy' && st.historyMessage
        ? st.historyMessage
        : { role: 'assistant', content: await profile.tokenizer.decode(gen, mode !== 'legacy') };
    const nextHistory: Message[] = [...history, assistant, ...st.observation];
    if (mode === 'canonical') {
      const suffix = observationSuffixText(profile, history, st.observation);
      if (!suffix) throw new Error(`${script.id}: the template rewrites history; no canonical suffix after turn ${k}`);
      const imagesBefore = profile.modelFamily.countPlaceholders(prompt, profile.ids).images;
      const delta = await tokenizeExpanded(profile, suffix.delta, pads, { images: imagesBefore });
      const boundary = st.closedAsTruncated ? closeIds : boundaryIds(gen, closeIds, turnStopIds(profile));
      // A generated stop that opens the next turn (GLM's role tokens) is that turn's opener: not written again.
      const opensNext = profile.ids.grammar.stopOpensTurn && !st.truncated && delta.expanded[0] === gen[gen.length - 1];
      prompt = [...prompt, ...gen, ...boundary, ...(opensNext ? delta.expanded.slice(1) : delta.expanded)];
    } else {
      prompt = (await renderTokens(profile, nextHistory, { addGenerationPrompt: true }, pads)).expanded;
    }
    history = nextHistory;
  }
  return Trajectory.parse({
    id: script.id,
    source: { file: 'built', line: 1, format: 'native' },
    turns,
    images: (script.images ?? []).map((i) => ({
      ...(i.url ? { url: i.url } : {}),
      width: i.width,
      height: i.height,
      sizeFrom: 'record',
    })),
  });
}

/** Encode `text`, then replace the ids of `split.word` (first occurrence) by the ids of its pieces. */
async function encodeWithSplit(
  profile: ModelProfile,
  text: string,
  split: { word: string; pieces: string[] },
): Promise<number[]> {
  const ids = await profile.tokenizer.encode(text);
  const word = await profile.tokenizer.encode(split.word);
  const pieces = (await Promise.all(split.pieces.map((p) => profile.tokenizer.encode(p)))).flat();
  const at = ids.findIndex((_, i) => word.every((w, j) => ids[i + j] === w));
  if (at < 0) throw new Error(`"${split.word}" is not tokenized as a unit inside the answer`);
  if (pieces.join() === word.join())
    throw new Error(
      `pieces ${JSON.stringify(split.pieces)} encode like "${split.word}" itself: not a non-canonical split`,
    );
  return [...ids.slice(0, at), ...pieces, ...ids.slice(at + word.length)];
}

/**
 * A reproducible stream of logprobs shaped like a sampler's: mostly confident tokens, now and then
 * an uncertain one (mulberry32; JS numbers are rounded so the JSON stays short and stable).
 */
function logprobSampler(seed: number): () => number {
  const random = mulberry32(seed);
  return () => {
    const u = random.next();
    return -Math.round((0.0002 + 3.5 * u ** 6) * 10000) / 10000;
  };
}

/**
 * The training sample a rollout loop that keeps the generated ids stores (slime's layout): the last
 * prompt ⧺ its generation; response = everything after the first prompt; loss mask 1 on generated
 * ids, 0 on observations; the sampler's logprobs on generated ids, 0 elsewhere. Built from the
 * turns alone, independently of the re-alignment the checks perform. Throws when the turns do not
 * extend one another (a sample cannot be cut from them this way).
 */
export function trainingSample(traj: TrajectoryType, profile: ModelProfile): TrainingSample {
  const last = traj.turns[traj.turns.length - 1];
  const first = traj.turns[0];
  if (!last?.promptIds || !first?.promptIds) throw new Error(`${traj.id}: no prompt ids to build a sample from`);
  const tokens = [...last.promptIds, ...(last.generatedIds ?? [])];
  const promptLength = first.promptIds.length;
  const lossMask = new Array<number>(tokens.length - promptLength).fill(0);
  const logprobs = new Array<number>(tokens.length - promptLength).fill(0);
  for (const t of traj.turns) {
    const start = t.promptIds?.length ?? 0;
    const gen = t.generatedIds ?? [];
    gen.forEach((id, i) => {
      if (tokens[start + i] !== id)
        throw new Error(`${traj.id}: turn prompts do not extend one another at token ${start + i}`);
      lossMask[start + i - promptLength] = 1;
      logprobs[start + i - promptLength] = t.generatedLogprobs?.[i] ?? 0;
    });
  }
  const imageGridThw = traj.images.map((img, i) => {
    if (!img.width || !img.height) throw new Error(`${traj.id}: image ${i} has no size`);
    return profile.modelFamily.imageTokens(img.width, img.height, profile.vision).gridThw;
  });
  return {
    tokens,
    responseLength: tokens.length - promptLength,
    lossMask,
    logprobs,
    maskScope: 'response',
    imageGridThw,
  };
}
