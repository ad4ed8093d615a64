// `--shard K/N`: the share of a run one worker of N reads (docs/distributed.md). The run's files,
// laid end to end in input order, are cut into N equal byte ranges as Hadoop cuts a file into
// input splits (below); a shard reads only its splits, and `merge` puts the shards' outputs back
// together as one run (report/merge.ts, cli/merge-keys.ts).
import path from 'node:path';
import { z } from 'zod';

export const ShardSpec = z
  .object({
    index: z.number().int().nonnegative(),
    count: z.number().int().positive(),
    /** Folder the run's file names are relative to in its fingerprint (default: the inputs' common folder), so
     * shards whose run directory is mounted at different places still agree. */
    root: z.string().optional(),
  })
  .refine((s) => s.index < s.count, { message: 'the shard index must be below the shard count' });
export type ShardSpec = z.infer<typeof ShardSpec>;

/** Parse `K/N` (K from 0 to N−1, as JOB_COMPLETION_INDEX and SLURM_ARRAY_TASK_ID count). */
export function parseShard(text: string): ShardSpec {
  const m = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(text);
  if (!m) throw new Error(`--shard takes K/N (for example 0/4), got "${text}"`);
  const index = Number(m[1]);
  const count = Number(m[2]);
  if (count < 1) throw new Error(`--shard ${text}: N must be at least 1`);
  if (index >= count) throw new Error(`--shard ${text}: K counts from 0 to N−1 (${count - 1})`);
  return { index, count };
}

/** The deepest folder that holds every input (a file's own folder when it is the only input). */
export function runRoot(paths: readonly string[]): string {
  const dirs = paths.map((p) => {
    const abs = path.resolve(p);
    return /\.[a-z0-9]+$/i.test(abs) ? path.dirname(abs) : abs;
  });
  if (dirs.length === 0) return path.resolve('.');
  let common = dirs[0]!.split(path.sep);
  for (const d of dirs.slice(1)) {
    const parts = d.split(path.sep);
    let i = 0;
    while (i < common.length && i < parts.length && common[i] === parts[i]) i++;
    common = common.slice(0, i);
  }
  return common.join(path.sep) || path.sep;
}

// --- input splits ---------------------------------------------------------------------------------
// As Hadoop's FileInputFormat does: the run's bytes (its files end to end, in input order) are cut
// into N equal ranges; a file that can be cut at line starts (a record-local JSONL file,
// uncompressed) is read by every shard whose range it meets, from the range's first line start
// to the first line start at or after the range's end (the rule of Hadoop's LineRecordReader,
// docs/reference/input-splits.md); any other file (binary, whole-file JSON, gzip, a chat log
// whose records make one session together), and any file no larger than one range, goes whole
// to the shard whose range holds its middle byte.

/** One file of the run as the split plan sees it. */
export interface PlannedFile {
  file: string;
  bytes: number;
  /** Whether it may be cut at line starts (import/stream.ts `splitsAtLines`). */
  splittable: boolean;
}

/** What one shard reads of one file: bytes [start, end) before alignment to line starts, or the whole file. */
export interface InputSplit {
  /** The file's place in the run's input order. */
  order: number;
  file: string;
  bytes: number;
  start: number;
  end: number;
  whole: boolean;
}

/** The byte where range k of `count` over `total` bytes begins (range `count` ends the run). */
export function rangeStart(k: number, count: number, total: number): number {
  return Math.floor((k * total) / count);
}

/** The splits shard `index` of `count` reads, in input order (at most one per file). */
export function planInputSplits(files: readonly PlannedFile[], index: number, count: number): InputSplit[] {
  const total = files.reduce((n, f) => n + f.bytes, 0);
  const from = rangeStart(index, count, total);
  const to = rangeStart(index + 1, count, total);
  const splits: InputSplit[] = [];
  let at = 0;
  files.forEach((f, order) => {
    const begin = at;
    at += f.bytes;
    if (!f.splittable || f.bytes * count <= total) {
      // Whole, to the shard whose range holds its middle byte (the last shard for an empty run).
      const middle = begin + Math.floor(f.bytes / 2);
      const owner = total === 0 ? count - 1 : shardAtByte(middle, count, total);
      if (owner === index) splits.push({ order, file: f.file, bytes: f.bytes, start: 0, end: f.bytes, whole: true });
      return;
    }
    const start = Math.max(from, begin);
    const end = Math.min(to, at);
    if (start < end)
      splits.push({ order, file: f.file, bytes: f.bytes, start: start - begin, end: end - begin, whole: false });
  });
  return splits;
}

/** The shard whose range holds byte `at` of the run. */
function shardAtByte(at: number, count: number, total: number): number {
  let k = Math.min(count - 1, Math.floor((at * count) / total));
  while (k > 0 && rangeStart(k, count, total) > at) k--;
  while (k < count - 1 && rangeStart(k + 1, count, total) <= at) k++;
  return k;
}

/** Where in the run an entry was read (report/check-report.ts RunPosition): file order (−1: a path that cannot be read), split start, place. */
export type SplitPosition = [number, number, number];

/**
 * The run positions of what a shard reads, in the order it reads it: given the shard's splits
 * (`plan`, before the first event), and told where each split ends (`fileEnded`: every split's
 * events end with its file's `file` event), each entry's [file order, its split's first byte,
 * its place in the split]. What comes before the plan (the paths that cannot be read) is [−1, 0, place].
 * `merge` orders the entries of all shards by these (report/merge.ts, cli/merge-keys.ts).
 */
export class SplitPositions {
  private splits: readonly InputSplit[] = [];
  private planned = false;
  private cursor = 0;
  private seq = 0;

  plan(splits: readonly InputSplit[]): void {
    this.planned = true;
    this.splits = splits;
    this.cursor = 0;
    this.seq = 0;
  }

  /** The split being read now (undefined before the plan). */
  get current(): InputSplit | undefined {
    return this.planned ? this.splits[this.cursor] : undefined;
  }

  fileEnded(): void {
    this.cursor++;
    this.seq = 0;
  }

  next(): SplitPosition {
    const split = this.current;
    return split ? [split.order, split.start, this.seq++] : [-1, 0, this.seq++];
  }
}
