// The per-call check: what `check` finds over a whole trajectory, asked of one call against its
// session's previous turn only (the same analysis functions, server/analysis/checks.ts). The
// prompt must extend the previous prompt ⧺ generated ids ⧺ the EOS-aware boundary (`prefix_break`
// with its classified cause and token), each new image's pad run must have the length the
// processor math gives (`placeholder_count`, `image_count`), and `usage.prompt_tokens` must count
// the prompt ids (`prompt_tokens_mismatch`). Nothing is tokenized here.
import type { Finding } from '../model/finding.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import { prefixBreak } from '../analysis/checks.ts';
import { findVisionSpans } from '../analysis/vision-spans.ts';
import type { SessionImage } from './sessions.ts';

export interface CallUnderCheck {
  /** The session's turn this call is. */
  turn: number;
  promptIds: readonly number[];
  statedPromptTokens?: number;
  /** The previous turn, when the session has one the gateway holds. */
  previous?: { promptIds: readonly number[]; generatedIds: readonly number[] };
  /** Every image of the conversation, in order, with its expected pad count. */
  images: readonly SessionImage[];
}

export function checkCall(profile: ModelProfile, closeIds: readonly number[], call: CallUnderCheck): Finding[] {
  const out: Finding[] = [];
  const { openers } = profile.ids.grammar;
  const plain = !call.promptIds.some((id) => openers.includes(id));
  if (call.previous) {
    const f = prefixBreak(
      profile,
      { promptIds: [...call.previous.promptIds], generatedIds: [...call.previous.generatedIds] },
      { promptIds: [...call.promptIds] },
      call.turn,
      closeIds,
      plain,
    );
    if (f) out.push(f);
  }

  // Pad runs the previous prompt did not hold yet are the new images'.
  const checkedUpTo = call.previous ? call.previous.promptIds.length : 0;
  const spans = findVisionSpans(call.promptIds, profile).filter((s) => s.kind === 'image');
  if (call.images.length > 0 && spans.length !== call.images.length) {
    out.push({
      kind: 'image_count',
      severity: 'error',
      turn: call.turn,
      index: spans[call.images.length]?.start ?? -1,
      stream: 'prompt',
      expected: call.images.length,
      actual: spans.length,
      message: `${call.images.length} image(s) in the messages but ${spans.length} vision span(s) in the prompt ids the engine ran`,
    });
  }
  spans.forEach((span, i) => {
    if (span.padStart < checkedUpTo) return;
    const expected = call.images[i]?.padCount;
    if (expected === undefined || expected === span.padLength) return;
    out.push({
      kind: 'placeholder_count',
      severity: 'error',
      turn: call.turn,
      index: span.padStart,
      stream: 'prompt',
      image: i,
      expected,
      actual: span.padLength,
      message: `image ${i} has ${span.padLength} pad tokens in the prompt but its size gives ${expected} with the profile's processor settings (other min/max_pixels on the engine, or pads expanded twice)`,
    });
  });

  if (call.statedPromptTokens !== undefined && call.statedPromptTokens !== call.promptIds.length) {
    out.push({
      kind: 'prompt_tokens_mismatch',
      severity: 'error',
      turn: call.turn,
      index: Math.min(call.statedPromptTokens, call.promptIds.length),
      stream: 'prompt',
      expected: call.promptIds.length,
      actual: call.statedPromptTokens,
      message: `the engine reports usage.prompt_tokens ${call.statedPromptTokens} for a prompt of ${call.promptIds.length} ids: it ran other tokens than the ones recorded (re-tokenized ids, or pads expanded another way)`,
    });
  }
  return out;
}
