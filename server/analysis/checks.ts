// The checks: pure functions from a trajectory (and its analysis context) to findings.
// Each finding names its kind, severity, turn, the stream and absolute token index it points
// at, what was expected and what was found, and one sentence a person can act on.
import { logprobMismatch, mismatchFindings } from './logprob-mismatch.ts';
import { FINDING_KINDS, type Finding, type StreamName } from '../model/finding.ts';
import type { Message, Trajectory, Turn } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import type { AnalysisContext } from './context.ts';
import type { MediaRuns } from '../families/family.ts';
import { expectedMedia } from './context.ts';
import { realign, type Alignment } from './realign.ts';
import { padCountExpansions, renderTokens, turnCloseIds, turnStopIds } from './render.ts';
import { closedCanonical, expectedNextPrompt, extendsTurn } from './expected-streams.ts';
import { firstDivergence, tokenName } from './classify.ts';
import { commonPrefixLength, startsWith } from './diff.ts';
import { padRuns } from './vision-spans.ts';
import { expectedMask } from './mask.ts';
import { checkZeroFilledLogprobs } from './zero-logprobs.ts';
import { checkSources, checkStatedPromptTokens, followsChatFormat } from './sources.ts';
import { renderSemanticsFor } from './render.ts';
import { checkCanonicalSplits } from './canonical-split.ts';
import { checkStrayVisionTokens, imageSpans } from './stray-vision.ts';
import { checkVideos } from './videos.ts';
import { inStepAsync, StepFailures, type StepPlace } from './analysis-failed.ts';
import { unavailableAlignment } from './realign.ts';
import { sampleTurnOf } from './positions.ts';

export interface NamedStream {
  name: StreamName;
  /** For `prompt` streams: the turn whose prompt (⧺ generation) this is. */
  turn: number;
  tokens: number[];
}

export interface CheckResult {
  findings: Finding[];
  alignment: Alignment;
  /** The re-rendered conversation, when the data holds messages to render. */
  rerender?: number[];
}

/** The stream the data itself holds: the stored sample, else the last call's prompt ⧺ generation. */
export function observedStream(traj: Trajectory): NamedStream | undefined {
  if (traj.sample) return { name: 'sample', turn: -1, tokens: traj.sample.tokens };
  for (let k = traj.turns.length - 1; k >= 0; k--) {
    const t = traj.turns[k]!;
    if (t.promptIds) return { name: 'prompt', turn: k, tokens: [...t.promptIds, ...(t.generatedIds ?? [])] };
  }
  return undefined;
}

/**
 * Every check on one trajectory. A check (or the re-alignment, a render, the tokenizer) that raises
 * becomes an `analysis_failed` finding naming the step (analysis-failed.ts), and the checks that do
 * not need its result still run: a conversation the template cannot render still has its ids'
 * values, lengths and masks checked.
 */
export async function checkTrajectory(
  traj: Trajectory,
  ctx: AnalysisContext,
  failures = new StepFailures(),
): Promise<CheckResult> {
  if (ctx.profile.uncoveredModel !== undefined) return checkWithoutTokenizer(traj, ctx);
  const realigned = await failures.guard('realign', {}, () => realign(traj, ctx, failures));
  const alignment = realigned ?? unavailableAlignment();
  const findings: Finding[] = [];
  const check = async (name: string, fn: () => Finding[] | Promise<Finding[]>) => {
    const found = await failures.guard('checks', { detail: name }, fn);
    if (found) findings.push(...found);
  };
  await check('values', () => checkValues(traj, ctx, alignment));
  const closeIds = await failures.guard('render', { detail: 'the turn boundary' }, () => turnCloseIds(ctx.profile));
  if (closeIds) await check('prefixes', () => checkPrefixes(traj, ctx, closeIds));
  const rerender = await failures.guard('render', rerenderPlace(traj), () =>
    rerenderConversation(traj, ctx, realigned),
  );
  if (rerender && realigned && closeIds)
    await check('re-render', () => checkRerender(traj, ctx, realigned, rerender, closeIds));
  if (realigned) await check('sample', () => checkSample(traj, ctx, realigned));
  await check('images', () => checkImages(traj, ctx));
  await check('videos', () => {
    const observed = observedStream(traj);
    return observed && observed.tokens.length > 0
      ? checkVideos(traj, ctx, { tokens: observed.tokens, stream: observed.name, turn: observed.turn })
      : [];
  });
  await check('lengths and masks', () => checkLengthsAndMasks(traj, ctx, alignment));
  await check('logprob mismatch', () =>
    mismatchFindings(logprobMismatch(traj, ctx.mismatch), ctx.mismatch, sampleTurnOf(traj)),
  );
  await check('zero-filled logprobs', () => checkZeroFilledLogprobs(traj, alignment));
  await check('canonical splits', () => checkCanonicalSplits(traj, ctx, alignment));
  await check('stray vision tokens', () => checkStrayVisionTokens(traj, ctx, alignment));
  await check('sources', () => checkSources(traj, ctx, failures));
  findings.push(...failures.findings);
  return { findings: sortFindings(findings), alignment, rerender };
}

