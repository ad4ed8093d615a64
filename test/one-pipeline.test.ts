// `check`, `export` and `serve` share one pipeline: on the same files in every format (the native
// demo run, vLLM, slime, verl, AReaL, prime-rl, Agent Lightning, a file with broken records, and
// a second copy of a file so that ids repeat), `rollscope check --json` (the CLI, on worker
// threads), `rollscope export` (its manifest, rejects and rows, on the main thread) and the
// server (its trajectory list, trajectory details and browser export) name the same
// trajectories with the same ids and report the same findings and unreadable records.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckReport } from '../server/report/check-report.ts';
import { RejectEntry } from '../server/export/manifest.ts';
import { ExportRow } from '../server/export/row.ts';
import { ExportJob, RunInfo, TrajectoryDetail, TrajectoryList } from '../server/http/api.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { publicFinding } from '../server/model/public-finding.ts';
import { DEMO_FILE, DEMO_VLLM_FILE, writeDemoRun } from '../server/demo/write.ts';
import { checkPaths } from '../server/pipeline.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { waitFor } from './support/wait.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURES = path.join(ROOT, 'test', 'fixtures');

let dir: string;
let paths: string[];
let check: CheckReport;
let store: RunStore;
let server: RunningServer;

const jsonl = (file: string) =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as unknown);
/** A record's place, the same whichever way the path was spelled. */
const where = (file: string, line: number) => `${path.basename(file)}:${line}`;

