// Why two token streams diverge (docs/reference/prefix-stability.md): a duplicated or missing end
// of turn, a missing newline after it, a turn the model ended with a secondary stop token closed as
// if cut by length, the same text tokenized differently, reasoning dropped from the history, a
// tool call parsed and serialized again, vision tokens the model generated, a template that
// rewrote history otherwise (special tokens, stripped whitespace), or image pad runs of another
// length. The turn boundary is the model family's grammar (server/families/), and the
// explanations name the family's own tokens, as their pieces spell them.
import type { DivergenceCause } from '../model/finding.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import { commonPrefixLength, diffTokens, mergeNearbyHunks, type Hunk } from './diff.ts';
import { visiblePiece } from '../profiles/tokenizer.ts';
import { isVisionToken, padIdsOf } from './vision-spans.ts';

export interface Divergence {
  cause: DivergenceCause;
  /** First differing index in `expected` and in `actual`. */
  expectedIndex: number;
  actualIndex: number;
  hunk: Hunk;
  /** Tokens each side holds in the differing region (capped for display). */
  expectedTokens: number[];
  actualTokens: number[];
  /** One sentence that says what happened. */
  explanation: string;
}

const MAX_SHOWN = 12;

function count(ids: readonly number[], id: number): number {
  let n = 0;
  for (const t of ids) if (t === id) n++;
  return n;
}

/** Tokens as code spans a message names them by: their pieces, a newline written `\n`. */
export function tokenName(profile: ModelProfile, ids: readonly number[]): string {
  const text = ids.map((id) => profile.tokenizer.piece(id)).join('');
  return `\`${text.replace(/\n/g, '\\n').replace(/\t/g, '\\t')}\``;
}

/** A cause's explanation in the family's words when it has its own, else the generic one. */
function explained(profile: ModelProfile, cause: DivergenceCause, token: string, generic: string): string {
  return profile.modelFamily.explain?.(cause, token) ?? generic;
}

function quote(profile: ModelProfile, ids: readonly number[]): string {
  const text = visiblePiece(profile.tokenizer.decodeSync(ids.slice(0, MAX_SHOWN)));
  return `"${text}${ids.length > MAX_SHOWN ? '…' : ''}"`;
}

/**
 * Classify the first divergence between `expected` and `actual`. With `prefixOnly`, `actual`
 * may run on past the end of `expected` (a next prompt extending a context) without that
 * counting as a difference. Returns undefined when the streams agree.
 */
export function firstDivergence(
  profile: ModelProfile,
  expected: readonly number[],
  actual: readonly number[],
  opts: { prefixOnly?: boolean; window?: number; generated?: readonly (readonly [number, number])[] } = {},
): Divergence | undefined {
  // Diff only a window after the common prefix: the first divergence is local, and a diff of
  // whole streams would happily align the rest of a longer `actual` against later tokens.
  const lcp = commonPrefixLength(expected, actual);
  if (lcp === expected.length && (opts.prefixOnly || lcp === actual.length)) return undefined;
  const atBoundary = boundaryDivergence(profile, expected, actual, lcp, opts.generated);
  if (atBoundary) return atBoundary;
  const w = opts.window ?? 256;
  const a = expected.slice(lcp, lcp + w);
  // When `actual` may run on, compare it only a little past what `expected` still has.
  let b = actual.slice(lcp, opts.prefixOnly ? lcp + a.length + 4 : lcp + w);
  if (opts.prefixOnly) {
    // Both sides close the same assistant turn: compare up to (and as far past) the first end of turn.
    const end = profile.ids.grammar.endOfTurn ?? profile.ids.eos;
    const ea = a.indexOf(end);
    const eb = b.indexOf(end);
    if (ea >= 0 && eb >= 0) b = b.slice(0, eb + (a.length - ea));
  }
  const hunks = mergeNearbyHunks(diffTokens(a, b), 3);
  const first = hunks[0] ?? { aStart: 0, aEnd: a.length, bStart: 0, bEnd: b.length };
  const hunk: Hunk = {
    aStart: first.aStart + lcp,
    aEnd: first.aEnd + lcp,
    bStart: first.bStart + lcp,
    bEnd: first.bEnd + lcp,
  };
  return classifyHunk(profile, expected, actual, hunk, opts.generated);
}

/**
 * Turn-boundary failures read directly at the first differing token: a diff could explain an end
 * of turn followed by the next opener, against the same with the newline between, as an insertion
 * elsewhere at equal cost.
 */