/** Errors first; then by kind in FINDING_KINDS order (what the engine saw before how a re-render would differ). */
export function sortFindings(findings: Finding[]): Finding[] {
  const rank = (f: Finding) => FINDING_KINDS.indexOf(f.kind);
  return findings.sort(
    (x, y) =>
      (x.severity === y.severity ? 0 : x.severity === 'error' ? -1 : 1) ||
      rank(x) - rank(y) ||
      x.turn - y.turn ||
      x.index - y.index,
  );
}

/** Where the re-render reads its conversation: the last turn's messages. */
function rerenderPlace(traj: Trajectory): StepPlace {
  const k = traj.turns.length - 1;
  return k >= 0 ? { turn: k, field: `turns.${k}.messages` } : {};
}

/** A value as JSON can carry it in `actual` (NaN and infinities are not JSON numbers). */
function jsonValue(v: number | null): number | string | null {
  return v === null || Number.isFinite(v) ? v : String(v);
}

// The common case of checkValues, every value valid, settled by one tight loop per kind of list.

/** Every entry an integer id in 0..vocab-1 (`(v | 0) === v` is an integer test for that range). */
function allValidIds(values: readonly number[] | undefined, vocab: number): boolean {
  if (!values) return true;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!(v >= 0 && v < vocab && (v | 0) === v)) return false;
  }
  return true;
}

/** Every entry a finite logprob <= 1e-6 (what badLogprob accepts). */
function allValidLogprobs(values: readonly (number | null)[] | undefined): boolean {
  if (!values) return true;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!(v !== null && v <= 1e-6 && v > -Infinity)) return false;
  }
  return true;
}

function allMaskBits(values: readonly number[] | undefined): boolean {
  if (!values) return true;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v !== 0 && v !== 1) return false;
  }
  return true;
}

/** Why a token id is not one, or undefined when it is. */
function badTokenId(id: number, vocabSize: number): string | undefined {
  if (Number.isNaN(id)) return 'is not a number';
  if (!Number.isInteger(id)) return 'is not an integer';
  if (id === -100) return "is the loss labels' ignore index, not a token id (labels written where ids belong)";
  if (id < 0) return 'is negative';
  if (id >= vocabSize) return `is outside the vocabulary (${vocabSize} tokens)`;
  return undefined;
}

/** Why a logprob is not a log-probability, or undefined when it is. */
function badLogprob(lp: number | null): string | undefined {
  if (lp === null) return 'is missing (null)';
  if (Number.isNaN(lp)) return 'is NaN';
  if (!Number.isFinite(lp)) return lp > 0 ? 'is +Infinity' : 'is -Infinity (a token the sampler gave probability 0)';
  if (lp > 1e-6) return 'is positive (a log-probability is <= 0)';
  return undefined;
}

/**
 * `invalid_value`: a token id that is not one (NaN, fractional, negative, -100, past the
 * vocabulary), a logprob that is not a log-probability (null, NaN, infinite, positive), a loss
 * mask value other than 0/1. One finding per field, at the first bad value (the message counts
 * the others), at the token's position in the stream that holds it and with the turn (call) the
 * token belongs to (positions.ts; docs/check-json.md, "Where `index` points"): the stored
 * sample's values on `sample`; a call's generated ids and logprobs on `canonical`; a call's
 * prompt ids on `prompt`. A value the turns hold at the same place as the stored sample (turns
 * split from it) is reported once, on the sample; a prompt id the previous call's prompt ⧺
 * generation holds at the same place (the history repeated) is reported once, on that call.
 */
