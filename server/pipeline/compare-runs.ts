// Rollout against trained side, run against run: both sides loaded through the one pipeline (any
// format each), pairs joined by trajectory id then by sample index (analysis/compare.ts
// `joinSides`), each pair compared field by field (`compareTrained`). Shared by `rollscope
// compare` (cli/compare.ts turns the result into its JSON contract) and `serve --trained`.
import { compareTrained, joinKeys, joinSides } from '../analysis/compare.ts';
import type { Finding } from '../model/finding.ts';
import { analysisFailed } from '../analysis/analysis-failed.ts';
import type { ReadError } from '../model/trajectory.ts';
import { type CheckedTrajectory, checkPaths, type RunOptions } from '../pipeline.ts';

export interface LoadedSide {
  checked: CheckedTrajectory[];
  errors: ReadError[];
  /** A path could not be read at all (an error at line 0). */
  fatal: boolean;
}

export async function loadSide(paths: readonly string[], opts: RunOptions): Promise<LoadedSide> {
  const checked: CheckedTrajectory[] = [];
  const errors: ReadError[] = [];
  let fatal = false;
  for await (const ev of checkPaths(paths, opts)) {
    if (ev.type === 'trajectory') checked.push(ev.checked);
    else if (ev.type === 'error') {
      errors.push(ev.error);
      if (ev.error.line === 0) fatal = true;
    }
  }
  return { checked, errors, fatal };
}

export interface ComparedPair {
  rollout: CheckedTrajectory;
  trained: CheckedTrajectory;
  /** `trained_mismatch` findings, one per differing field; none when the pair matches. */
  findings: Finding[];
}

export interface ComparedRuns {
  pairs: ComparedPair[];
  onlyRollout: CheckedTrajectory[];
  onlyTrained: CheckedTrajectory[];
  errors: ReadError[];
  fatal: boolean;
}

/** Pair two loaded sides and compare each pair. */
export function compareSides(rollout: LoadedSide, trained: LoadedSide): ComparedRuns {
  const key = (c: CheckedTrajectory) => joinKeys(c.trajectory);
  const joined = joinSides(rollout.checked, trained.checked, key, key);
  return {
    pairs: joined.pairs.map(([r, t]) => ({ rollout: r, trained: t, findings: comparePair(r, t) })),
    onlyRollout: joined.onlyRollout,
    onlyTrained: joined.onlyTrained,
    errors: [...rollout.errors, ...trained.errors],
    fatal: rollout.fatal || trained.fatal,
  };
}

/** The pair's `trained_mismatch` findings; a comparison that raises is an `analysis_failed` finding of the pair. */
export function comparePair(r: CheckedTrajectory, t: CheckedTrajectory): Finding[] {
  try {
    return compareTrained(
      { trajectory: r.trajectory, alignment: r.alignment },
      { trajectory: t.trajectory, profile: t.profile },
    );
  } catch (e) {
    return [analysisFailed('compare', e)];
  }
}

export async function compareRuns(
  rolloutPaths: readonly string[],
  trainedPaths: readonly string[],
  opts: RunOptions,
): Promise<ComparedRuns> {
  return compareSides(await loadSide(rolloutPaths, opts), await loadSide(trainedPaths, opts));
}
