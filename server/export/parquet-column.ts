// One numeric (INT32 or FLOAT) leaf column chunk of an export row group, written as
// hyparquet-writer's `writeColumn` and `writeDataPageV2` write it with the settings the export
// uses (statistics off, no bloom filter, no column index, offset index on, encoding chosen by the
// writer), from the typed buffers the row writer fills: values by slot (a placeholder where the
// slot is empty), definition and repetition levels as bytes. What differs is only how: the
// dictionary is built in a hash table over the typed values instead of a Map over every value,
// and levels, indexes and pages are encoded straight into byte arrays instead of one DataView
// call per byte. The bytes are the same (test/export-parquet-writer.test.ts compares whole files
// with the generic writer's).
import {
  writeDictionaryPage,
  writePageHeader,
  type ColumnChunk,
  type ColumnEncoder,
  type PageIndexes,
  type Writer,
} from './parquet-internals.ts';

export interface NumericLeaf {
  /** By slot; meaningless where `def[i] < maxDef`. INT32 columns hold Int32Array, FLOAT ones the float64 values given. */
  values: Int32Array | Float64Array;
  def: Uint8Array;
  rep: Uint8Array;
  maxDef: number;
  maxRep: number;
  /** How many slots are empty (`def[i] < maxDef`): with none, the values are the present values. */
  holes: number;
}

/** hyparquet-writer's sampling: reject a dictionary when 1000 sampled slots are nearly all distinct. */
const SAMPLE_REJECTION_RATIO = 0.9;

/** Bits of a float64, to hash it; ±0 and every NaN hash alike (a Map's SameValueZero keys them as one). */
const f64 = new Float64Array(1);
const f64Words = new Int32Array(f64.buffer);
function hashNumber(v: number, isInt: boolean): number {
  if (isInt) return Math.imul(v, 0x9e3779b1);
  if (v === 0) return 0;
  if (Number.isNaN(v)) return 0x7ff80000;
  f64[0] = v;
  return Math.imul(f64Words[0]! ^ Math.imul(f64Words[1]!, 0x85ebca6b), 0x9e3779b1);
}
/** A Map's key equality (SameValueZero). */
const sameKey = (a: number, b: number) => a === b || (Number.isNaN(a) && Number.isNaN(b));

/**
 * hyparquet-writer's `useDictionary` for numbers without a size cap: the dictionary in order of
 * first appearance and each present value's index (compact: one per present slot), or undefined
 * where it would write plain values.
 */
function numericDictionary(
  leaf: NumericLeaf,
): { dictionary: Int32Array | Float64Array; indexes: Int32Array } | undefined {
  const { values, def, maxDef } = leaf;
  const n = def.length;
  const present = (i: number) => def[i]! >= maxDef;
  // The sample spreads over slots (empty ones weigh nothing) and keys values as a Map would.
  const sampleSize = Math.min(n, 1000);
  const sampled = new Set<number>();
  let sampleDictionarySize = 0;
  let sampleTotalSize = 0;
  for (let i = 0; i < sampleSize; i++) {
    const at = sampleSize === 1 ? 0 : Math.floor((i * (n - 1)) / (sampleSize - 1));
    if (!present(at)) continue;
    const v = values[at]!;
    if (!sampled.has(v)) {
      sampled.add(v);
      sampleDictionarySize += 4;
    }
    sampleTotalSize += 4;
  }
  if (!sampleTotalSize || sampleDictionarySize / sampleTotalSize > SAMPLE_REJECTION_RATIO) return undefined;

  const present_ = n - leaf.holes;
  const indexes = new Int32Array(present_);
  // A build stops where the dictionary has grown too large to be kept (float logprobs mostly do).
  const rejectAt = rejectionSize(present_);
  const built = values instanceof Int32Array ? smallIntDictionary(values, def, maxDef, indexes, rejectAt) : undefined;
  const result = built ?? hashedDictionary(values, def, maxDef, indexes, rejectAt);
  if (result === 'too large') return undefined;
  const { dictionary, size } = result;
  if (dictionaryTooLarge(size, present_)) return undefined;
  return {
    dictionary:
      values instanceof Int32Array ? Int32Array.from(dictionary.subarray(0, size)) : dictionary.subarray(0, size),
    indexes,
  };
}

/** hyparquet-writer's rule: a dictionary of `size` values and its bit-packed indexes must at least halve the plain bytes of `present` 4-byte values. */
export function dictionaryTooLarge(size: number, present: number): boolean {
  const bitWidth = Math.ceil(Math.log2(size));
  const indexSize = Math.ceil((present * bitWidth) / 8);
  return 2 * (size * 4 + indexSize) > present * 4;
}