function boundaryDivergence(
  profile: ModelProfile,
  expected: readonly number[],
  actual: readonly number[],
  i: number,
  generated: readonly (readonly [number, number])[] = [],
): Divergence | undefined {
  const generatedEndsAt = (end: number) => generated.some(([, e]) => e === end);
  const { grammar, eos } = profile.ids;
  const end = grammar.endOfTurn ?? eos;
  const after = grammar.afterEnd[0];
  const openers = grammar.openers;
  const e = expected[i];
  const a = actual[i];
  const prev = expected[i - 1];
  const make = (cause: DivergenceCause, hunk: Hunk, explanation: string): Divergence => ({
    cause,
    expectedIndex: i,
    actualIndex: i,
    hunk,
    expectedTokens: expected.slice(hunk.aStart, hunk.aEnd),
    actualTokens: actual.slice(hunk.bStart, hunk.bEnd),
    explanation: explained(profile, cause, tokenName(profile, [end]), explanation),
  });
  const endText = tokenName(profile, [end]);
  const afterText = after !== undefined ? tokenName(profile, [after]) : '';
  const closeText = tokenName(profile, [end, ...grammar.afterEnd]);
  const secondary = prev !== undefined && grammar.secondaryStops.includes(prev) ? prev : undefined;
  if (secondary !== undefined && after !== undefined && e === after && a === end) {
    return make(
      'secondary_eos',
      { aStart: i, aEnd: i, bStart: i, bEnd: i + 1 },
      `the turn ended with ${tokenName(profile, [secondary])}, a stop token of the model, but was closed with ${closeText} as if cut by the length limit: after a generated stop token only ${afterText} follows`,
    );
  }
  if (e !== undefined && grammar.secondaryStops.includes(e) && a === end && generatedEndsAt(i + 1)) {
    return make(
      'secondary_eos',
      { aStart: i, aEnd: i + 1, bStart: i, bEnd: i + 1 },
      `the model ended its turn with ${tokenName(profile, [e])}, a stop token of its own; decoded without special tokens and rendered again, the turn ends with the template's ${endText} instead`,
    );
  }
  if (prev === end && a === end) {
    return make(
      'duplicated_eos',
      { aStart: i, aEnd: i, bStart: i, bEnd: i + 1 },
      `${endText} appears twice: the re-rendered history closes the assistant turn again after the generated ${endText}`,
    );
  }
  if (e === end && a !== undefined && (a === after || openers.includes(a))) {
    return make(
      'missing_eos',
      { aStart: i, aEnd: i + 1, bStart: i, bEnd: i },
      `the ${endText} that closes the assistant turn is missing: the next turn starts inside the unfinished one`,
    );
  }
  if (prev === end && after !== undefined && e === after && a !== undefined && openers.includes(a)) {
    return make(
      'missing_newline',
      { aStart: i, aEnd: i + 1, bStart: i, bEnd: i },
      `the ${afterText} the template puts after ${endText} is missing: the next turn starts right after the end of turn`,
    );
  }
  return undefined;
}

/**
 * @param generated [start, end) ranges of `expected` that hold generated ids: vision tokens there
 *   are the model's own text, not an image.
 */
