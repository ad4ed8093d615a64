// Export rows as Parquet, streamed: each row is shredded into column buffers as it arrives and
// a row group is written when it fills (memory bounded by one row group's column data), with typed list columns: tokens `list<int32>`, masks and token types
// `list<int8>` (INT32 annotated INT_8, which readers show as TINYINT/int8), logprobs
// `list<float>`. hyparquet-writer cannot infer list columns, so the schema is spelled out in the
// standard three-level LIST layout (`<name>` LIST → repeated group `list` → `element`), which
// DuckDB, pyarrow and Spark all read (apache/parquet-format LogicalTypes.md, "Lists").
import fs from 'node:fs';
import { ByteWriter, ParquetWriter, type SchemaElement } from 'hyparquet-writer';
import { writeNumericColumn, type NumericLeaf } from './parquet-column.ts';
import {
  appendRowGroup,
  writeColumn,
  type ColumnEncoder,
  type PageData,
  type PageIndexes,
} from './parquet-internals.ts';
import { parquetReadObjects, type AsyncBuffer } from 'hyparquet';
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

// --- shredding rows into column buffers ----------------------------------------------------------
// Rows are shredded into their leaf columns as they arrive (Dremel definition and repetition
// levels in byte arrays, numbers in typed arrays), so a row group in memory is its column data,
// not its rows. The levels and values are exactly what hyparquet-writer's generic
// `encodeNestedValues` derives from row objects. Numeric leaves are written from their typed
// buffers (parquet-column.ts), the others through hyparquet-writer's `writeColumn`; either way the
// file is byte for byte what `ParquetWriter.write` makes of the rows as objects
// (test/export-parquet-writer.test.ts).

type DecodedArray = PageData['values'];

/** A growable typed array. */
class Grow<A extends Uint8Array | Int32Array | Float64Array> {
  length = 0;
  constructor(
    public data: A,
    private readonly make: (n: number) => A,
  ) {}
  reserve(n: number): void {
    if (this.length + n <= this.data.length) return;
    const next = this.make(Math.max(this.data.length * 2, this.length + n));
    next.set(this.data.subarray(0, this.length));
    this.data = next;
  }
  push(v: number): void {
    if (this.length === this.data.length) this.reserve(1);
    this.data[this.length++] = v;
  }
  /** Append a run of values (a shredded row's, export/parquet.ts `ShreddedRow`). */
  append(values: ArrayLike<number>): void {
    this.reserve(values.length);
    this.data.set(values, this.length);
    this.length += values.length;
  }
  fill(v: number, n: number): void {
    this.reserve(n);
    this.data.fill(v, this.length, this.length + n);
    this.length += n;
  }
  view(): A {
    return this.data.subarray(0, this.length) as A;
  }
  clear(): void {
    this.length = 0;
  }
}

const bytes = (n = 4096) => new Grow(new Uint8Array(n), (m) => new Uint8Array(m));

/** Why `v` cannot be written as an INT32 (as hyparquet-writer's plain encoder says), or undefined. */
function int32Problem(v: number): string | undefined {
  return (v | 0) === v ? undefined : `parquet expected int32 value, got ${v}`;
}

/** One leaf column of the row group being filled. */
class Leaf {
  readonly def = bytes();
  readonly rep = bytes();
  /** Numeric leaves (all REQUIRED): values by slot, a placeholder where an ancestor is missing. */
  readonly nums?: Grow<Int32Array> | Grow<Float64Array>;
  /** Other leaves: values by slot, null or undefined as hyparquet-writer gives them. */
  objs: unknown[] = [];
  /** Slots whose value is missing (definition level below the maximum). */
  holes = 0;
  /** Repetition level of every list element after the first in the innermost list. */
  readonly maxRep: number;

  constructor(
    readonly column: ColumnEncoder,
    readonly maxDef: number,
    /** A flat column: no levels of its own, values straight from the rows. */
    readonly flat: boolean,
  ) {
    this.maxRep = column.schemaPath.filter((s) => s.repetition_type === 'REPEATED').length;
    const t = column.element.type;
    if (!flat && t === 'INT32') this.nums = new Grow(new Int32Array(4096), (m) => new Int32Array(m));
    else if (!flat && (t === 'FLOAT' || t === 'DOUBLE'))
      this.nums = new Grow(new Float64Array(4096), (m) => new Float64Array(m));
  }

  /** A slot with no value: the list (or struct) above the leaf is empty or null. */
  missing(def: number, rep: number, value: null | undefined = undefined): void {
    this.def.push(def);
    this.rep.push(rep);
    this.holes++;
    if (this.nums) this.nums.push(0);
    else this.objs.push(value);
  }

