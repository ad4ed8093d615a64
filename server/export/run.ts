// `exportEvents`: checked trajectories in, a validated training batch out, with its account.
// Consumes the pipeline's events (server/pipeline.ts; `rollscope export` wires the two in
// server/pipeline/export-run.ts) one trajectory at a time, so memory is bounded by one row group
// (Parquet) or one write buffer (JSONL), not by the run.
//
// Safe writing: the batch, its manifest and its rejects are written to temporary files in the
// destination folder (`.NAME.<pid>.<random>.tmp`, hidden, so a rerun over the folder skips
// them), synced, and renamed into place only when complete — the batch last, so a batch under
// its final name always has its account beside it. An existing batch is never replaced without
// `force` (without it the batch is published with link(2), which fails rather than clobbers).
// SIGINT/SIGTERM/SIGHUP remove the temporary files before the process goes; a SIGKILL cannot be
// caught and leaves only a temporary file.
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import type { ProcessorSettings, ReadError } from '../model/trajectory.ts';
import type { CheckedTrajectory, RunEvent } from '../analysis/checked.ts';
import type { PositionIdsLayout } from './row.ts';
import { encodeOutcome, type EncodedOutcome, type RowSpec } from './encoded.ts';
import { RecentImages, type ImageMode } from './images.ts';
import { JsonlWriter } from './jsonl.ts';
import { ParquetRowWriter } from './parquet.ts';
import {
  countDistinct,
  emptyCounts,
  type ExportFormat,
  hashFile,
  hashFileRange,
  imageDirFor,
  keysPathFor,
  Manifest,
  manifestPathFor,
  rejectsPathFor,
  rollscopeVersion,
  type RejectEntry,
} from './manifest.ts';
import { EXPORT_SCHEMA_VERSION } from './row-schema.ts';
import {
  PartitionedParquetSink,
  partitionedKeysPath,
  partitionedManifestPath,
  partitionedRejectsPath,
  type PartitionTarget,
} from './partitioned.ts';

export interface ExportOptions {
  /** The batch file to write. */
  out: string;
  /** Default: `parquet` when `out` ends in `.parquet`, else `jsonl`. */
  format?: ExportFormat;
  /** Replace an existing batch. */
  force?: boolean;
  /** Image bytes inline (default) or paths relative to the batch. */
  images?: ImageMode;
  /** `qwen`: 3 rows (t, h, w), as transformers' get_rope_index (default); `verl`: verl's 4 rows. */
  positionIds?: PositionIdsLayout;
  includeWarnings?: boolean;
  model?: string;
  /** Input format override (skips detection). */
  inputFormat?: string;
  /** Fetch remote http(s) images under the limits of server/images/remote.ts (off by default). */
  allowRemoteImages?: boolean;
  processor?: ProcessorSettings;
  roots?: string[];
  workers?: number;
  /** Bytes of a read unit (RunOptions `unitBytes`; tests cut small files with it). */
  unitBytes?: number;
  /** Export only the trajectories this accepts (a filter or a selection); the rest are not counted. */
  select?: (checked: CheckedTrajectory) => boolean;
  /** A description of `select` for the manifest (e.g. the browser's filter). */
  selection?: string;
  /**
   * `--where` (docs/filter.md): export only the trajectories `matches` accepts; the rest are read and
   * counted as `filtered_out`, and the expression is recorded in the manifest's `filter`.
   */
  filter?: { expression: string; matches: (checked: CheckedTrajectory) => boolean };
  signal?: AbortSignal;
  /** Parquet rows per row group. */
  rowGroupRows?: number;
  /** Write hive-style partition folders under `out` (a folder then), one Parquet part per folder (export/partitioned.ts). */
  partition?: PartitionTarget;
  /** Export only this shard's trajectories (pipeline/shard.ts ShardSpec); recorded in the manifest for `merge`. */
  shard?: { index: number; count: number; root?: string };
  /**
   * A shard that reads its input splits (pipeline/export-run.ts): where each trajectory was read.
   * Its rows keep the id their data states, and FILE.keys.jsonl lists each trajectory's place and
   * row, so `merge` gives the run-wide keys (cli/merge-keys.ts).
   */
  positions?: ExportPositions;
}

/** Where a shard reads each trajectory (pipeline/shard.ts SplitPositions). */
export interface ExportPositions {
  /** The input split being read now. */
  readonly current: { start: number; end: number; bytes: number; whole: boolean } | undefined;
  /** The split's file ended (its `file` event). */
  fileEnded(): void;
  /** [file order, split start, place in the split] of the next trajectory. */
  next(): [number, number, number];
}

