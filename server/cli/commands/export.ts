// `rollscope export PATH... --out FILE`: re-align every trajectory the canonical way, check the
// result again, and write the ones that pass as a training batch (JSONL or Parquet) with
// FILE.manifest.json and FILE.rejects.jsonl beside it (docs/export-format.md).
import fs from 'node:fs';
import path from 'node:path';
import {
  COMMON_OPTIONS,
  parse,
  processorOptions,
  UsageError,
  WHERE_USAGE,
  whereOption,
  workerCount,
  type Command,
} from '../command.ts';
import { paint } from '../output.ts';
import { ExportError, formatFor, type ExportProgress } from '../../export/run.ts';
import { exportRun } from '../../pipeline/export-run.ts';
import { ExportFormat } from '../../export/manifest.ts';
import { parseShard, type ShardSpec } from '../../pipeline/shard.ts';
import { parsePartitionKeys, type PartitionKey } from '../../export/partition.ts';

const OPTIONS = {
  ...COMMON_OPTIONS,
  out: { type: 'string', short: 'o' },
  'input-format': { type: 'string' },
  'include-warnings': { type: 'boolean', default: false },
  force: { type: 'boolean', default: false },
  images: { type: 'string', default: 'embed' },
  'position-ids': { type: 'string', default: 'qwen' },
  workers: { type: 'string' },
  shard: { type: 'string' },
  where: { type: 'string' },
  partition: { type: 'string' },
} as const;

function oneOf<T extends string>(name: string, value: string | undefined, allowed: readonly T[]): T {
  if (value !== undefined && (allowed as readonly string[]).includes(value)) return value as T;
  throw new UsageError(`--${name} takes ${allowed.join(' or ')}, got "${value}"`);
}

function progressLine(p: ExportProgress): string {
  const files = p.filesTotal !== null ? `file ${p.filesDone}/${p.filesTotal}` : `${p.filesDone} file(s)`;
  return `${files}: ${p.read} read, ${p.exported} exported, ${p.rejected} rejected, ${(p.bytesWritten / 1e6).toFixed(1)} MB`;
}

