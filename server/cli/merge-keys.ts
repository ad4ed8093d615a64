// The run-wide keys of a sharded export, given by `rollscope merge`. A shard reads only its input
// splits (pipeline/shard.ts), so it cannot know whether a trajectory's stated id was stated before
// in another shard's share: its rows and reject entries carry the stated id, and its
// FILE.keys.jsonl (`_part-K.keys.jsonl`) lists, in the order it read them, each trajectory's place
// in the run ([file order, split start, place in the split]), its stated id, and where its row
// (part file, row index) or reject entry (line index) is. `merge` orders the trajectories of all
// shards by place, gives the keys an unsharded export gives (model/trajectory-key.ts: `ID`, then
// `ID#2`, … in run order), and rewrites the few rows whose key is not their stated id: only the
// parts and rejects files that hold such a row are rewritten (a run that states each id once
// rewrites nothing). Rerunning merge rewrites nothing more: the rows already hold their keys.
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { z } from 'zod';
import { asyncBufferFromFile, parquetMetadataAsync } from 'hyparquet';
import { uniqueIds } from '../model/trajectory-key.ts';
import { MergeError } from '../report/merge.ts';
import { RunPosition } from '../report/check-report.ts';
import { hashFile, type Manifest, rollscopeVersion } from '../export/manifest.ts';
import { ParquetRowWriter, readParquetFileRows } from '../export/parquet.ts';
import { ExportRow } from '../export/row-schema.ts';
import { tempPathFor } from '../export/run.ts';

/** One line of FILE.keys.jsonl. */
export const KeyLine = z.object({
  at: RunPosition,
  id: z.string(),
  /** The row: its file (relative to the shard's export folder) and index there. */
  row: z.tuple([z.string(), z.number().int().nonnegative()]).optional(),
  /** The reject entry: its line (0-based) in the shard's rejects file. */
  reject: z.number().int().nonnegative().optional(),
});
export type KeyLine = z.infer<typeof KeyLine>;

/** A file that holds rows or reject entries to rename: line or row index → key. */
type Renames = Map<string, { kind: 'parquet' | 'jsonl'; rows: Map<number, string> }>;

export interface RunKeysResult {
  /** Trajectories whose run-wide key is not their stated id. */
  renamed: number;
  /** Files rewritten now (a rerun finds them done). */
  rewritten: string[];
  /** Size and hash of every part that holds a renamed row (absolute path), as it is now. */
  parts: Map<string, { bytes: number; sha256: string }>;
}

/**
 * Give the rows and reject entries of the shards' exports their run-wide keys. `shards` are the
 * parsed manifests with their file names; manifests without `keys` (a whole export) need none.
 */
export async function assignRunKeys(shards: readonly { name: string; m: Manifest }[]): Promise<RunKeysResult> {
  const result: RunKeysResult = { renamed: 0, rewritten: [], parts: new Map() };
  const keyed = shards.filter((s) => s.m.keys);
  if (keyed.length === 0) return result;
  if (keyed.length < shards.length)
    throw new MergeError(
      `${shards.find((s) => !s.m.keys)!.name} lists no keys file: its shard was exported by an older rollscope; export it again`,
    );
  const entries: { at: RunPosition; id: string; file?: string; kind?: 'parquet' | 'jsonl'; index: number }[] = [];
  for (const { name, m } of shards) {
    const dir = path.dirname(path.resolve(name));
    const keysFile = path.join(dir, m.keys!.file);
    const rejects = path.join(dir, m.rejects.file);
    let lines = 0;
    const input = fs.createReadStream(keysFile);
    try {
      for await (const text of readline.createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY })) {
        if (text === '') continue;
        const parsed = KeyLine.safeParse(JSON.parse(text));
        if (!parsed.success) throw new MergeError(`${keysFile}:${lines + 1}: not a keys line`);
        const k = parsed.data;
        lines++;
        if (k.row)
          entries.push({
            at: k.at,
            id: k.id,
            file: path.join(dir, ...k.row[0].split('/')),
            kind: m.output.format,
            index: k.row[1],
          });
        else if (k.reject !== undefined)
          entries.push({ at: k.at, id: k.id, file: rejects, kind: 'jsonl', index: k.reject });
        else entries.push({ at: k.at, id: k.id, index: -1 });
      }
    } catch (e) {
      if (e instanceof MergeError) throw e;
      throw new MergeError(`${keysFile}: ${(e as Error).message}`);
    } finally {
      input.destroy();
    }
    if (lines !== m.keys!.lines)
      throw new MergeError(`${keysFile} holds ${lines} line(s), its manifest ${name} says ${m.keys!.lines}`);
  }
  entries.sort((a, b) => a.at[0] - b.at[0] || a.at[1] - b.at[1] || a.at[2] - b.at[2]);
  for (let i = 1; i < entries.length; i++) {
    const [a, b] = [entries[i - 1]!.at, entries[i]!.at];
    if (a[0] === b[0] && a[1] === b[1] && a[2] === b[2])
      throw new MergeError(
        `the shards do not fit together (two trajectories read at ${JSON.stringify(b)}): were they run over the same inputs with the same options?`,
      );
  }
  const keyOf = uniqueIds();
  const renames: Renames = new Map();
  for (const e of entries) {
    const key = keyOf(e.id);
    if (key === e.id) continue;
    result.renamed++;
    if (!e.file || !e.kind) continue;
    const file = renames.get(e.file) ?? { kind: e.kind, rows: new Map<number, string>() };
    file.rows.set(e.index, key);
    renames.set(e.file, file);
  }
  const partFiles = new Set<string>();
  for (const { name, m } of shards) {
    const dir = path.dirname(path.resolve(name));
    for (const p of m.parts ?? [{ file: m.output.file }]) partFiles.add(path.join(dir, ...p.file.split('/')));
  }
  for (const [file, { kind, rows }] of renames) {
    const changed = kind === 'parquet' ? await renameParquetRows(file, rows) : await renameJsonlLines(file, rows);
    if (changed) result.rewritten.push(file);
    if (partFiles.has(file)) result.parts.set(file, await hashFile(file));
  }
  return result;
}

