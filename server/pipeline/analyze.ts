// The work the pipeline does for one trajectory or one batch of raw lines, on whichever thread
// runs it (the main thread, or an analysis worker): resolve image sizes from their bytes, pick
// the model profile, run the checks and the canonical re-alignment.
import { withTrainerSide } from '../model/trainer-side.ts';
import path from 'node:path';
import type { FormatName, Trajectory } from '../model/trajectory.ts';
import { DEFAULT_PROFILE, loadProfile, profileFor, visionIdsOf, type ModelProfile } from '../profiles/profile.ts';
import { analysisFailed, StepFailures, type AnalysisStep } from '../analysis/analysis-failed.ts';
import { unavailableAlignment } from '../analysis/realign.ts';
import { analysisContext } from '../analysis/context.ts';
import { checkTrajectory } from '../analysis/checks.ts';
import type { CheckedTrajectory, RunEvent } from '../analysis/checked.ts';
import { importLines, type RecordLine } from '../import/stream.ts';
import { resolveImages } from '../images/resolve.ts';
import { encodeOutcome, type EncodedOutcome } from '../export/encoded.ts';
import { forReport, forStore } from './wire.ts';
import type { RunOptions } from './run-options.ts';

export type { RunOptions } from './run-options.ts';

/**
 * Analyze one trajectory. Each step that raises is an `analysis_failed` finding on the trajectory
 * (analysis/analysis-failed.ts) and the steps after it run on what there is: images that could not
 * be sized keep their stated size, a failed check leaves the others.
 */
export async function analyzeTrajectory(
  traj: Trajectory,
  opts: RunOptions,
  roots: readonly string[],
): Promise<CheckedTrajectory> {
  const failures = new StepFailures();
  const withTrainer = (await failures.guard('trainer side', {}, () => withTrainerSide(traj, opts.trainer))) ?? traj;
  const baseDir = path.dirname(path.resolve(traj.source.file));
  const resolved =
    (await failures.guard('image sizing', {}, () =>
      resolveImages(withTrainer, { baseDir, roots, allowRemoteImages: opts.allowRemoteImages === true }),
    )) ?? withTrainer;
  const profile = profileFor(opts.model, resolved.model);
  const ctx = {
    ...((await failures.guard('image sizing', {}, () => analysisContext(resolved, profile, opts.processor))) ?? {
      profile,
      images: resolved.images.map(() => ({ vision: profile.vision, problem: 'the image sizing step failed' })),
    }),
    mismatch: opts.mismatch,
  };
  const { findings, alignment, rerender } = await checkTrajectory(resolved, ctx, failures);
  return { trajectory: resolved, profile, findings, alignment, rerender };
}

/**
 * What is left of a trajectory whose analysis raised outside any step (a worker that died, a
 * profile that cannot be loaded): its ids and streams as read, and the `analysis_failed` finding.
 */
export function failedAnalysis(traj: Trajectory, opts: Pick<RunOptions, 'model'>, e: unknown): CheckedTrajectory {
  let profile: ModelProfile;
  let step: AnalysisStep = 'checks';
  try {
    profile = profileFor(opts.model, traj.model);
  } catch {
    // Only to show the ids with: nothing is checked against it.
    profile = loadProfile(DEFAULT_PROFILE);
    step = 'profile';
  }
  return { trajectory: traj, profile, findings: [analysisFailed(step, e)], alignment: unavailableAlignment() };
}

/** Folders images may be read from when none are given: the inputs' own folders. */
export function defaultRoots(paths: readonly string[]): string[] {
  return paths.map((p) => path.resolve(p)).map((p) => (/\.[a-z0-9]+$/i.test(p) ? path.dirname(p) : p));
}

/** A trajectory's event with its export outcome, when the run exports (RunOptions `exportRows`). */
export type ExportedEvent = Extract<RunEvent, { type: 'trajectory' }> & { exported?: EncodedOutcome };

/** Settles to the events of one piece of work, in order; `imported` counts the trajectories it read. */
export interface ChunkOutcome {
  events: (RunEvent | ExportedEvent)[];
  imported: number;
}

/**
 * With RunOptions `exportRows`, the trajectory's row built and encoded here, and the trajectory
 * cut to what the export's thread reads of it (no streams, no image bytes); else `ev` as it is.
 */
export async function withExport(
  ev: RunEvent,
  opts: Pick<RunOptions, 'exportRows' | 'mismatch'>,
): Promise<RunEvent | ExportedEvent> {
  if (ev.type !== 'trajectory' || !opts.exportRows) return ev;
  const exported = await encodeOutcome(ev.checked, opts.exportRows);
  // The report's facts (group member, response tokens, prompt hash) from the full streams: `--where`
  // reads them on the export's thread, which gets the trajectory without its streams.
  const { profile } = ev.checked;
  return { type: 'trajectory', checked: { ...forReport(ev.checked, opts, visionIdsOf(profile)), profile }, exported };
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
  const events: ChunkOutcome['events'] = [];
  // Events in line order, a line's read errors before its trajectories (as loadFile reports a line):
  // then a batch's first line does not decide where an unreadable record comes among the trajectories.
  let nextError = 0;
  const errorsUpTo = (line: number) => {
    for (; nextError < errors.length && errors[nextError]!.line <= line; nextError++) {
      const error = errors[nextError]!;
      events.push({ type: 'error', error });
    }
  };
  let imported = 0;
  const lean = opts.reportOnly === true && opts.noStreams === true;
  for (let i = 0; i < trajectories.length; i++) {
    const traj = trajectories[i]!;
    errorsUpTo(traj.source.line);
    imported++;
    const ev = await withExport(await analyzeOrError(traj, analyzeTrajectory(traj, opts, roots), opts), opts);
    if (lean || opts.storeIndex || opts.exportRows) trajectories[i] = undefined; // done with: its record need not outlive the batch
    events.push(
      ev.type === 'trajectory' && !opts.exportRows ? { type: 'trajectory', checked: cutChecked(ev.checked, opts) } : ev,
    );
  }
  errorsUpTo(Number.POSITIVE_INFINITY);
  return { events, imported };
}

/**
 * A trajectory of a batch as its consumer reads it, cut as soon as it is checked so that the batch
 * holds no streams of the records it has done: the server's store reads its index facts
 * (`storeIndex`), a report its report facts (`reportOnly` with `noStreams`), as a worker sends them.
 */
export function cutChecked(c: CheckedTrajectory, opts: RunOptions): CheckedTrajectory {
  if (opts.storeIndex) return forStore(c, opts, visionIdsOf(c.profile));
  if (opts.reportOnly && opts.noStreams) return forReport(c, opts, visionIdsOf(c.profile));
  return c;
}

/**
 * The trajectory's event, whatever its analysis raised: a trajectory is never lost to an
 * exception (it comes with an `analysis_failed` finding instead; failedAnalysis).
 */
export async function analyzeOrError(
  traj: Trajectory,
  result: Promise<CheckedTrajectory>,
  opts: Pick<RunOptions, 'model'>,
): Promise<RunEvent> {
  try {
    return { type: 'trajectory', checked: await result };
  } catch (e) {
    return { type: 'trajectory', checked: failedAnalysis(traj, opts, e) };
  }
}
