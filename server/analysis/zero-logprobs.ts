// Zero-filled logprobs: generated tokens whose logprob is exactly 0.0 because the value was missing
// and a default was written (a logprob array padded with zeros, a converter that fills gaps,
// `rollout_log_probs` written as zeros when the engine returned none). Importance-sampling ratios
// computed from them are exp(new - 0) instead of exp(new - old): silently biased, never NaN.
//
// A single exact 0.0 is plausible: a float32 log-softmax rounds to 0.0 when every other logit is
// ~17 or more below the sampled one (deterministic continuations, a closing end of turn). What
// sampling does not produce is a whole turn of them, or a long unbroken run, so only those count.
import type { Finding } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import type { Alignment } from './realign.ts';

/** A turn with at least this many generated tokens, all exactly 0.0, is zero-filled. */
export const ZERO_TURN_MIN_TOKENS = 4;
/** This many consecutive exact 0.0 logprobs inside a turn are zero-filled. */
export const ZERO_RUN_MIN_TOKENS = 16;

/**
 * Where a turn's generated tokens sit in the stored sample, when the sample holds that turn
 * verbatim and its logprobs hold the same zero run (turns split from it).
 */
function sampleIndexOf(
  traj: Trajectory,
  promptLength: number,
  generated: readonly number[],
  run: { start: number; length: number },
): number | undefined {
  const s = traj.sample;
  if (!s?.logprobs) return undefined;
  for (let i = 0; i < generated.length; i++) if (!Object.is(s.tokens[promptLength + i], generated[i])) return undefined;
  const offset = s.maskScope === 'full' ? 0 : s.tokens.length - (s.responseLength ?? 0);
  for (let i = run.start; i < run.start + run.length; i++)
    if (s.logprobs[promptLength + i - offset] !== 0) return undefined;
  return promptLength;
}

/**
 * At the run's first token: on the stored sample when it holds the turn (its logprobs are the
 * sample's), else on `canonical`, where the call's generated ids stand (docs/check-json.md).
 */
export function checkZeroFilledLogprobs(traj: Trajectory, alignment: Alignment): Finding[] {
  const out: Finding[] = [];
  traj.turns.forEach((t, k) => {
    const lps = t.generatedLogprobs;
    const ids = t.generatedIds;
    if (!lps || !ids || lps.length === 0) return;
    const n = Math.min(lps.length, ids.length);
    // Longest run of exact zeros (0.0 and -0.0), and whether it is the whole turn.
    let best = { start: -1, length: 0 };
    for (let i = 0; i < n; i++) {
      if (lps[i] !== 0) continue;
      let j = i;
      while (j < n && lps[j] === 0) j++;
      if (j - i > best.length) best = { start: i, length: j - i };
      i = j;
    }
    const whole = best.length === n && n >= ZERO_TURN_MIN_TOKENS;
    if (!whole && best.length < ZERO_RUN_MIN_TOKENS) return;
    const p = t.promptIds?.length ?? 0;
    const inSample = sampleIndexOf(traj, p, ids.slice(0, n), best);
    const zeros = lps.slice(0, n).filter((x) => x === 0).length;
    const where = whole
      ? `all ${n} generated logprobs of turn ${k} are exactly 0.0`
      : `${best.length} consecutive generated logprobs of turn ${k} are exactly 0.0 (${zeros} of ${n} in the turn)`;
    out.push({
      kind: 'invalid_value',
      cause: 'zero_filled_logprobs',
      severity: 'error',
      turn: k,
      index: (inSample ?? alignment.turns[k]?.generated[0] ?? p) + best.start,
      stream: inSample !== undefined ? 'sample' : 'canonical',
      field: inSample !== undefined ? 'sample.logprobs' : `turns.${k}.generatedLogprobs`,
      expected: "the sampler's logprobs (< 0 for all but near-certain tokens)",
      actual: { zeros, run: best.length, tokens: n },
      message: `${where}: the logprobs were missing and zero-filled (a near-certain token can have logprob 0.0, ${
        whole ? 'a whole turn cannot' : 'a run this long cannot'
      }); importance-sampling ratios computed from them are biased`,
    });
  });
  return out;
}
