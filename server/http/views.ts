// API views of one checked trajectory: its detail, any of its token streams, a token-aligned
// diff of two of them, and its images. Everything the app shows is computed here from the
// shared analysis (checks, realign, classify, image math); the app only lays it out.
import type { VisionConfig } from '../model/vision.ts';
import type { Finding, FindingKind, StreamName } from '../model/finding.ts';
import type { CheckedTrajectory, RunOptions } from '../pipeline.ts';
import { streamTokens } from '../pipeline.ts';
import { analysisContext, type AnalysisContext } from '../analysis/context.ts';
import { observedStream } from '../analysis/checks.ts';
import { imageSpans } from '../analysis/stray-vision.ts';
import { diffTokens, type Hunk } from '../analysis/diff.ts';
import { firstDivergence } from '../analysis/classify.ts';
import { turnCloseIds, turnStopIds } from '../analysis/render.ts';
import { closedCanonical, expectedNextPrompt } from '../analysis/expected-streams.ts';
import { followsChatFormat } from '../analysis/sources.ts';
import { rootCauses } from '../analysis/root-cause.ts';
import { partialByteJoins, visiblePiece } from '../profiles/tokenizer.ts';
import { textDisplay, tokenDisplay, type ModelProfile } from '../profiles/profile.ts';
import type {
  DiffA,
  DiffB,
  DiffPair,
  DiffQuery,
  DiffResult,
  FindingTarget,
  ImageInfo,
  LocatedFinding,
  Pieces,
  StreamInfo,
  TokenStream,
  TrajectoryDetail,
  TrajectorySummary,
  TurnMark,
  VisionSpanInfo,
} from './api.ts';

export class NotFound extends Error {}

export function contextOf(c: CheckedTrajectory, opts: RunOptions): AnalysisContext {
  return analysisContext(c.trajectory, c.profile, opts.processor);
}

export function availableStreams(c: CheckedTrajectory): StreamInfo[] {
  const out: StreamInfo[] = [];
  if (c.alignment.tokens.length > 0)
    out.push({ name: 'canonical', turn: -1, length: c.alignment.tokens.length, label: 'canonical (re-aligned)' });
  if (c.trajectory.sample)
    out.push({ name: 'sample', turn: -1, length: c.trajectory.sample.tokens.length, label: 'stored training sample' });
  c.trajectory.turns.forEach((t, k) => {
    if (t.promptIds)
      out.push({
        name: 'prompt',
        turn: k,
        length: t.promptIds.length + (t.generatedIds?.length ?? 0),
        label: `turn ${k} prompt + generation`,
      });
  });
  if (c.rerender)
    out.push({ name: 'rerender', turn: -1, length: c.rerender.length, label: 're-rendered conversation' });
  return out;
}

/**
 * The diff that shows a finding of each kind (its token is on `side`), or null when the
 * finding is seen best in its own stream at its token. Every kind must say.
 */
export const DIFF_OF_KIND: Readonly<Record<FindingKind, { a: DiffA; b: DiffB; side: 'a' | 'b' } | null>> = {
  prefix_break: { a: 'prompt', b: 'prompt', side: 'b' },
  rerender_mismatch: { a: 'canonical', b: 'rerender', side: 'a' },
  sample_mismatch: { a: 'canonical', b: 'sample', side: 'b' },
  placeholder_count: null,
  video_timestamps: null,
  image_count: null,
  image_truncated: null,
  placeholder_range: null,
  length_mismatch: null,
  mask_mismatch: null,
  invalid_value: null,
  logprob_mismatch: null,
  logprob_shift: null,
  trained_mismatch: null,
  grouping_ambiguous: null,
  prompt_tokens_mismatch: null,
  chain_split: { a: 'prompt', b: 'prompt', side: 'b' },
  chat_format_unrecognized: null,
  non_canonical_split: null,
  group: null,
  analysis_failed: null,
  session_lost: null,
};

/** The diff of `f`'s divergence, when its kind has one (the prefix pair is the finding's turn). */
export function diffOfFinding(f: Finding): (DiffPair & { side: 'a' | 'b' }) | undefined {
  const d = DIFF_OF_KIND[f.kind];
  return d ? { a: d.a, b: d.b, turn: d.a === 'prompt' ? f.turn : 0, side: d.side } : undefined;
}

