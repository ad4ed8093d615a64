// Every fast-check property in the suite runs from one seed, so a run of `npm test` draws the
// same cases on every machine and a submission never lands or fails by the luck of a draw.
// `npm test` uses FIXED_SEED; `npm run fuzz` (test/fuzz.js) runs the same properties with fresh
// seeds. A failure names its seed and shrink path and the command that replays it exactly.
// Loaded by vitest as a setup file (vite.config.ts `setupFiles`), so no test sets a seed itself.
import fc from 'fast-check';
import { expect } from 'vitest';

/** The seed `npm test` and CI use unless ROLLSCOPE_FUZZ_SEED names another. */
export const FIXED_SEED = 20_261_206;

function seedFromEnv(): number {
  const raw = process.env.ROLLSCOPE_FUZZ_SEED;
  if (raw === undefined || raw === '') return FIXED_SEED;
  const seed = Number(raw);
  if (!Number.isSafeInteger(seed))
    throw new Error(`ROLLSCOPE_FUZZ_SEED must be an integer, not ${JSON.stringify(raw)}`);
  return seed | 0;
}

export const propertySeed = seedFromEnv();
const replayPath = process.env.ROLLSCOPE_FUZZ_PATH || undefined;
/** Replaying one case (ROLLSCOPE_FUZZ_PATH): a property runs once, so tests skip their "ran N cases" checks. */
export const replayingOneCase = replayPath !== undefined;

/**
 * `-t`'s argument, shell-quoted inside '…', that selects the test `expect` names `name`: vitest
 * matches it as a regular expression against the names joined by spaces (expect's joins them with
 * " > "), so parentheses and dots in a name are escaped.
 */
export function testNamePattern(name: string): string {
  return name
    .split(' > ')
    .join(' ')
    .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    .replace(/'/g, "'\\''");
}

/** The shell command that reruns exactly the failing case of the current test. */
function replayCommand(path: string | null): string {
  const state = expect.getState();
  const file = state.testPath ? state.testPath.replace(`${process.cwd()}/`, '') : '<test file>';
  const pattern = testNamePattern(state.currentTestName ?? '');
  const pathPart = path ? ` ROLLSCOPE_FUZZ_PATH='${path}'` : '';
  // The other fuzz settings (case counts) the failing run had.
  const settings = Object.entries(process.env)
    .filter(([k]) => k.startsWith('ROLLSCOPE_FUZZ_') && k !== 'ROLLSCOPE_FUZZ_SEED' && k !== 'ROLLSCOPE_FUZZ_PATH')
    .map(([k, v]) => ` ${k}=${v}`)
    .join('');
  return `ROLLSCOPE_FUZZ_SEED=${propertySeed}${pathPart}${settings} npx vitest run ${file} -t '${pattern}'`;
}

fc.configureGlobal({
  seed: propertySeed,
  ...(replayPath ? { path: replayPath } : {}),
  reporter(details) {
    if (!details.failed) return;
    const message = fc.defaultReportMessage(details) ?? 'property failed';
    throw new Error(`${message}\n\nReplay this case with:\n  ${replayCommand(details.counterexamplePath)}\n`, {
      cause: details.errorInstance,
    });
  },
});
