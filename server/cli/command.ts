// A CLI command: one file per command under server/cli/commands/, found by name, so each
// command stays a thin door onto the shared pipeline and analysis.
import fs from 'node:fs';
import os from 'node:os';
import type { TrainerSide } from '../model/trainer-side.ts';
import { readTrainerSidecar } from '../import/trainer-sidecar.ts';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { type FilterNode, parseFilter } from '../report/filter.ts';

export class UsageError extends Error {}

export interface Command {
  name: string;
  /** One line for the command list. */
  summary: string;
  /** Usage lines and options, shown by `rollscope COMMAND --help`. */
  usage: string;
  run(argv: string[]): Promise<number>;
}

/** Options most commands share. */
export const COMMON_OPTIONS = {
  model: { type: 'string' },
  format: { type: 'string' },
  'min-pixels': { type: 'string' },
  'max-pixels': { type: 'string' },
  json: { type: 'boolean', default: false },
  'allow-remote-images': { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} satisfies ParseArgsConfig['options'];

export const COMMON_USAGE = `  --model M        a built-in profile (qwen2.5-vl, qwen3-vl, qwen2.5, qwen3, …; README), a model name
                   (Qwen/Qwen2.5-1.5B-Instruct), or a local model folder (tokenizer.json, chat template,
                   config.json, preprocessor_config.json). Default: the profile the model named in the data
                   picks, else qwen2.5-vl; a model no built-in covers is checked without its tokenizer.
  --format F       override format detection
  --min-pixels N   image processor min_pixels for this run (records that state their own keep theirs)
  --max-pixels N   image processor max_pixels for this run
  --json           machine-readable output
  --allow-remote-images
                   fetch http(s) images the records name (off: they are marked unavailable). Only
                   public addresses, 10 s, 64 MiB, image/* only, redirects re-checked (docs/security.md)`;

export function parse<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T) {
  return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
}

export function positiveInt(name: string, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0)
    throw new UsageError(`--${name} takes a positive whole number, got "${String(v)}"`);
  return n;
}

export function processorOptions(values: { 'min-pixels'?: string; 'max-pixels'?: string }) {
  return {
    minPixels: positiveInt('min-pixels', values['min-pixels']),
    maxPixels: positiveInt('max-pixels', values['max-pixels']),
  };
}

/**
 * The run options COMMON_OPTIONS and `--workers` set, as check, diff-runs and serve read them
 * (`--workers` unset: the pipeline starts threads only for a run big enough to repay them).
 */
export function runOptions(values: {
  model?: string;
  format?: string;
  'min-pixels'?: string;
  'max-pixels'?: string;
  'allow-remote-images'?: boolean;
  workers?: string;
}) {
  return {
    model: values.model,
    format: values.format,
    processor: processorOptions(values),
    workers: values.workers === undefined ? undefined : workerCount(values.workers),
    allowRemoteImages: values['allow-remote-images'] === true,
  };
}

/** `--workers N`: analysis threads; default one per core (none on a single-core machine). */
export function workerCount(v: string | undefined): number {
  if (v === undefined) {
    const cores = os.availableParallelism?.() ?? os.cpus().length;
    return cores > 1 ? Math.min(cores, 8) : 0;
  }
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--workers takes a whole number >= 0, got "${v}"`);
  return n;
}

/**
 * `--trainer FILE` (repeatable): trainer sidecars, read and merged; their bad lines go to stderr.
 * A file that does not exist is a wrong argument (exit status 2, as for any PATH).
 */
export async function trainerSidecars(
  files: readonly string[] | undefined,
): Promise<{ side?: TrainerSide; bad: boolean }> {
  if (!files || files.length === 0) return { bad: false };
  for (const f of files) if (!fs.existsSync(f)) throw new UsageError(`--trainer: no such file: ${f}`);
  const side: TrainerSide = {};
  let bad = false;
  for (const f of files) {
    const r = await readTrainerSidecar(f);
    Object.assign(side, r.side);
    for (const e of r.errors) {
      bad = true;
      process.stderr.write(
        `error ${e.file}${e.line ? `:${e.line}` : ''}${e.field ? ` ${e.field}` : ''}: ${e.message}\n`,
      );
    }
  }
  return { side, bad };
}

export const TRAINER_USAGE = `  --trainer FILE   a trainer sidecar (JSONL: trajectory_id, log_probs, ref_log_probs, advantages) whose arrays
                   join the trajectories of the same id (docs/native-format.md, "Trainer sidecar"); repeatable`;

export const WHERE_USAGE = `  --where EXPR     only the trajectories EXPR selects, e.g. 'reward >= 1 and not severity:error and step >= 100'
                   (fields, findings and group fields: docs/filter.md)`;

/** `--where EXPR`, parsed before any file is read: a bad expression is a FilterError (main prints it with a caret). */
export function whereOption(v: string | undefined): { expression: string; node: FilterNode } | undefined {
  if (v === undefined) return undefined;
  return { expression: v, node: parseFilter(v) };
}
