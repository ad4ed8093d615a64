// `check RUN --where EXPR --json` lists exactly the trajectories a direct evaluation of EXPR over
// `check RUN --json` selects, with the summary over them alone (docs/filter.md): over every fixture
// folder and the demo run, for hand-written and random expressions; --shard with --where is refused.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { writeDemoRun } from '../server/demo/write.ts';
import type { Finding } from '../server/model/finding.ts';
import { CheckReport, type ReportEntry } from '../server/report/check-report.ts';
import { type FilterField, matchesFilter, parseFilter, printFilter } from '../server/report/filter.ts';
import { filterAst } from './support/filter-arbitrary.ts';

const FIXTURES = path.resolve('test/fixtures');
const RUNS = fs
  .readdirSync(FIXTURES, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name);

let demoDir: string;
beforeAll(async () => {
  demoDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-where-demo-'));
  await writeDemoRun(demoDir);
});
afterAll(() => fs.rmSync(demoDir, { recursive: true, force: true }));

const runPath = (run: string) => (run === 'demo' ? demoDir : path.join(FIXTURES, run));

async function check(
  paths: string[],
  extra: Partial<Parameters<typeof runCheck>[1]> = {},
): Promise<{ report: CheckReport; status: number; text: string }> {
  const parts: string[] = [];
  const status = await runCheck(paths, { json: true, workers: 0, ...extra }, { write: (t: string) => parts.push(t) });
  const text = parts.join('');
  return { report: CheckReport.parse(JSON.parse(text)), status, text };
}

async function checkWhere(paths: string[], where: string, extra: Partial<Parameters<typeof runCheck>[1]> = {}) {
  return check(paths, { where: { expression: where, node: parseFilter(where) }, ...extra });
}

/** What a direct evaluation of `where` over the whole report selects. */
function selected(report: CheckReport, where: string): ReportEntry[] {
  const node = parseFilter(where);
  const byGroup = new Map(report.groups.map((g) => [JSON.stringify([g.id, g.step]), g]));
  return report.trajectories.filter((entry) =>
    matchesFilter(node, {
      entry,
      group: entry.group === null ? null : (byGroup.get(JSON.stringify([entry.group, entry.step])) ?? null),
    }),
  );
}

/** The summary counts of `entries` (own findings only: a group's findings count once per group kept). */
function expectedCounts(whole: CheckReport, entries: ReportEntry[]) {
  const groupFindings = (e: ReportEntry) =>
    whole.groups.find((g) => g.id === e.group && g.step === e.step)?.findings.length ?? 0;
  const own = (e: ReportEntry) => (e.findings as Finding[]).slice(0, e.findings.length - groupFindings(e));
  const kept = new Set(entries.filter((e) => e.group !== null).map((e) => JSON.stringify([e.group, e.step])));
  const byKind: Record<string, number> = {};
  for (const e of entries) for (const f of own(e)) byKind[f.kind] = (byKind[f.kind] ?? 0) + 1;
  for (const g of whole.groups)
    if (kept.has(JSON.stringify([g.id, g.step])) && g.findings.length > 0)
      byKind.group = (byKind.group ?? 0) + g.findings.length;
  return {
    trajectories: entries.length,
    withErrors: entries.filter((e) => own(e).some((f) => f.severity === 'error')).length,
    withWarningsOnly: entries.filter((e) => own(e).length > 0 && !own(e).some((f) => f.severity === 'error')).length,
    byKind,
  };
}

/** The values a run holds for each field, so random comparisons select something. */
function knownValues(report: CheckReport): Partial<Record<FilterField, (string | number)[]>> {
  const values = (f: (e: ReportEntry) => string | number | null) => [
    ...new Set(report.trajectories.map(f).filter((v): v is string | number => v !== null)),
  ];
  return {
    reward: values((e) => e.reward),
    step: values((e) => e.step),
    group: values((e) => e.group),
    sample: values((e) => e.sample),
    turns: values((e) => e.turns),
    response_tokens: values((e) => e.response_tokens),
    images: values((e) => e.images),
    model: values((e) => e.model),
    status: values((e) => e.status),
    id: values((e) => e.id),
    file: values((e) => e.source.file),
    'group.reward_std': [...new Set(report.groups.flatMap((g) => (g.reward_std === null ? [] : [g.reward_std])))],
    'group.reward_mean': [...new Set(report.groups.flatMap((g) => (g.reward_mean === null ? [] : [g.reward_mean])))],
    'group.size': [...new Set(report.groups.map((g) => g.size))],
  };
}