export function checkValues(traj: Trajectory, ctx: AnalysisContext, alignment: Alignment): Finding[] {
  const out: Finding[] = [];
  // A model no profile covers has a vocabulary of unknown size: only what is no id at all is reported.
  const vocab = ctx.profile.uncoveredModel === undefined ? ctx.profile.tokenizer.vocabSize : Number.POSITIVE_INFINITY;
  const s = traj.sample;
  const sampleOffset = s ? (s.maskScope === 'full' ? 0 : s.tokens.length - (s.responseLength ?? 0)) : 0;
  const sampleTurn = sampleTurnOf(traj);
  const scan = <T extends number | null>(
    values: readonly T[] | undefined,
    why: (v: T) => string | undefined,
    where: {
      field: string;
      what: string;
      stream: StreamName;
      turn: number | ((index: number) => number);
      offset: number;
      expected: string;
    },
    /** Whether the value at `i` of `values` is reported elsewhere (the sample, an earlier call). */
    reportedElsewhere?: (i: number, v: T) => boolean,
  ) => {
    if (!values) return;
    let first = -1;
    let count = 0;
    for (let i = 0; i < values.length; i++) {
      if (why(values[i]!) === undefined) continue;
      if (reportedElsewhere?.(i, values[i]!)) continue;
      if (first < 0) first = i;
      count++;
    }
    if (first < 0) return;
    const v = values[first]!;
    const index = where.offset + first;
    out.push({
      kind: 'invalid_value',
      severity: 'error',
      turn: typeof where.turn === 'number' ? where.turn : where.turn(index),
      index,
      stream: where.stream,
      field: where.field,
      actual: jsonValue(v),
      expected: where.expected,
      message: `${where.what} ${v === null ? 'null' : String(v)} at token ${index} (${where.field}[${first}]) ${why(v)}${
        count > 1 ? `; ${count - 1} more invalid value${count > 2 ? 's' : ''} in ${where.field}` : ''
      }`,
    });
  };
  // The common case, every value valid, is settled by one tight loop per kind of list.
  const allIds = (values: readonly number[] | undefined) => allValidIds(values, vocab);
  const idWhy = (id: number) => badTokenId(id, vocab);
  const idRange = Number.isFinite(vocab) ? `an integer token id in 0..${vocab - 1}` : 'a non-negative integer token id';
  const logprobRange = 'a finite logprob <= 0';
  if (s) {
    if (!allIds(s.tokens))
      scan(s.tokens, idWhy, {
        field: 'sample.tokens',
        what: 'token id',
        stream: 'sample',
        turn: sampleTurn,
        offset: 0,
        expected: idRange,
      });
    if (!allValidLogprobs(s.logprobs))
      scan(s.logprobs, badLogprob, {
        field: 'sample.logprobs',
        what: 'logprob',
        stream: 'sample',
        turn: sampleTurn,
        offset: sampleOffset,
        expected: logprobRange,
      });
    if (!allMaskBits(s.lossMask))
      scan(s.lossMask, (m) => (m === 0 || m === 1 ? undefined : 'is not 0 or 1'), {
        field: 'sample.lossMask',
        what: 'loss mask value',
        stream: 'sample',
        turn: sampleTurn,
        offset: sampleOffset,
        expected: '0 or 1',
      });
  }
  // A NaN or infinite reward (AReaL and verl dump `float(reward)` with json.dumps) turns the whole
  // GRPO group's normalized advantages into NaN.
  if (typeof traj.reward === 'number' && !Number.isFinite(traj.reward))
    out.push({
      kind: 'invalid_value',
      severity: 'error',
      turn: -1,
      index: -1,
      field: 'reward',
      actual: String(traj.reward),
      expected: 'a finite reward',
      message: `reward ${String(traj.reward)} is not a finite number: group-normalized advantages of its whole group become NaN`,
    });
  /** The sample holds `v` at token `index` (turns split from it hold its values). */
  const sampleIdAt = (index: number, v: number) => !!s && Object.is(s.tokens[index], v);
  const sampleLogprobAt = (index: number, v: number | null) =>
    !!s?.logprobs && index >= sampleOffset && Object.is(s.logprobs[index - sampleOffset], v);
  traj.turns.forEach((t, k) => {
    const p = t.promptIds?.length ?? 0;
    const generatedAt = alignment.turns[k]?.generated[0] ?? p;
    const before = k > 0 ? traj.turns[k - 1] : undefined;
    /** The previous call's prompt ⧺ generation holds `v` at `i`: the history repeated, reported there. */
    const inHistory = (i: number, v: number) => {
      if (!before?.promptIds) return false;
      const bp = before.promptIds.length;
      return Object.is(i < bp ? before.promptIds[i] : before.generatedIds?.[i - bp], v);
    };
    if (!allIds(t.promptIds))
      scan(
        t.promptIds,
        idWhy,
        { stream: 'prompt', turn: k, expected: idRange, what: 'token id', field: `turns.${k}.promptIds`, offset: 0 },
        (i, v) => sampleIdAt(i, v) || inHistory(i, v),
      );
    const canonical = { stream: 'canonical' as const, turn: k, offset: generatedAt };
    if (!allIds(t.generatedIds))
      scan(
        t.generatedIds,
        idWhy,
        { ...canonical, expected: idRange, what: 'token id', field: `turns.${k}.generatedIds` },
        (i, v) => sampleIdAt(p + i, v),
      );
    if (!allValidLogprobs(t.generatedLogprobs))
      scan(
        t.generatedLogprobs,
        badLogprob,
        { ...canonical, expected: logprobRange, what: 'logprob', field: `turns.${k}.generatedLogprobs` },
        (i, v) => sampleLogprobAt(p + i, v),
      );
  });
  return out;
}