  one(def: number, rep: number, value: unknown): void {
    this.def.push(def);
    this.rep.push(rep);
    if (this.nums) {
      const v = value as number;
      if (this.column.element.type === 'INT32') {
        const bad = int32Problem(v);
        if (bad) throw new Error(`${this.column.columnName}: ${bad}`);
      }
      this.nums.push(v);
    } else this.objs.push(value);
  }

  /** A list of numbers under one repeated level: `rep0` for its first element, `repN` for the rest. */
  numbers(values: readonly number[], def: number, rep0: number, repN: number): void {
    const n = values.length;
    this.def.fill(def, n);
    this.rep.reserve(n);
    this.rep.push(rep0);
    if (n > 1) this.rep.fill(repN, n - 1);
    const nums = this.nums!;
    nums.reserve(n);
    const out = nums.data;
    const at = nums.length;
    if (this.column.element.type === 'INT32') {
      for (let i = 0; i < n; i++) {
        const v = values[i]!;
        if ((v | 0) !== v) throw new Error(`${this.column.columnName}: ${int32Problem(v)}`);
        out[at + i] = v;
      }
    } else for (let i = 0; i < n; i++) out[at + i] = values[i]!;
    nums.length += n;
  }

  /** A nested numeric leaf as the typed buffers it is (written by parquet-column.ts), else undefined. */
  numericLeaf(): NumericLeaf | undefined {
    if (this.flat || !this.nums || this.column.element.type === 'DOUBLE') return undefined;
    return {
      values: this.nums.view(),
      def: this.def.view(),
      rep: this.rep.view(),
      maxDef: this.maxDef,
      maxRep: this.maxRep,
      holes: this.holes,
    };
  }

  pageData(): PageData {
    if (this.flat) {
      const definitionLevels =
        this.maxDef === 0 ? [] : (this.objs.map((v) => (v === null || v === undefined ? 0 : 1)) as number[]);
      return {
        values: this.objs as DecodedArray,
        definitionLevels,
        repetitionLevels: [],
        maxDefinitionLevel: this.maxDef,
      };
    }
    let values: DecodedArray | unknown[] = this.objs;
    if (this.nums) {
      const nums = this.nums.view();
      if (this.holes === 0) values = nums;
      else {
        // Missing slots as hyparquet-writer leaves them: undefined among the values.
        const def = this.def.data;
        const all = new Array<number | undefined>(nums.length);
        for (let i = 0; i < nums.length; i++) all[i] = def[i]! < this.maxDef ? undefined : nums[i];
        values = all;
      }
    }
    return {
      values: values as DecodedArray,
      definitionLevels: this.def.view() as unknown as number[],
      repetitionLevels: this.rep.view() as unknown as number[],
      maxDefinitionLevel: this.maxDef,
    };
  }

  clear(): void {
    this.def.clear();
    this.rep.clear();
    this.nums?.clear();
    this.objs = [];
    this.holes = 0;
  }
}

/** What a leaf's encoder takes from the file's writer. */
type EncoderSettings = Pick<ParquetWriter, 'codec' | 'compressors' | 'statistics' | 'statisticsTruncateLength'>;

/** Every leaf of the schema in file order, with its encoder settings (ParquetWriter.write's defaults, statistics off). */
function schemaLeaves(writer: EncoderSettings): Map<string, Leaf> {
  const leaves = new Map<string, Leaf>();
  let i = 1;
  const walk = (path: SchemaElement[]) => {
    const el = PARQUET_SCHEMA[i++]!;
    const here = [...path, el];
    if (el.num_children) {
      for (let c = 0; c < el.num_children; c++) walk(here);
      return;
    }
    const columnName = here
      .slice(1)
      .map((s) => s.name)
      .join('.');
    const maxDef = here.slice(1).filter((s) => s.repetition_type !== 'REQUIRED').length;
    const column: ColumnEncoder = {
      columnName,
      element: el,
      schemaPath: here,
      codec: writer.codec,
      compressors: writer.compressors,
      stats: writer.statistics,
      statisticsTruncateLength: writer.statisticsTruncateLength,
      pageSize: 1048576,
      dictionarySize: undefined,
      columnIndex: false,
      offsetIndex: true,
      encoding: undefined,
      bloomFilter: undefined,
    };
    leaves.set(columnName, new Leaf(column, maxDef, here.length === 2));
  };
  const root = PARQUET_SCHEMA[0]!;
  for (let c = 0; c < root.num_children!; c++) walk([root]);
  return leaves;
}

