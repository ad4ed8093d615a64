// The command line's registry (server/cli/command-registry.ts) names every command of
// server/cli/commands/, each under its file's name: the installed package has no sources to list.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../server/cli/command-registry.ts';

describe('the command registry', () => {
  it('holds every command file, each command named as its file', async () => {
    const files = fs
      .readdirSync(path.resolve('server/cli/commands'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => f.slice(0, -3))
      .sort();
    expect(Object.keys(COMMANDS).sort()).toEqual(files);
    for (const [name, load] of Object.entries(COMMANDS)) expect((await load()).command.name, name).toBe(name);
  });
});
