// Figure "fuzz": the importer fuzzers (test/fuzz-importers.test.ts) with fresh seeds, as
// `npm run fuzz` runs them, so every full bench run also looks for new counterexamples. `npm test`
// draws one fixed seed; here each run draws new ones and prints any failure's replay command.
// Quick: one seed at a few cases per target (the script works); full: 4 seeds at 500 cases.
// `node bin/tsx.js bench/fuzz.ts [--quick]`
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { isMain, REPO, round, runStandalone, type Figure } from './lib.ts';

export async function fuzzFigure(quick: boolean): Promise<Figure> {
  const seeds = quick ? 1 : 4;
  const runs = quick ? 10 : 500;
  const started = performance.now();
  const r = spawnSync(
    process.execPath,
    [
      path.join(REPO, 'test', 'fuzz.js'),
      '--seeds',
      String(seeds),
      '--runs',
      String(runs),
      'test/fuzz-importers.test.ts',
    ],
    { cwd: REPO, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 },
  );
  const seconds = (performance.now() - started) / 1000;
  const failedSeeds = /(\d+) of \d+ seed\(s\) failed/.exec(r.stdout)?.[1];
  const failed = r.status === 0 ? 0 : Number(failedSeeds ?? seeds);
  const replays = [...r.stdout.matchAll(/replay: (.+)/g)].map((m) => m[1]!);
  return {
    figure: 'fuzz',
    title: 'Importer fuzzing with fresh seeds (npm run fuzz)',
    status: 'measured',
    data: { file: 'test/fuzz-importers.test.ts', seeds, casesPerTarget: runs },
    results: [
      { name: 'seeds that held', value: seeds - failed, unit: `of ${seeds}` },
      { name: 'wall per seed', value: round(seconds / seeds), unit: 's' },
    ],
    references: [],
    targets: [
      {
        name: 'no counterexample',
        wanted: 'every property holds for fresh seeds',
        measured: failed === 0 ? `${seeds} seed(s) held` : `${failed} seed(s) failed: ${replays.join(' ; ')}`,
        met: failed === 0,
      },
    ],
    notes: failed === 0 ? [] : [r.stdout.split('\n').slice(-40).join('\n')],
  };
}

if (isMain(import.meta.url)) await runStandalone(fuzzFigure);