async function api(
  p: string,
  body?: unknown,
  at: RunningServer = server,
): Promise<{ status: number; body: unknown; bytes: Buffer }> {
  const init: RequestInit =
    body === undefined
      ? {}
      : {
          method: 'POST',
          body: JSON.stringify(body),
          headers: { 'Content-Type': 'application/json', Origin: at.url.replace(/\/$/, '') },
        };
  const res = await fetch(at.url + p.replace(/^\//, ''), init);
  const bytes = Buffer.from(await res.arrayBuffer());
  const json = res.headers.get('content-type')?.includes('json') && !res.headers.get('content-disposition');
  return { status: res.status, body: json ? JSON.parse(bytes.toString('utf8')) : undefined, bytes };
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-one-pipeline-'));
  await writeDemoRun(path.join(dir, 'demo'));
  // The same samples (and the images they name) a second time: every id repeats.
  fs.cpSync(path.join(FIXTURES, 'slime'), path.join(dir, 'slime-copy'), { recursive: true });
  paths = [
    path.join(dir, 'demo'),
    path.join(FIXTURES, 'vllm', 'chat-by-id.jsonl'),
    path.join(FIXTURES, 'vllm', 'malformed.jsonl'),
    path.join(FIXTURES, 'slime', 'samples.jsonl'),
    path.join(dir, 'slime-copy', 'samples.jsonl'),
    path.join(FIXTURES, 'verl', 'agent_loop.jsonl'),
    path.join(FIXTURES, 'areal', 'trajectories.json'),
    path.join(FIXTURES, 'prime-rl', 'training-samples', 'rank_0.bin'),
    path.join(FIXTURES, 'agent-lightning', 'completed-rollouts.jsonl'),
  ];

  const cli = spawnSync(process.execPath, ['bin/rollscope.js', 'check', ...paths, '--json', '--workers', '2'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  expect(cli.status, cli.stderr).toBe(1); // error findings and unreadable records, nothing fatal
  check = CheckReport.parse(JSON.parse(cli.stdout));

  const appDir = path.join(dir, 'app');
  fs.mkdirSync(appDir);
  fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');
  store = openRunStore(paths, { pollMs: 0 });
  await store.ready;
  server = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
}, 240_000);

afterAll(async () => {
  await server?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Export from the browser, wait for it, and read its batch and rejects back. */
async function browserExport(
  at: RunningServer,
  selection: unknown,
): Promise<{ rows: ExportRow[]; rejects: RejectEntry[] }> {
  const start = await api('/api/exports', { format: 'jsonl', selection }, at);
  expect(start.status, JSON.stringify(start.body)).toBe(202);
  const started = ExportJob.parse(start.body);
  const job = await waitFor('the export', async () => {
    const j = ExportJob.parse((await api(`/api/exports/${started.id}`, undefined, at)).body);
    return j.state !== 'running' && j;
  });
  expect(job.state, job.error ?? '').toBe('done');
  const file = async (role: 'batch' | 'rejects') =>
    (await api(job.files.find((f) => f.role === role)!.url, undefined, at)).bytes
      .toString('utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as unknown);
  return {
    rows: (await file('batch')).map((r) => ExportRow.parse(r)),
    rejects: (await file('rejects')).map((r) => RejectEntry.parse(r)),
  };
}

/**
 * check --json's findings per id, in the contract's form: each member lists its group's findings
 * after its own, as serve does; an export reject lists the trajectory's own (the group's concern the batch).
 */
const groupFindings = (t: CheckReport['trajectories'][number]) =>
  check.groups.find((g) => g.id === t.group && g.step === t.step)?.findings ?? [];
const ownFindings = (t: CheckReport['trajectories'][number]) =>
  t.findings.slice(0, t.findings.length - groupFindings(t).length);
const checkFindings = () => new Map(check.trajectories.map((t) => [t.id, ownFindings(t)]));
const servedFindings = () => new Map(check.trajectories.map((t) => [t.id, t.findings]));

describe('check, export and serve read the same run the same way', () => {
  it('the run covers every format, and repeated ids get the one duplicate scheme (ID#2)', () => {
    expect(new Set(check.trajectories.map((t) => t.format))).toEqual(
      new Set(['native', 'vllm', 'slime', 'verl', 'areal', 'prime-rl', 'agent-lightning']),
    );
    const ids = check.trajectories.map((t) => t.id);
    expect(new Set(ids).size).toBe(ids.length);
    const copies = check.trajectories.filter((t) => t.source.file.includes('slime-copy'));
    const originals = check.trajectories.filter((t) => t.source.file === paths[3]);
    expect(copies.length).toBeGreaterThan(0);
    expect(copies.map((t) => t.id)).toEqual(originals.map((t) => `${t.id}#2`));
    expect(check.summary.unreadableRecords).toBeGreaterThan(0);
  });

  it('serve lists the same trajectories under the same ids, from the same lines, with the same finding counts', async () => {
    const r = await api('/api/trajectories?sort=file&order=asc&limit=100000');
    expect(r.status).toBe(200);
    const list = TrajectoryList.parse(r.body);
    const served = new Map(list.items.map((s) => [s.id, s]));
    expect([...served.keys()].sort()).toEqual(check.trajectories.map((t) => t.id).sort());
    for (const t of check.trajectories) {
      const s = served.get(t.id)!;
      expect(where(s.source.file, s.source.line), t.id).toBe(where(t.source.file, t.source.line));
      expect(s.format).toBe(t.format);
      const kinds: Record<string, number> = {};
      for (const f of t.findings as { kind: string }[]) kinds[f.kind] = (kinds[f.kind] ?? 0) + 1;
      expect(t.findings.slice(ownFindings(t).length), t.id).toEqual(groupFindings(t));
      expect(s.findings.kind, t.id).toEqual(kinds);
    }
  });

  it('serve reports the same findings, field for field, for a trajectory of each format and a repeated id', async () => {
    const picked = new Map<string, string>();
    for (const t of check.trajectories) if (!picked.has(t.format)) picked.set(t.format, t.id);
    const repeated = check.trajectories.find((t) => t.id.endsWith('#2'))!;
    const byId = servedFindings();
    for (const id of [...picked.values(), repeated.id]) {
      const r = await api(`/api/trajectories/${encodeURIComponent(id)}`);
      expect(r.status, id).toBe(200);
      const detail = TrajectoryDetail.parse(r.body);
      expect(detail.summary.id).toBe(id);
      expect(detail.findings.map(publicFinding), id).toEqual(byId.get(id));
    }
  });

  it('serve on worker threads lists the same trajectories, ids and finding counts as on the main thread', async () => {
    const pooled = openRunStore(paths, { pollMs: 0, workers: 2, poolFromBytes: 0 });
    try {
      await pooled.ready;
      const all = (s: RunStore) =>
        s
          .list({ sort: 'file', order: 'asc', offset: 0, limit: 100_000 })
          .items.map((x) => ({ id: x.id, line: x.source.line, findings: x.findings, health: x.health }));
      expect(all(pooled)).toEqual(all(store));
      expect(pooled.info().errors).toEqual(store.info().errors);
    } finally {
      pooled.close();
    }
  });

  it('serve reports the same unreadable records', () => {
    const info = RunInfo.parse(store.info());
    const served = new Set(info.errors.filter((e) => e.line > 0).map((e) => where(e.file, e.line)));
    const checked = new Set(check.errors.filter((e) => e.line > 0).map((e) => where(e.file, e.line)));
    expect(checked.size).toBeGreaterThan(0);
    expect(served).toEqual(checked);
  });

  it('export accounts for every trajectory by the same id: rows and rejects, with the same findings and unreadable records', async () => {
    const out = path.join(dir, 'out', 'batch.jsonl');
    fs.mkdirSync(path.dirname(out));
    const result = await exportRun(paths, { out, workers: 0 });
    const rows = jsonl(out).map((r) => ExportRow.parse(r));
    const rejects = jsonl(result.rejectsFile).map((r) => RejectEntry.parse(r));
    const byId = checkFindings();

    const rejectedIds = rejects.flatMap((r) => (r.id === null ? [] : [r.id]));
    expect([...rows.map((r) => r.id), ...rejectedIds].sort()).toEqual([...byId.keys()].sort());
    for (const r of rejects) if (r.id !== null) expect(r.findings, r.id).toEqual(byId.get(r.id));
    for (const row of rows) {
      const t = check.trajectories.find((x) => x.id === row.id)!;
      expect(where(row.source.file, row.source.line)).toBe(where(t.source.file, t.source.line));
    }
    const unreadable = new Set(rejects.filter((r) => r.id === null).map((r) => where(r.source.file, r.source.line)));
    expect(unreadable).toEqual(new Set(check.errors.filter((e) => e.line > 0).map((e) => where(e.file, e.line))));

    const { counts } = result.manifest;
    expect(counts.read).toBe(check.trajectories.length + unreadable.size);
    expect(counts.exported).toBe(rows.length);
    expect(result.manifest.inputs.map((i) => i.trajectories).reduce((a, b) => a + b, 0)).toBe(
      check.trajectories.length,
    );
  });

  it("the browser's export names rows and rejects as the API and the CLI export do", async () => {
    const { rows, rejects } = await browserExport(server, { kind: 'filter', filter: {} });
    const byId = checkFindings();
    expect([...rows.map((r) => r.id), ...rejects.map((r) => r.id!)].sort()).toEqual([...byId.keys()].sort());
    for (const r of rejects) expect(r.findings, r.id!).toEqual(byId.get(r.id!));

    const cliRows = jsonl(path.join(dir, 'out', 'batch.jsonl')).map((r) => ExportRow.parse(r).id);
    expect(rows.map((r) => r.id).sort()).toEqual(cliRows.sort());

    // A selection read from the one file that holds it keeps the keys the whole run gave.
    const copies = check.trajectories.filter((t) => t.source.file.includes('slime-copy')).map((t) => t.id);
    const picked = await browserExport(server, { kind: 'ids', ids: copies });
    expect([...picked.rows.map((r) => r.id), ...picked.rejects.map((r) => r.id!)].sort()).toEqual([...copies].sort());
  });
});

describe('a growing run keeps its keys', () => {
  it('a record appended with an id the run has becomes ID#2 in the list, its detail and a browser export, as check names it', async () => {
    const grow = path.join(dir, 'grow');
    fs.cpSync(path.join(dir, 'demo'), grow, { recursive: true });
    fs.rmSync(path.join(grow, DEMO_VLLM_FILE));
    const file = path.join(grow, DEMO_FILE);
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    fs.writeFileSync(file, `${lines[0]}\n${lines[1]}\n`);
    const growing = openRunStore([grow], { pollMs: 0 });
    const appDir = path.join(dir, 'app');
    const at = await startServer({ store: growing, port: 0, host: '127.0.0.1', appDir });
    try {
      await growing.ready;
      const ids = () => growing.list({ sort: 'file', order: 'asc', offset: 0, limit: 100 }).items.map((s) => s.id);
      const [first, second] = ids();
      fs.appendFileSync(file, `${lines[0]}\n`);
      await growing.refresh();
      expect(ids()).toEqual([first, second, `${first}#2`]);

      const detail = TrajectoryDetail.parse(
        (await api(`/api/trajectories/${encodeURIComponent(`${first}#2`)}`, undefined, at)).body,
      );
      const original = TrajectoryDetail.parse(
        (await api(`/api/trajectories/${encodeURIComponent(first!)}`, undefined, at)).body,
      );
      expect(detail.summary.source.line).toBe(3);
      expect(detail.findings).toEqual(original.findings);

      const { rows, rejects } = await browserExport(at, { kind: 'ids', ids: [`${first}#2`] });
      expect([...rows.map((r) => r.id), ...rejects.map((r) => r.id)]).toEqual([`${first}#2`]);
      expect([...rows.map((r) => r.source.line), ...rejects.map((r) => r.source.line)]).toEqual([3]);

      const checked: string[] = [];
      for await (const ev of checkPaths([grow], { workers: 0 }))
        if (ev.type === 'trajectory') checked.push(ev.checked.trajectory.id);
      expect(checked).toEqual(ids());
    } finally {
      await at.close();
    }
  });
});
