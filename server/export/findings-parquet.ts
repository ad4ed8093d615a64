// `check --findings-parquet FILE`: one row per finding, so a team queries the findings of a whole
// run (every shard's file) with DuckDB, Spark or pyarrow. Flat columns with statistics, written a
// row group at a time as rows come (memory bounded by one row group), into a file that appears
// only when complete (util/atomic-file.ts). Schema: docs/check-json.md, "Findings as Parquet".
import type { Finding } from '../model/finding.ts';
import { ParquetWriter, type ColumnSource, type SchemaElement } from 'hyparquet-writer';
import type { CheckedTrajectory } from '../analysis/checked.ts';
import { AtomicFile } from '../util/atomic-file.ts';
import { FdWriter } from './parquet.ts';
import { partitionValue } from './partition.ts';

export interface FindingRow {
  trajectory_id: string;
  file: string;
  line: number;
  format: string;
  step: number | null;
  rank: number | null;
  group: string | null;
  kind: string;
  cause: string | null;
  severity: string;
  turn: number;
  index: number;
  stream: string | null;
  message: string;
}

type Column = { name: keyof FindingRow; type: 'INT32' | 'BYTE_ARRAY'; optional?: boolean };
const COLUMNS: Column[] = [
  { name: 'trajectory_id', type: 'BYTE_ARRAY' },
  { name: 'file', type: 'BYTE_ARRAY' },
  { name: 'line', type: 'INT32' },
  { name: 'format', type: 'BYTE_ARRAY' },
  { name: 'step', type: 'INT32', optional: true },
  { name: 'rank', type: 'INT32', optional: true },
  { name: 'group', type: 'BYTE_ARRAY', optional: true },
  { name: 'kind', type: 'BYTE_ARRAY' },
  { name: 'cause', type: 'BYTE_ARRAY', optional: true },
  { name: 'severity', type: 'BYTE_ARRAY' },
  { name: 'turn', type: 'INT32' },
  { name: 'index', type: 'INT32' },
  { name: 'stream', type: 'BYTE_ARRAY', optional: true },
  { name: 'message', type: 'BYTE_ARRAY' },
];

export const FINDINGS_SCHEMA: SchemaElement[] = [
  { name: 'root', num_children: COLUMNS.length },
  ...COLUMNS.map(
    (c): SchemaElement => ({
      name: c.name,
      type: c.type,
      repetition_type: c.optional ? 'OPTIONAL' : 'REQUIRED',
      ...(c.type === 'BYTE_ARRAY' ? { converted_type: 'UTF8' as const } : {}),
    }),
  ),
];

/** The findings rows of one checked trajectory (its id is the run-wide key). */
export function findingRows(c: CheckedTrajectory): FindingRow[] {
  const t = c.trajectory;
  const step = partitionValue(t, 'step');
  const rank = partitionValue(t, 'rank');
  return c.findings.map((f) => ({
    trajectory_id: t.id,
    file: t.source.file,
    line: t.source.line,
    format: t.source.format,
    step,
    rank,
    group: t.group ?? null,
    kind: f.kind,
    cause: f.cause ?? null,
    severity: f.severity,
    turn: f.turn,
    index: f.index,
    stream: f.stream ?? null,
    message: f.message,
  }));
}

/**
 * The rows of a GRPO group's findings (analysis/groups.ts): they concern the group, not one of its
 * trajectories, so `trajectory_id` and `file` are empty and `line` 0; `group` and `step` say which.
 */
export function groupFindingRows(g: { id: string; step: number | null; findings: readonly Finding[] }): FindingRow[] {
  return g.findings.map((f) => ({
    trajectory_id: '',
    file: '',
    line: 0,
    format: '',
    step: g.step,
    rank: null,
    group: g.id,
    kind: f.kind,
    cause: f.cause ?? null,
    severity: f.severity,
    turn: f.turn,
    index: f.index,
    stream: f.stream ?? null,
    message: f.message,
  }));
}

export class FindingsParquetWriter {
  private readonly file: AtomicFile;
  private readonly writer: ParquetWriter;
  private buffered: FindingRow[] = [];

  /** `rowGroupRows`: rows per row group (findings are small; large groups keep the footer short). */
  constructor(
    dest: string,
    private readonly rowGroupRows = 65536,
  ) {
    this.file = new AtomicFile(dest);
    this.writer = new ParquetWriter({
      writer: new FdWriter(this.file.fd),
      schema: FINDINGS_SCHEMA,
      createdBy: 'rollscope',
      kvMetadata: [{ key: 'rollscope.findings_schema_version', value: '1' }],
    });
  }

  add(c: CheckedTrajectory): void {
    this.addRows(findingRows(c));
  }

  addGroup(g: { id: string; step: number | null; findings: readonly Finding[] }): void {
    this.addRows(groupFindingRows(g));
  }

  private addRows(rows: readonly FindingRow[]): void {
    for (const row of rows) this.buffered.push(row);
    if (this.buffered.length >= this.rowGroupRows) this.flushGroup();
  }

  private flushGroup(): void {
    if (this.buffered.length === 0) return;
    const rows = this.buffered;
    this.buffered = [];
    const columnData: ColumnSource[] = COLUMNS.map((c) => ({ name: c.name, data: rows.map((r) => r[c.name]) }));
    void this.writer.write({ columnData, rowGroupSize: rows.length });
  }

  /** Last row group and footer, then the file appears under its name. */
  commit(): void {
    this.flushGroup();
    void this.writer.finish();
    this.file.commit();
  }

  discard(): void {
    this.file.discard();
  }
}
