// `where` in the list API (server/http/store.ts) selects what `check --where` selects: the
// overview, the browser's export and `share --where` read a run through the store, `check` through
// its report, and both evaluate the filter over the same fields (docs/filter.md). A bad expression
// is a 400 that carries the offending character.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { writeDemoRun } from '../server/demo/write.ts';
import { ApiError, ListQuery, TrajectoryList } from '../server/http/api.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { parseFilter, printFilter } from '../server/report/filter.ts';
import { filterAst } from './support/filter-arbitrary.ts';

let tmp: string;
let demoDir: string;
beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-http-where-'));
  demoDir = path.join(tmp, 'demo');
  await writeDemoRun(demoDir);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

async function checkIds(paths: string[], where: string): Promise<string[]> {
  const parts: string[] = [];
  await runCheck(
    paths,
    { json: true, workers: 0, where: { expression: where, node: parseFilter(where) } },
    { write: (t: string) => parts.push(t) },
  );
  return CheckReport.parse(JSON.parse(parts.join(''))).trajectories.map((t) => t.id);
}

const listIds = (store: RunStore, where: string) =>
  store.list(ListQuery.parse({ where, sort: 'file', order: 'asc', limit: 100_000 })).items.map((s) => s.id);

describe.each(['demo', 'groups', 'values', 'agent-lightning'])('%s', (run) => {
  let store: RunStore;
  const paths = () => [run === 'demo' ? demoDir : path.resolve('test/fixtures', run)];
  beforeAll(async () => {
    store = openRunStore(paths(), { pollMs: 0 });
    await store.ready;
  });
  afterAll(() => store.close());

  it('the store selects what check --where lists, for random expressions', async () => {
    await fc.assert(
      fc.asyncProperty(filterAst(), async (ast) => {
        const where = printFilter(ast);
        expect(new Set(listIds(store, where))).toEqual(new Set(await checkIds(paths(), where)));
      }),
      { numRuns: 25 },
    );
  }, 300_000);

  it.each([
    'group.size >= 2 and sample = 0',
    'kind:group or group.degenerate',
    'response_tokens > 20 and turns >= 1 and images >= 0',
    'reward >= 1 and not severity:error',
  ])('%s', async (where) => {
    expect(new Set(listIds(store, where))).toEqual(new Set(await checkIds(paths(), where)));
  });
});

describe('the list API', () => {
  let server: RunningServer;
  beforeAll(async () => {
    const store = openRunStore([demoDir], { pollMs: 0 });
    await store.ready;
    server = await startServer({ store, port: 0, host: '127.0.0.1', appDir: tmp });
  });
  afterAll(async () => server?.close());

  it('combines where with the other filters', async () => {
    const get = async (q: string) =>
      TrajectoryList.parse(await (await fetch(`${server.url}api/trajectories?${q}`)).json()).items.map((s) => s.id);
    const where = encodeURIComponent('reward >= 1 and not cause:duplicated_eos');
    const both = await get(`where=${where}&kind=prefix_break`);
    const kind = new Set(await get('kind=prefix_break'));
    const rewarded = new Set(await get(`where=${where}`));
    expect(both.length).toBeGreaterThan(0);
    expect(both.every((id) => kind.has(id) && rewarded.has(id))).toBe(true);
    expect(both.length).toBeLessThan(kind.size);
  });

  it('answers a bad expression with 400, its message and offset', async () => {
    const where = 'reward >= 1 and rewrd < 2';
    const res = await fetch(`${server.url}api/trajectories?where=${encodeURIComponent(where)}`);
    expect(res.status).toBe(400);
    const body = ApiError.parse(await res.json());
    expect(body.error).toContain('unknown field "rewrd"');
    expect(body.offset).toBe(where.indexOf('rewrd'));
  });
});
