// The served run as steps and groups (/api/run/steps, /api/run/groups, group findings on each
// member), and a run that is still being written: appended lines, a new step folder and a
// half-written last line.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GroupList, RunSteps, TrajectoryDetail, TrajectoryList } from '../server/http/api.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { openRunStore, RunFolders, type RunStore } from '../server/http/store.ts';
import { expandPaths } from '../server/import/index.ts';
import { sharedTrajectory } from '../server/http/share-page.ts';
import { SLIME_GROUPS } from './fixtures/generate-groups.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'groups');
const SLIME_LINES = fs
  .readFileSync(path.join(FIXTURES, 'slime', 'samples.jsonl'), 'utf8')
  .trim()
  .split('\n');
const VERL_LINES = fs
  .readFileSync(path.join(FIXTURES, 'verl', 'step_3', 'agent_loop.jsonl'), 'utf8')
  .trim()
  .split('\n');

let dir: string;
let store: RunStore;
let server: RunningServer;
const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-app-'));

async function get<T>(p: string, schema: { parse(v: unknown): T }): Promise<T> {
  const res = await fetch(server.url + p.replace(/^\//, ''));
  expect(res.status, p).toBe(200);
  return schema.parse(await res.json());
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-groups-'));
  fs.mkdirSync(path.join(dir, 'slime'));
  // Step 0 only, to start with.
  fs.writeFileSync(path.join(dir, 'slime', 'samples.jsonl'), `${SLIME_LINES.slice(0, 8).join('\n')}\n`);
  store = openRunStore([dir], { pollMs: 0 });
  await store.ready;
  server = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
}, 60_000);

afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(appDir, { recursive: true, force: true });
});

describe('steps and groups in the served run', () => {
  it('lists the groups with their members, the equal-reward group marked degenerate', async () => {
    const groups = await get('/api/run/groups', GroupList);
    expect(groups.items.map((g) => [g.id, g.step, g.size, g.degenerate])).toEqual([
      ['0', 0, 4, false],
      ['1', 0, 4, true],
    ]);
    expect(groups.items[1]!.members.map((m) => m.reward)).toEqual([1, 1, 1, 1]);
    expect(groups.ungrouped).toBe(0);
    const degenerate = await get('/api/run/groups?degenerate=true&members=false', GroupList);
    expect(degenerate.items.map((g) => [g.id, g.size, g.members])).toEqual([['1', 4, []]]);
  });

  it('gives every member of a degenerate group the group finding, and no one else', async () => {
    const list = await get('/api/trajectories?sort=id&order=asc', TrajectoryList);
    const flagged = list.items.filter((s) => s.findings.kind.group).map((s) => s.group);
    expect(flagged).toEqual(['1', '1', '1', '1']);
    expect(list.items.filter((s) => s.group === '1').every((s) => s.health === 'warning')).toBe(true);
    const member = list.items.find((s) => s.group === '1')!;
    const detail = await get(`/api/trajectories/${encodeURIComponent(member.id)}`, TrajectoryDetail);
    expect(detail.findings.filter((f) => f.kind === 'group').map((f) => f.field)).toEqual(['reward']);
    // The page `share` writes shows the detail the server shows.
    const shared = await sharedTrajectory(store, member.id);
    expect(shared.detail.findings).toEqual(detail.findings);
  });

  it('summarizes each step: counts, findings, reward histogram over the run-wide range', async () => {
    const { steps, rewardRange } = await get('/api/run/steps', RunSteps);
    expect(steps.map((s) => [s.step, s.trajectories, s.groups, s.degenerateGroups])).toEqual([[0, 8, 2, 1]]);
    expect(rewardRange).toEqual({ min: 0, max: 1, bins: 12 });
    expect(steps[0]!.reward.counts.reduce((a, b) => a + b, 0)).toBe(8);
    expect(steps[0]!.reward.mean).toBeCloseTo(0.75, 12);
    expect(steps[0]!.findings.group).toBe(4);
    expect(steps[0]!.length.n).toBe(8);
    // The trends the run page plots, from the same eight rewards (six of 1, two of 0).
    const t = steps[0]!.trends;
    expect(t.reward.mean).toBeCloseTo(0.75, 12);
    expect(t.reward.std).toBeCloseTo(Math.sqrt(0.75 * 0.25), 12);
    expect([t.reward.p10, t.reward.p90]).toEqual([0, 1]);
    expect(t.degenerateShare).toBe(0.5);
    expect(t.prefixBreakShare).toBe(0);
    expect(t.meanAbsDelta).toBeNull();
  });

  it('sorts the list by group: groups in read order, each group together', async () => {
    const list = await get('/api/trajectories?sort=group', TrajectoryList);
    expect(list.items.map((s) => s.group)).toEqual(['0', '0', '0', '0', '1', '1', '1', '1']);
    // By findings the warned group comes first; by group, read order holds whatever the health.
    const byHealth = await get('/api/trajectories?sort=findings&order=desc', TrajectoryList);
    expect(byHealth.items.map((s) => s.group)).toEqual(['1', '1', '1', '1', '0', '0', '0', '0']);
  });

  it('filters the list to one step', async () => {
    const list = await get('/api/trajectories?step=0', TrajectoryList);
    expect(list.total).toBe(8);
    expect((await get('/api/trajectories?step=1', TrajectoryList)).total).toBe(0);
  });
});

