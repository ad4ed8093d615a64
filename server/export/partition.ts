// Where a trajectory sits in its training run: the step and the rank that produced it, read from
// what the importers keep in `meta` (prime-rl: `step`/`rank` from `step_<n>/rank_<r>.bin`;
// slime's train dumps: `rollout_id`/`rank`; verl's dumps: `step`). These name the hive-style
// folders of a partitioned export (`step=12/rank=3/`) and the `step`/`rank` columns of the
// findings Parquet. A trajectory that states neither gets Hive's name for a missing value,
// which DuckDB, Spark and pyarrow read back as NULL.
import type { Trajectory } from '../model/trajectory.ts';

export const PARTITION_KEYS = ['step', 'rank'] as const;
export type PartitionKey = (typeof PARTITION_KEYS)[number];

/** Hive's folder value for NULL (`key=__HIVE_DEFAULT_PARTITION__`). */
export const MISSING_PARTITION_VALUE = '__HIVE_DEFAULT_PARTITION__';

/** Which `meta` fields give each partition key, first present wins. */
const META_FIELDS: Record<PartitionKey, readonly string[]> = {
  step: ['step', 'rollout_id', 'global_step'],
  rank: ['rank', 'data_parallel_rank', 'dp_rank'],
};

function wholeNumber(v: unknown): number | null {
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return v;
  if (typeof v === 'string' && /^\d{1,15}$/.test(v)) return Number(v);
  return null;
}

/** The trajectory's value for `key`, or null when its data does not say. */
export function partitionValue(t: Pick<Trajectory, 'meta'>, key: PartitionKey): number | null {
  const meta = t.meta ?? {};
  for (const field of META_FIELDS[key]) {
    const n = wholeNumber(meta[field]);
    if (n !== null) return n;
  }
  return null;
}

/** `--partition step,rank` → ['step', 'rank']; refuses unknown or repeated keys. */
export function parsePartitionKeys(text: string): PartitionKey[] {
  const keys = text
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  if (keys.length === 0) throw new Error('--partition takes a comma-separated list of step, rank');
  for (const k of keys)
    if (!(PARTITION_KEYS as readonly string[]).includes(k))
      throw new Error(`--partition: unknown key "${k}" (known: ${PARTITION_KEYS.join(', ')})`);
  if (new Set(keys).size !== keys.length) throw new Error(`--partition: a key is repeated in "${text}"`);
  return keys as PartitionKey[];
}

/** The hive-style folder of a trajectory, e.g. `step=12/rank=3` (forward slashes). */
export function partitionFolder(t: Pick<Trajectory, 'meta'>, keys: readonly PartitionKey[]): string {
  return keys
    .map((k) => {
      const v = partitionValue(t, k);
      return `${k}=${v === null ? MISSING_PARTITION_VALUE : v}`;
    })
    .join('/');
}
