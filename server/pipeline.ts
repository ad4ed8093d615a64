// The one path from files to checked trajectories, shared by `check`, `export` and the server:
// load (detect format, import), resolve image sizes from their bytes, pick the model profile,
// run the checks and the canonical re-alignment.
import path from 'node:path';
import type { Finding } from './model/finding.ts';
import type { ProcessorSettings, ReadError, Trajectory } from './model/trajectory.ts';
import { profileFor, type ModelProfile } from './profiles/profile.ts';
import { analysisContext } from './analysis/context.ts';
import { checkTrajectory } from './analysis/checks.ts';
import type { Alignment } from './analysis/realign.ts';
import { expandPaths, loadFile } from './import/index.ts';
import { resolveImages } from './images/resolve.ts';
import { AnalysisPool } from './analysis-pool.ts';

export interface RunOptions {
  /** Built-in profile name, model name, or local model folder. */
  model?: string;
  format?: string;
  processor?: ProcessorSettings;
  /** Folders local images may be read from (default: the folders of the inputs). */
  roots?: string[];
  /** Worker threads for the analysis; 0 runs it on the main thread. */
  workers?: number;
  /** Fetch http(s) images named by the records (`--allow-remote-images`; SSRF-guarded, server/images/remote.ts). */
  allowRemoteImages?: boolean;
}

export interface CheckedTrajectory {
  trajectory: Trajectory;
  profile: ModelProfile;
  findings: Finding[];
  alignment: Alignment;
  rerender?: number[];
}

export async function analyzeTrajectory(traj: Trajectory, opts: RunOptions, roots: readonly string[]): Promise<CheckedTrajectory> {
  const baseDir = path.dirname(path.resolve(traj.source.file));
  const resolved = await resolveImages(traj, { baseDir, roots, allowRemoteImages: opts.allowRemoteImages === true });
  const profile = profileFor(opts.model, resolved.model);
  const ctx = analysisContext(resolved, profile, opts.processor);
  const { findings, alignment, rerender } = await checkTrajectory(resolved, ctx);
  return { trajectory: resolved, profile, findings, alignment, rerender };
}

export function defaultRoots(paths: readonly string[]): string[] {
  return paths.map((p) => path.resolve(p)).map((p) => (/\.[a-z0-9]+$/i.test(p) ? path.dirname(p) : p));
}

export type RunEvent = { type: 'trajectory'; checked: CheckedTrajectory } | { type: 'error'; error: ReadError } | { type: 'file'; file: string; format?: string; count: number };

/**
 * Load and check every trajectory under `paths`, file by file, in input order. With workers the
 * analysis runs on other threads while this one imports; at most `window` results are pending.
 */
export async function* checkPaths(paths: readonly string[], opts: RunOptions): AsyncGenerator<RunEvent> {
  const roots = opts.roots ?? defaultRoots(paths);
  const { files, errors } = expandPaths(paths);
  for (const error of errors) yield { type: 'error', error };
  const pool = opts.workers && opts.workers > 0 ? new AnalysisPool(opts.workers) : undefined;
  const window = pool ? 16 * (opts.workers ?? 1) : 1;
  const pending: { traj: Trajectory; result: Promise<CheckedTrajectory> }[] = [];
  const settle = async (p: { traj: Trajectory; result: Promise<CheckedTrajectory> }): Promise<RunEvent> => {
    try {
      return { type: 'trajectory', checked: await p.result };
    } catch (e) {
      return { type: 'error', error: { file: p.traj.source.file, line: p.traj.source.line, message: `cannot analyze trajectory ${p.traj.id}: ${(e as Error).message}` } };
    }
  };
  try {
    for (const file of files) {
      const loaded = await loadFile(file, { format: opts.format });
      for (const error of loaded.errors) yield { type: 'error', error };
      yield { type: 'file', file, format: loaded.format, count: loaded.trajectories.length };
      for (const traj of loaded.trajectories) {
        const result = pool ? pool.analyze(traj, opts, roots) : analyzeTrajectory(traj, opts, roots);
        result.catch(() => undefined); // settled in order below; avoid an unhandled rejection meanwhile
        pending.push({ traj, result });
        if (pending.length >= window) yield await settle(pending.shift()!);
      }
    }
    while (pending.length > 0) yield await settle(pending.shift()!);
  } finally {
    await pool?.close();
  }
}

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
