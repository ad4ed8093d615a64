// The format registry, the one place that knows which formats exist and how a file is matched to
// one (as Perfetto's trace-type registry): each format's importer (its name, the file names that
// identify it, its structure test), the file extensions it reads as bytes, and the detection
// priority (the order of FORMATS). Loading a file (index.ts), streaming one (stream.ts), scanning
// a folder (expandPaths) and the server's re-reads all ask this module; nothing else detects.
import path from 'node:path';
import type { Importer } from './importer.ts';
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
import { slimeTrainImporter } from './slime-train.ts';
import { sglangImporter } from './sglang.ts';
import { sglangOpenAiImporter } from './sglang-openai.ts';

interface FormatEntry {
  importer: Importer;
  /** Extensions (lower case, with the dot) of files this format reads as bytes rather than as text. */
  byteExtensions?: readonly string[];
}

/**
 * Every format, most specific first: detection by file name takes the first pattern that
 * matches, detection by structure the first importer that accepts a sampled record.
 */
const FORMATS: readonly FormatEntry[] = [
  { importer: nativeImporter },
  // Before slime's: an export row is also a slime Sample, plus `schema_version`.
  { importer: exportRowsImporter, byteExtensions: ['.parquet'] },
  { importer: slimeImporter },
  { importer: slimeTrainImporter },
  { importer: verlImporter },
  { importer: arealImporter },
  { importer: verlDumpImporter },
  { importer: arealDumpImporter },
  { importer: primeRlImporter, byteExtensions: ['.bin', '.msgpack', '.mpk'] },
  // SGLang's OpenAI-compatible logs are vLLM-shaped: their sniff (SGLang-only fields) goes first.
  { importer: sglangOpenAiImporter },
  { importer: sglangImporter },
  { importer: vllmImporter },
  { importer: agentLightningImporter },
];

/** Registered importers in detection order. */
export const IMPORTERS: readonly Importer[] = FORMATS.map((f) => f.importer);

/** Text containers every text format is read from; each may also be gzip-compressed (`.gz`). */
const TEXT_EXTENSIONS = ['.jsonl', '.json'] as const;
/** torch.save archives: decoded to one record (read/torch-records.ts), then detected by structure like JSON. */
const TORCH_EXTENSIONS = ['.pt', '.pth'] as const;
export function isTorchSaveName(file: string): boolean {
  return (TORCH_EXTENSIONS as readonly string[]).includes(extensionOf(file));
}
/** Files rollscope writes beside a batch; a folder scan does not read them back as runs. */
const SIDE_FILES = /\.(manifest\.json|rejects\.jsonl)$/;

export function importerFor(format: string): Importer | undefined {
  return IMPORTERS.find((i) => i.format === format);
}

export function formatNames(): string[] {
  return IMPORTERS.map((i) => i.format);
}

/** The name importers match on: `steps.rollscope.jsonl.gz` is read as `steps.rollscope.jsonl`. */
function matchName(file: string): string {
  return path.basename(file).replace(/\.gz$/i, '');
}

function extensionOf(file: string): string {
  return path.extname(path.basename(file)).toLowerCase();
}

/** Whether a folder scan picks `name` up as a run file. */
export function isRunFileName(name: string): boolean {
  if (SIDE_FILES.test(name)) return false;
  const ext = extensionOf(name.replace(/\.gz$/i, ''));
  if ((TEXT_EXTENSIONS as readonly string[]).includes(ext) || isTorchSaveName(name)) return true;
  return !/\.gz$/i.test(name) && FORMATS.some((f) => f.byteExtensions?.includes(ext));
}

function readsBytes(importer: Importer, file: string): boolean {
  if (importer.container === 'binary') return true;
  const entry = FORMATS.find((f) => f.importer === importer);
  return importer.importBytes !== undefined && entry?.byteExtensions?.includes(extensionOf(file)) === true;
}

/**
 * How a file is read, decided before any byte of it is: `--format NAME`, else the file name
 * (a format's name pattern, then a byte extension); `text` without an importer means the
 * structure of its first records decides (`sniffRecords`).
 */
export type ReadPlan =
  | { read: 'bytes'; importer: Importer }
  | { read: 'text'; importer?: Importer }
  | { read: 'none'; field: 'format'; message: string };

export function planRead(file: string, format?: string): ReadPlan {
  if (format) {
    const importer = importerFor(format);
    if (!importer)
      return {
        read: 'none',
        field: 'format',
        message: `unknown format "${format}"; known: ${formatNames().join(', ')}`,
      };
    return readsBytes(importer, file) ? { read: 'bytes', importer } : { read: 'text', importer };
  }
  const name = matchName(file);
  const byName = IMPORTERS.find((i) => i.fileNamePattern?.test(name));
  if (byName)
    return readsBytes(byName, file) ? { read: 'bytes', importer: byName } : { read: 'text', importer: byName };
  const ext = extensionOf(file);
  const byExtension = FORMATS.find((f) => f.byteExtensions?.includes(ext))?.importer;
  return byExtension ? { read: 'bytes', importer: byExtension } : { read: 'text' };
}

/** Records this many into a file decide its format by structure. */
export const SNIFF_RECORDS = 3;

/**
 * Detection by structure: the first importer (in priority order) that accepts any of the sampled
 * records. `tried` says, per format, why it did not match (the "no known format matched" error).
 */
export function sniffRecords(sample: readonly unknown[]): { importer?: Importer; tried: string[] } {
  const tried: string[] = [];
  for (const imp of IMPORTERS) {
    if (imp.container === 'binary') {
      tried.push(`${imp.format}: binary format, file name must match ${imp.fileNamePattern}`);
      continue;
    }
    let why: string | undefined;
    for (const value of sample.slice(0, SNIFF_RECORDS)) {
      const ok = imp.sniff(value);
      if (ok === true) return { importer: imp, tried };
      why ??= ok;
    }
    tried.push(`${imp.format}: ${why ?? 'no record to look at'}`);
  }
  return { tried };
}

/**
 * Whether the importer reads each JSON line on its own, so a file of it can be streamed in
 * batches (any thread, bounded memory) and one record re-read by its line.
 */
export function readsLineByLine(importer: Importer | undefined): importer is Importer {
  return importer?.recordLocal === true && importer.container === 'jsonl' && importer.importBytes === undefined;
}
