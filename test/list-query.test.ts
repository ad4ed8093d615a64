// The overview's list query is one schema (server/http/list-fields.ts, api.ts ListFilter): the
// list, its facets, the ratio histogram and the export of "the current filter" all take every
// field of it. Issue 33 #16: an overview narrowed to one step exported every step, because the
// export's filter was written out by hand without `step` and `group`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExportJob, ExportRequest, ListFilter, ListQuery, TrajectoryList } from '../server/http/api.ts';
import { LIST_FILTER_FIELDS } from '../server/http/list-fields.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { Manifest } from '../server/export/manifest.ts';
import { writeFixtureRun } from './e2e/fixture.ts';
import { waitFor } from './support/wait.ts';

const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-app-'));
fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');
const SLIME = path.resolve('test/fixtures/groups/slime/samples.jsonl');

interface Served {
  server: RunningServer;
  store: RunStore;
}

async function serve(paths: string[]): Promise<Served> {
  const store = openRunStore(paths, { pollMs: 0 });
  await store.ready;
  return { server: await startServer({ store, port: 0, host: '127.0.0.1', appDir }), store };
}

async function get(s: Served, p: string): Promise<unknown> {
  const res = await fetch(s.server.url + p.replace(/^\//, ''));
  expect(res.status, p).toBe(200);
  return res.json();
}

async function exportFilter(s: Served, filter: Record<string, unknown>, includeWarnings = false): Promise<ExportJob> {
  const res = await fetch(`${s.server.url}api/exports`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Origin: s.server.url.replace(/\/$/, '') },
    body: JSON.stringify({ format: 'jsonl', includeWarnings, selection: { kind: 'filter', filter } }),
  });
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(202);
  const started = ExportJob.parse(body);
  const job = await waitFor(`export ${started.id} to finish`, async () => {
    const now = started.state === 'running' ? ExportJob.parse(await get(s, `/api/exports/${started.id}`)) : started;
    return now.state !== 'running' && now;
  });
  expect(job.state, job.error ?? '').toBe('done');
  return job;
}

async function manifestOf(s: Served, job: ExportJob): Promise<Manifest> {
  const f = job.files.find((x) => x.role === 'manifest')!;
  return Manifest.parse(await (await fetch(s.server.url + f.url.replace(/^\//, ''))).json());
}

let slime: Served;
let fixture: Served;
beforeAll(async () => {
  slime = await serve([SLIME]);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-list-query-'));
  await writeFixtureRun(dir);
  fixture = await serve([dir]);
});
afterAll(async () => {
  await slime?.server.close();
  await fixture?.server.close();
});

/** A value of each filter field that selects some trajectories of the slime groups fixture. */
const SAMPLE_VALUES: Record<(typeof LIST_FILTER_FIELDS)[number], string> = {
  kind: 'group',
  cause: 'duplicated_eos',
  severity: 'warning',
  status: 'completed',
  q: 'samples',
  ratioBin: '16',
  step: '1',
  group: '1',
  where: 'reward >= 1',
  export: 'exported',
};

describe('the list query', () => {
  it('is one schema: the export request takes every field the list takes, and nothing else', () => {
    expect(Object.keys(ListFilter.shape).sort()).toEqual([...LIST_FILTER_FIELDS].sort());
    for (const field of LIST_FILTER_FIELDS) {
      const filter = { [field]: SAMPLE_VALUES[field] };
      expect(ListQuery.safeParse(filter).success, field).toBe(true);
      const request = ExportRequest.safeParse({ format: 'jsonl', selection: { kind: 'filter', filter } });
      expect(request.success, `${field}: ${request.error?.message}`).toBe(true);
    }
    expect(
      ExportRequest.safeParse({ format: 'jsonl', selection: { kind: 'filter', filter: { sort: 'reward' } } }).success,
    ).toBe(false);
  });

  it('answers each field (the cache tells queries apart by every one of them)', async () => {
    const all = TrajectoryList.parse(await get(slime, '/api/trajectories?limit=1000'));
    for (const field of LIST_FILTER_FIELDS) {
      const one = TrajectoryList.parse(
        await get(slime, `/api/trajectories?${field}=${encodeURIComponent(SAMPLE_VALUES[field])}`),
      );
      const direct = slime.store.select(ListFilter.parse({ [field]: SAMPLE_VALUES[field] }));
      expect(one.items.map((s) => s.id).sort(), field).toEqual(direct.map((s) => s.id).sort());
      expect(one.total, field).toBeLessThanOrEqual(all.total);
    }
    const step1 = TrajectoryList.parse(await get(slime, '/api/trajectories?step=1'));
    expect(step1.total).toBeGreaterThan(0);
    expect(step1.total).toBeLessThan(all.total);
    expect(step1.items.every((s) => s.step === 1)).toBe(true);
  });

  it('exports exactly the step the overview shows (issue 33 #16)', async () => {
    const step1 = TrajectoryList.parse(await get(slime, '/api/trajectories?step=1&group=1'));
    expect(step1.total).toBeGreaterThan(0);
    const job = await exportFilter(slime, { step: 1, group: '1' });
    const manifest = await manifestOf(slime, job);
    expect(manifest.counts.read).toBe(step1.total);
    expect(manifest.settings.selection).toBe('filter step=1, group="1"');
  });

  it('counts what the filter selects: the facets follow the filter', async () => {
    const all = TrajectoryList.parse(await get(fixture, '/api/trajectories'));
    const errors = TrajectoryList.parse(await get(fixture, '/api/trajectories?status=error'));
    expect(errors.facets.health).toEqual({ ok: 0, warning: 0, error: errors.total });
    expect(all.facets.health.error).toBe(errors.total);
    for (const [kind, n] of Object.entries(errors.facets.counts.kind))
      expect(errors.items.filter((s) => (s.findings.kind[kind] ?? 0) > 0).length, kind).toBe(n);
  });

  it('promises what the export writes: the facets say how many rows and rejects, and why (issue 33 #6)', async () => {
    for (const includeWarnings of [false, true]) {
      const list = TrajectoryList.parse(await get(fixture, '/api/trajectories'));
      const promise = list.facets.export;
      const job = await exportFilter(fixture, {}, includeWarnings);
      const exported = promise.exported + (includeWarnings ? promise.onlyWarnings : 0);
      expect(job.counts).toMatchObject({ read: list.total, exported, rejected: list.total - exported });
      // The rejected by their first reason add up to the rejected, as the dialog lists them.
      const byFirst = Object.values(job.counts!.byFirstReason).reduce((a, b) => a + b, 0);
      expect(byFirst).toBe(job.counts!.rejected);
      if (!includeWarnings) expect(job.counts!.byFirstReason).toEqual(promise.byFirstReason);
      // What the CLI calls "repaired by re-alignment" is in the job, as the facets promised it.
      const repaired = Object.fromEntries(Object.entries(job.counts!.repaired).filter(([, n]) => n > 0));
      if (!includeWarnings) expect(repaired).toEqual(promise.repaired);
      expect(Object.values(repaired).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    }
  });
});
