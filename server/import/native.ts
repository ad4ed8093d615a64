// rollscope's own format: JSONL, one `Trajectory` per line (docs/native-format.md, JSON Schema in
// docs/trajectory.schema.json). The record's `source` is replaced by where it was actually read.
import { Trajectory } from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { validateRecord } from './read/validate.ts';

export const nativeImporter: Importer = {
  format: 'native',
  description: 'rollscope native JSONL: one trajectory per line ({"id", "turns": [...], "sample"?, ...})',
  container: 'jsonl',
  fileNamePattern: /\.rollscope\.jsonl$/,
  recordLocal: true,
  validates: true,
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (!Array.isArray(record.turns)) return 'no "turns" array';
    if (typeof record.id !== 'string') return 'no string "id"';
    return true;
  },
  importRecords(records, { file }): ImportResult {
    const out: ImportResult = { trajectories: [], errors: [] };
    for (const r of records) {
      const withSource = isObject(r.value) ? { ...r.value, source: { file, line: r.line, format: 'native' } } : r.value;
      const parsed = validateRecord(Trajectory, withSource, file, r.line);
      if ('data' in parsed) out.trajectories.push(parsed.data);
      else out.errors.push(...parsed.errors);
    }
    return out;
  },
};
