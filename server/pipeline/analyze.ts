// The work the pipeline does for one trajectory or one batch of raw lines, on whichever thread
// runs it (the main thread, or an analysis worker): resolve image sizes from their bytes, pick
// the model profile, run the checks and the canonical re-alignment.
import { withTrainerSide } from '../model/trainer-side.ts';
import path from 'node:path';
import type { FormatName, ReadError, Trajectory } from '../model/trajectory.ts';
import { profileFor, visionIdsOf } from '../profiles/profile.ts';
import { analysisContext } from '../analysis/context.ts';
import { checkTrajectory } from '../analysis/checks.ts';
import type { CheckedTrajectory, RunEvent } from '../analysis/checked.ts';
import { importLines, type RecordLine } from '../import/stream.ts';
import { resolveImages } from '../images/resolve.ts';
import { ownsError, ownsTrajectory, type Skipped } from './shard.ts';
import { forReport } from './wire.ts';
import type { RunOptions } from './run-options.ts';

export type { RunOptions } from './run-options.ts';

export async function analyzeTrajectory(
  traj: Trajectory,
  opts: RunOptions,
  roots: readonly string[],
): Promise<CheckedTrajectory> {
  const baseDir = path.dirname(path.resolve(traj.source.file));
  const resolved = await resolveImages(withTrainerSide(traj, opts.trainer), {
    baseDir,
    roots,
    allowRemoteImages: opts.allowRemoteImages === true,
  });
  const profile = profileFor(opts.model, resolved.model);
  const ctx = { ...analysisContext(resolved, profile, opts.processor), mismatch: opts.mismatch };
  const { findings, alignment, rerender } = await checkTrajectory(resolved, ctx);
  return { trajectory: resolved, profile, findings, alignment, rerender };
}

/** Folders images may be read from when none are given: the inputs' own folders. */
export function defaultRoots(paths: readonly string[]): string[] {
  return paths.map((p) => path.resolve(p)).map((p) => (/\.[a-z0-9]+$/i.test(p) ? path.dirname(p) : p));
}

/** Settles to the events of one piece of work, in order; `imported` counts the trajectories it read. */
export interface ChunkOutcome {
  /** `skipped`: read, but another shard's (the pipeline counts them and hands them out no further). */
  events: (RunEvent | Skipped)[];
  imported: number;
}

/** Import and analyze one batch of raw lines on this thread (what a pool worker does with it). */
export async function importAndAnalyze(
  chunk: { file: string; format: FormatName; lines: RecordLine[] },
  opts: RunOptions,
  roots: readonly string[],
): Promise<ChunkOutcome> {
  const imports = importLines(chunk.file, chunk.format, chunk.lines, { model: opts.model });
  const { errors } = imports;
  const trajectories: (Trajectory | undefined)[] = imports.trajectories;
  const events: ChunkOutcome['events'] = errors.map((error) =>
    ownsError(opts.shard, error) ? { type: 'error', error } : { type: 'skipped', what: 'error' },
  );
  let imported = 0;
  const lean = opts.reportOnly === true && opts.noStreams === true;
  for (let i = 0; i < trajectories.length; i++) {
    const traj = trajectories[i]!;
    if (!ownsTrajectory(opts.shard, traj)) {
      events.push({ type: 'skipped', what: 'trajectory', trajectory: { id: traj.id, source: traj.source } });
      continue;
    }
    imported++;
    const ev = await analyzeOrError(traj, analyzeTrajectory(traj, opts, roots));
    if (lean) trajectories[i] = undefined; // done with: its record need not outlive the batch
    events.push(
      lean && ev.type === 'trajectory'
        ? { type: 'trajectory', checked: forReport(ev.checked, opts, visionIdsOf(ev.checked.profile)) }
        : ev,
    );
  }
  return { events, imported };
}

/** The trajectory's event, or the error that says it could not be analyzed (the rest of the run goes on). */
export async function analyzeOrError(traj: Trajectory, result: Promise<CheckedTrajectory>): Promise<RunEvent> {
  try {
    return { type: 'trajectory', checked: await result };
  } catch (e) {
    return { type: 'error', error: cannotAnalyze(traj, e) };
  }
}

export function cannotAnalyze(traj: Pick<Trajectory, 'id' | 'source'>, e: unknown): ReadError {
  return {
    file: traj.source.file,
    line: traj.source.line,
    message: `cannot analyze trajectory ${traj.id}: ${(e as Error).message}`,
  };
}