const samePair = (x: DiffPair, y: DiffPair) => x.a === y.a && x.b === y.b && x.turn === y.turn;

/** Pairs worth diffing: every consecutive pair of prompts, canonical vs re-render, canonical vs stored sample. */
export function availableDiffs(c: CheckedTrajectory): TrajectoryDetail['diffs'] {
  const pairs: (DiffPair & { label: string })[] = [];
  for (let k = 1; k < c.trajectory.turns.length; k++) {
    if (!c.trajectory.turns[k - 1]!.promptIds || !c.trajectory.turns[k]!.promptIds) continue;
    pairs.push({ a: 'prompt', b: 'prompt', turn: k, label: `turn ${k - 1} prompt + generation vs turn ${k} prompt` });
  }
  if (c.rerender) pairs.push({ a: 'canonical', b: 'rerender', turn: 0, label: 'canonical vs re-rendered' });
  if (c.trajectory.sample) pairs.push({ a: 'canonical', b: 'sample', turn: 0, label: 'canonical vs stored sample' });
  const divergent = c.findings.map(diffOfFinding).filter((d) => d !== undefined);
  return pairs
    .map((p) => ({ ...p, diverges: divergent.some((d) => samePair(d, p)) }))
    .sort((x, y) => Number(y.diverges) - Number(x.diverges));
}

/** Where the app shows `f`: the diff of its divergence when the trajectory has it, else its stream at its token. */
export function findingTarget(
  f: Finding,
  diffs: readonly DiffPair[],
  streams: readonly StreamInfo[],
): FindingTarget | null {
  const token = f.index >= 0 ? f.index : null;
  // Logprob findings exist only where the sample has trainer logprobs: the logprob view shows them.
  if (f.kind === 'logprob_mismatch' || f.kind === 'logprob_shift') return { view: 'logprobs', token };
  const diff = diffOfFinding(f);
  if (diff && diffs.some((d) => samePair(d, diff))) return { view: 'diff', ...diff, token };
  const stream = f.stream ?? 'canonical';
  const turn = stream === 'prompt' ? f.turn : -1;
  if (!streams.some((s) => s.name === stream && s.turn === turn)) return null;
  return { view: 'stream', stream, turn, token };
}

/** The detail with its GRPO group's findings after the trajectory's own: the group's, seen in no stream (no target). */
export function withGroupFindings(detail: TrajectoryDetail, group: readonly Finding[]): TrajectoryDetail {
  if (group.length === 0) return detail;
  const findings = [...detail.findings, ...group.map((f) => ({ ...f, target: null }))];
  return { ...detail, findings, causes: rootCauses(findings) };
}

export function trajectoryDetail(summary: TrajectorySummary, c: CheckedTrajectory, opts: RunOptions): TrajectoryDetail {
  const streams = availableStreams(c);
  const diffs = availableDiffs(c);
  const findings: LocatedFinding[] = c.findings.map((f) => ({ ...f, target: findingTarget(f, diffs, streams) }));
  return {
    summary,
    model: c.trajectory.model ?? null,
    profile: c.profile.name,
    findings,
    limitations: c.trajectory.limitations,
    notes: c.alignment.notes,
    streams,
    images: imageInfos(c, opts),
    diffs,
    meta: c.trajectory.meta ?? null,
    causes: rootCauses(findings),
  };
}

/** Visible pieces of the distinct ids, which are special, and where a character spans tokens (for token chips). */
export function pieces(profile: ModelProfile, ids: readonly number[]): Pieces {
  const tok = profile.tokenizer;
  const out: Record<string, string> = {};
  if (profile.uncoveredModel !== undefined) {
    for (const id of new Set(ids)) out[id] = tokenDisplay(profile, id);
    return { pieces: out, specialIds: [], joins: [] };
  }
  const specialIds: number[] = [];
  for (const id of new Set(ids)) {
    out[id] = visiblePiece(tok.piece(id));
    if (tok.isAdded(id)) specialIds.push(id);
  }
  return { pieces: out, specialIds, joins: partialByteJoins(tok, ids) };
}