describe('a run still being written', () => {
  it('reads appended lines, waits for a half-written last line, and picks up a new step folder', async () => {
    const before = (await get('/api/trajectories?sort=id&order=asc', TrajectoryList)).items.map((s) => s.id);
    const file = path.join(dir, 'slime', 'samples.jsonl');
    const half = SLIME_LINES[9]!.slice(0, 300);
    fs.appendFileSync(file, `${SLIME_LINES[8]}\n${half}`);
    fs.mkdirSync(path.join(dir, 'verl', 'step_3'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'verl', 'step_3', 'agent_loop.jsonl'), `${VERL_LINES.join('\n')}\n`);
    await store.refresh();
    let info = store.info();
    expect(info.errors).toEqual([]);
    expect(info.trajectories).toBe(8 + 1 + VERL_LINES.length);
    fs.appendFileSync(file, `${SLIME_LINES[9]!.slice(300)}\n${SLIME_LINES.slice(10).join('\n')}\n`);
    await store.refresh();
    info = store.info();
    expect(info.errors).toEqual([]);
    expect(info.trajectories).toBe(SLIME_LINES.length + VERL_LINES.length);
    // Trajectories already shown keep their ids.
    const after = (await get('/api/trajectories?sort=id&order=asc', TrajectoryList)).items.map((s) => s.id);
    expect(after).toEqual(expect.arrayContaining(before));
    const { steps } = await get('/api/run/steps', RunSteps);
    expect(steps.map((s) => [s.step, s.trajectories])).toEqual([
      [0, 8],
      [1, 11],
      [3, 4],
    ]);
    // Groups come in the order their first sample was read: verl's step 3 before step 1's later groups.
    const groups = await get('/api/run/groups', GroupList);
    const verdict = (g: { step: number | null; id: string; degenerate: boolean }) =>
      `${g.step}/${g.id}:${g.degenerate}`;
    expect(groups.items.map(verdict)).toEqual(
      [
        ...SLIME_GROUPS.slice(0, 3),
        { step: 3, group: 'a', degenerate: true },
        { step: 3, group: 'b', degenerate: false },
        ...SLIME_GROUPS.slice(3),
      ].map((g) => verdict({ ...g, id: g.group })),
    );
  });
});

describe('RunFolders', () => {
  it('lists what expandPaths lists, and sees a new file in a folder listed before', () => {
    const folders = new RunFolders([dir]);
    expect(folders.expand()).toEqual(expandPaths([dir]));
    fs.mkdirSync(path.join(dir, 'verl', 'step_4'));
    fs.writeFileSync(path.join(dir, 'verl', 'step_4', 'rank_1.jsonl'), `${VERL_LINES[0]}\n`);
    expect(folders.expand()).toEqual(expandPaths([dir]));
    expect(folders.expand().files).toContain(path.join(dir, 'verl', 'step_4', 'rank_1.jsonl'));
  });

  it('stats every new file, and only a bounded slice of quiet ones per poll', () => {
    const folders = new RunFolders([]);
    const files = Array.from({ length: 1000 }, (_, i) => `f${i}`);
    expect(folders.due(files, 0)).toHaveLength(1000); // never seen
    for (const f of files) folders.saw(f, 0);
    expect(folders.due(files, 1000)).toHaveLength(1000); // all modified within the last minute
    const later = 10 * 60_000;
    folders.saw('f7', later);
    const due = folders.due(files, later + 1);
    expect(due).toContain('f7');
    expect(due.length).toBeLessThan(300);
    // Round robin: every quiet file gets its turn within a few polls.
    const seen = new Set(due);
    for (let i = 0; i < 4; i++) for (const f of folders.due(files, later + 2 + i)) seen.add(f);
    expect(seen.size).toBe(1000);
  });
});
