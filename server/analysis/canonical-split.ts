// Non-canonical BPE splits kept in stored generated ids: the sampler may emit a valid split of a
// word that the tokenizer would never produce (" w" + "ill" for " will"). The stored ids are right
// for training, but decoding and tokenizing the text again (a re-render) gives other ids, so every
// later prompt built that way stops extending the generation (docs/reference/prefix-stability.md).
//
// Method: each generated turn is cut at added tokens (the tokenizer splits text there before
// BPE, so each piece between them is encoded on its own); each piece's decoded text is encoded
// again and the two id sequences are walked side by side by byte offset, so every differing span
// is found exactly, however many there are. Pieces whose bytes are not valid UTF-8 (a character
// cut by the length limit, stray bytes) are compared only up to where their text is whole.
import type { Finding } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import type { TokenizerHandle } from '../profiles/tokenizer.ts';
import { visiblePiece } from '../profiles/tokenizer.ts';
import type { AnalysisContext } from './context.ts';
import type { Alignment } from './realign.ts';
import { ByteLru, hashIds, sameIds, sharedCacheBytes } from '../util/shared-cache.ts';

export interface SplitSpan {
  /** Offset of the first stored token of the span inside the checked ids. */
  at: number;
  stored: number[];
  canonical: number[];
}

/**
 * How many ids of `ids[start, end)` from `start` decode to whole UTF-8 text: all of them unless a
 * character is cut at the end or bytes are stray (then up to the last token boundary before the
 * first bad byte).
 */
function wholeTextPrefix(tok: TokenizerHandle, ids: readonly number[], start = 0, end = ids.length): number {
  // Most tokens are whole characters on their own (a per-id verdict the tokenizer caches): the
  // byte walk starts at the first one that is not.
  let first = start;
  while (first < end && tok.wholeUtf8(ids[first]!)) first++;
  if (first === end) return end - start;
  let whole = first;
  let pending = 0; // continuation bytes the current character still needs
  for (let n = first; n < end; n++) {
    for (const b of tok.pieceBytes(ids[n]!)) {
      if (pending > 0) {
        if ((b & 0xc0) !== 0x80) return whole - start;
        pending--;
      } else if (b < 0x80) pending = 0;
      else if ((b & 0xe0) === 0xc0 && b >= 0xc2) pending = 1;
      else if ((b & 0xf0) === 0xe0) pending = 2;
      else if ((b & 0xf8) === 0xf0 && b <= 0xf4) pending = 3;
      else return whole - start;
    }
    if (pending === 0) whole = n + 1;
  }
  return whole - start;
}

/** Differing spans of `stored` vs `canonical` (same bytes), aligned by byte offset. */
export function alignSplits(
  tok: TokenizerHandle,
  stored: readonly number[],
  canonical: readonly number[],
): SplitSpan[] {
  const spans: SplitSpan[] = [];
  let i = 0;
  let j = 0;
  while (i < stored.length && j < canonical.length) {
    if (stored[i] === canonical[j]) {
      i++;
      j++;
      continue;
    }
    // Both sides start at the same byte here; advance the side that ends first until they end together.
    const si = i;
    const sj = j;
    let endA = tok.pieceBytes(stored[i++]!).length;
    let endB = tok.pieceBytes(canonical[j++]!).length;
    while (endA !== endB) {
      if (endA < endB && i < stored.length) endA += tok.pieceBytes(stored[i++]!).length;
      else if (endB < endA && j < canonical.length) endB += tok.pieceBytes(canonical[j++]!).length;
      else break;
    }
    spans.push({ at: si, stored: stored.slice(si, i), canonical: canonical.slice(sj, j) });
    if (endA !== endB) break;
  }
  if (spans.length === 0 && (i < stored.length || j < canonical.length))
    spans.push({ at: i, stored: stored.slice(i), canonical: canonical.slice(j) });
  return spans;
}

/** A piece's spans (offsets inside the piece), with the piece's ids to check a hash hit against. */
interface PieceVerdict {
  ids: Int32Array;
  spans: SplitSpan[];
}

/**
 * Verdicts by piece, per tokenizer: a piece's spans are a function of its ids and the tokenizer
 * alone, and the pieces of a run repeat (tool calls, a prompt's generation revisited at a later
 * step). Bounded in bytes (util/shared-cache.ts).
 */
const pieceVerdicts = new Map<TokenizerHandle, ByteLru<number, PieceVerdict>>();
let pieceCacheBytes: number | undefined;

function verdictsOf(tok: TokenizerHandle): ByteLru<number, PieceVerdict> | undefined {
  // A third of the shared bound: the image cache holds larger entries.
  pieceCacheBytes ??= Math.floor(sharedCacheBytes() / 3);
  if (pieceCacheBytes === 0) return undefined;
  let cache = pieceVerdicts.get(tok);
  if (!cache) pieceVerdicts.set(tok, (cache = new ByteLru(pieceCacheBytes)));
  return cache;
}

