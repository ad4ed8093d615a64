// The one place that reaches past hyparquet-writer's public API. The export's streaming writer
// (parquet.ts, parquet-column.ts) encodes its own row groups and hands them to a `ParquetWriter`
// for the footer, so it uses the library's column and page encoders (`src/column.js`,
// `src/datapage.js`, `src/dictionary.js`) and appends to three fields a `ParquetWriter` keeps
// for `finish()`: `pendingIndexes`, `row_groups`, `num_rows`. None of these is documented API: a
// release may rename or reshape them. They were read at HYPARQUET_WRITER_VERSION, which
// package.json pins exactly; test/parquet-internals.test.ts fails on any other installed version
// and when a field or function is missing or of another shape, and
// test/export-parquet-writer.test.ts compares whole files, byte for byte, with what the library's
// own `ParquetWriter.write` makes of the same rows.
//
// Why not the public API alone: `ParquetWriter.write` takes row objects by column and builds a
// `Map` over every value for its dictionaries; shredding rows as they arrive into typed buffers
// and encoding those is what keeps export within 1.3× of check (bench/README.md). Why not another
// library: the JavaScript Arrow implementation writes no Parquet, and a WebAssembly writer would be
// a second encoder whose files the DuckDB read-back tests would have to re-establish; this one's
// are byte-identical to the library's own.
import type { ParquetWriter } from 'hyparquet-writer';

export { writeColumn } from 'hyparquet-writer/src/column.js';
export { writePageHeader } from 'hyparquet-writer/src/datapage.js';
export { writeDictionaryPage } from 'hyparquet-writer/src/dictionary.js';
export type { ColumnEncoder, PageData, Writer } from 'hyparquet-writer/src/types.js';

/** The hyparquet-writer release these internals were read at (package.json pins it). */
export const HYPARQUET_WRITER_VERSION = '0.17.0';

/** One column chunk's metadata, as the footer lists it. */
export type ColumnChunk = ParquetWriter['row_groups'][number]['columns'][number];
/** What `ParquetWriter` keeps of a written column chunk until `finish()` writes the page indexes. */
export type PageIndexes = ParquetWriter['pendingIndexes'][number];

/**
 * Record a row group whose column chunks were written to the writer's output: what
 * `ParquetWriter.write` does after writing its own, so `finish()` writes the indexes and footer.
 */
export function appendRowGroup(
  writer: ParquetWriter,
  group: { chunks: readonly PageIndexes[]; rows: number; compressedBytes: number },
): void {
  let total_byte_size = 0n;
  for (const { chunk } of group.chunks) total_byte_size += chunk.meta_data?.total_uncompressed_size ?? 0n;
  writer.pendingIndexes.push(...group.chunks);
  writer.num_rows += BigInt(group.rows);
  writer.row_groups.push({
    columns: group.chunks.map((c) => c.chunk),
    total_byte_size,
    num_rows: BigInt(group.rows),
    total_compressed_size: BigInt(group.compressedBytes),
  });
}