export function visionSpans(
  ids: readonly number[],
  c: CheckedTrajectory,
  ctx: AnalysisContext,
  firstImage = 0,
): VisionSpanInfo[] {
  let image = firstImage;
  // Vision tokens the model generated are its text, not an image: they take no image's number.
  return imageSpans(c.trajectory, ids, c.profile).map((s) => {
    const i = s.kind === 'image' ? image++ : -1;
    const math = ctx.images[i]?.tokens;
    const stored = c.trajectory.sample?.imageGridThw?.[i];
    const vision = ctx.images[i]?.vision ?? c.profile.vision;
    return {
      image: i,
      kind: s.kind,
      start: s.start,
      padStart: s.padStart,
      padLength: s.padLength,
      end: s.end,
      expectedPads: math?.padCount ?? (stored ? safePadCount(c.profile, stored, vision) : null),
      gridThw: math?.gridThw ?? stored ?? null,
      cellsWide: math?.cellsWide ?? (stored ? cellsWideOfGrid(c.profile, stored, vision) : null),
    };
  });
}

/** Merged cells per row of a stored grid (grid_w / merge), null when the grid cannot come from the family's processor. */
export function cellsWideOfGrid(
  profile: Pick<ModelProfile, 'modelFamily'>,
  grid: readonly [number, number, number],
  vision: VisionConfig,
): number | null {
  return safePadCount(profile, grid, vision) === null ? null : grid[2] / vision.mergeSize;
}

/** The pads a stored grid implies (the family's formula), null when no processor of the family makes it. */
function safePadCount(
  profile: Pick<ModelProfile, 'modelFamily'>,
  grid: readonly [number, number, number],
  vision: VisionConfig,
): number | null {
  try {
    return profile.modelFamily.padCountFromGrid([...grid], vision);
  } catch {
    return null;
  }
}

export function tokenStream(
  c: CheckedTrajectory,
  name: StreamName,
  turn: number,
  opts: RunOptions,
  head?: number,
): TokenStream {
  const ids = streamTokens(c, name, turn);
  if (!ids)
    throw new NotFound(
      `trajectory ${c.trajectory.id} has no ${name} stream${name === 'prompt' ? ` for turn ${turn}` : ''}`,
    );
  const ctx = contextOf(c, opts);
  const vision = visionSpans(ids, c, ctx);
  // Per-token arrays are built for the tokens sent only: a head of a 128k-token stream costs its head.
  const n = head === undefined ? ids.length : headEnd(c.profile, ids, vision, head);
  const cutting = n < ids.length;
  const perToken = <T>(f: (i: number) => T): T[] => {
    const out = new Array<T>(n);
    for (let i = 0; i < n; i++) out[i] = f(i);
    return out;
  };
  let lossMask: (number | null)[] | null = null;
  let logprobs: (number | null)[] | null = null;
  const turns: TurnMark[] = [{ index: 0, turn: name === 'prompt' ? turn : 0, what: 'prompt' }];
  if (name === 'canonical') {
    const { lossMask: mask, logprobs: lps } = c.alignment;
    lossMask = mask.slice(0, n);
    // Observation tokens carry a filler logprob of 0: there is no logprob to show there.
    logprobs = perToken((i) => (mask[i] === 1 ? lps[i]! : null));
    for (const s of c.alignment.turns) {
      turns.push({ index: s.generated[0], turn: s.turn, what: 'generated' });
      if (s.observation[1] > s.observation[0])
        turns.push({ index: s.observation[0], turn: s.turn, what: 'observation' });
    }
  } else if (name === 'prompt') {
    const t = c.trajectory.turns[turn]!;
    const p = t.promptIds?.length ?? 0;
    lossMask = perToken((i) => (i < p ? 0 : 1));
    logprobs = perToken((i) => (i < p ? null : (t.generatedLogprobs?.[i - p] ?? null)));
    turns.push({ index: p, turn, what: 'generated' });
  } else if (name === 'sample') {
    const s = c.trajectory.sample!;
    const offset = s.maskScope === 'full' ? 0 : ids.length - (s.responseLength ?? 0);
    const at = (arr: readonly (number | null)[] | undefined, i: number) =>
      arr && i >= offset ? (arr[i - offset] ?? null) : null;
    lossMask = s.lossMask ? perToken((i) => at(s.lossMask, i)) : null;
    logprobs = s.logprobs ? perToken((i) => at(s.logprobs, i)) : null;
    if (s.responseLength !== undefined)
      turns.push({ index: ids.length - s.responseLength, turn: -1, what: 'response' });
  }
  const badLogprobs: number[] = [];
  logprobs?.forEach((x, i) => {
    if (x !== null && (!Number.isFinite(x) || x > 1e-6)) badLogprobs.push(i);
  });
  const shown = ids.slice(0, n);
  return {
    name,
    turn,
    ids: shown,
    ...pieces(c.profile, shown),
    lossMask,
    logprobs: logprobs?.map((x) => (x === null || Number.isFinite(x) ? x : null)) ?? null,
    badLogprobs,
    turns: (cutting ? turns.filter((m) => m.index < n) : turns).sort((a, b) => a.index - b.index),
    vision: cutting ? vision.filter((v) => v.start < n) : vision,
    ...(head === undefined ? {} : { total: ids.length }),
  };
}