/**
 * The fewest distinct values at which `dictionaryTooLarge` holds. The rule only grows with the
 * size (more entries, never narrower indexes), so a build that reaches this size would be
 * refused at its end anyway and may stop there: the same verdict, without hashing the rest.
 */
export function rejectionSize(present: number): number {
  let lo = 1;
  let hi = present + 1; // always too large: more entries than values
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (dictionaryTooLarge(mid, present)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Ids of non-negative ints below this many are looked up in a table indexed by the value (token ids, positions, masks). */
const DIRECT_LIMIT = 1 << 21;

/** The dictionary of int values in [0, DIRECT_LIMIT), through a table indexed by value; undefined for others. */
function smallIntDictionary(
  values: Int32Array,
  def: Uint8Array,
  maxDef: number,
  indexes: Int32Array,
  rejectAt: number,
): { dictionary: Int32Array; size: number } | 'too large' | undefined {
  const n = def.length;
  let max = 0;
  for (let i = 0; i < n; i++) {
    if (def[i]! < maxDef) continue;
    const v = values[i]!;
    if (v < 0 || v >= DIRECT_LIMIT) return undefined;
    if (v > max) max = v;
  }
  const idOf = new Int32Array(max + 1); // index + 1, 0 = not seen
  let dictionary = new Int32Array(256);
  let size = 0;
  let k = 0;
  for (let i = 0; i < n; i++) {
    if (def[i]! < maxDef) continue;
    const v = values[i]!;
    let id = idOf[v]!;
    if (id === 0) {
      if (size === dictionary.length) {
        const d = new Int32Array(size * 2);
        d.set(dictionary);
        dictionary = d;
      }
      dictionary[size] = v;
      id = ++size;
      if (size >= rejectAt) return 'too large';
      idOf[v] = id;
    }
    indexes[k++] = id - 1;
  }
  return { dictionary, size };
}

/** The dictionary of any numbers, by open addressing over their bits (keys as a Map keys them). */
function hashedDictionary(
  values: Int32Array | Float64Array,
  def: Uint8Array,
  maxDef: number,
  indexes: Int32Array,
  rejectAt: number,
): { dictionary: Float64Array; size: number } | 'too large' {
  const n = def.length;
  const isInt = values instanceof Int32Array;
  let capacity = 1024;
  let keys = new Float64Array(capacity);
  let slots = new Int32Array(capacity); // index + 1, 0 = free
  let dictionary = new Float64Array(256);
  let size = 0;
  const grow = () => {
    const oldKeys = keys;
    const oldSlots = slots;
    capacity *= 2;
    keys = new Float64Array(capacity);
    slots = new Int32Array(capacity);
    const mask = capacity - 1;
    for (let s = 0; s < oldSlots.length; s++) {
      const id = oldSlots[s]!;
      if (id === 0) continue;
      let h = hashNumber(oldKeys[s]!, isInt) & mask;
      while (slots[h] !== 0) h = (h + 1) & mask;
      keys[h] = oldKeys[s]!;
      slots[h] = id;
    }
  };
  let k = 0;
  for (let i = 0; i < n; i++) {
    if (def[i]! < maxDef) continue;
    const v = values[i]!;
    const mask = capacity - 1;
    let h = hashNumber(v, isInt) & mask;
    let id = slots[h]!;
    while (id !== 0 && !sameKey(keys[h]!, v)) {
      h = (h + 1) & mask;
      id = slots[h]!;
    }
    if (id === 0) {
      if (size === dictionary.length) {
        const d = new Float64Array(size * 2);
        d.set(dictionary);
        dictionary = d;
      }
      dictionary[size] = v;
      id = ++size;
      if (size >= rejectAt) return 'too large';
      keys[h] = v;
      slots[h] = id;
      if (size * 2 > capacity) grow();
    }
    indexes[k++] = id - 1;
  }
  return { dictionary, size };
}

/** Pages of at most `pageSize` estimated bytes (4 a present value), each starting at a row. */
function pageBoundaries(leaf: NumericLeaf, pageSize: number): { start: number; end: number }[] {
  const { def, rep, maxDef } = leaf;
  const n = def.length;
  const out: { start: number; end: number }[] = [];
  let start = 0;
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const size = def[i]! >= maxDef ? 4 : 0;
    bytes += size;
    const rowStart = rep.length === 0 || rep[i] === 0;
    if (bytes >= pageSize && i > start && rowStart) {
      out.push({ start, end: i });
      start = i;
      bytes = size;
    }
  }
  if (start < n) out.push({ start, end: n });
  return out;
}

/** A growable byte array with hyparquet-writer's ByteWriter appends, minus the DataView per byte. */
class Bytes {
  buf = new Uint8Array(1 << 16);
  length = 0;
  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.length + n));
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
  }
  u8(v: number): void {
    if (this.length === this.buf.length) this.reserve(1);
    this.buf[this.length++] = v;
  }
  varInt(value: number): void {
    for (;;) {
      if ((value & ~0x7f) === 0) {
        this.u8(value);
        return;
      }
      this.u8((value & 0x7f) | 0x80);
      value >>>= 7;
    }
  }
  int32s(values: Int32Array): void {
    this.reserve(values.length * 4);
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.length, values.length * 4);
    for (let i = 0; i < values.length; i++) view.setInt32(i * 4, values[i]!, true);
    this.length += values.length * 4;
  }
  float32s(values: Float64Array): void {
    this.reserve(values.length * 4);
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.length, values.length * 4);
    for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i]!, true);
    this.length += values.length * 4;
  }
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
  clear(): void {
    this.length = 0;
  }
}

