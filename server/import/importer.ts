// The contract every importer implements (one file per foreign format, like speedscope's
// src/import/*): records in, trajectories of the one internal model out, and a ReadError for
// every record that could not be used. An importer takes part in detection once it is listed in
// the format registry (formats.ts).
import type { FormatName, ReadError, TrajectoryInput } from '../model/trajectory.ts';
import type { ZodType } from 'zod';
import type { RawRecord } from './read/record.ts';
import { validateRecord } from './read/validate.ts';
import { visionIdsFor, type VisionIds } from '../profiles/profile.ts';

export interface FileContext {
  /** The file as the user named it (shown in errors and sources). */
  file: string;
  /**
   * The placeholder ids of the profile a trajectory whose records name `model` will be checked
   * with (the `--model` profile, else the one the name picks; undefined when no profile covers
   * it): an importer that cuts records apart at image pads reads them here, never as constants.
   */
  visionIds(model: string | undefined): VisionIds | undefined;
}

/** The context `loadFile` and `importLines` give an importer, for a run with `--model explicitModel` (or none). */
export function fileContext(file: string, explicitModel?: string): FileContext {
  return { file, visionIds: (model) => visionIdsFor(explicitModel, model) };
}

export interface ImportResult {
  trajectories: TrajectoryInput[];
  errors: ReadError[];
}

export interface Importer {
  format: FormatName;
  /** One line for `--help` and for "no format matched" messages. */
  description: string;
  /** How the files are laid out: JSON lines, one JSON document, or binary (msgpack). */
  container: 'jsonl' | 'json' | 'binary';
  /** File names that identify the format on their own. */
  fileNamePattern?: RegExp;
  /** Structural test on one parsed record: true, or why it does not match. */
  sniff(record: unknown): true | string;
  /**
   * Each record becomes trajectories on its own (no grouping, no file-wide id allocation), so a
   * large file can be imported in batches, on any thread, without holding it (import/stream.ts).
   */
  recordLocal?: boolean;
  /**
   * importRecords returns trajectories already parsed with the Trajectory schema (bounded), so a
   * loader need not validate them a second time (zod over every token id is most of the import).
   */
  validates?: boolean;
  /** Turn the records of one file into trajectories. Grouping formats (vLLM logs) look across records. */
  importRecords(records: readonly RawRecord[], ctx: FileContext): ImportResult;
  /** Binary formats read the bytes themselves (Parquet readers are asynchronous). */
  importBytes?(bytes: Uint8Array, ctx: FileContext): ImportResult | Promise<ImportResult>;
}

export function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/**
 * The loop per-record importers share: validate each record against the format's schema with the
 * bounded parser (a hostile list cannot turn zod into a crash), build its trajectories, or report
 * the record as errors naming file, line and field. The rest of the file always loads.
 */
export function importEachRecord<T>(
  records: readonly RawRecord[],
  file: string,
  schema: ZodType<T>,
  build: (data: T, record: RawRecord) => TrajectoryInput | TrajectoryInput[],
): ImportResult {
  const out: ImportResult = { trajectories: [], errors: [] };
  for (const r of records) {
    const parsed = validateRecord(schema, r.value, file, r.line);
    if ('errors' in parsed) {
      out.errors.push(...parsed.errors);
      continue;
    }
    const built = build(parsed.data, r);
    out.trajectories.push(...(Array.isArray(built) ? built : [built]));
  }
  return out;
}
