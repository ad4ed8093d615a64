// Export rows as Parquet, written with hyparquet-writer one row group at a time (memory bounded
// by a row group), with typed list columns: tokens `list<int32>`, masks and token types
// `list<int8>` (INT32 annotated INT_8, which readers show as TINYINT/int8), logprobs
// `list<float>`. hyparquet-writer cannot infer list columns, so the schema is spelled out in the
// standard three-level LIST layout (`<name>` LIST → repeated group `list` → `element`), which
// DuckDB, pyarrow and Spark all read (apache/parquet-format LogicalTypes.md, "Lists").
import fs from 'node:fs';
import { ByteWriter, ParquetWriter, type ColumnSource, type SchemaElement } from 'hyparquet-writer';
import { parquetReadObjects } from 'hyparquet';
import { EXPORT_SCHEMA_VERSION, type ExportRow } from './row-schema.ts';

type Repetition = 'REQUIRED' | 'OPTIONAL';
/** A schema subtree: its elements in depth-first order, as Parquet's flattened schema lists them. */
type Node = SchemaElement[];

const int32 = (name: string, repetition_type: Repetition = 'REQUIRED'): Node => [
  { name, type: 'INT32', repetition_type },
];
const int8 = (name: string): Node => [{ name, type: 'INT32', converted_type: 'INT_8', repetition_type: 'REQUIRED' }];
const float32 = (name: string): Node => [{ name, type: 'FLOAT', repetition_type: 'REQUIRED' }];
const float64 = (name: string, repetition_type: Repetition): Node => [{ name, type: 'DOUBLE', repetition_type }];
const utf8 = (name: string, repetition_type: Repetition = 'REQUIRED'): Node => [
  { name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type },
];
const binary = (name: string, repetition_type: Repetition): Node => [{ name, type: 'BYTE_ARRAY', repetition_type }];
const struct = (name: string, fields: Node[], repetition_type: Repetition = 'REQUIRED'): Node => [
  { name, repetition_type, num_children: fields.length },
  ...fields.flat(),
];
/** `elementOf` receives the name `element` and returns the element's subtree. */
const list = (name: string, elementOf: (name: string) => Node, repetition_type: Repetition = 'REQUIRED'): Node => [
  { name, repetition_type, converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  ...elementOf('element'),
];

const COLUMNS: Node[] = [
  int32('schema_version'),
  utf8('id'),
  struct('source', [utf8('file'), int32('line'), utf8('format')]),
  utf8('model'),
  utf8('group', 'OPTIONAL'),
  list('tokens', (n) => int32(n)),
  int32('response_length'),
  list('loss_mask', int8),
  list('rollout_log_probs', float32, 'OPTIONAL'),
  float64('reward', 'OPTIONAL'),
  utf8('status'),
  list('images', (n) =>
    struct(n, [
      utf8('sha256'),
      int32('width'),
      int32('height'),
      int32('min_pixels'),
      int32('max_pixels'),
      binary('bytes', 'OPTIONAL'),
      utf8('path', 'OPTIONAL'),
      utf8('uri', 'OPTIONAL'),
    ]),
  ),
  list('image_grid_thw', (n) => list(n, (m) => int32(m))),
  list('placeholder_ranges', (n) => struct(n, [int32('offset'), int32('length')])),
  list('mm_token_type_ids', int8),
  list('position_ids', (n) => list(n, (m) => int32(m))),
  struct('pixel_values', [utf8('dtype'), list('shape', (n) => int32(n)), binary('data', 'REQUIRED')], 'OPTIONAL'),
];

export const PARQUET_SCHEMA: SchemaElement[] = [{ name: 'root', num_children: COLUMNS.length }, ...COLUMNS.flat()];
const COLUMN_NAMES = COLUMNS.map((c) => c[0]!.name);

/** Row fields as Parquet values: images' base64 bytes become binary. */
function columnValue(row: ExportRow, name: string): unknown {
  if (name === 'images')
    return row.images.map((img) => ({
      ...img,
      bytes: img.bytes === null ? null : Buffer.from(img.bytes, 'base64'),
      uri: img.uri ?? null,
    }));
  if (name === 'pixel_values')
    return row.pixel_values ? { ...row.pixel_values, data: Buffer.from(row.pixel_values.data, 'base64') } : null;
  return row[name as keyof ExportRow];
}

/** A hyparquet-writer sink that appends to an open file descriptor, 1 MiB at a time (like its own fileWriter). */
export class FdWriter extends ByteWriter {
  constructor(private readonly fd: number) {
    super(1 << 20);
  }
  private drain(): void {
    if (this.index > 0) fs.writeSync(this.fd, new Uint8Array(this.buffer, 0, this.index));
    this.index = 0;
  }
  override ensure(size: number): void {
    if (this.index > 1 << 20) this.drain();
    super.ensure(size);
  }
  flush(): void {
    this.drain();
  }
  override finish(): void {
    this.drain();
  }
}

export interface ParquetRowWriterOptions {
  /** Rows per row group (default 512). */
  rowGroupRows?: number;
  /** Flush a row group early once its rows hold about this many bytes (default 64 MiB). */
  rowGroupBytes?: number;
  createdBy: string;
}

export class ParquetRowWriter {
  private readonly writer: ParquetWriter;
  private readonly out: FdWriter;
  private buffered: ExportRow[] = [];
  private bufferedBytes = 0;
  private rows = 0;
  private readonly groupRows: number;
  private readonly groupBytes: number;

  private constructor(
    private readonly fd: number,
    opts: ParquetRowWriterOptions,
  ) {
    this.out = new FdWriter(fd);
    this.groupRows = opts.rowGroupRows ?? 512;
    this.groupBytes = opts.rowGroupBytes ?? 64 << 20;
    this.writer = new ParquetWriter({
      writer: this.out,
      schema: PARQUET_SCHEMA,
      createdBy: opts.createdBy,
      statistics: false,
      kvMetadata: [{ key: 'rollscope.schema_version', value: String(EXPORT_SCHEMA_VERSION) }],
    });
  }

  /** Create `file` exclusively (never clobbers) and start a Parquet file in it. */
  static create(file: string, opts: ParquetRowWriterOptions): ParquetRowWriter {
    return new ParquetRowWriter(fs.openSync(file, 'wx'), opts);
  }

  get rowCount(): number {
    return this.rows;
  }

  get bytesWritten(): number {
    return this.out.offset;
  }

  write(row: ExportRow): void {
    this.buffered.push(row);
    this.rows++;
    this.bufferedBytes +=
      row.tokens.length * 4 * (4 + row.position_ids.length) +
      row.images.reduce((n, i) => n + (i.bytes?.length ?? 0), 0);
    if (this.buffered.length >= this.groupRows || this.bufferedBytes >= this.groupBytes) this.flushGroup();
  }

  private flushGroup(): void {
    if (this.buffered.length === 0) return;
    const rows = this.buffered;
    this.buffered = [];
    this.bufferedBytes = 0;
    const columnData: ColumnSource[] = COLUMN_NAMES.map((name) => ({
      name,
      data: rows.map((r) => columnValue(r, name)),
    }));
    void this.writer.write({ columnData, rowGroupSize: rows.length });
  }

  /** Last row group, footer, sync to disk, close. */
  close(): void {
    this.flushGroup();
    void this.writer.finish();
    fs.fdatasyncSync(this.fd);
    fs.closeSync(this.fd);
  }

  abandon(): void {
    this.buffered = [];
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}

/** Read an exported Parquet batch back into rows in their JSON shape (binary image bytes → base64). */
function isPixelValues(v: unknown): v is { data: Uint8Array } {
  return typeof v === 'object' && v !== null && (v as { data?: unknown }).data instanceof Uint8Array;
}

export async function readParquetRows(bytes: Uint8Array): Promise<Record<string, unknown>[]> {
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  // utf8: false keeps un-annotated BYTE_ARRAY (the image bytes) binary; UTF8 columns still decode to strings.
  const rows = (await parquetReadObjects({ file, utf8: false })) as Record<string, unknown>[];
  return rows.map((r) => ({
    ...r,
    group: r.group ?? null,
    reward: r.reward ?? null,
    rollout_log_probs: r.rollout_log_probs ?? null,
    pixel_values: isPixelValues(r.pixel_values)
      ? { ...r.pixel_values, data: Buffer.from(r.pixel_values.data).toString('base64') }
      : (r.pixel_values ?? null),
    images: Array.isArray(r.images)
      ? r.images.map(({ uri, ...img }: Record<string, unknown>) => ({
          ...img,
          bytes: img.bytes instanceof Uint8Array ? Buffer.from(img.bytes).toString('base64') : (img.bytes ?? null),
          path: img.path ?? null,
          // Only `--images ref` rows carry a uri (the JSONL rows of the other modes have no such key).
          ...(uri !== null && uri !== undefined ? { uri } : {}),
        }))
      : r.images,
  }));
}
