// The recipes of docs/distributed.md as written: every shell script parses (`bash -n`), every
// Python one compiles (`python3 -m py_compile`; the Ray driver runs on no cluster here), and each
// rollscope command they run passes only options that command takes. test/slurm.test.ts and
// test/distributed.test.ts run the Slurm and Kubernetes ones.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Command } from '../server/cli/command.ts';
import { recipes, type Recipe } from './support/recipes.ts';

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-recipes-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const hasPython = spawnSync('python3', ['--version']).status === 0;

/** The rollscope commands a recipe runs: the command's name and the `--options` it passes. */
function rollscopeCalls(r: Recipe): { command: string; options: string[] }[] {
  const calls: { command: string; options: string[] }[] = [];
  if (r.lang === 'python') {
    // rollscope("check", RUN, "--json", ...): up to the call's closing parenthesis.
    for (const m of r.text.matchAll(/\brollscope\(\s*"([a-z-]+)"([\s\S]*?)\)\n/g))
      calls.push({ command: m[1]!, options: [...m[2]!.matchAll(/"(--[a-z-]+)"/g)].map((o) => o[1]!) });
    for (const m of r.text.matchAll(/"rollscope", "([a-z-]+)"([^\]]*)\]/g))
      calls.push({ command: m[1]!, options: [...m[2]!.matchAll(/"(--[a-z-]+)"/g)].map((o) => o[1]!) });
    return calls;
  }
  // Shell (and the YAML's embedded script): the command line with its continuations.
  const text = r.text.replace(/\\\n/g, ' ');
  for (const m of text.matchAll(/^\s*(?:exec\s+)?rollscope ([a-z-]+)([^\n;|&']*)/gm))
    calls.push({ command: m[1]!, options: [...m[2]!.matchAll(/(?:^|\s)(--[a-z-]+)/g)].map((o) => o[1]!) });
  return calls;
}

describe('docs/distributed.md recipes', () => {
  const all = recipes();

  it('has the recipes the tests run, each once', () => {
    const names = all.map((r) => r.name);
    expect(new Set(names).size).toBe(names.length);
    for (const n of ['kubernetes', 'slurm', 'slurm-merge', 'slurm-submit', 'slurm-srun', 'slurm-export', 'ray'])
      expect(names).toContain(n);
  });

  it.each(all.filter((r) => r.lang === 'sh').map((r) => [r.name, r] as const))('%s parses as bash', (_n, r) => {
    const file = path.join(tmp, `${r.name}.sh`);
    fs.writeFileSync(file, r.text);
    const res = spawnSync('bash', ['-n', file], { encoding: 'utf8' });
    expect(res.stderr).toBe('');
    expect(res.status).toBe(0);
  });

  it.skipIf(!hasPython && !process.env.CI)('the Ray driver compiles (python3 -m py_compile)', () => {
    const py = all.filter((r) => r.lang === 'python');
    expect(py.length).toBeGreaterThan(0);
    for (const r of py) {
      const file = path.join(tmp, r.file ?? `${r.name}.py`);
      fs.writeFileSync(file, r.text);
      const res = spawnSync('python3', ['-m', 'py_compile', file], { encoding: 'utf8' });
      expect(res.stderr, r.name).toBe('');
      expect(res.status).toBe(0);
    }
    // The submit script runs the driver by the name the page gives it.
    const ray = all.find((r) => r.name === 'ray')!;
    expect(all.find((r) => r.name === 'ray-submit')!.text).toContain(`python ${ray.file}`);
  });

  it('every rollscope command of a recipe passes only options that command takes', async () => {
    let seen = 0;
    for (const r of all)
      for (const call of rollscopeCalls(r)) {
        const { command } = (await import(`../server/cli/commands/${call.command}.ts`)) as { command: Command };
        for (const opt of call.options)
          expect(command.usage, `${r.name}: rollscope ${call.command} ${opt}`).toMatch(
            new RegExp(`(^|[\\s\\[])${opt}(?![a-z-])`),
          );
        seen += call.options.length;
      }
    // The parsers above found the commands (a recipe reshaped past them would check nothing).
    expect(seen).toBeGreaterThan(30);
    const ray = rollscopeCalls(all.find((r) => r.name === 'ray')!);
    expect(ray.map((c) => c.command).sort()).toEqual(['check', 'export', 'merge', 'merge']);
  });
});