/** The leaves of one row group and how a row is shredded into them (the schema above, column by column). */
class RowGroupColumns {
  readonly leaves: Map<string, Leaf>;
  private readonly L: (name: string) => Leaf;
  /** Image bytes by hash within the row group: one buffer per distinct image, so the dictionary finds repeats by identity. */
  private imageBytes = new Map<string, Uint8Array>();
  rows = 0;

  constructor(writer: EncoderSettings) {
    this.leaves = schemaLeaves(writer);
    this.L = (name) => this.leaves.get(name)!;
  }

  add(row: ExportRow): void {
    const L = this.L;
    this.rows++;
    L('schema_version').objs.push(row.schema_version);
    L('id').objs.push(row.id);
    L('source.file').one(0, 0, row.source.file);
    L('source.line').one(0, 0, row.source.line);
    L('source.format').one(0, 0, row.source.format);
    L('model').objs.push(row.model);
    L('group').objs.push(row.group);
    numberList(L('tokens.list.element'), row.tokens, 0);
    L('response_length').objs.push(row.response_length);
    numberList(L('loss_mask.list.element'), row.loss_mask, 0);
    const lp = L('rollout_log_probs.list.element');
    if (row.rollout_log_probs === null || row.rollout_log_probs === undefined) lp.missing(0, 0);
    else numberList(lp, row.rollout_log_probs, 1);
    L('reward').objs.push(row.reward);
    L('status').objs.push(row.status);
    this.addImages(row.images);
    const grid = L('image_grid_thw.list.element.list.element');
    if (row.image_grid_thw.length === 0) grid.missing(0, 0);
    else row.image_grid_thw.forEach((g, i) => numberList(grid, g, 1, i === 0 ? 0 : 1));
    const offset = L('placeholder_ranges.list.element.offset');
    const length = L('placeholder_ranges.list.element.length');
    if (row.placeholder_ranges.length === 0) {
      offset.missing(0, 0);
      length.missing(0, 0);
    } else
      row.placeholder_ranges.forEach((r, i) => {
        offset.one(1, i === 0 ? 0 : 1, r.offset);
        length.one(1, i === 0 ? 0 : 1, r.length);
      });
    numberList(L('mm_token_type_ids.list.element'), row.mm_token_type_ids, 0);
    const pos = L('position_ids.list.element.list.element');
    if (row.position_ids.length === 0) pos.missing(0, 0);
    else row.position_ids.forEach((p, i) => numberList(pos, p, 1, i === 0 ? 0 : 1));
    const pv = row.pixel_values;
    const dtype = L('pixel_values.dtype');
    const shape = L('pixel_values.shape.list.element');
    const data = L('pixel_values.data');
    if (!pv) {
      dtype.missing(0, 0);
      shape.missing(0, 0);
      data.missing(0, 0);
    } else {
      dtype.one(1, 0, pv.dtype);
      numberList(shape, pv.shape, 1);
      data.one(1, 0, Buffer.from(pv.data, 'base64'));
    }
  }

  private addImages(images: ExportRow['images']): void {
    const L = this.L;
    const names = ['sha256', 'width', 'height', 'min_pixels', 'max_pixels', 'bytes', 'path', 'uri'] as const;
    const leaf = names.map((n) => L(`images.list.element.${n}`));
    if (images.length === 0) {
      for (const l of leaf) l.missing(0, 0);
      return;
    }
    images.forEach((img, i) => {
      const rep = i === 0 ? 0 : 1;
      leaf[0]!.one(1, rep, img.sha256);
      leaf[1]!.one(1, rep, img.width);
      leaf[2]!.one(1, rep, img.height);
      leaf[3]!.one(1, rep, img.min_pixels);
      leaf[4]!.one(1, rep, img.max_pixels);
      optional(leaf[5]!, rep, img.bytes === null ? null : this.imageBuffer(img.sha256, img.bytes));
      optional(leaf[6]!, rep, img.path);
      optional(leaf[7]!, rep, img.uri ?? null);
    });
  }

  private imageBuffer(sha256: string, base64: string): Uint8Array {
    let b = this.imageBytes.get(sha256);
    if (!b) {
      b = Buffer.from(base64, 'base64');
      this.imageBytes.set(sha256, b);
    }
    return b;
  }

