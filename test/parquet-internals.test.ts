// The export's Parquet writer reaches into hyparquet-writer past its public API, all of it in
// server/export/parquet-internals.ts. A new hyparquet-writer release must fail here, loudly,
// before anyone trusts a file it wrote: the installed version is the one the internals were read
// at, the functions and fields they use are there with the shapes they rely on, and a row group
// appended through the adapter reads back (hyparquet) as the rows written. The files themselves
// are compared byte for byte with the library's own writer in test/export-parquet-writer.test.ts.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { parquetReadObjects } from 'hyparquet';
import { describe, expect, it } from 'vitest';
import {
  appendRowGroup,
  HYPARQUET_WRITER_VERSION,
  writeColumn,
  writeDictionaryPage,
  writePageHeader,
} from '../server/export/parquet-internals.ts';

const require = createRequire(import.meta.url);

describe('hyparquet-writer internals (server/export/parquet-internals.ts)', () => {
  it(`are those of the release they were read at (${HYPARQUET_WRITER_VERSION}), pinned in package.json`, () => {
    const pkgFile = path.join(path.dirname(require.resolve('hyparquet-writer')), '..', 'package.json');
    const installed = (JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { version: string }).version;
    const pinned = (
      JSON.parse(fs.readFileSync(path.join(import.meta.dirname, '..', 'package.json'), 'utf8')) as {
        dependencies: Record<string, string>;
      }
    ).dependencies['hyparquet-writer'];
    expect(
      { installed, pinned },
      `hyparquet-writer ${installed} is installed: server/export/parquet-internals.ts uses its internals as of ${HYPARQUET_WRITER_VERSION}; read its src/column.js, datapage.js, dictionary.js and ParquetWriter again, update the adapter, then HYPARQUET_WRITER_VERSION`,
    ).toEqual({ installed: HYPARQUET_WRITER_VERSION, pinned: HYPARQUET_WRITER_VERSION });
  });

  it('have the functions and writer fields the adapter uses', () => {
    expect([writeColumn.length, writePageHeader.length, writeDictionaryPage.length]).toEqual([1, 2, 3]);
    const w = new ParquetWriter({ writer: new ByteWriter(), schema: [{ name: 'root', num_children: 0 }] });
    expect(Array.isArray(w.pendingIndexes)).toBe(true);
    expect(Array.isArray(w.row_groups)).toBe(true);
    expect(typeof w.num_rows).toBe('bigint');
    expect(typeof w.finish).toBe('function');
  });

  it('a row group written leaf by leaf and appended through the adapter reads back as its rows', async () => {
    const out = new ByteWriter();
    const schema = [
      { name: 'root', num_children: 2 },
      {
        name: 'id',
        type: 'BYTE_ARRAY' as const,
        converted_type: 'UTF8' as const,
        repetition_type: 'REQUIRED' as const,
      },
      { name: 'n', type: 'INT32' as const, repetition_type: 'REQUIRED' as const },
    ];
    const w = new ParquetWriter({ writer: out, schema, statistics: false });
    const start = out.offset;
    const ids = ['a', 'b', 'a#2'];
    const ns = [1, 2, 3];
    const encoder = (i: number) => ({
      columnName: schema[i]!.name,
      element: schema[i]!,
      schemaPath: [schema[0]!, schema[i]!],
      codec: w.codec,
      compressors: w.compressors,
      stats: false,
      pageSize: 1 << 20,
      columnIndex: false,
      offsetIndex: true,
    });
    const chunks = [
      writeColumn({
        writer: out,
        column: encoder(1),
        pageData: { values: ids, definitionLevels: [], repetitionLevels: [], maxDefinitionLevel: 0 },
      }),
      writeColumn({
        writer: out,
        column: encoder(2),
        pageData: { values: ns, definitionLevels: [], repetitionLevels: [], maxDefinitionLevel: 0 },
      }),
    ];
    appendRowGroup(w, { chunks, rows: 3, compressedBytes: out.offset - start });
    w.finish();
    const file = out.getBuffer();
    expect(await parquetReadObjects({ file })).toEqual(ids.map((id, i) => ({ id, n: ns[i] })));
  });
});