export interface ExportProgress {
  filesDone: number;
  /** Known when the export was started from paths. */
  filesTotal: number | null;
  file: string | null;
  /** Trajectories the files loaded so far hold (before any selection). */
  trajectoriesKnown: number;
  read: number;
  exported: number;
  rejected: number;
  bytesWritten: number;
}

export interface ExportResult {
  out: string;
  manifestFile: string;
  rejectsFile: string;
  manifest: Manifest;
}

export type ExportErrorCode = 'target_exists' | 'bad_target' | 'aborted';

export class ExportError extends Error {
  constructor(
    readonly code: ExportErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export function formatFor(out: string, format?: ExportFormat): ExportFormat {
  return format ?? (/\.parquet$/i.test(out) ? 'parquet' : 'jsonl');
}

/** Refuse a destination that exists (without force), is a folder, or whose folder does not exist. */
export function checkTarget(out: string, force: boolean): void {
  const dir = path.dirname(out);
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory())
    throw new ExportError('bad_target', `${dir}: no such folder to write ${path.basename(out)} into`);
  if (!fs.existsSync(out)) return;
  if (fs.statSync(out).isDirectory()) throw new ExportError('bad_target', `${out} is a folder`);
  if (!force) throw new ExportError('target_exists', `${out} exists; pass --force to replace it`);
}

// --- temporary files and signals -------------------------------------------------------------

const liveTemps = new Set<string>();
const liveExports = new Set<AbortController>();
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const handlers = new Map<NodeJS.Signals, () => void>();

function removeLiveTemps(): void {
  for (const f of liveTemps) {
    try {
      fs.unlinkSync(f);
    } catch {
      // already gone
    }
  }
  liveTemps.clear();
}

function onSignal(sig: NodeJS.Signals): void {
  removeLiveTemps();
  for (const a of liveExports) a.abort(new ExportError('aborted', `export interrupted by ${sig}`));
  // Alone on this signal: restore the default action and let it end the process as it would have.
  if (process.listenerCount(sig) === 1) {
    uninstallSignalHandlers();
    process.kill(process.pid, sig);
  }
}

function installSignalHandlers(): void {
  if (handlers.size > 0) return;
  for (const sig of SIGNALS) {
    const h = () => onSignal(sig);
    handlers.set(sig, h);
    process.on(sig, h);
  }
}

function uninstallSignalHandlers(): void {
  for (const [sig, h] of handlers) process.removeListener(sig, h);
  handlers.clear();
}

export function tempPathFor(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

/** Publish `tmp` as `dest`; without `force`, refuse rather than replace an existing `dest`. */
function publish(tmp: string, dest: string, force: boolean): void {
  if (force) {
    fs.renameSync(tmp, dest);
    return;
  }
  try {
    fs.linkSync(tmp, dest);
    fs.unlinkSync(tmp);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST')
      throw new ExportError('target_exists', `${dest} appeared while exporting; pass --force to replace it`);
    // Filesystems without hard links: check, then rename (a narrow race instead of none).
    if (fs.existsSync(dest)) throw new ExportError('target_exists', `${dest} exists; pass --force to replace it`);
    fs.renameSync(tmp, dest);
  }
}

// --- the export --------------------------------------------------------------------------------

type EncodedRow = Extract<EncodedOutcome, { kind: 'row' }>['row'];

/** Where a row went: its file (relative to the export's folder) and its index there. */
export interface RowPlace {
  file: string;
  row: number;
}

interface Sink {
  writeEncoded(row: EncodedRow, checked: CheckedTrajectory): Promise<RowPlace> | RowPlace;
  close(): Promise<void> | void;
  abandon(): Promise<void> | void;
  readonly bytesWritten: number;
}

/** A row encoded for another format than the batch's: rows are encoded as the export's spec says, so never. */
function wrongFormat(row: EncodedRow): never {
  throw new Error(`a row encoded as ${row.format} for a batch of another format`);
}

function parquetSink(w: ParquetRowWriter | PartitionedParquetSink, file: string): Sink {
  return {
    writeEncoded: (row, c) => {
      if (row.format !== 'parquet') wrongFormat(row);
      if (!(w instanceof ParquetRowWriter)) return w.writeShredded(row.shredded, c);
      w.writeShredded(row.shredded, c.trajectory.id);
      return { file, row: w.rowCount - 1 };
    },
    close: () => w.close(),
    abandon: () => w.abandon(),
    get bytesWritten() {
      return w.bytesWritten;
    },
  };
}

function jsonlSink(w: JsonlWriter, file: string): Sink {
  return {
    writeEncoded: async (row, c) => {
      if (row.format !== 'jsonl') wrongFormat(row);
      await w.writeAround(row.line, c.trajectory.id);
      return { file, row: w.rowCount - 1 };
    },
    close: () => w.close(),
    abandon: () => w.abandon(),
    get bytesWritten() {
      return w.bytesWritten;
    },
  };
}

/** A pipeline event, with the trajectory's row already built and encoded where it was analyzed (RunOptions `exportRows`). */
export type ExportInput = RunEvent | (Extract<RunEvent, { type: 'trajectory' }> & { exported?: EncodedOutcome });

/**
 * How the rows of an export are built and encoded (where each trajectory is analyzed, when the
 * pipeline is given it as RunOptions `exportRows`; else in `exportEvents`).
 */
export function rowSpecFor(opts: ExportOptions): RowSpec {
  const out = path.resolve(opts.out);
  const partition = opts.partition;
  const images = opts.images ?? 'embed';
  return {
    format: partition ? 'parquet' : formatFor(out, opts.format),
    ...(partition ? { partition } : {}),
    images,
    positionIds: opts.positionIds ?? 'qwen',
    includeWarnings: opts.includeWarnings === true,
    processor: opts.processor,
    roots: opts.roots ?? [],
    outDir: partition ? out : path.dirname(out),
    // By reference: one content-addressed store beside the batch (the file, or the partitioned folder).
    imageDir: images === 'ref' ? path.join(path.dirname(out), 'images') : imageDirFor(out),
  };
}

/**
 * Export from any stream of pipeline events (e.g. trajectories the server already holds). The
 * inputs listed in the manifest are the files announced by `file` events.
 */
export async function exportEvents(
  events: AsyncIterable<ExportInput>,
  opts: ExportOptions,
  onProgress?: (p: ExportProgress) => void,
  filesTotal: number | null = null,
): Promise<ExportResult> {
  const out = path.resolve(opts.out);
  const force = opts.force === true;
  const partition = opts.partition;
  const format = partition ? 'parquet' : formatFor(out, opts.format);
  if (partition) checkPartitionTarget(out, partition, force);
  else checkTarget(out, force);
  const manifestFile = partition ? partitionedManifestPath(out, partition.part) : manifestPathFor(out);
  const rejectsFile = partition ? partitionedRejectsPath(out, partition.part) : rejectsPathFor(out);
  const positions = opts.positions;
  const keysFile = positions ? (partition ? partitionedKeysPath(out, partition.part) : keysPathFor(out)) : undefined;
  const spec = rowSpecFor(opts);
  const recentImages = new RecentImages();

  const abort = new AbortController();
  const onOuterAbort = () => {
    const why = opts.signal?.reason;
    abort.abort(
      new ExportError(
        'aborted',
        `export cancelled${why instanceof Error && why.name !== 'AbortError' ? `: ${why.message}` : ''}`,
      ),
    );
  };
  const stopIfAborted = () => {
    if (abort.signal.aborted)
      throw abort.signal.reason instanceof ExportError
        ? abort.signal.reason
        : new ExportError('aborted', 'export cancelled');
  };
  opts.signal?.addEventListener('abort', onOuterAbort);
  if (opts.signal?.aborted) onOuterAbort();
  liveExports.add(abort);
  installSignalHandlers();

  const temps = {
    batch: tempPathFor(out),
    manifest: tempPathFor(manifestFile),
    rejects: tempPathFor(rejectsFile),
    ...(keysFile ? { keys: tempPathFor(keysFile) } : {}),
  };
  const mine = Object.values(temps);
  let sink: Sink | undefined;
  let parts: PartitionedParquetSink | undefined;
  let rejects: JsonlWriter | undefined;
  let keys: JsonlWriter | undefined;
  try {
    for (const t of mine) liveTemps.add(t);
    if (partition) {
      parts = new PartitionedParquetSink(
        out,
        partition,
        { createdBy: `rollscope ${rollscopeVersion()}`, rowGroupRows: opts.rowGroupRows },
        (dest) => {
          const tmp = tempPathFor(dest);
          liveTemps.add(tmp);
          mine.push(tmp);
          return tmp;
        },
      );
    }
    sink = parts
      ? parquetSink(parts, '')
      : format === 'parquet'
        ? parquetSink(
            ParquetRowWriter.create(temps.batch, {
              createdBy: `rollscope ${rollscopeVersion()}`,
              rowGroupRows: opts.rowGroupRows,
            }),
            path.basename(out),
          )
        : jsonlSink(await JsonlWriter.create(temps.batch), path.basename(out));
    rejects = await JsonlWriter.create(temps.rejects);
    if (temps.keys) keys = await JsonlWriter.create(temps.keys);

    const counts = emptyCounts();
    const inputs: Manifest['inputs'] = [];
    const profiles = new Map<string, Manifest['profiles'][number]>();
    const progress: ExportProgress = {
      filesDone: 0,
      filesTotal,
      file: null,
      trajectoriesKnown: 0,
      read: 0,
      exported: 0,
      rejected: 0,
      bytesWritten: 0,
    };
    // Read errors of one record arrive together (a record can fail on several fields): one entry per record.
    const unreadable = new Map<string, ReadError[]>();
    const flushUnreadable = async () => {
      for (const errs of unreadable.values()) {
        const e0 = errs[0]!;
        const entry: RejectEntry = {
          schema_version: EXPORT_SCHEMA_VERSION,
          id: null,
          source: { file: e0.file, line: e0.line, format: null },
          reasons: ['unreadable'],
          messages: errs.map((e) =>
            e.field && !e.message.startsWith(e.field) ? `${e.field}: ${e.message}` : e.message,
          ),
          findings: [],
          recheck_findings: [],
        };
        await rejects!.write(entry);
        counts.read++;
        counts.rejected++;
        counts.unreadable++;
        countDistinct(counts.byReason, ['unreadable']);
      }
      unreadable.clear();
    };

    for await (const ev of events) {
      stopIfAborted();
      if (ev.type === 'error') {
        // A selection is of trajectories: records that could not be read are not part of it.
        if (opts.select) continue;
        const key = `${ev.error.file}\u0000${ev.error.line}`;
        unreadable.set(key, [...(unreadable.get(key) ?? []), ev.error]);
        continue;
      }
      await flushUnreadable();
      if (ev.type === 'file') {
        // A shard that read part of a file hashes that part: [start, end) of its split, which the
        // splits of the other shards tile (merge checks they do).
        const split = positions?.current;
        const range = split && !split.whole ? { start: split.start, end: split.end } : undefined;
        const h = range ? await hashFileRange(ev.file, range.start, range.end) : await hashFile(ev.file);
        positions?.fileEnded();
        inputs.push({
          file: ev.file,
          format: ev.format ?? null,
          bytes: range ? (split?.bytes ?? h.bytes) : h.bytes,
          sha256: h.sha256,
          ...(range ? { range } : {}),
          trajectories: ev.count,
        });
        progress.filesDone++;
        progress.file = ev.file;
        progress.trajectoriesKnown += ev.count;
      } else {
        const c = ev.checked;
        const exported = 'exported' in ev ? ev.exported : undefined;
        if (opts.select && !opts.select(c)) continue;
        const at = positions?.next();
        counts.read++;
        if (opts.filter && !opts.filter.matches(c)) {
          counts.filtered_out++;
          progress.read = counts.read;
          onProgress?.(progress);
          continue;
        }
        const prof = profiles.get(c.profile.name) ?? {
          name: c.profile.name,
          family: c.profile.family,
          hashes: c.profile.hashes,
          trajectories: 0,
        };
        prof.trajectories++;
        profiles.set(c.profile.name, prof);
        const outcome = exported ?? (await encodeOutcome(c, spec, recentImages));
        if (outcome.kind === 'unwritable') throw new Error(outcome.message);
        if (outcome.kind === 'row') {
          const place = await sink.writeEncoded(outcome.row, c);
          if (at) await keys!.write({ at, id: c.trajectory.id, row: [place.file, place.row] });
          counts.exported++;
          countDistinct(counts.repairedByFindingKind, outcome.repairedKinds);
          countDistinct(counts.exportedWithWarnings, outcome.warningKinds);
        } else {
          await rejects.writeAround(outcome.entry, c.trajectory.id);
          if (at) await keys!.write({ at, id: c.trajectory.id, reject: rejects.rowCount - 1 });
          counts.rejected++;
          countDistinct(counts.byReason, outcome.reasons);
          countDistinct(counts.byFindingKind, outcome.causeKinds);
        }
      }
      progress.read = counts.read;
      progress.exported = counts.exported;
      progress.rejected = counts.rejected;
      progress.bytesWritten = sink.bytesWritten;
      onProgress?.(progress);
    }
    await flushUnreadable();
    stopIfAborted();

    await sink.close();
    await rejects.close();
    await keys?.close();
    const partList = await parts?.describe();
    const batchHash = partList ? partsDigest(partList) : await hashFile(temps.batch);
    const manifest: Manifest = Manifest.parse({
      schema_version: EXPORT_SCHEMA_VERSION,
      rollscope_version: rollscopeVersion(),
      created_at: createdAt(),
      output: {
        file: path.basename(out),
        format,
        rows: counts.exported,
        bytes: batchHash.bytes,
        sha256: batchHash.sha256,
      },
      ...(partList ? { parts: partList } : {}),
      ...(opts.shard ? { shard: { index: opts.shard.index, count: opts.shard.count } } : {}),
      rejects: { file: path.basename(rejectsFile), lines: counts.rejected },
      ...(keysFile && keys ? { keys: { file: path.basename(keysFile), lines: keys.rowCount } } : {}),
      ...(opts.filter ? { filter: { where: opts.filter.expression, filtered_out: counts.filtered_out } } : {}),
      profiles: [...profiles.values()],
      inputs,
      counts,
      settings: {
        format,
        images: spec.images,
        position_ids: spec.positionIds,
        include_warnings: spec.includeWarnings,
        model: opts.model ?? null,
        input_format: opts.inputFormat ?? null,
        min_pixels: opts.processor?.minPixels ?? null,
        max_pixels: opts.processor?.maxPixels ?? null,
        selection: opts.selection ?? null,
      },
    });
    const fd = fs.openSync(temps.manifest, 'wx');
    fs.writeSync(fd, `${JSON.stringify(manifest, null, 2)}\n`);
    fs.fdatasyncSync(fd);
    fs.closeSync(fd);

    stopIfAborted();
    fs.renameSync(temps.rejects, rejectsFile);
    if (temps.keys && keysFile) fs.renameSync(temps.keys, keysFile);
    fs.renameSync(temps.manifest, manifestFile);
    if (parts) parts.publish();
    else publish(temps.batch, out, force);
    return { out, manifestFile, rejectsFile, manifest };
  } catch (e) {
    await sink?.abandon();
    await rejects?.abandon();
    await keys?.abandon();
    throw e;
  } finally {
    for (const t of mine) {
      liveTemps.delete(t);
      try {
        fs.unlinkSync(t);
      } catch {
        // published or never created
      }
    }
    liveExports.delete(abort);
    opts.signal?.removeEventListener('abort', onOuterAbort);
    if (liveExports.size === 0) uninstallSignalHandlers();
  }
}

/** The manifest's time: SOURCE_DATE_EPOCH when set (reproducible reruns write the same bytes), else now. */
function createdAt(): string {
  const epoch = process.env.SOURCE_DATE_EPOCH;
  if (epoch && /^\d+$/.test(epoch)) return new Date(Number(epoch) * 1000).toISOString();
  return new Date().toISOString();
}

/** The hash of a partitioned export as a whole: SHA-256 of its parts' `file<TAB>sha256` lines, in order. */
function partsDigest(parts: { file: string; bytes: number; sha256: string }[]): { sha256: string; bytes: number } {
  const h = createHash('sha256');
  for (const p of parts) h.update(`${p.file}\t${p.sha256}\n`);
  return { sha256: h.digest('hex'), bytes: parts.reduce((n, p) => n + p.bytes, 0) };
}

/** A partitioned export goes into a folder (made if missing, in an existing parent); its shard's manifest is not replaced without force. */
function checkPartitionTarget(out: string, partition: PartitionTarget, force: boolean): void {
  const parent = path.dirname(out);
  if (!fs.existsSync(parent) || !fs.statSync(parent).isDirectory())
    throw new ExportError('bad_target', `${parent}: no such folder to write ${path.basename(out)} into`);
  if (fs.existsSync(out) && !fs.statSync(out).isDirectory())
    throw new ExportError('bad_target', `${out} is a file; --partition writes a folder`);
  fs.mkdirSync(out, { recursive: true });
  const manifest = partitionedManifestPath(out, partition.part);
  if (fs.existsSync(manifest) && !force)
    throw new ExportError('target_exists', `${manifest} exists; pass --force to replace this part`);
}