/**
 * Where the head of a stream ends: at `head` tokens, moved on past an image's pad run or a
 * character split across tokens that the cut would leave in two (the app draws each as one).
 */
export function headEnd(
  profile: ModelProfile,
  ids: readonly number[],
  vision: readonly VisionSpanInfo[],
  head: number,
): number {
  let cut = Math.min(head, ids.length);
  for (let moved = true; moved && cut < ids.length; ) {
    moved = false;
    for (const v of vision) {
      const padEnd = v.padStart + v.padLength;
      if (v.padStart < cut && cut < padEnd) {
        cut = padEnd;
        moved = true;
      }
    }
    // A split character spans at most 4 tokens: the joins near the cut are the ones that can cross it.
    const from = Math.max(0, cut - 8);
    for (const j of partialByteJoins(profile.tokenizer, ids.slice(from, cut + 8))) {
      if (from + j.start < cut && cut < from + j.end) {
        cut = from + j.end;
        moved = true;
      }
    }
  }
  return cut;
}

function rowsFor(
  aLength: number,
  bLength: number,
  hunks: readonly Hunk[],
): { rowsA: number[]; rowsB: number[]; starts: number[] } {
  const rowsA: number[] = [];
  const rowsB: number[] = [];
  const starts: number[] = [];
  let ai = 0;
  let bi = 0;
  const equalUntil = (aEnd: number) => {
    while (ai < aEnd) {
      rowsA.push(ai++);
      rowsB.push(bi++);
    }
  };
  for (const h of hunks) {
    equalUntil(h.aStart);
    starts.push(rowsA.length);
    const n = Math.max(h.aEnd - h.aStart, h.bEnd - h.bStart);
    for (let i = 0; i < n; i++) {
      rowsA.push(h.aStart + i < h.aEnd ? h.aStart + i : -1);
      rowsB.push(h.bStart + i < h.bEnd ? h.bStart + i : -1);
    }
    ai = h.aEnd;
    bi = h.bEnd;
  }
  equalUntil(aLength);
  while (bi < bLength) {
    rowsA.push(-1);
    rowsB.push(bi++);
  }
  return { rowsA, rowsB, starts };
}

const CONTEXT_TOKENS = 16;

export async function tokenDiff(c: CheckedTrajectory, q: DiffQuery): Promise<DiffResult> {
  const { profile, trajectory: traj, alignment } = c;
  const closeIds = await turnCloseIds(profile);
  let a: number[];
  let b: number[];
  let labelA: string;
  let labelB: string;
  let prefixOnly = false;
  if (q.a === 'prompt' && q.b === 'prompt') {
    const cur = traj.turns[q.turn - 1];
    const next = traj.turns[q.turn];
    // What turn k+1's prompt must start with (the expectation of checkPrefixes).
    const plain = followsChatFormat(traj, profile.ids.grammar.openers) === false;
    const expected = cur && expectedNextPrompt(cur, closeIds, turnStopIds(profile), plain);
    if (!expected || !next?.promptIds) throw new NotFound(`no prompt ids for turns ${q.turn - 1} and ${q.turn}`);
    a = expected;
    b = next.promptIds;
    labelA = `turn ${q.turn - 1} prompt + generation + boundary`;
    labelB = `turn ${q.turn} prompt`;
    prefixOnly = true;
  } else if (q.a === 'canonical' && q.b === 'rerender') {
    if (!c.rerender) throw new NotFound('this trajectory has no messages to re-render');
    // Closed as checkRerender closes it, so the divergence index matches the finding.
    a = closedCanonical(traj, alignment, closeIds, turnStopIds(profile), profile.ids.grammar.stopOpensTurn);
    b = c.rerender;
    labelA = 'canonical';
    labelB = 're-rendered';
    // As checkRerender: with nothing generated in the last turn the re-render may run on past the canonical stream.
    prefixOnly = !traj.turns[traj.turns.length - 1]?.generatedIds?.length;
  } else if (q.a === 'canonical' && q.b === 'sample') {
    if (!traj.sample) throw new NotFound('this trajectory has no stored sample');
    a = alignment.tokens;
    b = traj.sample.tokens;
    labelA = 'canonical';
    labelB = 'stored sample';
  } else
    throw new NotFound(`no diff of ${q.a} against ${q.b}; use canonical/rerender, canonical/sample or prompt/prompt`);

  return idsDiff(profile, a, b, { a: labelA, b: labelB }, prefixOnly);
}