const HAND_WRITTEN = [
  'reward >= 1 and not severity:error',
  'kind:prefix_break or kind:group',
  'group.degenerate or group.size >= 3',
  'not (group.reward_std > 0) and reward != null',
  'severity:warning and not severity:error',
  'sample = 0',
  'step >= 0 and step <= 2',
  'cause:duplicated_eos or cause:missing_eos or response_tokens > 30',
];

describe.each([...RUNS, 'demo'])('%s', (run) => {
  let whole: CheckReport;
  beforeAll(async () => {
    whole = (await check([runPath(run)])).report;
  });

  const agrees = async (where: string) => {
    const { report, status } = await checkWhere([runPath(run)], where);
    const expected = selected(whole, where);
    expect(report.trajectories).toEqual(expected);
    expect(report.filter).toEqual({
      where,
      matched: expected.length,
      filtered_out: whole.trajectories.length - expected.length,
    });
    const counts = expectedCounts(whole, expected);
    expect(report.summary.trajectories).toBe(counts.trajectories);
    expect(report.summary.withErrors).toBe(counts.withErrors);
    expect(report.summary.withWarningsOnly).toBe(counts.withWarningsOnly);
    expect(Object.fromEntries(Object.entries(report.summary.findingsByKind).filter(([, n]) => n > 0))).toEqual(
      counts.byKind,
    );
    expect(report.summary.unreadableRecords).toBe(whole.summary.unreadableRecords);
    // The run's groups, models and read errors are the whole run's.
    expect(report.groups).toEqual(whole.groups);
    expect(report.errors).toEqual(whole.errors);
    const fatal = report.errors.some((e) => e.line === 0);
    expect(status).toBe(fatal ? 2 : report.summary.withErrors > 0 || report.summary.unreadableRecords > 0 ? 1 : 0);
    return expected.length;
  };

  it('hand-written expressions', async () => {
    let matchedSome = 0;
    for (const where of HAND_WRITTEN) if ((await agrees(where)) > 0) matchedSome++;
    expect(matchedSome).toBeGreaterThan(0);
  }, 120_000);

  it('random expressions', async () => {
    await fc.assert(
      fc.asyncProperty(filterAst(knownValues(whole)), async (ast) => {
        await agrees(printFilter(ast));
      }),
      { numRuns: run === 'demo' ? 100 : 30 },
    );
  }, 300_000);
});

describe('printed for a person', () => {
  it.each([
    ['demo', 'reward >= 1 and kind:prefix_break'],
    ['groups', 'group.size >= 3 and not kind:group'],
    ['groups', 'kind:group'],
    ['values', 'severity:error or reward < 1'],
  ])(
    '%s --where %s: the summary line counts what --json lists',
    async (run, where) => {
      const json = await checkWhere([runPath(run)], where);
      const parts: string[] = [];
      const node = parseFilter(where);
      const status = await runCheck(
        [runPath(run)],
        { json: false, all: true, workers: 0, where: { expression: where, node } },
        { write: (t: string) => parts.push(t) },
      );
      const text = parts.join('').replace(/\x1b\[[0-9;]*m/g, '');
      const s = json.report.summary;
      expect(text).toContain(
        `${s.trajectories} trajectories: ${s.clean} clean, ${s.withErrors} with errors, ${s.withWarningsOnly} with warnings only`,
      );
      // --all lists exactly the kept trajectories, by id.
      const listed = [...text.matchAll(/^[✓✗!?] (\S+) {2}/gmu)].map((m) => m[1]);
      expect(listed).toEqual(json.report.trajectories.map((t) => t.id));
      expect(status).toBe(json.status);
    },
    120_000,
  );
});

describe('--shard with --where', () => {
  // A shard's entries carry stated ids and no group findings until merge completes them: a filter
  // over a shard would read what the run does not say.
  it('is refused: the filter reads the whole run', async () => {
    await expect(checkWhere([runPath('groups')], 'reward >= 1', { shard: { index: 0, count: 2 } })).rejects.toThrow(
      /whole run/,
    );
  });
});
