import fs from 'node:fs';

/** The records of a JSONL fixture, as plain objects (blank lines skipped). */
export function jsonlRecords(file: string): Record<string, unknown>[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
