// `export --partition step,rank --out DIR`: rows go to hive-style folders by the step and rank
// their trajectory came from (export/partition.ts), one Parquet file per folder and shard:
// `DIR/step=12/rank=3/part-K.parquet` (K the shard index, 0 unsharded), which DuckDB
// (`read_parquet('DIR/**/*.parquet', hive_partitioning = true)`), Spark and Ray Data read as
// one table with `step` and `rank` columns. Each file streams its rows a row group at a time
// (the row groups of every open partition are what memory holds), written to a hidden temporary
// file beside its final name and renamed only once the whole shard is done. The shard's account
// lives at the top of DIR as `_part-K.manifest.json` and `_part-K.rejects.jsonl` (the leading `_`
// keeps Spark and Hive from taking them for data).
import fs from 'node:fs';
import path from 'node:path';
import type { CheckedTrajectory } from '../analysis/checked.ts';
import type { Trajectory } from '../model/trajectory.ts';
import { hashFile } from './manifest.ts';
import { ParquetRowWriter, type ParquetRowWriterOptions, type ShreddedRow } from './parquet.ts';
import { partitionFolder, type PartitionKey } from './partition.ts';
import type { ExportRow } from './row-schema.ts';

export interface PartitionTarget {
  keys: PartitionKey[];
  /** The shard index: the `K` of `part-K.parquet` (0 when unsharded). */
  part: number;
}

export function partFileName(part: number): string {
  return `part-${part}.parquet`;
}

export function partitionedManifestPath(dir: string, part: number): string {
  return path.join(dir, `_part-${part}.manifest.json`);
}

export function partitionedRejectsPath(dir: string, part: number): string {
  return path.join(dir, `_part-${part}.rejects.jsonl`);
}

export function partitionedKeysPath(dir: string, part: number): string {
  return path.join(dir, `_part-${part}.keys.jsonl`);
}

/** The folder (relative to DIR) a trajectory's row goes to. */
export function partitionDirOf(t: Pick<Trajectory, 'meta'>, target: PartitionTarget): string {
  return partitionFolder(t, target.keys);
}

interface OpenPart {
  relative: string;
  dest: string;
  tmp: string;
  writer: ParquetRowWriter;
}

export class PartitionedParquetSink {
  private readonly parts = new Map<string, OpenPart>();
  private closedBytes = 0;

  constructor(
    private readonly dir: string,
    private readonly target: PartitionTarget,
    private readonly writerOptions: ParquetRowWriterOptions,
    /** A temporary name for a final one (export/run.ts tempPathFor), registered for cleanup. */
    private readonly tempFor: (dest: string) => string,
  ) {}

  get bytesWritten(): number {
    let n = this.closedBytes;
    for (const p of this.parts.values()) n += p.writer.bytesWritten;
    return n;
  }

  /** Temporary files written so far (for cleanup on failure). */
  temps(): string[] {
    return [...this.parts.values()].map((p) => p.tmp);
  }

  write(row: ExportRow, checked: CheckedTrajectory): void {
    this.partOf(checked).writer.write(row);
  }

  /** A row shredded where it was built (parquet.ts shredRow), into its trajectory's partition under its id: the part (relative to DIR) and the row's index there. */
  writeShredded(row: ShreddedRow, checked: CheckedTrajectory): { file: string; row: number } {
    const part = this.partOf(checked);
    part.writer.writeShredded(row, checked.trajectory.id);
    return { file: part.relative, row: part.writer.rowCount - 1 };
  }

  private partOf(checked: CheckedTrajectory): OpenPart {
    const folder = partitionDirOf(checked.trajectory, this.target);
    let part = this.parts.get(folder);
    if (!part) {
      const relative = `${folder}/${partFileName(this.target.part)}`;
      const dest = path.join(this.dir, ...relative.split('/'));
      fs.mkdirSync(path.dirname(dest), { recursive: true });
      const tmp = this.tempFor(dest);
      part = { relative, dest, tmp, writer: ParquetRowWriter.create(tmp, this.writerOptions) };
      this.parts.set(folder, part);
    }
    return part;
  }

  close(): void {
    for (const p of this.parts.values()) p.writer.close();
  }

  abandon(): void {
    for (const p of this.parts.values()) p.writer.abandon();
  }

  /** Every part, in folder order, with its rows and hash (after `close`). */
  async describe(): Promise<
    { file: string; partition: Record<string, string>; rows: number; bytes: number; sha256: string }[]
  > {
    const out = [];
    for (const [folder, p] of [...this.parts.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const h = await hashFile(p.tmp);
      const partition = Object.fromEntries(folder.split('/').map((kv) => kv.split('=') as [string, string]));
      out.push({ file: p.relative, partition, rows: p.writer.rowCount, bytes: h.bytes, sha256: h.sha256 });
    }
    return out;
  }

  /** Rename every part into place (replacing a part an earlier run of this shard wrote). */
  publish(): void {
    for (const p of this.parts.values()) fs.renameSync(p.tmp, p.dest);
  }
}