/** `prefix_break`: turn k+1's prompt must start with turn k's prompt ⧺ generated ids ⧺ the EOS-aware boundary. */
export function checkPrefixes(traj: Trajectory, ctx: AnalysisContext, closeIds: readonly number[]): Finding[] {
  const out: Finding[] = [];
  // Ids outside the chat format (no turn opener) continue by plain concatenation (sources.ts says so once).
  const plain = followsChatFormat(traj, ctx.profile.ids.grammar.openers) === false;
  for (let k = 0; k + 1 < traj.turns.length; k++) {
    const f = prefixBreak(ctx.profile, traj.turns[k]!, traj.turns[k + 1]!, k + 1, closeIds, plain);
    if (f) out.push(f);
  }
  return out;
}

/**
 * The `prefix_break` between two consecutive turns (`next` is turn `nextTurn`), or undefined when
 * `next`'s prompt extends `cur` or either lacks prompt ids. Shared by `checkPrefixes` and the
 * gateway's per-call guard, which holds only the session's previous turn.
 */
export function prefixBreak(
  profile: ModelProfile,
  cur: Turn,
  next: Turn,
  nextTurn: number,
  closeIds: readonly number[],
  plain: boolean,
): Finding | undefined {
  if (!cur.promptIds || !next.promptIds) return undefined;
  const stopIds = turnStopIds(profile);
  const gen = cur.generatedIds ?? [];
  let expected: number[] | undefined;
  if (extendsTurn(next.promptIds, cur, closeIds, stopIds, plain)) {
    // Where nothing closes a turn after its stop token (Kimi's end of turn, GLM's role token that
    // is also the next turn's opener), the stop written again right after the boundary is the
    // duplicated end: no family's next turn begins with the token that ended the last one.
    const at = expectedNextPrompt(cur, closeIds, stopIds, plain)!.length;
    const stop = gen[gen.length - 1];
    if (plain || stop === undefined || !stopIds.includes(stop) || next.promptIds[at] !== stop) return undefined;
    expected = [...next.promptIds.slice(0, at), ...next.promptIds.slice(at + 1)];
  } else expected = expectedNextPrompt(cur, closeIds, stopIds, plain);
  if (!expected) return undefined;
  const d = firstDivergence(profile, expected, next.promptIds, {
    prefixOnly: true,
    generated: [[cur.promptIds.length, cur.promptIds.length + gen.length]],
  });
  if (!d) return undefined;
  const k = nextTurn - 1;
  const inGenerated = d.expectedIndex >= cur.promptIds.length && d.expectedIndex < cur.promptIds.length + gen.length;
  const where =
    d.expectedIndex < cur.promptIds.length
      ? `turn ${k}'s prompt`
      : inGenerated
        ? `turn ${k}'s generated tokens`
        : `the boundary after turn ${k}`;
  return {
    kind: 'prefix_break',
    cause: d.cause,
    severity: 'error',
    turn: nextTurn,
    index: d.actualIndex,
    stream: 'prompt',
    expected: d.expectedTokens,
    actual: d.actualTokens,
    message: `turn ${nextTurn}'s prompt stops extending turn ${k} at token ${d.actualIndex} (in ${where}): ${d.explanation}`,
  };
}

/** The conversation rendered again from messages, the way a re-rendering rollout loop builds the next prompt. */
/**
 * The conversation rendered again from its messages. An image whose size cannot be read (a missing
 * file, a remote URL not fetched) takes the pad count of its run in the stored stream: the stored
 * run is the authority (docs/reference/image-math.md), and guessing would report a re-render
 * mismatch that is only the missing file.
 */
export async function rerenderConversation(
  traj: Trajectory,
  ctx: AnalysisContext,
  alignment?: Alignment,
): Promise<number[] | undefined> {
  const last = traj.turns[traj.turns.length - 1];
  if (!last?.messages) return undefined;
  const ids = last.generatedIds;
  const assistantText =
    last.generatedText ??
    (ids ? await inStepAsync('tokenize', () => ctx.profile.tokenizer.decode(ids, true)) : undefined);
  const messages: Message[] = [...last.messages];
  if (assistantText !== undefined) messages.push({ role: 'assistant', content: assistantText });
  if (last.observationMessages) messages.push(...last.observationMessages);
  const rendered = await renderTokens(
    ctx.profile,
    messages,
    {
      addGenerationPrompt: !!last.observationMessages || assistantText === undefined,
      tools: last.tools,
      as: renderSemanticsFor(traj),
    },
    withStoredCounts(expectedMedia(ctx), alignment),
  );
  return rendered.expanded;
}

