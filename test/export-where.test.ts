// `export --where EXPR` writes exactly the rows of `check --where EXPR` that the export's checks
// pass (docs/filter.md): over fixture folders and the demo run, for filters on trajectory fields,
// findings and group fields (the two-pass case); the manifest records the filter and
// read = exported + rejected + filtered_out, also across shards merged.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { writeDemoRun } from '../server/demo/write.ts';
import { Manifest, RejectEntry } from '../server/export/manifest.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { parseFilter, printFilter, readsGroup } from '../server/report/filter.ts';
import { filterAst } from './support/filter-arbitrary.ts';

const FIXTURES = path.resolve('test/fixtures');
let tmp: string;
let demoDir: string;
let n = 0;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-export-where-'));
  demoDir = path.join(tmp, 'demo');
  await writeDemoRun(demoDir);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const runPath = (run: string) => (run === 'demo' ? demoDir : path.join(FIXTURES, run));

function lines(file: string): unknown[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as unknown);
}

async function checkIds(paths: string[], where?: string): Promise<string[]> {
  const parts: string[] = [];
  await runCheck(
    paths,
    { json: true, workers: 0, ...(where ? { where: { expression: where, node: parseFilter(where) } } : {}) },
    { write: (t: string) => parts.push(t) },
  );
  return CheckReport.parse(JSON.parse(parts.join(''))).trajectories.map((t) => t.id);
}

async function exported(paths: string[], where?: string, shard?: { index: number; count: number }) {
  const out = path.join(tmp, `batch-${n++}.jsonl`);
  const r = await exportRun(paths, {
    out,
    workers: 0,
    ...(where ? { where: { expression: where, node: parseFilter(where) } } : {}),
    ...(shard ? { shard } : {}),
  });
  const rows = lines(r.out).map((x) => (x as { id: string }).id);
  const rejected = lines(r.rejectsFile)
    .map((x) => RejectEntry.parse(x))
    .flatMap((x) => (x.id === null ? [] : [x.id]));
  return { manifest: Manifest.parse(JSON.parse(fs.readFileSync(r.manifestFile, 'utf8'))), rows, rejected, r };
}

const FILTERS = [
  'reward >= 1 and not severity:error',
  'kind:prefix_break or cause:missing_eos',
  // Group fields and group findings: the export reads the run twice.
  'group.size >= 2 and reward >= 1',
  'not group.degenerate and not kind:group',
  'sample = 0 or turns > 1',
];

describe.each(['demo', 'groups', 'slime', 'verl', 'vllm', 'agent-lightning'])('%s', (run) => {
  let clean: Set<string>;
  let rejectedWhole: Set<string>;
  beforeAll(async () => {
    const whole = await exported([runPath(run)]);
    clean = new Set(whole.rows);
    rejectedWhole = new Set(whole.rejected);
  }, 120_000);

  const agrees = async (where: string) => {
    const selected = await checkIds([runPath(run)], where);
    const e = await exported([runPath(run)], where);
    expect(e.rows).toEqual(selected.filter((id) => clean.has(id)));
    expect(e.rejected).toEqual(selected.filter((id) => rejectedWhole.has(id)));
    const c = e.manifest.counts;
    expect(c.read).toBe(c.exported + c.rejected + c.filtered_out);
    expect(e.manifest.filter).toEqual({ where, filtered_out: c.filtered_out });
    const all = await checkIds([runPath(run)]);
    expect(c.filtered_out).toBe(all.length - selected.length);
    return selected.length;
  };

  it('hand-written filters', async () => {
    let some = 0;
    for (const where of FILTERS) if ((await agrees(where)) > 0) some++;
    expect(some).toBeGreaterThan(0);
  }, 300_000);

  it('random filters', async () => {
    await fc.assert(
      fc.asyncProperty(filterAst(), async (ast) => {
        await agrees(printFilter(ast));
      }),
      { numRuns: 6 },
    );
  }, 300_000);
});

it('a filter on trajectory fields alone is evaluated in one pass; one on a group in two', () => {
  expect(readsGroup(parseFilter('reward >= 1 and kind:prefix_break and not severity:error'))).toBe(false);
  expect(readsGroup(parseFilter('reward >= 1 and group.reward_std > 0'))).toBe(true);
  expect(readsGroup(parseFilter('not kind:group'))).toBe(true);
  expect(readsGroup(parseFilter('severity:warning'))).toBe(true);
});

it('--shard refuses --where: a shard reads only its share, and a filter reads the keys and groups of the whole run', async () => {
  const where = 'group.size >= 2 and reward >= 1';
  await expect(exported([runPath('groups')], where, { index: 0, count: 3 })).rejects.toThrow(
    /--where reads a whole run/,
  );
});