export const command: Command = {
  name: 'export',
  summary:
    'write a validated training batch (JSONL or Parquet) from the canonical re-alignment, with a manifest and rejects',
  usage: `rollscope export PATH... --out FILE [--model M] [--format jsonl|parquet] [--include-warnings] [--force]
                 [--images embed|path|ref] [--position-ids qwen|verl] [--input-format F] [--min-pixels N] [--max-pixels N]
                 [--where EXPR] [--workers N] [--shard K/N] [--partition step,rank] [--json]

Re-aligns every trajectory the canonical way (prompt once, generated ids verbatim, EOS-aware
observation suffixes), checks the re-aligned row again, and writes the rows that pass to FILE.
Beside it: FILE.manifest.json (inputs and their hashes, model profile hashes, counts, settings)
and FILE.rejects.jsonl (every trajectory not exported, with its findings). read = exported +
rejected. FILE appears only when complete; an existing FILE is kept unless --force.
Schema: docs/export-format.md.

Exit status: 0 when the batch was written (even with rejects); 2 on wrong arguments, a PATH that
does not exist, or an existing FILE without --force; 1 when writing failed.

  --out FILE           the batch to write (required)
  --format F           jsonl or parquet (default: parquet when FILE ends in .parquet, else jsonl)
  --include-warnings   also export trajectories whose warnings doubt the row (default: rejected; warnings that
                       describe a correct row, such as a non-canonical split or a raw-text prompt, never reject)
  --force              replace an existing FILE
${WHERE_USAGE.replace(/^ {2}--where EXPR {5}/, '  --where EXPR         ').replace(/\n {19}/g, '\n                       ')}
                       the rest count as filtered_out: read = exported + rejected + filtered_out
  --images MODE        embed: image bytes in each row (default); path: paths relative to FILE's folder
                       (images that exist only inside the data are written to FILE.images/); ref: each distinct
                       image once under images/ beside FILE, named by its sha256, and its uri in the row
  --shard K/N          export only shard K of N (K from 0 to N−1), reading only its share of the input as
                       check --shard does; give each shard its own FILE, or one --partition folder; rows keep
                       the ids their data states until rollscope merge of the manifests gives the run-wide
                       keys (docs/distributed.md)
  --partition KEYS     step, rank or step,rank: FILE is a folder of hive-style parts
                       (FILE/step=12/rank=3/part-K.parquet, K the shard), Parquet only
  --position-ids L     qwen: 3 rows t/h/w (default); verl: verl's 4 rows (text, t, h, w)
  --model M            a built-in profile (qwen2.5-vl, qwen3-vl, qwen2.5, qwen3, …), a model name, or a local model folder
                       (default: inferred from the data, else qwen2.5-vl)
  --input-format F     override input format detection
  --min-pixels N       image processor min_pixels for this run (records that state their own keep theirs)
  --max-pixels N       image processor max_pixels for this run
  --workers N          threads that read the input, build and encode its rows (default: as check, one per core
                       this process may use, for inputs of 32 MB or more; 0 = this thread alone); the batch is
                       the same bytes on any number
  --json               print the manifest as JSON`,
  async run(argv) {
    const { values, positionals } = parse(argv, OPTIONS);
    if (positionals.length === 0) throw new UsageError('export needs at least one PATH');
    if (!values.out) throw new UsageError('export needs --out FILE');
    const missing = positionals.filter((p) => !fs.existsSync(p));
    if (missing.length > 0) throw new UsageError(`no such file or folder: ${missing.join(', ')}`);
    const format = values.partition
      ? 'parquet'
      : values.format === undefined
        ? formatFor(values.out)
        : oneOf('format', values.format, ExportFormat.options);
    const ext = path.extname(values.out).toLowerCase();
    if (
      !values.partition &&
      ((ext === '.parquet' && format === 'jsonl') || (ext === '.jsonl' && format === 'parquet'))
    ) {
      throw new UsageError(
        `--format ${format} does not match the file name ${path.basename(values.out)} (rollscope reads Parquet back by its .parquet name)`,
      );
    }
    const images = oneOf('images', values.images, ['embed', 'path', 'ref'] as const);
    let shard: ShardSpec | undefined;
    let partitionKeys: PartitionKey[] | undefined;
    try {
      if (values.shard !== undefined) shard = parseShard(values.shard);
      if (values.partition !== undefined) partitionKeys = parsePartitionKeys(values.partition);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    if (partitionKeys && values.format === 'jsonl') throw new UsageError('--partition writes Parquet only');
    const positionIds = oneOf('position-ids', values['position-ids'], ['qwen', 'verl'] as const);
    const where = whereOption(values.where);
    // A shard's rows get their run-wide keys and group places from merge, which a filter reads.
    if (where && shard)
      throw new UsageError('--where reads a whole run (its keys and groups): export the shards without it and merge');

    const live = process.stderr.isTTY === true;
    let lastDraw = 0;
    const onProgress = (p: ExportProgress) => {
      const now = Date.now();
      if (!live || now - lastDraw < 200) return;
      lastDraw = now;
      process.stderr.write(`\r${paint.dim(progressLine(p))}\u001b[K`);
    };
    try {
      const result = await exportRun(
        positionals,
        {
          out: values.out,
          format,
          force: values.force === true,
          images,
          positionIds,
          includeWarnings: values['include-warnings'] === true,
          model: values.model,
          inputFormat: values['input-format'],
          processor: processorOptions(values),
          // Unset: the threads check would start for the run (server/pipeline.ts workersFor).
          workers: values.workers === undefined ? undefined : workerCount(values.workers),
          allowRemoteImages: values['allow-remote-images'] === true,
          shard,
          ...(partitionKeys ? { partition: { keys: partitionKeys, part: shard?.index ?? 0 } } : {}),
          ...(where ? { where } : {}),
        },
        onProgress,
      );
      if (live) process.stderr.write('\r\u001b[K');
      const m = result.manifest;
      if (values.json) {
        process.stdout.write(`${JSON.stringify(m)}\n`);
        return 0;
      }
      const reasons = Object.entries(m.counts.byReason)
        .filter(([, n]) => n > 0)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ');
      const listed = (counts: Record<string, number>) =>
        Object.entries(counts)
          .filter(([, n]) => n > 0)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ');
      const repaired = listed(m.counts.repairedByFindingKind);
      const withWarnings = listed(m.counts.exportedWithWarnings);
      process.stdout.write(
        `${paint.green('✓')} wrote ${result.out} (${format}): ${m.counts.exported} row(s) of ${m.counts.read} read, ${m.counts.rejected} rejected` +
          `${m.filter ? `, ${m.filter.filtered_out} filtered out by --where ${m.filter.where}` : ''}` +
          `${reasons ? `\n  rejected: ${reasons} (see ${path.basename(result.rejectsFile)})` : ''}` +
          `${repaired ? `\n  repaired by re-alignment: ${repaired}` : ''}` +
          `${withWarnings ? `\n  exported with warnings: ${withWarnings}` : ''}` +
          `\n  manifest: ${result.manifestFile}\n`,
      );
      return 0;
    } catch (e) {
      if (live) process.stderr.write('\r\u001b[K');
      if (e instanceof ExportError) {
        process.stderr.write(`rollscope export: ${e.message}\n`);
        return e.code === 'aborted' ? 130 : 2;
      }
      if (e instanceof UsageError) throw e;
      const err = e as NodeJS.ErrnoException;
      if (err.code && err.syscall) {
        process.stderr.write(`rollscope export: cannot write ${values.out}: ${err.message}\n`);
        return 1;
      }
      throw e;
    }
  },
};
