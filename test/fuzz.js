#!/usr/bin/env node
// `npm run fuzz`: the suite's fast-check properties with fresh seeds and longer runs. `npm test`
// runs them from one fixed seed (test/support/property-seed.ts) so CI never fails by the draw;
// run this before submitting a change. Every failure prints the command that replays its case;
// make that case a regression test next to the code it exercises.
//
//   npm run fuzz                    20 fresh seeds, every property file
//   npm run fuzz -- --seeds 5       5 fresh seeds
//   npm run fuzz -- --seed 123      one given seed
//   npm run fuzz -- --runs 1000     cases per importer fuzz target (default 500; npm test runs 250)
//   npm run fuzz -- test/diff.test.ts   only these files
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const value = args[i + 1];
  args.splice(i, 2);
  if (value === undefined || !/^-?\d+$/.test(value)) {
    console.error(`${name} takes an integer`);
    process.exit(2);
  }
  return Number(value);
};
const given = option('--seed');
const seedCount = option('--seeds') ?? 20;
const runs = option('--runs') ?? 500;
const seeds = given !== undefined ? [given] : Array.from({ length: seedCount }, () => randomInt(2 ** 31));

/** Test files that state a property (fc.assert / fc.check / fc.sample), unless files were named. */
const files =
  args.length > 0
    ? args
    : fs
        .readdirSync('test')
        .filter((f) => f.endsWith('.test.ts'))
        .map((f) => path.join('test', f))
        .filter((f) => /\bfc\.(assert|check|sample)\(/.test(fs.readFileSync(f, 'utf8')))
        .sort();

console.log(`fuzz: ${seeds.length} seed(s) × ${files.length} file(s), ${runs} cases per importer target`);
const failures = [];
for (const [k, seed] of seeds.entries()) {
  const started = Date.now();
  const r = spawnSync(
    path.join('node_modules', '.bin', 'vitest'),
    ['run', '--reporter=dot', '--testTimeout=1800000', ...files],
    {
      env: { ...process.env, ROLLSCOPE_FUZZ_SEED: String(seed), ROLLSCOPE_FUZZ_RUNS: String(runs) },
      encoding: 'utf8',
      maxBuffer: 512 * 1024 * 1024,
    },
  );
  const out = `${r.stdout}\n${r.stderr}`;
  const replays = [...out.matchAll(/Replay this case with:\n\s+(.+)/g)].map((m) => m[1]);
  const ok = r.status === 0;
  console.log(
    `seed ${seed} (${k + 1}/${seeds.length}): ${ok ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  if (!ok) {
    failures.push({ seed, replays });
    // Failures that are not property counterexamples (a crash, a plain assertion) show their output.
    if (replays.length === 0) console.log(out.split('\n').slice(-60).join('\n'));
    for (const cmd of replays) console.log(`  replay: ${cmd}`);
  }
}
console.log(
  failures.length === 0
    ? `fuzz: every property held for ${seeds.length} seed(s)`
    : `fuzz: ${failures.length} of ${seeds.length} seed(s) failed (seeds ${failures.map((f) => f.seed).join(', ')})`,
);
process.exit(failures.length === 0 ? 0 : 1);
