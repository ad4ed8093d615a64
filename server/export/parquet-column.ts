// One INT32 leaf column chunk of an export row group, written as hyparquet-writer's `writeColumn`
// writes it with the settings the export uses (statistics off, no bloom filter, no column index,
// offset index on, encoding chosen by the writer), from the typed buffers the row writer fills:
// values by slot (a placeholder where the slot is empty), definition and repetition levels as
// bytes. What differs is only how: the dictionary is built in an integer hash table instead of a
// Map over every value, and levels and indexes stay typed. The bytes are the same
// (test/export-parquet-writer.test.ts compares whole files with the generic writer's).
import type { ColumnEncoder, PageData, Writer } from 'hyparquet-writer/src/types.js';
import { writeDataPageV2 } from 'hyparquet-writer/src/datapage.js';
import { writeDictionaryPage } from 'hyparquet-writer/src/dictionary.js';
import type { ParquetWriter } from 'hyparquet-writer';

type ColumnChunk = ParquetWriter['row_groups'][number]['columns'][number];
type PageIndexes = ParquetWriter['pendingIndexes'][number];

export interface Int32Leaf {
  /** By slot; meaningless where `def[i] < maxDef`. */
  values: Int32Array;
  def: Uint8Array;
  rep: Uint8Array;
  maxDef: number;
}

/** hyparquet-writer's sampling: reject a dictionary when 1000 sampled slots are nearly all distinct. */
const SAMPLE_REJECTION_RATIO = 0.9;

/**
 * hyparquet-writer's `useDictionary` for INT32 values without a size cap: the dictionary in order
 * of first appearance and each present value's index (compact: one per present slot), or
 * undefined where it would write plain values.
 */
function int32Dictionary(leaf: Int32Leaf): { dictionary: Int32Array; indexes: Int32Array } | undefined {
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

  // Open addressing over int32 keys; `slots` holds index + 1 (0 = free).
  let capacity = 1024;
  let keys = new Int32Array(capacity);
  let slots = new Int32Array(capacity);
  let dictionary = new Int32Array(256);
  let size = 0;
  let present_ = 0;
  for (let i = 0; i < n; i++) if (present(i)) present_++;
  const indexes = new Int32Array(present_);
  const hash = (v: number, mask: number) => (Math.imul(v, 0x9e3779b1) >>> 0) & mask;
  const grow = () => {
    const oldKeys = keys;
    const oldSlots = slots;
    capacity *= 2;
    keys = new Int32Array(capacity);
    slots = new Int32Array(capacity);
    const mask = capacity - 1;
    for (let s = 0; s < oldSlots.length; s++) {
      const id = oldSlots[s]!;
      if (id === 0) continue;
      let h = hash(oldKeys[s]!, mask);
      while (slots[h] !== 0) h = (h + 1) & mask;
      keys[h] = oldKeys[s]!;
      slots[h] = id;
    }
  };
  let k = 0;
  for (let i = 0; i < n; i++) {
    if (!present(i)) continue;
    const v = values[i]!;
    const mask = capacity - 1;
    let h = hash(v, mask);
    let id = slots[h]!;
    while (id !== 0 && keys[h] !== v) {
      h = (h + 1) & mask;
      id = slots[h]!;
    }
    if (id === 0) {
      if (size === dictionary.length) {
        const d = new Int32Array(size * 2);
        d.set(dictionary);
        dictionary = d;
      }
      dictionary[size] = v;
      id = ++size;
      keys[h] = v;
      slots[h] = id;
      if (size * 2 > capacity) grow();
    }
    indexes[k++] = id - 1;
  }
  // The dictionary and its bit-packed indexes must at least halve the plain bytes.
  const bitWidth = Math.ceil(Math.log2(size));
  const indexSize = Math.ceil((present_ * bitWidth) / 8);
  if (2 * (size * 4 + indexSize) > present_ * 4) return undefined;
  return { dictionary: dictionary.subarray(0, size), indexes };
}

/** Pages of at most `pageSize` estimated bytes (4 a present value), each starting at a row. */
function pageBoundaries(leaf: Int32Leaf, pageSize: number): { start: number; end: number }[] {
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

/** Write the column chunk; returns what `ParquetWriter` keeps of it (the chunk, its offset index). */
export function writeInt32Column(writer: Writer, column: ColumnEncoder, leaf: Int32Leaf): PageIndexes {
  const { element, schemaPath } = column;
  const { def, rep, maxDef } = leaf;
  const offsetStart = writer.offset;
  let uncompressedSize = 0;
  const encodings: ('PLAIN' | 'RLE_DICTIONARY')[] = [];
  let dictionaryPageOffset: bigint | undefined;
  const dict = int32Dictionary(leaf);
  // Present values (or their dictionary indexes), compact: page p holds those of its slots.
  let written: Int32Array;
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
    let present = 0;
    for (let i = start; i < end; i++) if (def[i]! >= maxDef) present++;
    const pageData: PageData = {
      values: written.subarray(presentBefore, presentBefore + present),
      definitionLevels: def.subarray(start, end) as unknown as number[],
      repetitionLevels: rep.subarray(start, end) as unknown as number[],
      maxDefinitionLevel: maxDef,
    };
    presentBefore += present;
    uncompressedSize += writeDataPageV2({ writer, column, encoding, pageData });
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

function compactValues(leaf: Int32Leaf): Int32Array {
  const { values, def, maxDef } = leaf;
  let n = 0;
  for (let i = 0; i < def.length; i++) if (def[i]! >= maxDef) n++;
  if (n === def.length) return values.subarray(0, n);
  const out = new Int32Array(n);
  let k = 0;
  for (let i = 0; i < def.length; i++) if (def[i]! >= maxDef) out[k++] = values[i]!;
  return out;
}