  /** The leaves' contents as one row (the only row since the last clear), in the form that crosses threads. */
  shredded(estimate: number): ShreddedRow {
    const leaves = [...this.leaves.values()];
    const slots = new Int32Array(leaves.length);
    const holes = new Int32Array(leaves.length);
    let levelCount = 0;
    let intCount = 0;
    let floatCount = 0;
    leaves.forEach((leaf, i) => {
      const n = leaf.flat ? leaf.objs.length : leaf.def.length;
      slots[i] = n;
      holes[i] = leaf.holes;
      if (!leaf.flat) levelCount += 2 * n;
      if (leaf.nums?.data instanceof Int32Array) intCount += n;
      else if (leaf.nums) floatCount += n;
    });
    const levels = new Uint8Array(levelCount);
    const ints = new Int32Array(intCount);
    const floats = new Float64Array(floatCount);
    const objs: unknown[] = [];
    let lv = 0;
    let ii = 0;
    let fi = 0;
    for (const leaf of leaves) {
      if (!leaf.flat) {
        levels.set(leaf.def.view(), lv);
        lv += leaf.def.length;
        levels.set(leaf.rep.view(), lv);
        lv += leaf.rep.length;
      }
      if (leaf.nums?.data instanceof Int32Array) {
        ints.set(leaf.nums.view(), ii);
        ii += leaf.nums.length;
      } else if (leaf.nums) {
        floats.set(leaf.nums.view(), fi);
        fi += leaf.nums.length;
      } else for (const v of leaf.objs) objs.push(v);
    }
    // A Float64Array crossing threads is read as a packed number list (pipeline/wire.ts): its bytes go as bytes.
    return { slots, holes, levels, ints, floatBytes: new Uint8Array(floats.buffer), objs, estimate };
  }

  /** Append a row shredded elsewhere (`shredded`), named `id`. */
  addShredded(s: ShreddedRow, id: string): void {
    const floats = new Float64Array(s.floatBytes.buffer, s.floatBytes.byteOffset, s.floatBytes.byteLength / 8);
    let i = 0;
    let lv = 0;
    let ii = 0;
    let fi = 0;
    let oi = 0;
    for (const leaf of this.leaves.values()) {
      const n = s.slots[i]!;
      leaf.holes += s.holes[i]!;
      i++;
      if (!leaf.flat) {
        leaf.def.append(s.levels.subarray(lv, lv + n));
        lv += n;
        leaf.rep.append(s.levels.subarray(lv, lv + n));
        lv += n;
      }
      if (leaf.nums?.data instanceof Int32Array) {
        leaf.nums.append(s.ints.subarray(ii, ii + n));
        ii += n;
      } else if (leaf.nums) {
        leaf.nums.append(floats.subarray(fi, fi + n));
        fi += n;
      } else for (let k = 0; k < n; k++) leaf.objs.push(s.objs[oi++]);
    }
    const ids = this.L('id').objs;
    ids[ids.length - 1] = id;
    // One buffer per distinct image within the row group, as `add` keeps them (the dictionary finds repeats by identity).
    const hashes = this.L('images.list.element.sha256').objs;
    const bytes = this.L('images.list.element.bytes').objs;
    const added = s.slots[[...this.leaves.keys()].indexOf('images.list.element.bytes')]!;
    for (let k = bytes.length - added; k < bytes.length; k++) {
      const b = bytes[k];
      if (!(b instanceof Uint8Array)) continue;
      const sha = hashes[k] as string;
      const known = this.imageBytes.get(sha);
      if (known) bytes[k] = known;
      else this.imageBytes.set(sha, b);
    }
    this.rows++;
  }

  /** Empty the leaves; `keepImages`: a shredder keeps the decoded images of the last rows (a GRPO group shares them). */
  clear(keepImages = false): void {
    for (const l of this.leaves.values()) l.clear();
    if (!keepImages || this.imageBytes.size > 16) this.imageBytes = new Map();
    this.rows = 0;
  }
}

/**
 * One row shredded into the schema's leaves (definition and repetition levels, numbers, other
 * values), as it crosses from the thread that built it to the one that writes the file: what
 * `RowGroupColumns.add` would have put in the leaves, so the file is the same bytes either way.
 */
export interface ShreddedRow {
  /** Slots of each leaf, in schema order. */
  slots: Int32Array;
  /** Slots of each leaf with no value. */
  holes: Int32Array;
  /** Of each nested leaf in turn: its definition levels, then its repetition levels. */
  levels: Uint8Array;
  /** The values of the INT32 leaves, leaf after leaf. */
  ints: Int32Array;
  /** The values of the FLOAT and DOUBLE leaves (a Float64Array's bytes). */
  floatBytes: Uint8Array;
  /** The values of the other leaves, leaf after leaf (the row's id slot is filled in by the writer). */
  objs: unknown[];
  /** What the row weighs toward the row group's byte bound (`rowWeight`). */
  estimate: number;
}

