// The account written beside every batch: `FILE.manifest.json` (what went in, with hashes; what
// came out; why the rest did not; the settings) and the shape of `FILE.rejects.jsonl` (one line
// per trajectory or record not exported). read = exported + rejected + filtered_out, always.
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { FINDING_KINDS } from '../model/finding.ts';
import { RejectReason, REJECT_REASONS } from './policy.ts';
import { EXPORT_SCHEMA_VERSION } from './row-schema.ts';

export const ExportFormat = z.enum(['jsonl', 'parquet']);
export type ExportFormat = z.infer<typeof ExportFormat>;

const countsByKind = z.record(z.string(), z.number().int().nonnegative());

export const Manifest = z.object({
  schema_version: z.literal(EXPORT_SCHEMA_VERSION),
  rollscope_version: z.string(),
  created_at: z.string(),
  /** The batch: its file name (beside this manifest), format, row count and hash. */
  output: z.object({
    file: z.string(),
    format: ExportFormat,
    rows: z.number().int().nonnegative(),
    bytes: z.number().int().nonnegative(),
    sha256: z.string(),
  }),
  /**
   * A partitioned export (`--partition`): every Parquet file written, relative to the export
   * folder, with its hive partition values. `output` then names the folder and sums the parts.
   */
  parts: z
    .array(
      z.object({
        file: z.string(),
        partition: z.record(z.string(), z.string()),
        rows: z.number().int().nonnegative(),
        bytes: z.number().int().nonnegative(),
        sha256: z.string(),
      }),
    )
    .optional(),
  /** The export of one shard (`--shard K/N`): `rollscope merge` checks it has all N. */
  shard: z.object({ index: z.number().int().nonnegative(), count: z.number().int().positive() }).optional(),
  rejects: z.object({ file: z.string(), lines: z.number().int().nonnegative() }),
  /**
   * A shard's `FILE.keys.jsonl` (`_part-K.keys.jsonl`): where it read each trajectory and where its
   * row or reject entry is, so `merge` can give the run-wide keys (cli/merge-keys.ts).
   */
  keys: z.object({ file: z.string(), lines: z.number().int().nonnegative() }).optional(),
  /** `export --where` (docs/filter.md): the expression, and the trajectories it left out (`counts.filtered_out`). */
  filter: z.object({ where: z.string(), filtered_out: z.number().int().nonnegative() }).optional(),
  /** Model profiles the rows were aligned with (tokenizer, chat template, preprocessor hashes). */
  profiles: z.array(
    z.object({
      name: z.string(),
      family: z.string(),
      hashes: z.object({ tokenizer: z.string(), template: z.string(), preprocessor: z.string() }),
      trajectories: z.number().int().nonnegative(),
    }),
  ),
  inputs: z.array(
    z.object({
      file: z.string(),
      format: z.string().nullable(),
      /** The file's size. */
      bytes: z.number().int().nonnegative(),
      /** SHA-256 of the file, or with `range` of those bytes of it. */
      sha256: z.string(),
      /** A shard that read part of the file (its input split): bytes [start, end), before alignment to line starts. */
      range: z.object({ start: z.number().int().nonnegative(), end: z.number().int().nonnegative() }).optional(),
      /** Trajectories read from it (from its range). */
      trajectories: z.number().int().nonnegative(),
    }),
  ),
  counts: z.object({
    /** Trajectories considered plus records that could not be read (each counted once). */
    read: z.number().int().nonnegative(),
    exported: z.number().int().nonnegative(),
    rejected: z.number().int().nonnegative(),
    /** Of the rejected: records that could not be read or analyzed at all. */
    unreadable: z.number().int().nonnegative(),
    /** Trajectories `--where` did not select (neither exported nor rejected); 0 in manifests older than the filter. */
    filtered_out: z.number().int().nonnegative().default(0),
    /** Rejected entries per reason (an entry may have several reasons). */
    byReason: countsByKind,
    /** Rejected trajectories per finding kind among the findings that caused the rejection. */
    byFindingKind: countsByKind,
    /** Exported trajectories per error kind the canonical re-alignment repaired. */
    repairedByFindingKind: countsByKind,
    /**
     * Exported trajectories per kind of warning they carry: warnings that describe a correct row
     * (a non-canonical split kept verbatim, a raw-text prompt…), and with --include-warnings those
     * that doubt it. Absent from manifests older than this count.
     */
    exportedWithWarnings: countsByKind.default({}),
  }),
  settings: z.object({
    format: ExportFormat,
    images: z.enum(['embed', 'path', 'ref']),
    position_ids: z.enum(['qwen', 'verl']),
    include_warnings: z.boolean(),
    model: z.string().nullable(),
    input_format: z.string().nullable(),
    min_pixels: z.number().int().nullable(),
    max_pixels: z.number().int().nullable(),
    /** What was selected, when the export was of a filter or a selection (browser). */
    selection: z.string().nullable(),
  }),
});
export type Manifest = z.infer<typeof Manifest>;

