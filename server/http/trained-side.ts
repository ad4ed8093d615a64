// The trained side of `serve ROLLOUT --trained TRAINED`: loaded once in the background beside the
// run store, joined to the rollout as `rollscope compare` joins them (server/pipeline/compare-runs.ts), and
// kept as the trained trajectory of each rollout id. The rollout side is the store's; its
// analyses are not kept here.
import path from 'node:path';
import type { CheckedTrajectory, RunOptions } from '../pipeline.ts';
import { comparePair, compareRuns } from '../pipeline/compare-runs.ts';
import type { CompareRun, CompareSide } from './api.ts';

export interface TrainedSide {
  ready: Promise<void>;
  /** The trained trajectory joined to rollout trajectory `id`, and how it was joined. */
  pairOf(id: string): { trained: CheckedTrajectory; joinedBy: 'id' | 'sample_index' } | undefined;
  run(): CompareRun;
  /** Folders the trained side's images may be read from. */
  roots(): readonly string[];
}

const display = (file: string) => {
  const rel = path.relative(process.cwd(), file);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
};

export const compareSide = (c: CheckedTrajectory): CompareSide => ({
  id: c.trajectory.id,
  file: display(c.trajectory.source.file),
  line: c.trajectory.source.line,
  format: c.trajectory.source.format,
});

export function openTrainedSide(
  rolloutPaths: readonly string[],
  trainedPaths: readonly string[],
  opts: RunOptions,
  roots: readonly string[],
): TrainedSide {
  const pairs = new Map<string, { trained: CheckedTrajectory; joinedBy: 'id' | 'sample_index' }>();
  let loading = true;
  let summary: CompareRun = {
    available: true,
    loading: true,
    trainedFiles: trainedPaths.map(display),
    pairs: [],
    unmatched: { rollout: [], trained: [] },
    errors: [],
  };
  const ready = compareRuns(rolloutPaths, trainedPaths, opts)
    .then((r) => {
      for (const p of r.pairs)
        pairs.set(p.rollout.trajectory.id, {
          trained: p.trained,
          joinedBy: p.rollout.trajectory.id === p.trained.trajectory.id ? 'id' : 'sample_index',
        });
      summary = {
        ...summary,
        pairs: r.pairs.map((p) => ({
          rollout: compareSide(p.rollout),
          trained: compareSide(p.trained),
          fields: [...new Set(p.findings.map((f) => f.field ?? 'tokens'))],
          headline: p.findings[0]?.message ?? null,
        })),
        unmatched: { rollout: r.onlyRollout.map(compareSide), trained: r.onlyTrained.map(compareSide) },
        errors: r.errors.map((e) => ({ ...e, file: display(e.file) })),
      };
    })
    .catch((e: unknown) => {
      summary = { ...summary, errors: [{ file: trainedPaths.join(', '), line: 0, message: (e as Error).message }] };
    })
    .finally(() => {
      loading = false;
    });
  return {
    ready,
    pairOf: (id) => pairs.get(id),
    run: () => ({ ...summary, loading }),
    roots: () => roots,
  };
}

export { comparePair };