/** Images whose size is unknown take the pad count of their run in the canonical stream. */
function withStoredCounts(media: MediaRuns, alignment: Alignment | undefined): MediaRuns {
  const stored = padCountExpansions((alignment?.placeholderRanges ?? []).map((r) => r.length)).images;
  const n = Math.max(media.images.length, stored.length);
  return { ...media, images: Array.from({ length: n }, (_, k) => media.images[k] ?? stored[k]) };
}

/**
 * `rerender_mismatch`: the re-rendered conversation against the canonical stream (closed with
 * the EOS-aware boundary). A warning when the stored data kept the generated ids (re-rendering
 * would corrupt it); an error when a stored prompt or sample was built from the re-render.
 */
export function checkRerender(
  traj: Trajectory,
  ctx: AnalysisContext,
  alignment: Alignment,
  rerender: number[],
  closeIds: readonly number[],
): Finding[] {
  const last = traj.turns[traj.turns.length - 1];
  const canonical = closedCanonical(
    traj,
    alignment,
    closeIds,
    turnStopIds(ctx.profile),
    ctx.profile.ids.grammar.stopOpensTurn,
  );
  // Without the last turn's generated ids the canonical stream ends at its prompt: the re-render may run on.
  // So with none generated (slime's aborted or pending Sample, response_length 0): its empty answer renders closed.
  const d = firstDivergence(ctx.profile, canonical, rerender, {
    generated: alignment.turns.map((s) => s.generated),
    ...(last && !last.generatedIds?.length ? { prefixOnly: true } : {}),
  });
  if (!d) return [];
  const stored: number[][] = [];
  if (traj.sample) stored.push(traj.sample.tokens);
  for (const t of traj.turns) if (t.promptIds) stored.push(t.promptIds);
  const upTo = rerender.slice(0, d.hunk.bEnd);
  const builtFromRerender =
    traj.sample?.builtFromRerender === true ||
    stored.some(
      (s) =>
        s.length >= upTo.length &&
        d.hunk.bEnd > d.hunk.bStart &&
        startsWith(s, upTo) &&
        commonPrefixLength(s, canonical) <= d.hunk.aStart,
    );
  const turn = alignment.turns.findIndex((s) => d.expectedIndex < s.observation[1]);
  return [
    {
      kind: 'rerender_mismatch',
      cause: d.cause,
      severity: builtFromRerender ? 'error' : 'warning',
      turn: turn < 0 ? traj.turns.length - 1 : turn,
      index: d.expectedIndex,
      stream: 'canonical',
      expected: d.expectedTokens,
      actual: d.actualTokens,
      message: `re-rendering the conversation diverges from the generated tokens at token ${d.expectedIndex}: ${d.explanation}${
        builtFromRerender
          ? '; the stored data was built from this re-render'
          : '; the stored ids are right, re-rendering them would corrupt them'
      }`,
    },
  ];
}

/** `sample_mismatch`: the stored training sample must hold the canonical stream (generated ids verbatim where they belong). */
export function checkSample(traj: Trajectory, ctx: AnalysisContext, alignment: Alignment): Finding[] {
  if (!traj.sample || alignment.promptFrom === 'none') return [];
  const d = firstDivergence(ctx.profile, alignment.tokens, traj.sample.tokens, {
    generated: alignment.turns.map((s) => s.generated),
  });
  if (!d) return [];
  const turn = alignment.turns.findIndex((s) => d.expectedIndex < s.observation[1]);
  const inGenerated = alignment.turns.some(
    (s) => d.expectedIndex >= s.generated[0] && d.expectedIndex < s.generated[1],
  );
  return [
    {
      kind: 'sample_mismatch',
      cause: d.cause,
      severity: 'error',
      turn: turn < 0 ? traj.turns.length - 1 : turn,
      index: d.actualIndex,
      stream: 'sample',
      expected: d.expectedTokens,
      actual: d.actualTokens,
      message: `the stored sample departs from the canonical stream at token ${d.actualIndex}${inGenerated ? ' inside generated tokens' : ''}: ${d.explanation}`,
    },
  ];
}

