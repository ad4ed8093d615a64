// `rollscope export PATH...`: the shared pipeline (checkPaths) feeding the export
// (export/run.ts exportEvents), so an export reads, checks and names trajectories exactly as
// `check` and `serve` do.
import path from 'node:path';
import type { ReadError } from '../model/trajectory.ts';
import { expandPaths } from '../import/index.ts';
import {
  exportEvents,
  checkTarget,
  rowSpecFor,
  type ExportOptions,
  type ExportProgress,
  type ExportResult,
} from '../export/run.ts';
import { checkPaths, type RunEvent } from '../pipeline.ts';
import { defaultRoots, type RunOptions } from './analyze.ts';
import { runRoot, SplitPositions } from './shard.ts';
import { readsGroup } from '../report/filter.ts';
import { type ExportWhere, groupsOfRun, whereMatcher } from './where.ts';

/**
 * Export every trajectory under `paths` (files or folders), or with `where` those it selects: a
 * filter that reads a group reads the run twice (`groupsOfRun`, then the export), any other once.
 */
export async function exportRun(
  paths: readonly string[],
  opts: Omit<ExportOptions, 'filter'> & { where?: ExportWhere },
  onProgress?: (p: ExportProgress) => void,
): Promise<ExportResult> {
  const out = path.resolve(opts.out);
  const roots = opts.roots ?? defaultRoots(paths);
  const runOpts: RunOptions = {
    model: opts.model,
    format: opts.inputFormat,
    processor: opts.processor,
    roots,
    workers: opts.workers,
    ...(opts.unitBytes !== undefined ? { unitBytes: opts.unitBytes } : {}),
    allowRemoteImages: opts.allowRemoteImages,
    // Each row is built where its trajectory is analyzed, unless a selection (a function of this
    // thread) must see the checked trajectory first.
    ...(opts.select ? {} : { exportRows: rowSpecFor({ ...opts, roots }) }),
    // A shard reads only its input splits, as `check --shard` does (pipeline/shard.ts); names are
    // relative to the run as given, not to the files it expands to.
    ...(opts.shard ? { shard: { ...opts.shard, root: opts.shard.root ?? runRoot(paths) } } : {}),
  };
  if (!opts.partition) checkTarget(out, opts.force === true);
  const expanded = expandPaths(paths);
  const files = expanded.files;
  // A batch written into a folder it was exported from is not an input of the next export (--force reruns).
  const inputs = files.filter((f) => path.resolve(f) !== out && !isInside(f, opts.partition ? out : undefined));
  const where = opts.where;
  if (opts.shard) {
    // Its entries get their run-wide keys and group places from merge (cli/merge-keys.ts), which a filter reads.
    if (where) throw new Error('--where reads a whole run (its keys and groups): export the shards without it');
    const positions = new SplitPositions();
    // The paths that cannot be read are shard 0's: checkPaths gives them to it.
    const events = checkPaths(inputs, runOpts, { onPlan: (p) => positions.plan(p.splits) });
    return exportEvents(events, { ...opts, roots, positions }, onProgress, inputs.length);
  }
  const errors = expanded.errors;
  const matches = where && whereMatcher(where, readsGroup(where.node) ? await groupsOfRun(inputs, runOpts) : new Map());
  return exportEvents(
    withErrors(errors, checkPaths(inputs, runOpts)),
    { ...opts, roots, filter: where && matches ? { expression: where.expression, matches } : undefined },
    onProgress,
    inputs.length,
  );
}

/** Whether `file` lies under `dir` (a partitioned export's own folder is not an input of a rerun). */
function isInside(file: string, dir: string | undefined): boolean {
  if (!dir) return false;
  const rel = path.relative(dir, path.resolve(file));
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
}

async function* withErrors(errors: readonly ReadError[], events: AsyncIterable<RunEvent>): AsyncGenerator<RunEvent> {
  for (const error of errors) yield { type: 'error', error };
  yield* events;
}
