#!/usr/bin/env node
// `npm test`: typecheck, Biome (format and lint), unit and integration tests (vitest), then the browser end-to-end tests
// against Debian's chromium. Prints one closing line "N passed, N failed" for CI.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const bin = (name) => path.join('node_modules', '.bin', name);
const run = (cmd, args) => spawnSync(cmd, args, { stdio: 'inherit' }).status ?? 1;

let passed = 0;
let failed = 0;
const tally = (file) => {
  try {
    const r = JSON.parse(fs.readFileSync(file, 'utf8'));
    passed += r.numPassedTests ?? 0;
    // A file that fails to load has no failed assertions of its own: count it once.
    const brokenFiles = (r.testResults ?? []).filter(
      (t) => t.status === 'failed' && !(t.assertionResults ?? []).some((a) => a.status === 'failed'),
    );
    failed += (r.numFailedTests ?? 0) + brokenFiles.length;
  } catch {
    failed += 1;
  }
};

// Every fast-check property runs from one seed (test/support/property-seed.ts): say which.
const fixedSeed = /FIXED_SEED = ([\d_]+)/.exec(fs.readFileSync('test/support/property-seed.ts', 'utf8'))?.[1];
console.log(
  process.env.ROLLSCOPE_FUZZ_SEED
    ? `property seed: ${process.env.ROLLSCOPE_FUZZ_SEED} (ROLLSCOPE_FUZZ_SEED)`
    : `property seed: ${fixedSeed?.replaceAll('_', '')} (fixed; npm run fuzz tries fresh ones)`,
);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-test-'));
if (run(bin('tsc'), ['--noEmit', '-p', 'tsconfig.json']) !== 0) {
  console.error('typecheck failed');
  failed += 1;
} else passed += 1;

if (run(bin('biome'), ['ci', '.']) !== 0) {
  console.error('biome: format or lint errors (npx biome check --write FILES fixes most)');
  failed += 1;
} else passed += 1;

const unit = path.join(tmp, 'unit.json');
run(bin('vitest'), ['run', '--reporter=default', '--reporter=json', `--outputFile=${unit}`]);
tally(unit);

if (run(bin('vite'), ['build', '--logLevel', 'warn']) !== 0) failed += 1;
const e2e = path.join(tmp, 'e2e.json');
run(bin('vitest'), [
  'run',
  '--config',
  'test/e2e/vitest.e2e.config.ts',
  '--reporter=default',
  '--reporter=json',
  `--outputFile=${e2e}`,
]);
tally(e2e);

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