/** The JSON text an exported line starts with before its id (rows and reject entries alike; encoded.ts `splitAtId`). */
function idPrefix(line: string): string | undefined {
  return /^\{"schema_version":\d+,"id":/.exec(line)?.[0];
}

/** Put each key in its line of a JSONL file (rows or reject entries), streamed; false when every line already holds it. */
async function renameJsonlLines(file: string, keys: ReadonlyMap<number, string>): Promise<boolean> {
  let changed = false;
  let index = 0;
  const tmp = tempPathFor(file);
  const fd = fs.openSync(tmp, 'wx');
  const input = fs.createReadStream(file, { encoding: 'utf8' });
  try {
    let pending: string[] = [];
    let pendingBytes = 0;
    const flush = () => {
      fs.writeSync(fd, pending.join(''));
      pending = [];
      pendingBytes = 0;
    };
    for await (const line of readline.createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY })) {
      const key = keys.get(index++);
      let out = line;
      if (key !== undefined) {
        const prefix = idPrefix(line);
        if (!prefix) throw new MergeError(`${file}:${index}: not an exported line (no schema_version and id first)`);
        const rest = line.slice(prefix.length);
        const idEnd = endOfJsonString(rest);
        if ((JSON.parse(rest.slice(0, idEnd)) as string) !== key) changed = true;
        out = `${prefix}${JSON.stringify(key)}${rest.slice(idEnd)}`;
      }
      pending.push(out, '\n');
      pendingBytes += out.length + 1;
      if (pendingBytes >= 1 << 20) flush();
    }
    if (index < Math.max(...keys.keys()) + 1)
      throw new MergeError(`${file} holds ${index} line(s), fewer than its keys file says`);
    flush();
    if (changed) fs.fdatasyncSync(fd);
  } catch (e) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw e;
  } finally {
    input.destroy();
  }
  fs.closeSync(fd);
  if (!changed) {
    fs.rmSync(tmp, { force: true });
    return false;
  }
  fs.renameSync(tmp, file);
  return true;
}

/** The length of the JSON string literal `text` starts with. */
function endOfJsonString(text: string): number {
  for (let i = 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  throw new MergeError('an exported line whose id is not a JSON string');
}

/** Rewrite a Parquet part with each key as its row's id, a row group at a time; false when every row already holds it. */
async function renameParquetRows(file: string, keys: ReadonlyMap<number, string>): Promise<boolean> {
  const source = await asyncBufferFromFile(file);
  const meta = await parquetMetadataAsync(source);
  const total = Number(meta.num_rows);
  if (Math.max(...keys.keys()) >= total)
    throw new MergeError(`${file} holds ${total} row(s), fewer than its keys file says`);
  // Only the id column, to see whether anything is left to do.
  let changed = false;
  let start = 0;
  const groups = meta.row_groups.map((g) => {
    const range = { start, end: start + Number(g.num_rows) };
    start = range.end;
    return range;
  });
  for (const g of groups) {
    const due = [...keys.entries()].filter(([i]) => i >= g.start && i < g.end);
    if (due.length === 0) continue;
    const rows = await readParquetFileRows(source, g.start, g.end);
    if (due.some(([i, key]) => rows[i - g.start]!.id !== key)) {
      changed = true;
      break;
    }
  }
  if (!changed) return false;
  const tmp = tempPathFor(file);
  const writer = ParquetRowWriter.create(tmp, {
    createdBy: `rollscope ${rollscopeVersion()}`,
    rowGroupRows: Math.max(1, ...groups.map((g) => g.end - g.start)),
  });
  try {
    for (const g of groups) {
      const rows = await readParquetFileRows(source, g.start, g.end);
      rows.forEach((raw, j) => {
        const row = ExportRow.parse(raw);
        const key = keys.get(g.start + j);
        writer.write(key === undefined ? row : { ...row, id: key });
      });
    }
    writer.close();
    fs.renameSync(tmp, file);
  } catch (e) {
    writer.abandon();
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  return true;
}