export function classifyHunk(
  profile: ModelProfile,
  expected: readonly number[],
  actual: readonly number[],
  hunk: Hunk,
  generated: readonly (readonly [number, number])[] = [],
): Divergence {
  const { tokenizer } = profile;
  const { grammar } = profile.ids;
  const a = expected.slice(hunk.aStart, hunk.aEnd);
  const b = actual.slice(hunk.bStart, hunk.bEnd);
  const before = expected[hunk.aStart - 1];
  const base = {
    expectedIndex: hunk.aStart,
    actualIndex: hunk.bStart,
    hunk,
    expectedTokens: a.slice(0, MAX_SHOWN),
    actualTokens: b.slice(0, MAX_SHOWN),
  };
  const pads = padIdsOf(profile.ids);
  const isPad = (t: number) => pads.includes(t);
  const eos = grammar.endOfTurn ?? profile.ids.eos;
  const eosText = tokenName(profile, [eos]);
  const after = grammar.afterEnd[0];

  const isVision = (t: number) => isVisionToken(profile.ids, t);
  const generatedVision = a.findIndex(
    (t, k) => isVision(t) && generated.some(([s, e]) => hunk.aStart + k >= s && hunk.aStart + k < e),
  );
  if (generatedVision >= 0) {
    return {
      ...base,
      cause: 'vision_token_generated',
      explanation: `the model generated ${quote(profile, a.filter(isVision))} in its own text (token ${hunk.aStart + generatedVision}): no image stands behind them, and decoding without special tokens drops them from the history`,
    };
  }
  if (a.some(isPad) || b.some(isPad)) {
    const pa = a.filter(isPad).length;
    const pb = b.filter(isPad).length;
    return {
      ...base,
      cause: 'image_tokens_changed',
      explanation:
        pa !== pb
          ? `the image placeholder run differs by ${Math.abs(pa - pb)} pad tokens (${pb > pa ? 'extra' : 'missing'} on the actual side): the image was processed with other settings or its pads were expanded differently`
          : 'image pad tokens moved: the vision span is laid out differently',
    };
  }
  const eosA = count(a, eos);
  const eosB = count(b, eos);
  if (eosB > eosA && (before === eos || actual[hunk.bStart - 1] === eos || (b[0] === eos && b[1] === eos))) {
    return {
      ...base,
      cause: 'duplicated_eos',
      explanation: explained(
        profile,
        'duplicated_eos',
        eosText,
        `${eosText} appears twice: the re-rendered history closes the assistant turn again after the generated ${eosText}`,
      ),
    };
  }
  if (eosA > eosB) {
    return {
      ...base,
      cause: 'missing_eos',
      explanation: explained(
        profile,
        'missing_eos',
        eosText,
        `the generated ${eosText} is missing: the turn is not closed where the model closed it`,
      ),
    };
  }
  if (after !== undefined && a.length >= 1 && a[0] === after && before === eos && !(b[0] === after)) {
    return {
      ...base,
      cause: 'missing_newline',
      explanation: `the ${tokenName(profile, [after])} the template puts after ${eosText} is missing: the next turn starts right after the end of turn`,
    };
  }
  const textA = tokenizer.decodeSync(a);
  const textB = tokenizer.decodeSync(b);
  const tags = profile.modelFamily.reasoningTags;
  const thinkTags = (x: string) => (tags ? x.split(tags.open).length + x.split(tags.close).length - 2 : 0);
  if (thinkTags(textA) > thinkTags(textB)) {
    const n = a.length - b.length;
    return {
      ...base,
      cause: 'reasoning_stripped',
      explanation: explained(
        profile,
        'reasoning_stripped',
        `${quote(profile, a)}${n > 0 ? `, ${n} tokens` : ''}`,
        `the reasoning the model generated (${quote(profile, a)}${n > 0 ? `, ${n} tokens` : ''}) is missing from the history: the chat template dropped it (a template that keeps reasoning only after the last user turn) or the loop re-rendered the answer without it`,
      ),
    };
  }
  const callA = toolCallAround(profile, expected, hunk.aStart);
  const callB = toolCallAround(profile, actual, hunk.bStart);
  if (callA !== undefined && callB !== undefined && callA.text !== callB.text && callA.value === callB.value) {
    return {
      ...base,
      cause: 'tool_call_reserialized',
      explanation: `the tool call the model wrote as ${quoteText(callA.text)} was parsed and serialized again as ${quoteText(callB.text)}: the same JSON value in other text (key order, spacing or number format), so other tokens`,
    };
  }
  if (textA === textB) {
    return {
      ...base,
      cause: 'retokenized',
      explanation: `same text ${quote(profile, a)}, other token ids (${a.join(' ')} vs ${b.join(' ')}): decoded and tokenized again, the model's own split was lost`,
    };
  }
  const specialA = a.filter((t) => tokenizer.isAdded(t));
  const specialB = b.filter((t) => tokenizer.isAdded(t));
  const squash = (s: string) => s.replace(/\s+/g, '');
  const sorted = (x: string) => [...squash(x)].sort().join('');
  const looksJson = /[{}":]/.test(textA + textB);
  let detail: string | undefined;
  if (looksJson && textA !== textB && sorted(textA) === sorted(textB))
    detail = 'tool-call JSON re-serialized (separators or key order changed)';
  else if (squash(textA) === squash(textB)) detail = 'whitespace changed (stripped or re-indented text)';
  if (detail || specialA.join() !== specialB.join()) {
    return {
      ...base,
      cause: 'template_changed',
      explanation: `the template rendered the history differently: ${detail ?? `special tokens ${quote(profile, specialA)} vs ${quote(profile, specialB)}`} (${quote(profile, a)} vs ${quote(profile, b)})`,
    };
  }
  return { ...base, cause: 'other', explanation: `different tokens: ${quote(profile, a)} vs ${quote(profile, b)}` };
}

function quoteText(text: string): string {
  const t = visiblePiece(text.trim());
  return `\`${t.length > 60 ? `${t.slice(0, 60)}…` : t}\``;
}

/** JSON with object keys sorted, so two serializations of one value compare equal. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

const TOOL_REACH = 512;

/**
 * The tool-call block (the family parser's open … close) of `stream` that holds token `at`: its JSON text and its
 * value (keys sorted; `2.0` and `2` are one number). Undefined outside a block or when the text
 * is not JSON.
 */
function toolCallAround(
  profile: ModelProfile,
  stream: readonly number[],
  at: number,
): { text: string; value: string } | undefined {
  const tok = profile.tokenizer;
  const { open: TOOL_OPEN, close: TOOL_CLOSE } = profile.modelFamily.toolCalls;
  const before = tok.decodeSync(stream.slice(Math.max(0, at - TOOL_REACH), at));
  const open = before.lastIndexOf(TOOL_OPEN);
  if (open < 0 || before.indexOf(TOOL_CLOSE, open) >= 0) return undefined;
  const after = tok.decodeSync(stream.slice(at, at + TOOL_REACH));
  const close = after.indexOf(TOOL_CLOSE);
  if (close < 0) return undefined;
  const text = before.slice(open + TOOL_OPEN.length) + after.slice(0, close);
  try {
    return { text, value: canonicalJson(JSON.parse(text)) };
  } catch {
    return undefined;
  }
}