/** What the piece-verdict caches of this thread hold and have answered, over all tokenizers. */
export function splitVerdictCacheStats(): { entries: number; bytes: number; hits: number; misses: number } {
  const caches = [...pieceVerdicts.values()];
  const sum = (f: (c: ByteLru<number, PieceVerdict>) => number) => caches.reduce((n, c) => n + f(c), 0);
  return {
    entries: sum((c) => c.size),
    bytes: sum((c) => c.bytes),
    hits: sum((c) => c.hits),
    misses: sum((c) => c.misses),
  };
}

/** The non-canonical spans of `ids[start, end)`, a run between added ids, at offsets inside it. */
async function pieceSpans(tok: TokenizerHandle, ids: readonly number[], start: number, end: number) {
  const whole = wholeTextPrefix(tok, ids, start, end);
  if (whole === 0) return [];
  const canonical = await tok.encodeReadonly(tok.decodeSync(ids, start, start + whole));
  let same = canonical.length === whole;
  for (let k = 0; same && k < whole; k++) same = canonical[k] === ids[start + k];
  return same ? [] : alignSplits(tok, ids.slice(start, start + whole), canonical);
}

/**
 * The non-canonical spans of one generation: `ids` cut at added tokens, each piece compared with
 * the tokenizer's encoding of its text. With `cut` (a length-truncated turn), a span that reaches
 * the end of the generation is left out: the last word was cut mid-way, not split.
 */
export async function nonCanonicalSpans(
  tok: TokenizerHandle,
  ids: readonly number[],
  opts: { cut?: boolean } = {},
): Promise<SplitSpan[]> {
  const out: SplitSpan[] = [];
  const verdicts = verdictsOf(tok);
  // Pieces are the runs between added (or invalid) ids, walked in place: most are canonical, and
  // those cost one decode and one (usually cached) encode, with no copy of their ids.
  let start = 0;
  for (let i = 0; i <= ids.length; i++) {
    if (i < ids.length && !tok.isAdded(ids[i]!) && tok.isValid(ids[i]!)) continue;
    const pieceStart = start;
    start = i + 1;
    if (i === pieceStart) continue;
    let spans: SplitSpan[];
    const key = verdicts ? hashIds(ids, pieceStart, i) : 0;
    const known = verdicts?.get(key, (v) => sameIds(v.ids, ids, pieceStart, i));
    if (known) spans = known.spans;
    else {
      spans = await pieceSpans(tok, ids, pieceStart, i);
      const spanIds = spans.reduce((n, s) => n + s.stored.length + s.canonical.length, 0);
      verdicts?.set(
        key,
        { ids: Int32Array.from(ids.slice(pieceStart, i)), spans },
        4 * (i - pieceStart) + 8 * spanIds + 96,
      );
    }
    for (const span of spans) {
      const spanEnd = pieceStart + span.at + span.stored.length;
      if (opts.cut && spanEnd === ids.length) continue;
      // Copies: the cached verdict is shared by every piece with these ids.
      out.push({ at: pieceStart + span.at, stored: [...span.stored], canonical: [...span.canonical] });
    }
  }
  return out;
}

const shown = (tok: TokenizerHandle, ids: readonly number[]) =>
  ids.map((id) => `"${visiblePiece(tok.piece(id))}"`).join(' + ');

/**
 * `non_canonical_split` (warning): for each turn, the first generated span whose ids are not the
 * tokenizer's own encoding of their text; `index` on `canonical`, where the turn's generated ids
 * stand (docs/check-json.md, "Where `index` points").
 */
export async function checkCanonicalSplits(
  traj: Trajectory,
  ctx: AnalysisContext,
  alignment: Alignment,
): Promise<Finding[]> {
  const tok = ctx.profile.tokenizer;
  const stops = ctx.profile.ids.grammar.stops;
  const out: Finding[] = [];
  for (const [k, turn] of traj.turns.entries()) {
    const gen = turn.generatedIds;
    if (!gen || gen.length === 0) continue;
    const last = gen[gen.length - 1];
    const cut = turn.finishReason === 'length' || last === undefined || !stops.includes(last);
    const spans = await nonCanonicalSpans(tok, gen, { cut });
    const first = spans[0];
    if (!first) continue;
    const index = (alignment.turns[k]?.generated[0] ?? turn.promptIds?.length ?? 0) + first.at;
    const text = tok.decodeSync(first.stored);
    const more =
      spans.length > 1 ? ` (${spans.length - 1} more such span${spans.length > 2 ? 's' : ''} in this turn)` : '';
    out.push({
      kind: 'non_canonical_split',
      severity: 'warning',
      turn: k,
      index,
      stream: 'canonical',
      expected: { ids: first.canonical, tokens: first.canonical.map((id) => tok.piece(id)) },
      actual: { ids: first.stored, tokens: first.stored.map((id) => tok.piece(id)) },
      message: `turn ${k} generated "${visiblePiece(text)}" as ${shown(tok, first.stored)} (${first.stored.join(' ')}) at token ${index}; the tokenizer writes it ${shown(tok, first.canonical)} (${first.canonical.join(' ')}): the ids are right for training, but decoding and re-rendering them would change them${more}`,
    });
  }
  return out;
}
