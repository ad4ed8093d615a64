// Loading one file into the internal model: read it (bytes, JSON lines or one JSON document),
// pick its importer as the format registry (formats.ts) decides (`--format NAME`, the file name,
// then the structure of the first readable records), import, validate. A file no importer
// recognises gets one error that lists every format tried and why it did not match.
import fs from 'node:fs';
import path from 'node:path';
import { Trajectory, type FormatName, type ReadError } from '../model/trajectory.ts';
import { fileContext, type FileContext, type Importer, type ImportResult } from './importer.ts';
import { parseJson } from './read/json.ts';
import { readLimits, type ReadLimits } from './read/limits.ts';
import { readLines, type RecordLine } from './read/lines.ts';
import { isReadError, parseRecordLine, type RawRecord } from './read/record.ts';
import { safeParseBounded, zodErrors } from './read/validate.ts';
import { torchSaveRecords } from './read/torch-records.ts';
import { withPathStep } from './step.ts';
import { isRunFileName, isTorchSaveName, planRead, SNIFF_RECORDS, sniffRecords } from './formats.ts';

export { importerFor, IMPORTERS } from './formats.ts';

export interface LoadedFile {
  file: string;
  format?: FormatName;
  trajectories: Trajectory[];
  errors: ReadError[];
}

export interface LoadOptions {
  format?: string;
  /** The run's `--model` (its profile's placeholder ids are what importers cut records at); else each record's model picks. */
  model?: string;
  maxLineBytes?: number;
  /** Read limits (line and document size, nesting, array size, gzip ratio); defaults in read/limits.ts. */
  limits?: Partial<ReadLimits>;
}

/** Binary files are read whole; past this a file is not one rollout step's dump. */
const MAX_BINARY_BYTES = 1024 * 1024 * 1024;

/** torch.save archives: by name, or by the zip magic whatever the name. */
function isTorchSave(file: string): boolean {
  if (isTorchSaveName(file)) return true;
  const head = Buffer.alloc(4);
  const fd = fs.openSync(file, 'r');
  try {
    fs.readSync(fd, head, 0, 4, 0);
  } finally {
    fs.closeSync(fd);
  }
  return head.equals(Buffer.from([0x50, 0x4b, 0x03, 0x04]));
}

async function readRecords(
  file: string,
  opts: LoadOptions,
): Promise<{ records: RawRecord[]; errors: ReadError[]; wholeJson: boolean }> {
  if (isTorchSave(file)) {
    try {
      return { records: await torchSaveRecords(file), errors: [], wholeJson: true };
    } catch (e) {
      return {
        records: [],
        errors: [{ file, line: 0, message: `torch.save file: ${(e as Error).message}` }],
        wholeJson: true,
      };
    }
  }
  const limits = readLimits({
    ...opts.limits,
    ...(opts.maxLineBytes !== undefined ? { maxLineBytes: opts.maxLineBytes } : {}),
  });
  // A whole-file JSON document (`[...]` or a pretty-printed object) rather than JSON lines: the
  // first line is not a complete JSON value, or the file is one `[...]` line. Decided on the
  // first two lines (streamed, bounded), so a JSONL file with a long first line is never read whole.
  const head: RecordLine[] = [];
  for await (const l of readLines(file, { limits })) {
    head.push(l);
    if (head.length === 2) break;
  }
  const first = head[0];
  if (!first) return { records: [], errors: [], wholeJson: false };
  const firstText = first.text.trimStart();
  // The only line of a file may lack its line feed: Python's `json.dump(samples, f)` writes none.
  const onlyLine = head.length === 1 && (!first.problem || first.problem === 'unterminated');
  const complete = (!first.problem || onlyLine) && isCompleteJson(first.text, limits);
  const looksWholeJson = firstText.startsWith('[')
    ? (!first.problem && (!complete || head.length === 1)) || (onlyLine && complete)
    : !first.problem && firstText.startsWith('{') && !complete;
  let wholeError: ReadError | undefined;
  if (looksWholeJson) {
    for await (const doc of readLines(file, { whole: true, maxLineBytes: limits.maxDocumentBytes, limits })) {
      const r = parseRecordLine(file, doc, limits);
      if (isReadError(r)) wholeError = r;
      else {
        const items = Array.isArray(r.value) ? r.value : [r.value];
        return {
          records: items.map((value) => ({ line: r.line, offset: r.offset, length: r.length, value })),
          errors: [],
          wholeJson: true,
        };
      }
    }
    // Not a document after all (a broken first line of a JSONL file looks like the start of one):
    // read line by line, so one bad record does not cost the file.
  }
  const records: RawRecord[] = [];
  const errors: ReadError[] = [];
  for await (const l of readLines(file, { limits })) {
    const r = parseRecordLine(file, l, limits);
    if (isReadError(r)) errors.push(r);
    else records.push(r);
  }
  // A broken pretty-printed document (its lines are fragments: at most a number or a string
  // parses) gets one error, not one per line. Any object or array read from a line means JSON
  // lines with a broken first record: those records are kept, whatever the other lines hold.
  const containers = records.filter((r) => typeof r.value === 'object' && r.value !== null).length;
  if (wholeError && containers === 0) return { records: [], errors: [wholeError], wholeJson: true };
  return { records, errors, wholeJson: false };
}