/** What a row adds to its row group's size, for the byte bound: its int columns and its image bytes. */
export function rowWeight(row: ExportRow): number {
  return (
    row.tokens.length * 4 * (4 + row.position_ids.length) + row.images.reduce((n, i) => n + (i.bytes?.length ?? 0), 0)
  );
}

/** A shredder encodes nothing: its leaves only hold values (the writer's leaves encode them). */
const SHRED_SETTINGS: EncoderSettings = {
  codec: 'UNCOMPRESSED',
  compressors: { SNAPPY: (input) => input },
  statistics: false,
  statisticsTruncateLength: undefined,
};
let shredder: RowGroupColumns | undefined;

/** Shred `row` into its leaves where it was built (an analysis worker), to be written by `ParquetRowWriter.writeShredded`. */
export function shredRow(row: ExportRow): ShreddedRow {
  const columns = (shredder ??= new RowGroupColumns(SHRED_SETTINGS));
  try {
    columns.add(row);
    return columns.shredded(rowWeight(row));
  } finally {
    columns.clear(true);
  }
}

/** A REQUIRED list of REQUIRED numbers below definition level `defAbove`: empty → one missing slot. */
function numberList(leaf: Leaf, values: readonly number[], defAbove: number, rep0 = 0): void {
  if (values.length === 0) leaf.missing(defAbove, rep0);
  else leaf.numbers(values, defAbove + 1, rep0, leaf.maxRep);
}

/** An OPTIONAL leaf of a struct in a list (at definition level 1 when the struct is there). */
function optional(leaf: Leaf, rep: number, value: unknown): void {
  if (value === null || value === undefined) leaf.missing(1, rep, value as null | undefined);
  else leaf.one(2, rep, value);
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
  private readonly columns: RowGroupColumns;
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
    this.groupBytes = opts.rowGroupBytes ?? 16 << 20;
    this.writer = new ParquetWriter({
      writer: this.out,
      schema: PARQUET_SCHEMA,
      createdBy: opts.createdBy,
      statistics: false,
      kvMetadata: [{ key: 'rollscope.schema_version', value: String(EXPORT_SCHEMA_VERSION) }],
    });
    this.columns = new RowGroupColumns(this.writer);
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
    this.columns.add(row);
    this.added(rowWeight(row));
  }

  /** Write a row shredded where it was built (`shredRow`), under its run-wide key `id`. */
  writeShredded(row: ShreddedRow, id: string): void {
    this.columns.addShredded(row, id);
    this.added(row.estimate);
  }

  private added(weight: number): void {
    this.rows++;
    this.bufferedBytes += weight;
    if (this.columns.rows >= this.groupRows || this.bufferedBytes >= this.groupBytes) this.flushGroup();
  }

  /** Write the filled row group, leaf by leaf (what ParquetWriter.write does for one group), then its bytes to the file. */
  private flushGroup(): void {
    const groupSize = this.columns.rows;
    if (groupSize === 0) return;
    const groupStartOffset = this.out.offset;
    const chunks: PageIndexes[] = [];
    for (const leaf of this.columns.leaves.values()) {
      const numeric = leaf.numericLeaf();
      chunks.push(
        numeric
          ? writeNumericColumn(this.out, leaf.column, numeric)
          : writeColumn({ writer: this.out, column: leaf.column, pageData: leaf.pageData() }),
      );
      leaf.clear();
    }
    appendRowGroup(this.writer, { chunks, rows: groupSize, compressedBytes: this.out.offset - groupStartOffset });
    this.out.flush();
    this.columns.clear();
    this.bufferedBytes = 0;
  }

  /** Last row group, footer, sync to disk, close. */
  close(): void {
    this.flushGroup();
    void this.writer.finish();
    fs.fdatasyncSync(this.fd);
    fs.closeSync(this.fd);
  }

  abandon(): void {
    this.columns.clear();
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
  return rows.map(jsonShaped);
}

/** Rows [rowStart, rowEnd) of an exported Parquet file read from disk as needed (a row group at a time), in their JSON shape. */
export async function readParquetFileRows(
  file: AsyncBuffer,
  rowStart: number,
  rowEnd: number,
): Promise<Record<string, unknown>[]> {
  const rows = (await parquetReadObjects({ file, rowStart, rowEnd, utf8: false })) as Record<string, unknown>[];
  return rows.map(jsonShaped);
}

/** A row as hyparquet reads it, in the JSON shape of export rows (binary → base64, absent optionals → null). */
function jsonShaped(r: Record<string, unknown>): Record<string, unknown> {
  return {
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
  };
}
