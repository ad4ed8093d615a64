// Batches written by `rollscope export` (docs/export-format.md), read back: JSONL rows are
// recognised by structure (`schema_version`, `tokens`, `response_length`), Parquet files by
// name (`*.parquet`). Each row becomes the trajectory it stands for (server/export/row.ts
// rowToTrajectory): the re-aligned stream as the stored sample, one turn per run of trained
// tokens, the images with their bytes or paths, so a batch goes through the same checks as
// any rollout.
import { ExportRow, EXPORT_SCHEMA_VERSION, rowToTrajectory } from '../export/row-schema.ts';
import { LogprobValues, MaskValues, TokenIdValues } from './turns-from-mask.ts';

/**
 * A row as read back: the written contract, except that per-token values are read leniently (a
 * batch edited or written by another tool may hold a bad value), so the row still loads and the
 * checks report the value at its index instead of the whole row being unreadable.
 */
const ExportRowRead = ExportRow.extend({
  tokens: TokenIdValues,
  loss_mask: MaskValues,
  rollout_log_probs: LogprobValues.nullable(),
});
import { readParquetRows } from '../export/parquet.ts';
import type { Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { zodErrors } from './read/validate.ts';

function importRows(
  rows: readonly { line: number; value: unknown }[],
  file: string,
  lineLabel: 'line' | 'row',
): ImportResult {
  const out: ImportResult = { trajectories: [], errors: [] };
  for (const r of rows) {
    if (
      isObject(r.value) &&
      typeof r.value.schema_version === 'number' &&
      r.value.schema_version > EXPORT_SCHEMA_VERSION
    ) {
      out.errors.push({
        file,
        line: r.line,
        field: 'schema_version',
        message: `schema_version ${r.value.schema_version} is newer than this rollscope reads (${EXPORT_SCHEMA_VERSION})`,
      });
      continue;
    }
    const parsed = ExportRowRead.safeParse(r.value);
    if (!parsed.success) {
      out.errors.push(
        ...zodErrors(file, r.line, parsed.error).map((e) =>
          lineLabel === 'row' ? { ...e, message: `row ${r.line}: ${e.message}` } : e,
        ),
      );
      continue;
    }
    try {
      out.trajectories.push(rowToTrajectory(parsed.data, { file, line: r.line }));
    } catch (e) {
      out.errors.push({
        file,
        line: r.line,
        message: `cannot rebuild the trajectory of row ${parsed.data.id}: ${(e as Error).message}`,
      });
    }
  }
  return out;
}

export const exportRowsImporter: Importer = {
  format: 'export',
  description:
    'rollscope export batch: JSONL or Parquet rows written by `rollscope export` ({"schema_version", "tokens", "response_length", ...})',
  container: 'jsonl',
  fileNamePattern: /\.parquet$/i,
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (typeof record.schema_version !== 'number') return 'no numeric "schema_version"';
    if (!Array.isArray(record.tokens)) return 'no "tokens" array';
    if (typeof record.response_length !== 'number') return 'no numeric "response_length"';
    return true;
  },
  importRecords(records, { file }): ImportResult {
    return importRows(records, file, 'line');
  },
  /** Parquet: rows are numbered from 1 in `line` (a Parquet file has no lines). */
  async importBytes(bytes, { file }): Promise<ImportResult> {
    let rows: Record<string, unknown>[];
    try {
      rows = await readParquetRows(bytes);
    } catch (e) {
      return {
        trajectories: [],
        errors: [{ file, line: 0, message: `not a readable Parquet file: ${(e as Error).message}` }],
      };
    }
    return importRows(
      rows.map((value, i) => ({ line: i + 1, value })),
      file,
      'row',
    );
  },
};
