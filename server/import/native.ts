// rollscope's own format: JSONL, one `Trajectory` per line (docs/native-format.md, JSON Schema in
// docs/trajectory.schema.json). The record's `source` is replaced by where it was actually read.
import { Trajectory } from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { safeParseBounded, validateRecord } from './read/validate.ts';
import { LogprobValues, MaskValues, TokenIdValues } from './turns-from-mask.ts';

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
      const withSource = isObject(r.value)
        ? { ...lenientValues(r.value), source: { file, line: r.line, format: 'native' } }
        : r.value;
      const parsed = validateRecord(Trajectory, withSource, file, r.line);
      if ('data' in parsed) out.trajectories.push(parsed.data);
      else out.errors.push(...parsed.errors);
    }
    return out;
  },
};

const TURN_VALUES = {
  promptIds: TokenIdValues,
  generatedIds: TokenIdValues,
  observationIds: TokenIdValues,
  generatedLogprobs: LogprobValues,
};
const SAMPLE_VALUES = { tokens: TokenIdValues, lossMask: MaskValues, logprobs: LogprobValues };

/** Reads `"NaN"` logprobs, string or null ids, ... the way the trainer importers do, so one bad value is a finding, not a read error. */
function lenientFields(
  obj: Record<string, unknown>,
  fields: Record<string, typeof TokenIdValues | typeof LogprobValues>,
) {
  const out: Record<string, unknown> = { ...obj };
  for (const [key, schema] of Object.entries(fields)) {
    if (!Array.isArray(obj[key])) continue;
    const parsed = safeParseBounded(schema, obj[key]);
    if (parsed.success) out[key] = parsed.data;
  }
  return out;
}

function lenientValues(record: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...record };
  if (Array.isArray(record.turns))
    out.turns = record.turns.map((t) => (isObject(t) ? lenientFields(t, TURN_VALUES) : t));
  if (isObject(record.sample)) out.sample = lenientFields(record.sample, SAMPLE_VALUES);
  return out;
}