/**
 * Two id streams aligned token by token, the first divergence classified (classify.ts) and the
 * rest diffed after it (diff.ts). Shared by the trajectory diffs and the playground. With
 * `prefixOnly`, b may run on past a (the next observation) without that being a difference.
 */
export function idsDiff(
  profile: ModelProfile,
  a: number[],
  b: number[],
  labels: { a: string; b: string },
  prefixOnly = false,
): DiffResult {
  const d = firstDivergence(profile, a, b, { prefixOnly });
  let hunks: Hunk[] = [];
  if (d) {
    // The first hunk is the classifier's (so the row shown is the finding's token); the rest is diffed after it.
    const rest = diffTokens(a.slice(d.hunk.aEnd), b.slice(d.hunk.bEnd)).map((h) => ({
      aStart: h.aStart + d.hunk.aEnd,
      aEnd: h.aEnd + d.hunk.aEnd,
      bStart: h.bStart + d.hunk.bEnd,
      bEnd: h.bEnd + d.hunk.bEnd,
    }));
    hunks = [d.hunk, ...rest];
  }
  if (prefixOnly) {
    // b running on past a is the next observation, not a difference.
    hunks = hunks.filter((h) => !(h.aStart === a.length && h.aEnd === a.length && h.bEnd === b.length));
  }
  const { rowsA, rowsB, starts } = rowsFor(a.length, b.length, hunks);
  const text = (ids: number[], s: number, e: number): [string, string, string] => [
    textDisplay(profile, ids.slice(Math.max(0, s - CONTEXT_TOKENS), s)),
    textDisplay(profile, ids.slice(s, e)),
    textDisplay(profile, ids.slice(e, e + CONTEXT_TOKENS)),
  ];
  return {
    a: { label: labels.a, ids: a, ...pieces(profile, a) },
    b: { label: labels.b, ids: b, ...pieces(profile, b) },
    rowsA,
    rowsB,
    hunks: hunks.map((h, i) => ({ row: starts[i]!, ...h })),
    divergence: d
      ? {
          row: starts[0]!,
          aIndex: d.hunk.aStart,
          bIndex: d.hunk.bStart,
          cause: d.cause,
          explanation: d.explanation,
          textA: text(a, d.hunk.aStart, d.hunk.aEnd),
          textB: text(b, d.hunk.bStart, d.hunk.bEnd),
        }
      : null,
    prefixOnly,
  };
}

export function imageInfos(c: CheckedTrajectory, opts: RunOptions): ImageInfo[] {
  const ctx = contextOf(c, opts);
  const observed = observedStream(c.trajectory);
  const spans = observed ? imageSpans(c.trajectory, observed.tokens, c.profile).filter((s) => s.kind === 'image') : [];
  return c.trajectory.images.map((img, i) => {
    const e = ctx.images[i];
    const vision = e?.vision ?? c.profile.vision;
    const stored = c.trajectory.sample?.imageGridThw?.[i] ?? null;
    return {
      index: i,
      width: img.width ?? null,
      height: img.height ?? null,
      unavailable: img.unavailable ?? null,
      hasPreview: !!img.url && !img.unavailable,
      settings: {
        minPixels: vision.minPixels,
        maxPixels: vision.maxPixels,
        patchSize: vision.patchSize,
        mergeSize: vision.mergeSize,
      },
      layout: e?.tokens ?? null,
      problem: e?.problem ?? null,
      actualPads: spans[i]?.padLength ?? null,
      expectedPads: e?.tokens?.padCount ?? (stored ? safePadCount(c.profile, stored, vision) : null),
      storedGrid: stored,
    };
  });
}