function isCompleteJson(line: string, limits: ReadLimits): boolean {
  try {
    parseJson(line, limits);
    return true;
  } catch {
    return false;
  }
}

/** Load one file: detect its format, import every record, validate into the internal model. */
export async function loadFile(file: string, opts: LoadOptions = {}): Promise<LoadedFile> {
  const out: LoadedFile = { file, trajectories: [], errors: [] };
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (e) {
    out.errors.push({
      file,
      line: 0,
      message: `cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    });
    return out;
  }
  if (!stat.isFile()) {
    out.errors.push({ file, line: 0, message: 'not a regular file' });
    return out;
  }
  const plan = planRead(file, opts.format);
  if (plan.read === 'none') {
    out.errors.push({ file, line: 0, field: plan.field, message: plan.message });
    return out;
  }
  let importer: Importer | undefined = plan.importer;
  let result: ImportResult;
  if (plan.read === 'bytes') {
    const binary = plan.importer;
    if (!binary.importBytes) {
      out.errors.push({ file, line: 0, message: `the ${binary.format} importer does not read binary files` });
      return out;
    }
    if (stat.size > MAX_BINARY_BYTES) {
      out.errors.push({
        file,
        line: 0,
        message: `binary file is ${stat.size} bytes, over the ${MAX_BINARY_BYTES}-byte limit for one file`,
      });
      return out;
    }
    try {
      result = await binary.importBytes(fs.readFileSync(file), fileContext(file, opts.model));
    } catch (e) {
      out.errors.push({
        file,
        line: 0,
        message: `the ${binary.format} importer failed on this file: ${(e as Error).message}`,
      });
      return out;
    }
  } else {
    let read: Awaited<ReturnType<typeof readRecords>>;
    try {
      read = await readRecords(file, opts);
    } catch (e) {
      out.errors.push({
        file,
        line: 0,
        message: `cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      });
      return out;
    }
    const { records, errors } = read;
    out.errors.push(...errors);
    if (!importer) {
      const d = sniffRecords(records.slice(0, SNIFF_RECORDS).map((r) => r.value));
      if (!d.importer) {
        if (records.length > 0 || errors.length === 0) {
          out.errors.push({
            file,
            line: records[0]?.line ?? 0,
            message: `no known format matched. Tried: ${d.tried.join('; ')}`,
          });
        }
        return out;
      }
      importer = d.importer;
    }
    result = importIsolated(importer, records, fileContext(file, opts.model));
  }
  if (!importer) return out;
  out.format = importer.format;
  result = withPathStep(result, file);
  out.errors.push(...result.errors);
  const trusted = importer.validates === true; // its output is Trajectory-schema output already
  for (const t of result.trajectories) {
    if (trusted) {
      out.trajectories.push(t as Trajectory);
      continue;
    }
    const parsed = safeParseBounded(Trajectory, t);
    if (parsed.success) out.trajectories.push(parsed.data);
    else out.errors.push(...zodErrors(file, t.source?.line ?? 0, parsed.error));
  }
  return out;
}

