// `npm run bench [-- --quick] [-- --only check,memory] [-- --keep] [-- --json FILE] [-- --readme]`: every figure,
// each against its reference measured on the same data in the same run, printed as text, then
// all of them as one JSON document (also written to FILE; a full run also writes
// bench/results.json and the figures section of bench/README.md). `--quick` runs small sizes so CI can check the scripts work; it asserts no times.
// Generated runs live under $TMPDIR/rollscope-bench (ROLLSCOPE_BENCH_DIR) and are deleted at
// the end unless --keep.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  benchArgs,
  benchDir,
  Figure,
  figuresMarkdown,
  machine,
  printFigure,
  removeBenchRuns,
  REPO,
  round,
  writeReadmeFigures,
} from './lib.ts';
import { loadFigure } from './load.ts';
import { checkFigure } from './check.ts';
import { exportFigure } from './export.ts';
import { memoryFigure } from './memory.ts';
import { serveFigure } from './serve.ts';
import { browserFigure } from './browser.ts';
import { shardFigure } from './shard.ts';
import { standardFigure } from './standard.ts';
import { gatewayFigure } from './gateway.ts';
import { gatewayStreamFigure } from './gateway-stream.ts';
import { plotsFigure } from './plots.ts';
import { fuzzFigure } from './fuzz.ts';

const FIGURES: Record<string, (quick: boolean) => Promise<Figure>> = {
  load: loadFigure,
  standard: standardFigure,
  check: checkFigure,
  export: exportFigure,
  memory: memoryFigure,
  serve: serveFigure,
  browser: browserFigure,
  shard: shardFigure,
  gateway: gatewayFigure,
  'gateway-stream': gatewayStreamFigure,
  plots: plotsFigure,
  fuzz: fuzzFigure,
};

const args = benchArgs();
if (process.argv.includes('--readme')) {
  // Rewrite the README's figures from the last full run, without measuring anything.
  const doc = JSON.parse(fs.readFileSync(path.join(REPO, 'bench', 'results.json'), 'utf8')) as Parameters<
    typeof figuresMarkdown
  >[0];
  writeReadmeFigures(figuresMarkdown({ ...doc, figures: doc.figures.map((f) => Figure.parse(f)) }));
  process.exit(0);
}
const names = args.only ?? Object.keys(FIGURES);
const unknown = names.filter((n) => !(n in FIGURES));
if (unknown.length > 0) {
  process.stderr.write(`unknown figure(s): ${unknown.join(', ')}; known: ${Object.keys(FIGURES).join(', ')}\n`);
  process.exit(2);
}

const m = machine();
process.stdout.write(
  `rollscope bench${args.quick ? ' --quick (sizes too small for the figures to mean much)' : ''}\n` +
    `machine: ${m.nproc} cores (${m.cpu}), ${m.ramGB} GB RAM, node ${m.node}, ${m.platform}; load average ${m.loadAverage.start}\n` +
    `runs in ${benchDir()}\n`,
);
const t0 = performance.now();
const figures: Figure[] = [];
let failed = false;
try {
  for (const name of names) {
    try {
      const f = Figure.parse(await FIGURES[name]!(args.quick));
      figures.push(f);
      printFigure(f);
    } catch (e) {
      failed = true;
      process.stderr.write(`\nfigure ${name} failed: ${(e as Error).stack ?? String(e)}\n`);
    }
  }
} finally {
  if (!args.keep && !process.env.ROLLSCOPE_BENCH_DIR) removeBenchRuns();
}
m.loadAverage.end = round(os.loadavg()[0]!, 2);
const doc = { machine: m, quick: args.quick, seconds: round((performance.now() - t0) / 1000), figures };
const json = JSON.stringify(doc, null, 2);
process.stdout.write(`\n${json}\n`);
if (args.json) fs.writeFileSync(args.json, `${json}\n`);
if (!args.quick && !args.only && !failed) {
  fs.writeFileSync(path.join(REPO, 'bench', 'results.json'), `${json}\n`);
  writeReadmeFigures(figuresMarkdown(doc));
}
process.exitCode = failed ? 1 : 0;
