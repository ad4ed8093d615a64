// What the analysis of one trajectory produces, and the events a run of the pipeline yields:
// the shapes the pipeline (server/pipeline.ts), the export and the server all read.
import type { Finding } from '../model/finding.ts';
import type { ReadError, Trajectory } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import type { Alignment } from './realign.ts';
import type { GroupMember } from './groups.ts';
import type { TrajectoryMismatch } from './logprob-mismatch.ts';

export interface CheckedTrajectory {
  /** The trajectory as checked (image sizes resolved); its `id` is the run-wide trajectory key. */
  trajectory: Trajectory;
  profile: ModelProfile;
  findings: Finding[];
  alignment: Alignment;
  rerender?: number[];
  /**
   * Computed where the trajectory was analyzed when the run is report-only (RunOptions
   * `reportOnly`), whose trajectory then crosses threads without its streams; null: none.
   */
  report?: ReportFacts;
  /**
   * Computed where the trajectory was analyzed when the run is served (RunOptions `storeIndex`),
   * whose trajectory then crosses threads without its streams (pipeline/wire.ts `forStore`).
   */
  index?: IndexFacts;
}

/** What the server's run index reads of a trajectory's streams (analysis/index-facts.ts). */
export interface IndexFacts {
  /** Tokens of the canonical (re-aligned) stream. */
  tokens: number;
  /** Distinct token ids of every stream, packed (index-facts.ts `packedTokenSet`). */
  tokenSet: Uint8Array;
  /** Rollout against trainer logprobs under the default thresholds; null without both. */
  mismatch: {
    meanAbsDelta: number;
    maxAbsDelta: number;
    maxRatio: number;
    pastCapShare: number;
    ratioBins: [number, number][];
  } | null;
}

/** What a report reads of a trajectory's streams, computed where the streams still are (pipeline/wire.ts `forReport`). */
export interface ReportFacts {
  member: GroupMember | null;
  logprobs: TrajectoryMismatch | null;
  responseTokens: number | null;
  promptHash: string | null;
}

export type RunEvent =
  | { type: 'trajectory'; checked: CheckedTrajectory }
  | { type: 'error'; error: ReadError }
  /** A file is done (after its errors and trajectories): its format and how many trajectories it held. */
  | { type: 'file'; file: string; format?: string; count: number };

/** The tokens of the stream a finding points into. */
export function streamTokens(c: CheckedTrajectory, stream: Finding['stream'], turn: number): number[] | undefined {
  switch (stream) {
    case 'sample':
      return c.trajectory.sample?.tokens;
    case 'canonical':
      return c.alignment.tokens;
    case 'rerender':
      return c.rerender;
    case 'prompt': {
      const t = c.trajectory.turns[turn];
      return t?.promptIds ? [...t.promptIds, ...(t.generatedIds ?? [])] : undefined;
    }
    default:
      return undefined;
  }
}
