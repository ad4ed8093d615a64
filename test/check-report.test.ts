// The report layer (server/report/): the report `check --json` streams out is the one
// `buildCheckReport` builds in memory from the same events, entry for entry and byte for byte, and
// each entry states the trajectory's facts as the trajectory holds them.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { checkPaths, type CheckedTrajectory, type RunEvent } from '../server/pipeline.ts';
import { responseTokens } from '../server/analysis/report-facts.ts';
import { buildCheckReport, groupOf, groupsByKey } from '../server/report/build.ts';
import { CheckReport, checkExitStatus } from '../server/report/check-report.ts';
import { mergeCheckReports } from '../server/report/merge.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
/** A run of each shape: GRPO groups with steps, multi-call chat logs, trainer dumps, read errors. */
const RUNS = ['groups', 'vllm', 'sglang', 'slime', 'verl', 'agent-lightning', 'prime-rl', 'values'];
type ReportEvent = Parameters<typeof buildCheckReport>[0] extends Iterable<infer E> ? E : never;
const reportEvents = (evs: RunEvent[]) => evs.filter((e): e is ReportEvent => e.type !== 'file');

async function checkJson(paths: string[]): Promise<{ text: string; status: number }> {
  const parts: string[] = [];
  const status = await runCheck(paths, { json: true, workers: 0 }, { write: (t: string) => parts.push(t) });
  return { text: parts.join(''), status };
}

async function events(paths: string[]): Promise<RunEvent[]> {
  const out: RunEvent[] = [];
  for await (const ev of checkPaths(paths, { workers: 0 })) out.push(ev);
  return out;
}

describe('the report of a run', () => {
  it.each(RUNS)('check --json streams out the report buildCheckReport builds: %s', async (name) => {
    const run = path.join(FIXTURES, name);
    expect(fs.existsSync(run)).toBe(true);
    const { text, status } = await checkJson([run]);
    const built = buildCheckReport(reportEvents(await events([run])));
    expect(text).toBe(`${JSON.stringify(built)}\n`);
    expect(status).toBe(checkExitStatus(built));
    // The written report is a valid one, and reads back as it was written.
    expect(JSON.stringify(CheckReport.parse(JSON.parse(text)))).toBe(text.trim());
  });

  it('states each trajectory as it holds itself: turns, images, reward, status, response tokens, group and sample', async () => {
    const run = path.join(FIXTURES, 'groups');
    const evs = await events([run]);
    const checked: CheckedTrajectory[] = evs.flatMap((e) => (e.type === 'trajectory' ? [e.checked] : []));
    const report = buildCheckReport(reportEvents(evs));
    expect(report.trajectories.length).toBe(checked.length);
    const seen = new Map<string, number>();
    report.trajectories.forEach((entry, i) => {
      const t = checked[i]!.trajectory;
      expect(entry.id).toBe(t.id);
      expect(entry.turns).toBe(t.turns.length);
      expect(entry.images).toBe(t.images.length);
      expect(entry.reward).toBe(t.reward ?? null);
      expect(entry.status).toBe(t.status ?? null);
      expect(entry.response_tokens).toBe(responseTokens(t));
      expect(entry.group).toBe(t.group ?? null);
      if (t.group === undefined) expect(entry.sample).toBeNull();
      else {
        const key = `${t.step}/${t.group}`;
        expect(entry.sample).toBe(seen.get(key) ?? 0);
        seen.set(key, (seen.get(key) ?? 0) + 1);
      }
    });
    // Members of one group share their prompt hash; the run has groups of several samples.
    const byKey = groupsByKey(report.groups);
    const hashes = new Map<string, Set<string | null>>();
    for (const e of report.trajectories) {
      const g = groupOf(e, byKey);
      if (!g) continue;
      const set = hashes.get(`${g.step}/${g.id}`) ?? new Set();
      set.add(e.prompt_hash);
      hashes.set(`${g.step}/${g.id}`, set);
    }
    expect([...hashes.values()].some((s) => s.size === 1)).toBe(true);
    expect(report.trajectories.some((e) => (e.sample ?? 0) > 0)).toBe(true);
  });

  it("merge numbers a group's samples in run order, whichever shard read them", () => {
    const entry = (id: string, sample: number) => ({
      id,
      source: { file: 'a.jsonl', line: 1 },
      format: 'native',
      model: null,
      profile: 'qwen2.5-vl',
      findings: [],
      limitations: [],
      group: 'g',
      step: 0,
      sample,
      reward: 1,
      turns: 1,
      images: 0,
      response_tokens: 3,
      status: null,
      prompt_hash: 'h',
    });
    const shard = (index: number, ids: string[], positions: number[]) => ({
      version: 1,
      trajectories: ids.map((id) => entry(id, 0)),
      groups: [],
      models: [],
      errors: [],
      summary: {
        trajectories: ids.length,
        clean: ids.length,
        withErrors: 0,
        withWarningsOnly: 0,
        notCheckable: 0,
        unreadableRecords: 0,
        findingsByKind: {},
      },
      shard: { index, count: 2, run: 'r', positions: { trajectories: positions, errors: [] } },
    });
    const merged = mergeCheckReports([
      { name: 's0', doc: shard(0, ['a', 'c'], [0, 2]) },
      { name: 's1', doc: shard(1, ['b'], [1]) },
    ]);
    expect(merged.trajectories.map((t) => [t.id, t.sample])).toEqual([
      ['a', 0],
      ['b', 1],
      ['c', 2],
    ]);
  });
});