/**
 * hyparquet-writer's `writeRleBitPackedHybrid`, value for value: runs of 8 or more as RLE, the
 * rest in bit-packed groups of 8 (a group is taken whole even when a run starts inside it).
 */
function rleBitPackedHybrid(out: Bytes, values: ArrayLike<number>, bitWidth: number): number {
  const start = out.length;
  const n = values.length;
  let pendingGroups = 0;
  let packedStart = 0;
  let i = 0;
  while (i < n) {
    let run = 1;
    const first = values[i]!;
    while (i + run < n && values[i + run] === first) run++;
    if (run >= 8) {
      if (pendingGroups) {
        bitPackedGroups(out, values, packedStart, pendingGroups, bitWidth);
        pendingGroups = 0;
      }
      out.varInt(run << 1);
      const width = (bitWidth + 7) >> 3;
      for (let j = 0; j < width; j++) out.u8((first >> (j << 3)) & 0xff);
      i += run;
    } else {
      if (pendingGroups === 0) packedStart = i;
      pendingGroups++;
      i += 8;
    }
  }
  if (pendingGroups) bitPackedGroups(out, values, packedStart, pendingGroups, bitWidth);
  return out.length - start;
}

function bitPackedGroups(out: Bytes, values: ArrayLike<number>, start: number, groups: number, bitWidth: number): void {
  out.varInt((groups << 1) | 1);
  if (bitWidth === 0) return;
  const mask = (1 << bitWidth) - 1;
  let buffer = 0;
  let bitsUsed = 0;
  const total = groups * 8;
  for (let i = 0; i < total; i++) {
    const idx = start + i;
    const v = idx < values.length ? values[idx]! & mask : 0;
    buffer |= v << bitsUsed;
    bitsUsed += bitWidth;
    while (bitsUsed >= 8) {
      out.u8(buffer & 0xff);
      buffer >>>= 8;
      bitsUsed -= 8;
    }
  }
  if (bitsUsed > 0) out.u8(buffer & 0xff);
}

const levelBytes = new Bytes();
const pageBytes = new Bytes();

/** hyparquet-writer's `writeDataPageV2` for one page of a numeric leaf; returns its uncompressed size with the header. */
function writeDataPage(
  writer: Writer,
  column: ColumnEncoder,
  encoding: 'PLAIN' | 'RLE_DICTIONARY',
  values: Int32Array | Float64Array,
  def: Uint8Array,
  rep: Uint8Array,
  leaf: NumericLeaf,
): number {
  levelBytes.clear();
  pageBytes.clear();
  const { maxDef, maxRep } = leaf;
  let numNulls = 0;
  for (let i = 0; i < def.length; i++) if (def[i]! < maxDef) numNulls++;
  let numRows = 0;
  if (rep.length) for (let i = 0; i < rep.length; i++) numRows += rep[i] === 0 ? 1 : 0;
  else numRows = values.length;
  const repLength = maxRep ? rleBitPackedHybrid(levelBytes, rep, Math.ceil(Math.log2(maxRep + 1))) : 0;
  const defLength = maxDef ? rleBitPackedHybrid(levelBytes, def, Math.ceil(Math.log2(maxDef + 1))) : 0;
  if (encoding === 'PLAIN') {
    if (values instanceof Int32Array) pageBytes.int32s(values);
    else pageBytes.float32s(values);
  } else {
    let maxValue = 0;
    for (let i = 0; i < values.length; i++) if (values[i]! > maxValue) maxValue = values[i]!;
    const bitWidth = Math.ceil(Math.log2(maxValue + 1));
    pageBytes.u8(bitWidth);
    rleBitPackedHybrid(pageBytes, values, bitWidth);
  }
  const page = pageBytes.bytes();
  const compressed = column.compressors[column.codec]?.(page) ?? page;
  const headerStart = writer.offset;
  writePageHeader(writer, {
    type: 'DATA_PAGE_V2',
    uncompressed_page_size: levelBytes.length + page.length,
    compressed_page_size: levelBytes.length + compressed.length,
    data_page_header_v2: {
      num_values: def.length || values.length,
      num_nulls: numNulls,
      num_rows: numRows,
      encoding,
      definition_levels_byte_length: defLength,
      repetition_levels_byte_length: repLength,
      is_compressed: !!column.codec,
    },
  } as Parameters<typeof writePageHeader>[1]);
  const headerSize = writer.offset - headerStart;
  writer.appendBytes(levelBytes.bytes());
  writer.appendBytes(compressed);
  return headerSize + levelBytes.length + page.length;
}