/**
 * Run an importer so that a record it throws on costs that record only: on a throw, find the
 * records that throw on their own, report each (naming its line and longest list), and import
 * the rest together (grouping formats such as vLLM call logs keep their groups).
 */
export function importIsolated(importer: Importer, records: readonly RawRecord[], ctx: FileContext): ImportResult {
  const { file } = ctx;
  try {
    return importer.importRecords(records, ctx);
  } catch (whole) {
    const errors: ReadError[] = [];
    const kept: RawRecord[] = [];
    for (const r of records) {
      try {
        importer.importRecords([r], ctx);
        kept.push(r);
      } catch (e) {
        const longest = longestList(r.value);
        const why =
          e instanceof RangeError && longest
            ? ` (its longest list, ${longest.field}, has ${longest.length} entries: a long list of wrong-typed entries overwhelms validation)`
            : '';
        errors.push({
          file,
          line: r.line,
          ...(longest ? { field: longest.field } : {}),
          message: `the ${importer.format} importer failed on this record: ${(e as Error).message}${why}`,
        });
      }
    }
    try {
      const rest = importer.importRecords(kept, ctx);
      return { trajectories: rest.trajectories, errors: [...errors, ...rest.errors] };
    } catch {
      return {
        trajectories: [],
        errors: [
          ...errors,
          {
            file,
            line: records[0]?.line ?? 0,
            message: `the ${importer.format} importer failed on this file: ${(whole as Error).message}`,
          },
        ],
      };
    }
  }
}

/** The longest array in a record as a field path (walked iteratively: the record may be deep). */
function longestList(value: unknown): { field: string; length: number } | undefined {
  let best: { field: string; length: number } | undefined;
  const stack: { v: unknown; path: string[] }[] = [{ v: value, path: [] }];
  while (stack.length > 0) {
    const { v, path: at } = stack.pop()!;
    if (typeof v !== 'object' || v === null || at.length > 64) continue;
    if (Array.isArray(v) && v.length > (best?.length ?? 0)) best = { field: at.join('.'), length: v.length };
    if (Array.isArray(v) && v.length > 1024) continue; // a bulk list of ids/logprobs holds no further lists worth naming
    for (const [k, c] of Object.entries(v))
      if (typeof c === 'object' && c !== null) stack.push({ v: c, path: [...at, k] });
  }
  return best?.field ? best : undefined;
}

/**
 * What a run folder holds for a run, sorted by name: its sub-folders (to descend into) and its run
 * files (isRunFileName); hidden entries and node_modules skipped, an entry gone since the listing
 * left out. The one rule for every reader of folders (expandPaths here, serve's polling).
 */
export function runFolderEntries(dir: string): { path: string; dir: boolean }[] {
  const out: { path: string; dir: boolean }[] = [];
  for (const name of fs.readdirSync(dir).sort()) {
    if (name.startsWith('.') || name === 'node_modules') continue;
    const child = path.join(dir, name);
    try {
      if (fs.statSync(child).isDirectory()) out.push({ path: child, dir: true });
      else if (isRunFileName(name)) out.push({ path: child, dir: false });
    } catch {
      // gone since the folder was listed
    }
  }
  return out;
}

/** Expand directories into the trajectory files they hold (sorted, non-recursive into hidden folders). */
export function expandPaths(paths: readonly string[]): { files: string[]; errors: ReadError[] } {
  const files: string[] = [];
  const errors: ReadError[] = [];
  const walk = (p: string) => {
    let st: fs.Stats;
    try {
      st = fs.statSync(p);
    } catch {
      errors.push({ file: p, line: 0, message: 'no such file or directory' });
      return;
    }
    if (!st.isDirectory()) files.push(p);
    else for (const child of runFolderEntries(p)) child.dir ? walk(child.path) : files.push(child.path);
  };
  paths.forEach(walk);
  return { files, errors };
}