/** Image checks on every stream the data holds: pad counts, image counts, truncation, declared ranges. */
export function checkImages(traj: Trajectory, ctx: AnalysisContext): Finding[] {
  const out: Finding[] = [];
  const { ids, vision } = ctx.profile;
  const family = ctx.profile.modelFamily;
  const endName = tokenName(ctx.profile, [ids.media.image.end]);
  const padName = tokenName(ctx.profile, [ids.media.image.pad]);
  const observed = observedStream(traj);
  // No ids at all (slime's Sample aborted before its prompt was tokenized): no placeholder was dropped.
  if (!observed || observed.tokens.length === 0) return out;
  const spans = imageSpans(traj, observed.tokens, ctx.profile).filter((s) => s.kind === 'image');
  const stream = observed.name;
  const turn = observed.turn;
  const grids = traj.sample?.imageGridThw;

  const imagesKnown = traj.images.length > 0 || (grids?.length ?? 0) > 0;
  const expectedImages = traj.images.length > 0 ? traj.images.length : (grids?.length ?? 0);
  if (imagesKnown && spans.length !== expectedImages) {
    const truncatedTail = spans.length < expectedImages && spans.length > 0 && spans[spans.length - 1]!.end < 0;
    if (!truncatedTail) {
      out.push({
        kind: 'image_count',
        severity: 'error',
        turn,
        index: spans[expectedImages]?.start ?? -1,
        stream,
        expected: expectedImages,
        actual: spans.length,
        message: `${expectedImages} image${expectedImages === 1 ? '' : 's'} in the ${traj.images.length > 0 ? 'messages' : 'stored image_grid_thw'} but ${spans.length} vision span${spans.length === 1 ? '' : 's'} in the tokens${spans.length > expectedImages ? ': pads expanded twice or an image dropped before training' : ': an image was dropped from the tokens'}`,
      });
    }
  }

  spans.forEach((span, i) => {
    // A stream that starts inside a pad run (cut on the left) is reported by truncation.ts.
    if (span.start < 0 && span.padStart === 0) return;
    const img = ctx.images[i];
    const grid = grids?.[i];
    const fromGrid = grid ? family.padCountFromGrid(grid, img?.vision ?? vision) : undefined;
    const fromSize = img?.tokens?.padCount;
    if (span.end < 0) {
      const expected = fromGrid ?? fromSize;
      out.push({
        kind: 'image_truncated',
        severity: 'error',
        turn,
        index: span.padStart,
        stream,
        image: i,
        expected,
        actual: span.padLength,
        message: `the sequence is cut inside image ${i}: ${span.padLength}${expected ? ` of ${expected}` : ''} pad tokens and no ${endName}; the trainer gets pixels for a whole image and tokens for part of it`,
      });
      return;
    }
    if (fromGrid !== undefined && fromGrid !== span.padLength) {
      out.push({
        kind: 'placeholder_count',
        severity: 'error',
        turn,
        index: span.padStart,
        stream,
        image: i,
        expected: fromGrid,
        actual: span.padLength,
        message: `image ${i} has ${span.padLength} pad tokens but its image_grid_thw [${grid!.join(', ')}] gives ${fromGrid}`,
      });
    } else if (fromSize !== undefined && fromSize !== span.padLength) {
      const img0 = traj.images[i];
      const agreesWithGrid = fromGrid === span.padLength;
      out.push({
        kind: 'placeholder_count',
        severity: agreesWithGrid ? 'warning' : 'error',
        turn,
        index: span.padStart,
        stream,
        image: i,
        expected: fromSize,
        actual: span.padLength,
        // Processor settings are named where they bound the family's resize (Qwen's pixel bounds and grid).
        message: `image ${i} is ${img0?.width}×${img0?.height}: ${
          family.pixelBounds
            ? `with min_pixels=${img!.vision.minPixels}, max_pixels=${img!.vision.maxPixels} it gives ${fromSize} pad tokens (grid [${img!.tokens!.gridThw.join(', ')}])`
            : `${family.label}'s processor gives it ${fromSize} ${padName} tokens`
        } but the sequence holds ${span.padLength}${
          agreesWithGrid
            ? ' (consistent with the stored grid: the run used other processor settings; pass --min-pixels/--max-pixels)'
            : ''
        }`,
      });
    }
  });

  // Declared ranges must cover exactly the pad runs.
  const declared: {
    ranges: { offset: number; length: number }[];
    tokens: number[];
    stream: StreamName;
    turn: number;
    what: string;
  }[] = [];
  if (traj.sample?.placeholderRanges)
    declared.push({
      ranges: traj.sample.placeholderRanges,
      tokens: traj.sample.tokens,
      stream: 'sample',
      turn: -1,
      what: 'placeholder range',
    });
  if (traj.sample?.mmTokenTypeIds) {
    const runs: { offset: number; length: number }[] = [];
    const ids = traj.sample.mmTokenTypeIds;
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] === 0) continue;
      let j = i;
      while (j < ids.length && ids[j] === ids[i]) j++;
      runs.push({ offset: i, length: j - i });
      i = j - 1;
    }
    declared.push({
      ranges: runs,
      tokens: traj.sample.tokens,
      stream: 'sample',
      turn: -1,
      what: 'mm_token_type_ids run',
    });
  }
  traj.turns.forEach((t, k) => {
    if (t.placeholders && t.promptIds)
      declared.push({
        ranges: t.placeholders,
        tokens: t.promptIds,
        stream: 'prompt',
        turn: k,
        what: 'mm_placeholders range',
      });
  });
  for (const d of declared) {
    const runs = padRuns(d.tokens, ids);
    const n = Math.max(runs.length, d.ranges.length);
    for (let i = 0; i < n; i++) {
      const r = d.ranges[i];
      const run = runs[i];
      if (r && run && r.offset === run.offset && r.length === run.length) continue;
      out.push({
        kind: 'placeholder_range',
        severity: 'error',
        turn: d.turn,
        index: r?.offset ?? run?.offset ?? -1,
        stream: d.stream,
        image: i,
        expected: run ? { offset: run.offset, length: run.length } : null,
        actual: r ? { offset: r.offset, length: r.length } : null,
        message: !r
          ? `pad run ${i} at ${run!.offset} (${run!.length} pads) has no declared ${d.what}`
          : !run
            ? `declared ${d.what} ${i} {offset ${r.offset}, length ${r.length}} covers no pad run`
            : `declared ${d.what} ${i} {offset ${r.offset}, length ${r.length}} does not cover the pad run {offset ${run.offset}, length ${run.length}}`,
      });
      break;
    }
  }
  return out;
}

/** How many entries the sample's per-token arrays must have (every token, or the response). */
function sampleScopeLength(s: NonNullable<Trajectory['sample']>): number {
  return s.maskScope === 'full' ? s.tokens.length : (s.responseLength ?? s.tokens.length);
}

/**
 * `length_mismatch` and `mask_mismatch` on the stored training fields: a call's logprobs against
 * its generated ids on `canonical`, the sample's arrays on `sample` (positions.ts), each with the
 * turn its token belongs to.
 */
export function checkLengthsAndMasks(traj: Trajectory, ctx: AnalysisContext, alignment: Alignment): Finding[] {
  const out: Finding[] = [];
  const sampleTurn = sampleTurnOf(traj);
  // Turns split from a stored sample take their logprobs from it: a sample array of the wrong length
  // is reported once, on the sample, where its first token without a partner is.
  const sampleLogprobsOff = !!traj.sample?.logprobs && sampleScopeLength(traj.sample) !== traj.sample.logprobs.length;
  traj.turns.forEach((t, k) => {
    if (
      !sampleLogprobsOff &&
      t.generatedIds &&
      t.generatedLogprobs &&
      t.generatedLogprobs.length !== t.generatedIds.length
    ) {
      out.push({
        kind: 'length_mismatch',
        severity: 'error',
        turn: k,
        index:
          (alignment.turns[k]?.generated[0] ?? t.promptIds?.length ?? 0) +
          Math.min(t.generatedLogprobs.length, t.generatedIds.length),
        stream: 'canonical',
        expected: t.generatedIds.length,
        actual: t.generatedLogprobs.length,
        message: `turn ${k} has ${t.generatedIds.length} generated tokens but ${t.generatedLogprobs.length} logprobs`,
      });
    }
  });
  const s = traj.sample;
  if (!s) return out;
  const total = s.tokens.length;
  const respLen = s.responseLength;
  if (respLen !== undefined && respLen > total) {
    out.push({
      kind: 'length_mismatch',
      severity: 'error',
      turn: -1,
      index: -1,
      stream: 'sample',
      expected: `<= ${total}`,
      actual: respLen,
      message: `response_length ${respLen} is longer than the ${total} tokens of the sample`,
    });
    return out;
  }
  const scopeLen = s.maskScope === 'full' ? total : (respLen ?? total);
  const offset = total - scopeLen;
  const what = s.maskScope === 'full' ? 'tokens' : 'response_length';
  for (const [name, arr] of [
    ['loss_mask', s.lossMask],
    ['rollout_log_probs', s.logprobs],
  ] as const) {
    if (arr && arr.length !== scopeLen) {
      const index = offset + Math.min(arr.length, scopeLen);
      out.push({
        kind: 'length_mismatch',
        severity: 'error',
        turn: sampleTurn(index),
        index,
        stream: 'sample',
        expected: scopeLen,
        actual: arr.length,
        message: `${name} has ${arr.length} entries but ${what} is ${scopeLen}: the training fields are shifted against the tokens`,
      });
    }
  }
  // Which tokens the mask must train is read from the chat structure: the profile's ids.
  if (s.lossMask && s.lossMask.length === scopeLen && ctx.profile.uncoveredModel === undefined) {
    // Assistant turns before the first trained token are prompt history (few-shot, earlier episodes): not judged.
    const promptLength = respLen !== undefined ? total - respLen : Math.max(0, s.lossMask.indexOf(1));
    const expected = expectedMask(s.tokens, ctx.profile.ids.grammar, promptLength);
    // Where the chat structure allows either value (an assistant's end of turn: generated when the
    // model stopped, appended after a turn cut by length), the canonical re-alignment decides: it
    // knows which tokens were generated. Judged only where the sample holds the canonical stream.
    const canonicalUpTo = commonPrefixLength(s.tokens, alignment.tokens);
    for (let i = 0; i < scopeLen; i++) {
      const at = offset + i;
      let want = expected[at];
      const fromCanonical = (want === undefined || want < 0) && at >= promptLength && at < canonicalUpTo;
      if (fromCanonical) want = alignment.lossMask[at];
      const got = s.lossMask[i];
      if (got !== 0 && got !== 1) continue; // invalid_value (checkValues)
      if (want === undefined || want < 0 || want === got) continue;
      const end = ctx.profile.ids.grammar.endOfTurn ?? ctx.profile.ids.eos;
      const eos = s.tokens[at] === end;
      const endText = ctx.profile.tokenizer.piece(end);
      out.push({
        kind: 'mask_mismatch',
        severity: 'error',
        turn: sampleTurn(at),
        index: at,
        stream: 'sample',
        expected: want,
        actual: got,
        message: fromCanonical
          ? want === 0
            ? `loss mask is 1 at token ${at}, ${eos ? `an ${endText} appended to close a turn cut by length` : 'a token appended to the generation'}: the model would be trained on a token it did not generate`
            : `loss mask is 0 at token ${at}, ${eos ? `the ${endText} the model generated to end its turn: the model is not trained to stop` : `a token the model generated (its logprob is the sampler's): it is left out of training`}`
          : want === 0
            ? `loss mask is 1 at token ${at}, which belongs to ${describeRole(s.tokens, at, ctx)}: the model would be trained on text it did not generate`
            : `loss mask is 0 at token ${at}, inside the assistant's generated text: a generated token is left out of training`,
      });
      break;
    }
  }
  return out;
}

