// The command line: `rollscope <command> ...`. Each command is a thin door onto the shared
// pipeline and analysis; argument errors exit 2 with a message, never a stack trace.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { runCheck } from './check.ts';
import { BUILTIN_PROFILES } from '../profiles/profile.ts';
import { IMPORTERS } from '../import/index.ts';

export class UsageError extends Error {}

const HELP = `rollscope: inspect multimodal RL rollouts (Qwen2-VL, Qwen2.5-VL, Qwen3-VL)

Usage:
  rollscope check PATH... [--model M] [--format F] [--min-pixels N] [--max-pixels N] [--json]
  rollscope --help | --version

Commands:
  check     check trajectories: prefix stability, re-render drift, image placeholders, masks, logprobs.
            Exit 0 when clean, 1 when an error-level finding or an unreadable record, 2 on bad input.

Options:
  --model M        ${BUILTIN_PROFILES.join(', ')}, a model name (Qwen/Qwen2.5-VL-7B-Instruct), or a local
                   model folder (tokenizer.json, chat template, preprocessor_config.json). Default: inferred
                   from the data, else qwen2.5-vl.
  --format F       override format detection: ${IMPORTERS.map((i) => i.format).join(', ')}
  --min-pixels N   image processor min_pixels for this run (records that state their own keep theirs)
  --max-pixels N   image processor max_pixels for this run
  --json           one JSON document on stdout (docs/check-json.md)
`;

const COMMON = {
  model: { type: 'string' },
  format: { type: 'string' },
  'min-pixels': { type: 'string' },
  'max-pixels': { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} satisfies ParseArgsConfig['options'];

export function positiveInt(name: string, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`--${name} takes a positive whole number, got "${String(v)}"`);
  return n;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (!command || command === '--help' || command === '-h' || command === 'help') {
      process.stdout.write(HELP);
      return command ? 0 : 2;
    }
    if (command === '--version') {
      const { default: pkg } = await import('../../package.json', { with: { type: 'json' } });
      process.stdout.write(`${pkg.version}\n`);
      return 0;
    }
    if (command === 'check') {
      const { values, positionals } = parseArgs({ args: rest, options: COMMON, allowPositionals: true, strict: true });
      if (values.help) {
        process.stdout.write(HELP);
        return 0;
      }
      if (positionals.length === 0) throw new UsageError('check needs at least one PATH');
      return await runCheck(
        positionals,
        {
          json: values.json === true,
          model: values.model,
          format: values.format,
          processor: { minPixels: positiveInt('min-pixels', values['min-pixels']), maxPixels: positiveInt('max-pixels', values['max-pixels']) },
        },
        process.stdout,
      );
    }
    throw new UsageError(`unknown command "${command}"`);
  } catch (e) {
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`rollscope: ${(e as Error).message}\nRun "rollscope --help" for usage.\n`);
      return 2;
    }
    if (e instanceof Error && /unknown model|no tokenizer\.json|no chat template|not valid JSON/.test(e.message)) {
      process.stderr.write(`rollscope: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}
