// Where a finding about a call's response points (docs/check-json.md, "Where `index` points"):
// at the token's absolute position in the stream that holds the value, and at the call (turn)
// the token belongs to. A value of the stored sample's arrays is on `sample`; a value of a call's
// own arrays (its generated ids and logprobs) is on `canonical`, where every call's generated ids
// stand verbatim, one after the other, whatever the calls' prompts hold.
import type { Trajectory } from '../model/trajectory.ts';
import type { Alignment } from './realign.ts';

/**
 * The 0-based turn a token at `index` belongs to, given where each turn's generation starts in
 * the stream (undefined for a turn the stream does not hold): the last located turn that starts
 * at or before the token (a generation and the observation after it belong to their turn), the
 * first located turn for tokens of the initial prompt; -1 for index -1 or when no turn is located.
 */
export function turnAt(starts: readonly (number | undefined)[], index: number): number {
  if (index < 0) return -1;
  let turn = -1;
  for (let k = 0; k < starts.length; k++) {
    const start = starts[k];
    if (start === undefined) continue;
    if (turn < 0 || start <= index) turn = k;
    if (start > index) break;
  }
  return turn;
}

/**
 * Where each turn's generated ids begin in the stored sample: after the turn's prompt, when the
 * sample holds them there verbatim (turns split from the sample always do); undefined for a turn
 * it does not hold.
 */
export function sampleGenerationStarts(traj: Trajectory): (number | undefined)[] {
  const s = traj.sample;
  if (!s) return traj.turns.map(() => undefined);
  return traj.turns.map((t) => {
    const start = t.promptIds?.length;
    const gen = t.generatedIds ?? [];
    if (start === undefined || gen.length === 0 || start + gen.length > s.tokens.length) return undefined;
    for (let i = 0; i < gen.length; i++) if (!Object.is(s.tokens[start + i], gen[i])) return undefined;
    return start;
  });
}

/** Where each turn's generated ids begin in the canonical stream. */
export function canonicalGenerationStarts(alignment: Alignment): number[] {
  return alignment.turns.map((s) => s.generated[0]);
}

/** The turn of a token of the stored sample (see `turnAt`), computed once per trajectory when first asked. */
export function sampleTurnOf(traj: Trajectory): (index: number) => number {
  let starts: (number | undefined)[] | undefined;
  return (index) => turnAt((starts ??= sampleGenerationStarts(traj)), index);
}