function describeRole(tokens: readonly number[], index: number, ctx: AnalysisContext): string {
  const { ids, tokenizer } = ctx.profile;
  for (let i = index; i >= 0; i--) {
    const header = ids.grammar.openers.includes(tokens[i]!) ? ids.grammar.header(tokens, i) : undefined;
    if (header) {
      const [from, to] = header.roleSpan;
      const role =
        (tokenizer.decodeSync(tokens.slice(from, Math.min(to, from + 2))).split('\n')[0] ?? '').trim() || '?';
      return i === index ? 'a turn header' : `${/^[aeiou]/i.test(role) ? 'an' : 'a'} ${role} turn`;
    }
  }
  return 'the prompt';
}

/**
 * The checks that need neither the model's tokenizer, nor its template, nor its ids: for a model
 * the data names that no profile covers (ModelProfile `uncoveredModel`), which is never checked
 * as another. What is no value at all (a NaN or negative id, a logprob that is none, a mask value
 * other than 0/1), arrays of the wrong length, rollout against trainer logprobs, zero-filled
 * logprobs, the engine's prompt count against the ids the log holds, and what the importer found.
 * The stream is kept as stored, not re-aligned.
 */
async function checkWithoutTokenizer(traj: Trajectory, ctx: AnalysisContext): Promise<CheckResult> {
  const alignment = storedAlignment(traj, ctx.profile.uncoveredModel!);
  const findings: Finding[] = [
    ...checkValues(traj, ctx, alignment),
    ...checkLengthsAndMasks(traj, ctx, alignment),
    ...mismatchFindings(logprobMismatch(traj, ctx.mismatch), ctx.mismatch, sampleTurnOf(traj)),
    ...checkZeroFilledLogprobs(traj, alignment),
    ...(traj.sourceFindings ?? []),
    ...(await checkStatedPromptTokens(traj, ctx)),
  ];
  return { findings: sortFindings(findings), alignment };
}

/** The stream as the data holds it, for a trajectory that cannot be re-aligned (no profile covers its model). */
function storedAlignment(traj: Trajectory, model: string): Alignment {
  const observed = observedStream(traj);
  const tokens = observed?.tokens ?? [];
  const s = traj.sample;
  const responseLength = s ? (s.responseLength ?? 0) : (traj.turns[traj.turns.length - 1]?.generatedIds?.length ?? 0);
  return {
    tokens,
    lossMask: tokens.map(() => 0),
    logprobs: tokens.map(() => 0),
    promptLength: tokens.length - responseLength,
    responseLength,
    promptFrom: s ? 'sample' : traj.turns[0]?.promptIds ? 'engine' : 'none',
    turns: [],
    imageGridThw: [],
    placeholderRanges: [],
    notes: [`${model}: no profile covers the model, so the stream is shown as stored, not re-aligned`],
  };
}
