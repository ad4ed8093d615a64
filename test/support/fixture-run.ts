// A run folder of every importer's fixtures (JSONL, whole JSON, msgpack, torch.save archives,
// malformed files included) for the sharded-run tests, and `rollscope` on a PATH for the recipes
// of docs/distributed.md.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const FIXTURES = path.join(ROOT, 'test', 'fixtures');
export const FORMAT_FOLDERS = ['vllm', 'verl', 'slime', 'prime-rl', 'agent-lightning', 'areal', 'torch'];
export const ROLLSCOPE_CLI = path.join(ROOT, 'bin', 'rollscope.js');

/**
 * Copy the fixtures of every format into `run`, plus a slime file whose GRPO groups interleave
 * across more lines than one streamed batch (64) holds.
 */
export function writeFixtureRun(run: string): void {
  for (const f of FORMAT_FOLDERS)
    fs.cpSync(path.join(FIXTURES, f), path.join(run, f), { recursive: true, filter: (p) => !p.endsWith('.py') });
  const samples = fs
    .readFileSync(path.join(run, 'slime', 'samples.jsonl'), 'utf8')
    .trim()
    .split('\n');
  const lines = Array.from({ length: 70 }, (_, i) => {
    const s = JSON.parse(samples[i % samples.length]!) as Record<string, unknown>;
    return JSON.stringify({ ...s, index: i, group_index: i % 5 });
  });
  fs.writeFileSync(path.join(run, 'slime', 'interleaved-groups.jsonl'), `${lines.join('\n')}\n`);
}

/** A folder `dir/bin` with a `rollscope` script that runs this checkout's CLI (the folder to put on PATH). */
export function rollscopeOnPath(dir: string): string {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  fs.writeFileSync(path.join(bin, 'rollscope'), `#!/bin/sh\nexec '${process.execPath}' '${ROLLSCOPE_CLI}' "$@"\n`, {
    mode: 0o755,
  });
  return bin;
}
