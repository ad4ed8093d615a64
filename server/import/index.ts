// Format detection and loading, in two passes as speedscope does: by file name first, then by
// the structure of the first readable record. `--format NAME` overrides both. A file no
// importer recognises gets one error that lists every format tried and why it did not match.
import fs from 'node:fs';
import path from 'node:path';
import { Trajectory, type FormatName, type ReadError } from '../model/trajectory.ts';
import type { Importer } from './importer.ts';
import { isReadError, parseJson, parseRecordLine, readLines, zodErrors, type RawRecord } from './records.ts';
import { nativeImporter } from './native.ts';
import { slimeImporter } from './slime.ts';
import { verlImporter } from './verl.ts';
import { verlDumpImporter } from './verl-dump.ts';
import { arealImporter } from './areal.ts';
import { arealDumpImporter } from './areal-dump.ts';
import { primeRlImporter } from './prime-rl.ts';
import { exportRowsImporter } from './export-rows.ts';
import { vllmImporter } from './vllm.ts';
import { agentLightningImporter } from './agent-lightning.ts';

/** Registered importers, most specific first (structure sniffing stops at the first match). */
export const IMPORTERS: Importer[] = [nativeImporter, slimeImporter, verlImporter, arealImporter, verlDumpImporter, arealDumpImporter, primeRlImporter, exportRowsImporter, vllmImporter, agentLightningImporter];

export function registerImporter(importer: Importer): void {
  if (!IMPORTERS.some((i) => i.format === importer.format)) IMPORTERS.push(importer);
}

export function importerFor(format: string): Importer | undefined {
  return IMPORTERS.find((i) => i.format === format);
}

export interface LoadedFile {
  file: string;
  format?: FormatName;
  trajectories: Trajectory[];
  errors: ReadError[];
}

export interface LoadOptions {
  format?: string;
  maxLineBytes?: number;
}

const BINARY_EXT = /\.(bin|msgpack|mpk)$/i;

async function readRecords(file: string, opts: LoadOptions): Promise<{ records: RawRecord[]; errors: ReadError[]; wholeJson: boolean }> {
  const records: RawRecord[] = [];
  const errors: ReadError[] = [];
  // A whole-file JSON document (`[...]` or a pretty-printed object) rather than JSON lines.
  const fd = fs.openSync(file, 'r');
  const head = Buffer.alloc(4096);
  const n = fs.readSync(fd, head, 0, head.length, 0);
  fs.closeSync(fd);
  const headText = head.subarray(0, n).toString('utf8').trimStart();
  const firstLineEnd = headText.indexOf('\n');
  const firstLine = firstLineEnd < 0 ? headText : headText.slice(0, firstLineEnd);
  const looksWholeJson = headText.startsWith('[') || (headText.startsWith('{') && !isCompleteJson(firstLine));
  if (looksWholeJson) {
    const text = fs.readFileSync(file, 'utf8');
    try {
      const value = parseJson(text);
      const items = Array.isArray(value) ? value : [value];
      items.forEach((v) => records.push({ line: 1, offset: 0, length: text.length, value: v }));
      return { records, errors, wholeJson: true };
    } catch (e) {
      if (headText.startsWith('[')) {
        errors.push({ file, line: 1, message: `not valid JSON: ${(e as Error).message}` });
        return { records, errors, wholeJson: true };
      }
      // Fall through: JSONL whose first record spans... no: report line by line below.
    }
  }
  for await (const l of readLines(file, { maxLineBytes: opts.maxLineBytes })) {
    const r = parseRecordLine(file, l);
    if (isReadError(r)) errors.push(r);
    else records.push(r);
  }
  return { records, errors, wholeJson: false };
}

function isCompleteJson(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}

function detect(file: string, records: readonly RawRecord[]): { importer?: Importer; tried: string[] } {
  const base = path.basename(file);
  const byName = IMPORTERS.find((i) => i.fileNamePattern?.test(base));
  if (byName) return { importer: byName, tried: [] };
  const tried: string[] = [];
  const sample = records.slice(0, 3);
  for (const imp of IMPORTERS) {
    if (imp.container === 'binary') {
      tried.push(`${imp.format}: binary format, file name must match ${imp.fileNamePattern}`);
      continue;
    }
    let why: string | undefined;
    for (const r of sample) {
      const ok = imp.sniff(r.value);
      if (ok === true) return { importer: imp, tried };
      why ??= ok;
    }
    tried.push(`${imp.format}: ${why ?? 'no record to look at'}`);
  }
  return { tried };
}

/** Load one file: detect its format, import every record, validate into the internal model. */
export async function loadFile(file: string, opts: LoadOptions = {}): Promise<LoadedFile> {
  const out: LoadedFile = { file, trajectories: [], errors: [] };
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (e) {
    out.errors.push({ file, line: 0, message: `cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` });
    return out;
  }
  if (!stat.isFile()) {
    out.errors.push({ file, line: 0, message: 'not a regular file' });
    return out;
  }
  let importer = opts.format ? importerFor(opts.format) : undefined;
  if (opts.format && !importer) {
    out.errors.push({ file, line: 0, field: 'format', message: `unknown format "${opts.format}"; known: ${IMPORTERS.map((i) => i.format).join(', ')}` });
    return out;
  }
  if (!importer) {
    const byName = IMPORTERS.find((i) => i.fileNamePattern?.test(path.basename(file)));
    if (byName) importer = byName;
  }
  let result;
  // An importer that claims the file by name and reads bytes gets the bytes (Parquet export batches).
  const readsBytes = importer?.importBytes !== undefined && importer.fileNamePattern?.test(path.basename(file)) === true;
  if (importer?.container === 'binary' || readsBytes || (!importer && BINARY_EXT.test(file))) {
    const binary = importer ?? IMPORTERS.find((i) => i.container === 'binary');
    if (!binary?.importBytes) {
      out.errors.push({ file, line: 0, message: 'binary file and no binary importer matched' });
      return out;
    }
    importer = binary;
    result = await binary.importBytes(fs.readFileSync(file), { file });
  } else {
    const { records, errors } = await readRecords(file, opts);
    out.errors.push(...errors);
    if (!importer) {
      const d = detect(file, records);
      if (!d.importer) {
        if (records.length > 0 || errors.length === 0) {
          out.errors.push({ file, line: records[0]?.line ?? 0, message: `no known format matched. Tried: ${d.tried.join('; ')}` });
        }
        return out;
      }
      importer = d.importer;
    }
    result = importer.importRecords(records, { file });
  }
  out.format = importer.format;
  out.errors.push(...result.errors);
  for (const t of result.trajectories) {
    const parsed = Trajectory.safeParse(t);
    if (parsed.success) out.trajectories.push(parsed.data);
    else out.errors.push(...zodErrors(file, t.source?.line ?? 0, parsed.error));
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
    if (st.isDirectory()) {
      for (const name of fs.readdirSync(p).sort()) {
        if (name.startsWith('.') || name === 'node_modules') continue;
        const child = path.join(p, name);
        const cst = fs.statSync(child);
        if (cst.isDirectory()) walk(child);
        else if (/\.(jsonl|json|bin|msgpack|parquet)$/i.test(name) && !/\.(manifest\.json|rejects\.jsonl)$/.test(name)) files.push(child);
      }
    } else files.push(p);
  };
  paths.forEach(walk);
  return { files, errors };
}
