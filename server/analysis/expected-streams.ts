// The streams a check compares the data against, built once so that a check and the diff that
// shows its finding (server/http/views.ts) line up token for token.
import type { Trajectory, Turn } from '../model/trajectory.ts';
import type { Alignment } from './realign.ts';
import { boundaryIds } from './render.ts';
import { startsWithParts } from './diff.ts';

/**
 * What the next turn's prompt must start with: this turn's prompt ⧺ its generated ids ⧺ the
 * EOS-aware boundary (`closeIds` from `turnCloseIds`, `stopIds` from `turnStopIds`). Ids outside the
 * chat format (`plain`: no turn opener anywhere) continue by plain concatenation. Undefined when
 * the turn has no prompt ids.
 */
export function expectedNextPrompt(
  turn: Turn,
  closeIds: readonly number[],
  stopIds: readonly number[],
  plain = false,
): number[] | undefined {
  if (!turn.promptIds) return undefined;
  const generated = turn.generatedIds ?? [];
  return [...turn.promptIds, ...generated, ...(plain ? [] : boundaryIds(generated, closeIds, stopIds))];
}

/** Whether `next` starts with `expectedNextPrompt(turn, …)`; false when the turn has no prompt ids. */
export function extendsTurn(
  next: ArrayLike<number>,
  turn: Turn,
  closeIds: readonly number[],
  stopIds: readonly number[],
  plain = false,
): boolean {
  if (!turn.promptIds) return false;
  const generated = turn.generatedIds ?? [];
  return startsWithParts(next, [turn.promptIds, generated, plain ? [] : boundaryIds(generated, closeIds, stopIds)]);
}

/**
 * The canonical stream closed the way a re-render of the conversation closes it: the EOS-aware
 * boundary after the last generation, unless observations follow it (they carry their own). In a
 * family whose stop token is the next turn's opener (GLM's `stopOpensTurn`), a conversation that
 * ends with the answer renders without it: the generated stop is not part of the closed stream.
 */
export function closedCanonical(
  traj: Trajectory,
  alignment: Alignment,
  closeIds: readonly number[],
  stopIds: readonly number[],
  stopOpensTurn = false,
): number[] {
  const last = traj.turns[traj.turns.length - 1];
  const generated = last?.generatedIds ?? [];
  if (last?.observationMessages || generated.length === 0) return alignment.tokens;
  if (stopOpensTurn && stopIds.includes(generated[generated.length - 1]!)) return alignment.tokens.slice(0, -1);
  return [...alignment.tokens, ...boundaryIds(generated, closeIds, stopIds)];
}
