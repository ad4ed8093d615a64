// The facts of one trajectory a run's report states (server/report/entry.ts), computed from its
// full streams: where a run is report-only, the trajectory reaches the report without them.
import type { Trajectory } from '../model/trajectory.ts';
import type { VisionIds } from '../profiles/profile.ts';
import type { ReportFacts } from './checked.ts';
import { groupMember, promptHash } from './groups.ts';
import { logprobMismatch, type MismatchThresholds } from './logprob-mismatch.ts';

export function reportFacts(
  t: Trajectory,
  opts: { mismatch?: MismatchThresholds },
  vision: VisionIds | undefined,
): ReportFacts {
  const member = groupMember(t, vision) ?? null;
  return {
    member,
    logprobs: logprobMismatch(t, opts.mismatch) ?? null,
    responseTokens: responseTokens(t),
    promptHash: member?.prompt ?? promptHash(t, vision) ?? null,
  };
}

/**
 * Generated (response) tokens: the trainer's response length where the sample states one, else its
 * trained tokens (a full-sequence loss mask), else every call's generated ids; null when the data has none.
 */
export function responseTokens(t: Trajectory): number | null {
  if (t.sample?.responseLength !== undefined) return t.sample.responseLength;
  if (t.sample?.lossMask && t.sample.maskScope === 'full') return t.sample.lossMask.filter((m) => m === 1).length;
  const generated = t.turns.reduce((n, turn) => n + (turn.generatedIds?.length ?? 0), 0);
  return t.turns.some((turn) => turn.generatedIds) ? generated : null;
}