/** Write the column chunk; returns what `ParquetWriter` keeps of it (the chunk, its offset index). */
export function writeNumericColumn(writer: Writer, column: ColumnEncoder, leaf: NumericLeaf): PageIndexes {
  const { element, schemaPath } = column;
  const { def, rep, maxDef } = leaf;
  const offsetStart = writer.offset;
  let uncompressedSize = 0;
  const encodings: ('PLAIN' | 'RLE_DICTIONARY')[] = [];
  let dictionaryPageOffset: bigint | undefined;
  const dict = numericDictionary(leaf);
  // Present values (or their dictionary indexes), compact: each page holds those of its slots.
  let written: Int32Array | Float64Array;
  let encoding: 'PLAIN' | 'RLE_DICTIONARY';
  if (dict) {
    dictionaryPageOffset = BigInt(writer.offset);
    uncompressedSize += writeDictionaryPage(writer, column, dict.dictionary);
    encodings.push('PLAIN');
    encoding = 'RLE_DICTIONARY';
    written = dict.indexes;
  } else {
    encoding = 'PLAIN';
    written = compactValues(leaf);
  }
  encodings.push(encoding);

  const pages = pageBoundaries(leaf, column.pageSize);
  const offsetIndex:
    | { page_locations: { offset: bigint; compressed_page_size: number; first_row_index: bigint }[] }
    | undefined = column.offsetIndex && pages.length > 1 ? { page_locations: [] } : undefined;
  const dataPageOffset = BigInt(writer.offset);
  let firstRowIndex = 0n;
  let prevStart = 0;
  let presentBefore = 0;
  for (const { start, end } of pages) {
    const pageOffset = writer.offset;
    let present = end - start;
    if (leaf.holes > 0) for (let i = start; i < end; i++) if (def[i]! < maxDef) present--;
    uncompressedSize += writeDataPage(
      writer,
      column,
      encoding,
      written.subarray(presentBefore, presentBefore + present),
      def.subarray(start, end),
      rep.subarray(start, end),
      leaf,
    );
    presentBefore += present;
    if (offsetIndex) {
      if (rep.length) {
        for (let i = prevStart + 1; i <= start; i++) if (rep[i] === 0) firstRowIndex++;
      } else firstRowIndex = BigInt(start);
      offsetIndex.page_locations.push({
        offset: BigInt(pageOffset),
        compressed_page_size: writer.offset - pageOffset,
        first_row_index: firstRowIndex,
      });
    }
    prevStart = start;
  }

  const chunk: ColumnChunk = {
    meta_data: {
      type: element.type!,
      encodings,
      path_in_schema: schemaPath.slice(1).map((s) => s.name),
      codec: column.codec ?? 'UNCOMPRESSED',
      num_values: BigInt(def.length),
      total_compressed_size: BigInt(writer.offset - offsetStart),
      total_uncompressed_size: BigInt(uncompressedSize),
      data_page_offset: dataPageOffset,
      dictionary_page_offset: dictionaryPageOffset,
      statistics: undefined,
      encoding_stats: undefined,
      geospatial_statistics: undefined,
    },
    file_offset: BigInt(offsetStart),
  };
  return { chunk, columnIndex: undefined, offsetIndex, bloomFilter: undefined } as PageIndexes;
}

function compactValues(leaf: NumericLeaf): Int32Array | Float64Array {
  const { values, def, maxDef } = leaf;
  const n = def.length - leaf.holes;
  if (leaf.holes === 0) return values.subarray(0, n);
  const out = values instanceof Int32Array ? new Int32Array(n) : new Float64Array(n);
  let k = 0;
  for (let i = 0; i < def.length; i++) if (def[i]! >= maxDef) out[k++] = values[i]!;
  return out;
}
