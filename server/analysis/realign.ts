// Canonical re-alignment: the training stream as it should be built. The initial prompt is
// taken once (the engine's ids when recorded, else rendered), each turn's generated ids are
// appended verbatim (mask 1, their logprobs), and each observation is appended as the
// template's suffix, EOS-aware: no second end of turn when the generation already ended with
// one, the whole close (Qwen: end of turn and newline) when it did not (a length-truncated turn);
// where the stop token opens the next turn (GLM) the observation does not open it again. Observation tokens get mask 0
// and logprob 0.0. This is the fix the field converged on (vime #331/#341, verl agent loop,
// prime-rl renderers; docs/reference/prefix-stability.md#canonical-re-alignment).
import type { GridThw, Message, PlaceholderRange, Trajectory } from '../model/trajectory.ts';
import type { AnalysisContext } from './context.ts';
import { expectedMedia } from './context.ts';
import {
  boundaryIds,
  observationSuffixText,
  renderTokens,
  tokenizeExpanded,
  turnCloseIds,
  turnStopIds,
} from './render.ts';
import { renderSemanticsFor } from './render.ts';
import { startsWithParts } from './diff.ts';
import { findVisionSpans, padRuns } from './vision-spans.ts';
import { StepFailures } from './analysis-failed.ts';
import { followsChatFormat } from './sources.ts';

export interface TurnSpan {
  turn: number;
  /** [start, end) of the turn's generated ids in the canonical stream. */
  generated: [number, number];
  /** [start, end) of the observation that follows (empty when none). */
  observation: [number, number];
  /** Where the observation ids came from. */
  observationFrom?: 'next_prompt' | 'messages' | 'stored_ids';
}

export interface Alignment {
  tokens: number[];
  lossMask: number[];
  logprobs: number[];
  promptLength: number;
  responseLength: number;
  promptFrom: 'engine' | 'render' | 'sample' | 'none';
  turns: TurnSpan[];
  imageGridThw: (GridThw | null)[];
  placeholderRanges: PlaceholderRange[];
  /** Where the re-alignment had to make a choice the data did not settle. */
  notes: string[];
}

/** Index of the n-th (0-based) token of `seq` that opens a turn, or -1. */
function nthOpener(seq: readonly number[], isOpener: (t: number) => boolean, n: number): number {
  let seen = 0;
  for (let i = 0; i < seq.length; i++) if (isOpener(seq[i]!) && seen++ === n) return i;
  return -1;
}

/**
 * Images and videos the stream holds so far; vision tokens inside generated ids are the model's
 * text, not media. A video is as many spans as its expected runs (a Qwen3-VL video one per slice).
 */
function mediaSoFar(
  tokens: readonly number[],
  ctx: AnalysisContext,
  generated: readonly TurnSpan[],
): { images: number; videos: number } {
  const inGenerated = (i: number) => generated.some((s) => i >= s.generated[0] && i < s.generated[1]);
  const spans = findVisionSpans(tokens, ctx.profile).filter((s) => !inGenerated(s.start >= 0 ? s.start : s.padStart));
  let videoSpans = spans.filter((s) => s.kind === 'video').length;
  let videos = 0;
  while (videoSpans > 0) {
    videoSpans -= Math.max(1, ctx.videos?.[videos]?.tokens?.runs.length ?? 1);
    videos++;
  }
  return { images: spans.filter((s) => s.kind === 'image').length, videos };
}

/** The alignment of a trajectory whose re-alignment failed (an `analysis_failed` finding says why): no stream. */
export function unavailableAlignment(): Alignment {
  return {
    tokens: [],
    lossMask: [],
    logprobs: [],
    promptLength: 0,
    responseLength: 0,
    promptFrom: 'none',
    turns: [],
    imageGridThw: [],
    placeholderRanges: [],
    notes: ['the canonical re-alignment failed (see the analysis_failed finding)'],
  };
}

/**
 * The canonical stream. A render that fails (reported to `failures` as `analysis_failed`) is
 * worked around where the data allows: the first prompt from the stored sample, an observation
 * from the next prompt's ids.
 */
