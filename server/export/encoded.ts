// A trajectory's export outcome, built and encoded on the thread that analyzed it: the row
// (re-alignment, images, the re-check: row.ts exportRow) shredded into Parquet's leaves or
// written as its JSON line, or its reject entry as a JSON line. The thread that writes the batch
// (export/run.ts) only appends these bytes, so an export with analysis workers writes what one
// without them writes. The run-wide key of a trajectory is given on the writing thread
// (pipeline.ts keyed), so an encoded line leaves its id out and the writer puts it in.
import path from 'node:path';
import type { Finding } from '../model/finding.ts';
import { publicFinding } from '../model/public-finding.ts';
import type { CheckedTrajectory } from '../analysis/checked.ts';
import { analysisFailed } from '../analysis/analysis-failed.ts';
import { RecentImages } from './images.ts';
import type { ExportFormat, RejectEntry } from './manifest.ts';
import { shredRow, type ShreddedRow } from './parquet.ts';
import { partitionDirOf, type PartitionTarget } from './partitioned.ts';
import type { RejectReason } from './policy.ts';
import { exportRow, type RowOptions, type RowOutcome } from './row.ts';
import { EXPORT_SCHEMA_VERSION } from './row-schema.ts';

/**
 * How rows are built and encoded: what crosses to the analysis workers (no cache, no functions).
 * With `partition`, `outDir` is the partitioned folder and a row's paths are relative to its partition's.
 */
export type RowSpec = Omit<RowOptions, 'recentImages'> & { format: ExportFormat; partition?: PartitionTarget };

/** A JSON line without its id: the bytes before the id's JSON, and those after it (the newline included). */
export interface IdSplit {
  before: Uint8Array;
  after: Uint8Array;
}

export type EncodedOutcome =
  | {
      kind: 'row';
      row: { format: 'parquet'; shredded: ShreddedRow } | { format: 'jsonl'; line: IdSplit };
      /** Kinds of the original error findings the re-alignment repaired, and of the row's warnings. */
      repairedKinds: string[];
      warningKinds: string[];
    }
  | { kind: 'rejected'; reasons: RejectReason[]; causeKinds: string[]; entry: IdSplit }
  /** The row was built but cannot be encoded (a value outside its column's type): the export stops, as it would writing it. */
  | { kind: 'unwritable'; message: string };

/** The images the rows built on this thread read last (a GRPO group's samples follow one another). */
let threadImages: RecentImages | undefined;

/** Build `checked`'s row or reject entry as `spec` says, and encode it for the writer. */
export async function encodeOutcome(
  checked: CheckedTrajectory,
  spec: RowSpec,
  recentImages: RecentImages = (threadImages ??=
    new RecentImages()),
): Promise<EncodedOutcome> {
  const id = checked.trajectory.id;
  const { partition, format, ...rowOpts } = spec;
  const outDir = partition
    ? path.join(spec.outDir, ...partitionDirOf(checked.trajectory, partition).split('/'))
    : spec.outDir;
  const outcome = await exportRowOrReject(checked, { ...rowOpts, outDir, recentImages });
  if (outcome.kind === 'rejected') {
    return {
      kind: 'rejected',
      reasons: outcome.reasons,
      causeKinds: outcome.causes.map((f) => f.kind),
      entry: splitAtId(rejectEntry(checked, outcome.reasons, outcome.messages, outcome.recheck), id),
    };
  }
  const kinds = {
    repairedKinds: outcome.repaired.map((f) => f.kind),
    warningKinds: outcome.warnings.map((f) => f.kind),
  };
  try {
    return format === 'parquet'
      ? { kind: 'row', row: { format: 'parquet', shredded: shredRow(outcome.row) }, ...kinds }
      : { kind: 'row', row: { format: 'jsonl', line: splitAtId(outcome.row, id) }, ...kinds };
  } catch (e) {
    return { kind: 'unwritable', message: (e as Error).message };
  }
}

/**
 * `value`'s JSON line split around its id. Rows and reject entries both start with their schema
 * version (a number) and then their id, so the id's JSON is the text right after that prefix.
 */
function splitAtId(value: { schema_version: number; id: string | null }, id: string): IdSplit {
  const line = `${JSON.stringify(value)}\n`;
  const prefix = `{"schema_version":${JSON.stringify(value.schema_version)},"id":`;
  const idJson = JSON.stringify(id);
  if (!line.startsWith(prefix + idJson))
    throw new Error('an exported line does not start with its schema version and id');
  return { before: Buffer.from(prefix), after: Buffer.from(line.slice(prefix.length + idJson.length)) };
}

/**
 * `exportRow`, with an exception while building or re-checking the row turned into a rejection
 * (`analysis_failed`): one row that cannot be built never ends the export.
 */
async function exportRowOrReject(c: CheckedTrajectory, opts: RowOptions): Promise<RowOutcome> {
  try {
    return await exportRow(c, opts);
  } catch (e) {
    const failed = analysisFailed('export', e);
    return {
      kind: 'rejected',
      reasons: ['analysis_failed'],
      messages: [failed.message],
      causes: [failed],
      recheck: [],
    };
  }
}

function rejectEntry(
  c: CheckedTrajectory,
  reasons: RejectEntry['reasons'],
  messages: string[],
  recheck: Finding[],
): RejectEntry {
  const t = c.trajectory;
  return {
    schema_version: EXPORT_SCHEMA_VERSION,
    id: t.id,
    source: { file: t.source.file, line: t.source.line, format: t.source.format },
    reasons,
    messages,
    findings: c.findings.map(publicFinding),
    recheck_findings: recheck.map(publicFinding),
  };
}
