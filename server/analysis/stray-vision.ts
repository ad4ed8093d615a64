// Vision tokens that stand for no image: the model writing a span's begin token or pad in its own
// output, or a user typing the placeholder string (the tokenizer turns the text into the
// placeholder token). Neither is an image of the prompt, so the image checks must not count them;
// but a processor or a model forward that counts pad tokens pairs them with pixels (or fails on
// the count), so each is a finding of its own (docs/reference/tokens.md).
import type { Finding } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import type { AnalysisContext } from './context.ts';
import type { Alignment } from './realign.ts';
import { findVisionSpans, isVisionToken, padIdsOf, type FamilyView, type VisionSpan } from './vision-spans.ts';

/** [start, end) of each turn's generated ids in `tokens` (where `tokens` holds them at the turn's prompt length). */
export function generatedRanges(traj: Trajectory, tokens: readonly number[]): [number, number][] {
  const out: [number, number][] = [];
  for (const t of traj.turns) {
    const gen = t.generatedIds;
    if (!gen?.length || !t.promptIds) continue;
    const start = t.promptIds.length;
    if (gen.every((id, i) => tokens[start + i] === id)) out.push([start, start + gen.length]);
  }
  return out;
}

/** The vision spans of `tokens` that are images: none inside generated ids (findVisionSpans skips typed pads). */
export function imageSpans(traj: Trajectory, tokens: readonly number[], model: FamilyView): VisionSpan[] {
  const generated = generatedRanges(traj, tokens);
  const inGenerated = (i: number) => generated.some(([s, e]) => i >= s && i < e);
  return findVisionSpans(tokens, model).filter((s) => !inGenerated(s.start >= 0 ? s.start : s.padStart));
}

/**
 * `image_count` with cause `vision_token_generated` (at the first vision token of each turn's
 * generation, on `canonical`, where the turn's generated ids stand) and `placeholder_in_text` (at
 * each typed pad of the prompts, or of the sample when no turn holds prompt ids).
 */
export function checkStrayVisionTokens(traj: Trajectory, ctx: AnalysisContext, alignment: Alignment): Finding[] {
  const { ids, tokenizer } = ctx.profile as ModelProfile;
  const pads = padIdsOf(ids);
  const imagePad = tokenizer.piece(ids.media.image.pad);
  const out: Finding[] = [];
  const images = traj.images.length;
  traj.turns.forEach((t, k) => {
    const gen = t.generatedIds ?? [];
    const at = gen.findIndex((id) => isVisionToken(ids, id));
    if (at < 0) return;
    const n = gen.filter((id) => isVisionToken(ids, id)).length;
    const padCount = gen.filter((id) => pads.includes(id)).length;
    const index = (alignment.turns[k]?.generated[0] ?? t.promptIds?.length ?? 0) + at;
    out.push({
      kind: 'image_count',
      cause: 'vision_token_generated',
      // Pads are what a trainer pairs with pixels; a lone begin/end token is only odd text.
      severity: padCount > 0 ? 'error' : 'warning',
      turn: k,
      index,
      stream: 'canonical',
      expected: 0,
      actual: n,
      message: `turn ${k}'s generated text holds ${n} vision token${n === 1 ? '' : 's'} (the first at token ${index}): the model wrote ${n === 1 ? 'it' : 'them'}, no image stands behind ${n === 1 ? 'it' : 'them'}${padCount > 0 ? `; a trainer that counts ${imagePad} tokens finds ${padCount} more than the ${images} image${images === 1 ? '' : 's'} it has pixels for` : ''}`,
    });
  });

  // Typed placeholders: a pad that does not follow its begin token or header (nor continues a run), outside generated ids.
  const seen = new Set<number>();
  const scan = (tokens: readonly number[], stream: 'prompt' | 'sample', turn: number) => {
    const generated = generatedRanges(traj, tokens);
    for (let i = 1; i < tokens.length; i++) {
      const t = tokens[i]!;
      if (!pads.includes(t)) continue;
      const kind = t === ids.media.video?.pad && t !== ids.media.image.pad ? ids.media.video : ids.media.image;
      const prev = tokens[i - 1]!;
      const opened = kind.header.length > 0 ? prev === kind.header[kind.header.length - 1] : prev === kind.begin;
      if (opened || prev === t || seen.has(i)) continue;
      if (generated.some(([s, e]) => i >= s && i < e)) continue;
      seen.add(i);
      out.push({
        kind: 'image_count',
        cause: 'placeholder_in_text',
        severity: 'error',
        turn,
        index: i,
        stream,
        expected: images,
        actual: images + 1,
        message: `token ${i} is the image placeholder ${tokenizer.piece(t)} without ${tokenizer.piece(kind.begin)}: the text holds the placeholder string typed out, not an image; a processor that counts ${imagePad} tokens takes it for one more image than the ${images} the conversation has`,
      });
    }
  };
  let scanned = false;
  traj.turns.forEach((t, k) => {
    if (!t.promptIds) return;
    scanned = true;
    scan(t.promptIds, 'prompt', k);
  });
  if (!scanned && traj.sample) scan(traj.sample.tokens, 'sample', -1);
  return out;
}