export async function realign(
  traj: Trajectory,
  ctx: AnalysisContext,
  failures: StepFailures = new StepFailures(),
): Promise<Alignment> {
  const { profile } = ctx;
  const { grammar } = profile.ids;
  const notes: string[] = [];
  const padCounts = expectedMedia(ctx);
  const closeIds = await turnCloseIds(profile);
  // Ids with no turn opener anywhere (a raw-text agent) follow no chat format (sources.ts).
  const plain = followsChatFormat(traj, grammar.openers) === false;
  const isOpener = (t: number) => grammar.openers.includes(t);
  const firstOpener = (ids: readonly number[], from: number) => {
    for (let i = from; i < ids.length; i++) if (isOpener(ids[i]!)) return i;
    return -1;
  };

  // 1. The initial prompt, once.
  let tokens: number[] = [];
  let promptFrom: Alignment['promptFrom'] = 'none';
  const first = traj.turns[0];
  if (first?.promptIds) {
    tokens = first.promptIds.slice();
    promptFrom = 'engine';
  }
  if (promptFrom === 'none' && first?.messages) {
    const messages = first.messages;
    const opts = { addGenerationPrompt: true, tools: first.tools, as: renderSemanticsFor(traj) };
    const rendered = await failures.guard('render', { turn: 0, field: 'turns.0.messages' }, () =>
      renderTokens(profile, messages, opts, padCounts),
    );
    if (rendered) {
      tokens = rendered.expanded;
      promptFrom = 'render';
    }
  }
  if (promptFrom === 'none' && traj.sample) {
    tokens = traj.sample.tokens.slice(0, traj.sample.tokens.length - (traj.sample.responseLength ?? 0));
    promptFrom = 'sample';
  }
  if (promptFrom === 'none')
    notes.push('no prompt ids, messages or sample: the canonical stream starts at the first generation');
  const promptLength = tokens.length;
  const spans: TurnSpan[] = [];
  // Mask and logprobs are written once the stream's length is known: growing three arrays token by
  // token was most of what a check allocated.
  const generations: { from: number; lps?: readonly (number | null)[]; length: number }[] = [];
  const append = (ids: readonly number[], mask: number, lps?: readonly (number | null)[]) => {
    if (mask === 1) generations.push({ from: tokens.length, lps, length: ids.length });
    for (let i = 0; i < ids.length; i++) tokens.push(ids[i]!);
  };

  for (let k = 0; k < traj.turns.length; k++) {
    const turn = traj.turns[k]!;
    const gen = turn.generatedIds ?? [];
    const genStart = tokens.length;
    if (turn.generatedLogprobs && turn.generatedLogprobs.length !== gen.length) {
      notes.push(
        `turn ${k}: ${turn.generatedLogprobs.length} logprobs for ${gen.length} generated tokens; missing ones set to 0`,
      );
    }
    append(gen, 1, turn.generatedLogprobs);
    const genEnd = tokens.length;

    const next = traj.turns[k + 1];
    const hasObservation =
      next !== undefined || turn.observationIds !== undefined || turn.observationMessages !== undefined;
    let obs: number[] = [];
    let observationFrom: TurnSpan['observationFrom'];
    if (hasObservation && plain) {
      // Ids outside the chat format continue by plain concatenation: no boundary, and what the next
      // prompt holds past this stream is the observation.
      if (next?.promptIds && startsWithParts(next.promptIds, [tokens])) {
        obs = next.promptIds.slice(tokens.length);
        observationFrom = 'next_prompt';
      } else if (turn.observationIds) {
        obs = turn.observationIds.slice();
        observationFrom = 'stored_ids';
      } else if (next)
        notes.push(`turn ${k}: the next prompt does not extend this turn, and nothing else records what followed`);
      append(obs, 0);
    } else if (hasObservation) {
      const boundary = boundaryIds(gen, closeIds, turnStopIds(profile));
      // A stop token that is also the next turn's opener (GLM) was generated: the observation must not open the turn again.
      const lastGenerated = gen[gen.length - 1];
      const opensAgain = (ids: readonly number[]) =>
        grammar.stopOpensTurn && lastGenerated !== undefined && isOpener(lastGenerated) && ids[0] === lastGenerated
          ? ids.slice(1)
          : ids;
      const historyMessages = turn.messages;
      const obsMessages: Message[] | undefined =
        turn.observationMessages ??
        (historyMessages && next?.messages && next.messages.length > historyMessages.length + 1
          ? (next.messages.slice(historyMessages.length + 1) as Message[])
          : undefined);

      if (next?.promptIds && startsWithParts(next.promptIds, [tokens, boundary])) {
        // The engine's next prompt extends ours correctly: its tail is exactly the observation.
        obs = next.promptIds.slice(tokens.length);
        observationFrom = 'next_prompt';
      } else if (historyMessages && obsMessages) {
        const place = {
          turn: k,
          field: turn.observationMessages ? `turns.${k}.observationMessages` : `turns.${k + 1}.messages`,
        };
        const rendered = await failures.guard('render', place, async () => {
          const as = renderSemanticsFor(traj);
          const suffix = observationSuffixText(profile, historyMessages, obsMessages, { tools: turn.tools, as });
          const parts = suffix ?? observationSuffixText(profile, [{ role: 'user', content: 'q' }], obsMessages, { as });
          if (!suffix)
            notes.push(`turn ${k}: the template rewrites history; observation rendered after a stand-in history`);
          if (!parts) return undefined;
          return tokenizeExpanded(
            profile,
            parts.delta,
            padCounts,
            mediaSoFar(tokens, ctx, [
              ...spans,
              { turn: k, generated: [genStart, genEnd], observation: [genEnd, genEnd] },
            ]),
          );
        });
        if (rendered) {
          obs = [...boundary, ...opensAgain(rendered.expanded)];
          observationFrom = 'messages';
        }
      }
      if (!observationFrom) {
        // Only ids: anchor the observation at its first turn opener and put the correct boundary before it.
        let raw: readonly number[] | undefined = turn.observationIds;
        let from = 0;
        if (!raw && next?.promptIds) {
          // The next prompt's turn after the ones this stream holds; none: it records no observation.
          const at = nthOpener(next.promptIds, isOpener, tokens.filter(isOpener).length);
          if (at >= 0) {
            raw = next.promptIds;
            from = at;
          }
        }
        if (raw) {
          const anchor = firstOpener(raw, from);
          if (anchor >= 0) obs = [...boundary, ...opensAgain(raw.slice(anchor))];
          else {
            obs = raw.slice(from);
            notes.push(`turn ${k}: observation opens no turn; kept as stored`);
          }
          observationFrom = turn.observationIds ? 'stored_ids' : 'next_prompt';
        } else if (next) {
          notes.push(`turn ${k}: nothing records the observation that followed`);
        }
      }
      // A next prompt that is shorter than what we already hold cannot contribute anything more.
      append(obs, 0);
    }
    spans.push({ turn: k, generated: [genStart, genEnd], observation: [genEnd, tokens.length], observationFrom });
  }

  const lossMask = new Array<number>(tokens.length).fill(0);
  const logprobs = new Array<number>(tokens.length).fill(0);
  for (const g of generations)
    for (let i = 0; i < g.length; i++) {
      lossMask[g.from + i] = 1;
      // A logprob the data left out (null) stays invalid (NaN) rather than becoming a plausible 0.
      const lp = g.lps?.[i];
      logprobs[g.from + i] = lp === undefined ? 0 : lp === null ? NaN : lp;
    }

  // Grids and placeholder ranges for the canonical stream: one per pad run, from the image math
  // when it agrees with the run, else from the stored grid when that does (video runs: none).
  const runs = padRuns(tokens, profile.ids);
  const videoPad = profile.ids.media.video?.pad;
  let image = 0;
  const imageGridThw = runs.map((run): GridThw | null => {
    if (videoPad !== undefined && videoPad !== profile.ids.media.image.pad && tokens[run.offset] === videoPad)
      return null;
    const i = image++;
    const computed = ctx.images[i]?.tokens;
    if (computed && computed.padCount === run.length) return computed.gridThw;
    const stored = traj.sample?.imageGridThw?.[i];
    if (stored && profile.modelFamily.padCountFromGrid(stored, profile.vision) === run.length) return stored;
    return null;
  });
  return {
    tokens,
    lossMask,
    logprobs,
    promptLength,
    responseLength: tokens.length - promptLength,
    promptFrom,
    turns: spans,
    imageGridThw,
    placeholderRanges: runs,
    notes,
  };
}