/** One line of `FILE.rejects.jsonl`. */
export const RejectEntry = z.object({
  schema_version: z.literal(EXPORT_SCHEMA_VERSION),
  /** Trajectory id; null for a record that could not be read. */
  id: z.string().nullable(),
  source: z.object({ file: z.string(), line: z.number().int().nonnegative(), format: z.string().nullable() }),
  reasons: z.array(RejectReason).min(1),
  messages: z.array(z.string()),
  /** Every finding of the original trajectory (as `rollscope check --json` shows them). */
  findings: z.array(z.record(z.string(), z.unknown())),
  /** Findings of the re-aligned row, when it was built and re-checked. */
  recheck_findings: z.array(z.record(z.string(), z.unknown())),
});
export type RejectEntry = z.infer<typeof RejectEntry>;

export function emptyCounts(): Manifest['counts'] {
  return {
    read: 0,
    exported: 0,
    rejected: 0,
    unreadable: 0,
    filtered_out: 0,
    byReason: Object.fromEntries(REJECT_REASONS.map((r) => [r, 0])),
    byFindingKind: Object.fromEntries(FINDING_KINDS.map((k) => [k, 0])),
    repairedByFindingKind: Object.fromEntries(FINDING_KINDS.map((k) => [k, 0])),
    exportedWithWarnings: Object.fromEntries(FINDING_KINDS.map((k) => [k, 0])),
  };
}

/** Add one to each distinct key (a trajectory counts once per kind however many findings it has). */
export function countDistinct(into: Record<string, number>, keys: Iterable<string>): void {
  for (const k of new Set(keys)) into[k] = (into[k] ?? 0) + 1;
}

/** SHA-256 and size of a file, streamed. */
export async function hashFile(file: string): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

/** SHA-256 of bytes [start, end) of a file, streamed. */
export async function hashFileRange(
  file: string,
  start: number,
  end: number,
): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  if (end > start)
    for await (const chunk of fs.createReadStream(file, {
      start,
      end: end - 1,
      highWaterMark: 1 << 20,
    }) as AsyncIterable<Buffer>) {
      hash.update(chunk);
      bytes += chunk.length;
    }
  return { sha256: hash.digest('hex'), bytes };
}

let version: string | undefined;
export function rollscopeVersion(): string {
  if (!version) {
    const pkg = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../package.json');
    version = (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { version: string }).version;
  }
  return version;
}

/** Read a manifest written beside a batch (validated). */
export function readManifest(file: string): Manifest {
  return Manifest.parse(JSON.parse(fs.readFileSync(file, 'utf8')));
}

export function manifestPathFor(out: string): string {
  return `${out}.manifest.json`;
}

export function rejectsPathFor(out: string): string {
  return `${out}.rejects.jsonl`;
}

export function keysPathFor(out: string): string {
  return `${out}.keys.jsonl`;
}

export function imageDirFor(out: string): string {
  return `${out}.images`;
}
