// `rollscope <command> ...`: finds the command's file under ./commands, runs it, and turns
// usage errors into exit status 2 with a message, never a stack trace.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError, type Command } from './command.ts';
import { COMMANDS, type CommandName } from './command-registry.ts';
import { FilterError } from '../report/filter.ts';
import { boundHeapGrowth } from './heap.ts';
import { parseSharedCacheMb, SHARED_CACHE_ENV, SharedCacheSettingError } from '../util/shared-cache.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

async function loadCommand(name: string): Promise<Command | undefined> {
  if (!Object.hasOwn(COMMANDS, name)) return undefined;
  return (await COMMANDS[name as CommandName]()).command;
}

/**
 * Commands that tokenize what they read on this thread from the start. `check` and `export` are
 * not among them: they build this thread's tokenizer only when it analyzes (pipeline.ts
 * `checkPaths`, once the input is planned); when threads read the run, each builds its own when a
 * check first needs it, and this thread never does.
 */
const TOKENIZING = new Set(['compare', 'serve']);

/**
 * Commands whose analysis keeps the shared-work caches (util/shared-cache.ts): the cache bound is
 * checked here, once, before any work or worker thread starts, so the workers may trust it.
 */
const ANALYZING = new Set(['check', 'export', 'compare', 'serve', 'share', 'diff-runs']);

/** Exit status 2 with one line when the environment sets the cache bound to something that is no size. */
function badSharedCacheSetting(name: string): number | undefined {
  try {
    parseSharedCacheMb(process.env[SHARED_CACHE_ENV]);
    return undefined;
  } catch (e) {
    if (!(e instanceof SharedCacheSettingError)) throw e;
    process.stderr.write(`rollscope ${name}: ${e.message}\n`);
    return 2;
  }
}

/**
 * The tokenizer built while the command's modules load: from source they compile on the loader's
 * thread while this one waits, so the build costs the run no time (bench/README.md, "Start-up").
 */
function buildTokenizerMeanwhile(args: readonly string[]): void {
  const at = args.indexOf('--model');
  const model = at >= 0 ? args[at + 1] : args.find((a) => a.startsWith('--model='))?.slice('--model='.length);
  void import('../profiles/profile.ts').then(({ prewarmProfile }) => setImmediate(() => prewarmProfile(model)));
}

async function allCommands(): Promise<Command[]> {
  const names = Object.keys(COMMANDS).sort();
  return (await Promise.all(names.map(loadCommand))).filter((c): c is Command => c !== undefined);
}

async function help(): Promise<string> {
  const cmds = await allCommands();
  const width = Math.max(...cmds.map((c) => c.name.length));
  return `rollscope: inspect multimodal RL rollouts (Qwen2-VL, Qwen2.5-VL, Qwen3-VL)

Usage: rollscope <command> [options]

Commands:
${cmds.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Run "rollscope <command> --help" for a command's options.
`;
}

export async function main(argv: string[]): Promise<number> {
  boundHeapGrowth();
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(await help());
    return name ? 0 : 2;
  }
  if (name === '--version') {
    const pkg = JSON.parse(fs.readFileSync(path.join(here, '../../package.json'), 'utf8')) as {
      version: string;
    };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  const asksHelp = rest.includes('--help') || rest.includes('-h');
  if (ANALYZING.has(name) && !asksHelp) {
    const status = badSharedCacheSetting(name);
    if (status !== undefined) return status;
  }
  if (TOKENIZING.has(name) && !asksHelp) buildTokenizerMeanwhile(rest);
  const command = await loadCommand(name);
  if (!command) {
    process.stderr.write(`rollscope: unknown command "${name}"\nRun "rollscope --help" for usage.\n`);
    return 2;
  }
  if (asksHelp) {
    process.stdout.write(`${command.usage}\n`);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (e) {
    const code = (e as { code?: string }).code ?? '';
    if (e instanceof UsageError || code.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`rollscope ${name}: ${(e as Error).message}\nRun "rollscope ${name} --help" for usage.\n`);
      return 2;
    }
    if (e instanceof FilterError) {
      const pointer = e.pointer().replace(/^/gm, '  ');
      process.stderr.write(`rollscope ${name}: --where: ${e.message} (character ${e.offset + 1})\n${pointer}\n`);
      return 2;
    }
    if (
      e instanceof Error &&
      /unknown model|no tokenizer\.json|no chat template|not valid JSON|the tokenizer has no/.test(e.message)
    ) {
      process.stderr.write(`rollscope ${name}: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}
