// Every command of the command line, by name, loaded when it runs (each is its own chunk of the
// bundle). A registry rather than a listing of ./commands: the installed package carries the
// bundle, not the sources (test/cli-commands.test.ts holds it to the files of ./commands).
import type { Command } from './command.ts';

export const COMMANDS = {
  check: () => import('./commands/check.ts'),
  compare: () => import('./commands/compare.ts'),
  decode: () => import('./commands/decode.ts'),
  demo: () => import('./commands/demo.ts'),
  'diff-runs': () => import('./commands/diff-runs.ts'),
  export: () => import('./commands/export.ts'),
  gateway: () => import('./commands/gateway.ts'),
  'image-tokens': () => import('./commands/image-tokens.ts'),
  merge: () => import('./commands/merge.ts'),
  render: () => import('./commands/render.ts'),
  serve: () => import('./commands/serve.ts'),
  share: () => import('./commands/share.ts'),
  tokenize: () => import('./commands/tokenize.ts'),
} as const satisfies Record<string, () => Promise<{ command: Command }>>;

export type CommandName = keyof typeof COMMANDS;
