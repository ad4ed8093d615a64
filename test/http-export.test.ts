// The browser's export and playground routes without a browser: the real server in-process on a
// real run (real tokenizer, template and PNG), every answer checked against its zod schema, the
// downloaded batch read back and compared with what the filter lists.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ExportJob,
  PlaygroundPrefill,
  PlaygroundResult,
  TrajectoryList,
  type ExportRequestInput,
  type PlaygroundRequestInput,
} from '../server/http/api.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { Manifest, RejectEntry } from '../server/export/manifest.ts';
import { readParquetRows } from '../server/export/parquet.ts';
import { imageTokensFor } from '../server/analysis/ask.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { IDS, writeFixtureRun } from './e2e/fixture.ts';
import { waitFor } from './support/wait.ts';

const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-app-'));
fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');

interface Served {
  server: RunningServer;
  store: RunStore;
  dir: string;
}

async function serve(dir: string): Promise<Served> {
  const store = openRunStore([dir], { pollMs: 0 });
  await store.ready;
  return { server: await startServer({ store, port: 0, host: '127.0.0.1', appDir }), store, dir };
}

let run: Served;

async function call(
  s: Served,
  p: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: unknown; headers: Headers; bytes: Buffer }> {
  const init: RequestInit =
    body === undefined
      ? { headers }
      : // The app's own origin, as the browser sends it on every POST.
        {
          method: 'POST',
          body: JSON.stringify(body),
          headers: { 'Content-Type': 'application/json', Origin: s.server.url.replace(/\/$/, ''), ...headers },
        };
  const res = await fetch(s.server.url + p.replace(/^\//, ''), init);
  const bytes = Buffer.from(await res.arrayBuffer());
  const isJson = res.headers.get('content-type')?.includes('json') && !res.headers.get('content-disposition');
  return {
    status: res.status,
    body: isJson ? JSON.parse(bytes.toString('utf8')) : undefined,
    headers: res.headers,
    bytes,
  };
}

async function startExport(s: Served, request: ExportRequestInput): Promise<ExportJob> {
  const r = await call(s, '/api/exports', request);
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return ExportJob.parse(r.body);
}

async function finished(s: Served, job: ExportJob): Promise<ExportJob> {
  if (job.state !== 'running') return job;
  return waitFor('the export', async () => {
    const j = ExportJob.parse((await call(s, `/api/exports/${job.id}`)).body);
    return j.state !== 'running' && j;
  });
}

async function download(s: Served, job: ExportJob, role: 'batch' | 'manifest' | 'rejects'): Promise<Buffer> {
  const f = job.files.find((x) => x.role === role)!;
  const r = await call(s, f.url);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-disposition')).toBe(`attachment; filename="${f.name}"`);
  expect(r.bytes.length).toBe(f.bytes);
  return r.bytes;
}

const listing = (dir: string) =>
  fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .map(
      (d) =>
        `${path.relative(dir, path.join(d.parentPath, d.name))}:${d.isFile() ? fs.statSync(path.join(d.parentPath, d.name)).size : 'dir'}`,
    )
    .sort();

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-http-export-'));
  await writeFixtureRun(dir);
  run = await serve(dir);
});

afterAll(async () => {
  await run?.server.close();
});

describe('export from the browser', () => {
  it('exports the current filter: the downloads are the batch, its manifest and its rejects, and the counts match the filter', async () => {
    const before = listing(run.dir);
    const shown = TrajectoryList.parse((await call(run, '/api/trajectories?status=ok')).body);
    expect(shown.total).toBeGreaterThan(0);
    const job = await finished(
      run,
      await startExport(run, { format: 'jsonl', selection: { kind: 'filter', filter: { status: 'ok' } } }),
    );
    expect(job.state, job.error ?? '').toBe('done');
    expect(job.files.map((f) => f.role)).toEqual(['batch', 'manifest', 'rejects']);

    const manifest = Manifest.parse(JSON.parse((await download(run, job, 'manifest')).toString('utf8')));
    expect(manifest.counts.read).toBe(shown.total);
    expect(manifest.counts.exported + manifest.counts.rejected).toBe(manifest.counts.read);
    expect(manifest.settings.selection).toBe('filter status="ok"');
    expect(job.counts).toMatchObject({
      read: manifest.counts.read,
      exported: manifest.counts.exported,
      rejected: manifest.counts.rejected,
    });
    expect(job.progress).toMatchObject({ read: shown.total, scanned: job.progress.toScan });

    const rows = (await download(run, job, 'batch'))
      .toString('utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; tokens: number[] });
    const rejects = (await download(run, job, 'rejects'))
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => RejectEntry.parse(JSON.parse(l)));
    expect(rows.length).toBe(manifest.counts.exported);
    expect(rejects.length).toBe(manifest.counts.rejected);
    // Exactly the trajectories the filter lists, each once, either as a row or as a reject.
    expect([...rows.map((r) => r.id), ...rejects.map((r) => r.id)].sort()).toEqual(shown.items.map((s) => s.id).sort());
    // Clean trajectories export as they are: the row's tokens are the canonical stream.
    const clean = await run.store.get(IDS.clean);
    expect(rows.find((r) => r.id === IDS.clean)?.tokens).toEqual(clean!.alignment.tokens);

    // Written under the system temp dir, never beside the inputs; the inputs are untouched.
    expect(listing(run.dir)).toEqual(before);
  });

  it('exports a selection by id to Parquet; an error trajectory becomes a reject and read = exported + rejected', async () => {
    const ids = [IDS.clean, IDS.wrongPads];
    const job = await finished(
      run,
      await startExport(run, { format: 'parquet', includeWarnings: true, selection: { kind: 'ids', ids } }),
    );
    expect(job.state, job.error ?? '').toBe('done');
    expect(job.files[0]!.name).toMatch(/\.parquet$/);
    const batch = await download(run, job, 'batch');
    expect(batch.subarray(0, 4).toString()).toBe('PAR1');
    const rows = await readParquetRows(batch);
    const rejects = (await download(run, job, 'rejects'))
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => RejectEntry.parse(JSON.parse(l)));
    expect(rows.map((r) => r.id)).toEqual([IDS.clean]);
    expect(rejects.map((r) => r.id)).toEqual([IDS.wrongPads]);
    expect(rejects[0]!.reasons).toContain('unfixable_finding');
    const manifest = Manifest.parse(JSON.parse((await download(run, job, 'manifest')).toString('utf8')));
    expect(manifest.counts).toMatchObject({ read: 2, exported: 1, rejected: 1 });
    expect(manifest.settings).toMatchObject({
      format: 'parquet',
      include_warnings: true,
      selection: `2 selected: ${ids.join(', ')}`,
    });
  });

  it('refuses bad requests with a status and a message naming the problem', async () => {
    const bad = async (body: unknown, status: number, message: RegExp) => {
      const r = await call(run, '/api/exports', body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect((r.body as { error: string }).error).toMatch(message);
    };
    await bad({ selection: { kind: 'filter', filter: {} } }, 400, /format/);
    await bad({ format: 'csv', selection: { kind: 'filter', filter: {} } }, 400, /format/);
    await bad(
      { format: 'jsonl', selection: { kind: 'filter', filter: { status: 'ok' }, out: '/etc/passwd' } },
      400,
      /out/,
    );
    await bad(
      { format: 'jsonl', selection: { kind: 'ids', ids: ['no-such-trajectory'] } },
      400,
      /no trajectory with id "no-such-trajectory"/,
    );
    await bad(
      { format: 'jsonl', selection: { kind: 'filter', filter: { q: 'matches nothing at all' } } },
      400,
      /selection is empty/,
    );
    expect((await call(run, '/api/exports')).status).toBe(405);
    expect((await call(run, '/api/exports/0123456789abcdef')).status).toBe(404);
    // State-changing requests pass the request gate first: another site's page, or a form post, is refused.
    expect(
      (
        await call(
          run,
          '/api/exports',
          { format: 'jsonl', selection: { kind: 'filter', filter: {} } },
          { Origin: 'http://evil.example' },
        )
      ).status,
    ).toBe(403);
    const form = await fetch(`${run.server.url}api/exports`, {
      method: 'POST',
      headers: { 'Content-Type': 'text/plain', Origin: run.server.url.replace(/\/$/, '') },
      body: '{}',
    });
    expect(form.status).toBe(415);
  });

  it('writes under the system temp dir in a hidden folder: a run served from a folder that holds it never reads the export back', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-http-export-tmp-'));
    await writeFixtureRun(dir);
    const served = await serve(dir);
    const savedTmp = process.env.TMPDIR;
    // os.tmpdir() reads TMPDIR: make the temp dir a folder inside the served one.
    process.env.TMPDIR = path.join(dir, 'tmp');
    fs.mkdirSync(process.env.TMPDIR);
    try {
      const before = served.store.info().trajectories;
      const job = await finished(
        served,
        await startExport(served, { format: 'jsonl', selection: { kind: 'filter', filter: {} } }),
      );
      expect(job.state, job.error ?? '').toBe('done');
      const exportDirs = fs.readdirSync(process.env.TMPDIR);
      expect(exportDirs).toHaveLength(1);
      expect(exportDirs[0]).toMatch(/^\.rollscope-export-/);
      expect(fs.readdirSync(path.join(process.env.TMPDIR, exportDirs[0]!)).sort()).toEqual(
        job.files.map((f) => f.name).sort(),
      );
      await served.store.refresh();
      expect(served.store.info().trajectories).toBe(before);
    } finally {
      if (savedTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmp;
      await served.server.close();
    }
  });

  it('one export at a time; cancelling stops it, leaves no files, and the next one runs', async () => {
    // A run large enough that the export is still running when the cancel arrives.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-http-export-big-'));
    const file = await writeFixtureRun(dir);
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    fs.writeFileSync(
      file,
      `${Array.from({ length: 10 }, (_, k) =>
        lines.map((l) => l.replace(/"id":"([^"]+)"/, `"id":"$1-${k}"`)).join('\n'),
      ).join('\n')}\n`,
    );
    const big = await serve(dir);
    try {
      expect(big.store.info().trajectories).toBe(40);
      const job = await startExport(big, { format: 'jsonl', selection: { kind: 'filter', filter: {} } });
      const second = await call(big, '/api/exports', { format: 'jsonl', selection: { kind: 'filter', filter: {} } });
      expect(second.status).toBe(409);
      const cancel = await call(big, `/api/exports/${job.id}/cancel`, {});
      expect(cancel.status).toBe(200);
      const done = await finished(big, job);
      expect(done.state).toBe('cancelled');
      expect(done.files).toEqual([]);
      expect((await call(big, `/api/exports/${job.id}/files/batch`)).status).toBe(409);
      const again = await finished(
        big,
        await startExport(big, { format: 'jsonl', selection: { kind: 'ids', ids: [`${IDS.clean}-3`] } }),
      );
      expect(again.state).toBe('done');
      expect(again.counts).toMatchObject({ read: 1, exported: 1 });
    } finally {
      await big.server.close();
    }
  });
});

describe('playground', () => {
  const render = async (request: PlaygroundRequestInput) => call(run, '/api/playground/render', request);

  it("prefills a trajectory's first-turn messages; rendered, they give exactly the prompt the engine saw", async () => {
    const prefill = PlaygroundPrefill.parse((await call(run, `/api/playground/conversation?id=${IDS.clean}`)).body);
    expect(prefill.target).toEqual({ stream: 'prompt', turn: 0 });
    const r = await render({
      conversation: prefill.conversation,
      addGenerationPrompt: true,
      target: { id: IDS.clean, ...prefill.target },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const result = PlaygroundResult.parse(r.body);
    const traj = (await run.store.get(IDS.clean))!.trajectory;
    // The prompt ids the fixture built with the real tokenizer and template (test/support/build.ts).
    expect(result.ids).toEqual(traj.turns[0]!.promptIds);
    const profile = loadProfile('qwen2.5-vl');
    const pads = imageTokensFor(profile, { width: traj.images[0]!.width!, height: traj.images[0]!.height! }).pad_count;
    expect(result.images.map((i) => i.padCount)).toEqual([pads]);
    expect(result.vision.map((v) => v.padLength)).toEqual([pads]);
    expect(result.tokenIds.length).toBe(result.ids.length - pads + 1);
    expect(result.diff?.divergence).toBeNull();
    expect(result.diff?.prefixOnly).toBe(true);
    expect(result.diff?.b.ids.length).toBeGreaterThan(result.ids.length);
  });

  it('an edited conversation diverges where its ids first differ from the stream', async () => {
    const prefill = PlaygroundPrefill.parse((await call(run, `/api/playground/conversation?id=${IDS.clean}`)).body);
    const edited = prefill.conversation.replace('AB = 3', 'AB = 7');
    expect(edited).not.toBe(prefill.conversation);
    const result = PlaygroundResult.parse(
      (await render({ conversation: edited, target: { id: IDS.clean, stream: 'prompt', turn: 0 } })).body,
    );
    const prompt = (await run.store.get(IDS.clean))!.trajectory.turns[0]!.promptIds!;
    let first = 0;
    while (result.ids[first] === prompt[first]) first++;
    expect(result.diff?.divergence?.aIndex).toBe(first);
    expect(result.diff?.divergence?.textA[1]).toContain('7');
    expect(result.diff?.divergence?.textB[1]).toContain('3');
  });

  it('sizes images from width/height and data: URLs only, never from a local file', async () => {
    const png = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const dataUrl = `data:image/png;base64,${png.toString('base64')}`;
    const conversation = (image: Record<string, unknown>) =>
      JSON.stringify({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image', ...image },
              { type: 'text', text: 'Describe it.' },
            ],
          },
        ],
      });
    const ok = PlaygroundResult.parse((await render({ conversation: conversation({ image: dataUrl }) })).body);
    expect(ok.profile).toBe('qwen2.5-vl');
    expect(ok.images[0]).toMatchObject({
      source: 'data: URL',
      width: 300,
      height: 200,
      padCount: imageTokensFor(loadProfile('qwen2.5-vl'), { width: 300, height: 200 }).pad_count,
    });
    expect(ok.diff).toBeNull();
    // The fixture's own diagram sits in the run folder, but a pasted conversation may not name files.
    const local = await render({ conversation: conversation({ image: path.join(run.dir, 'diagram.png') }) });
    expect(local.status).toBe(400);
    expect((local.body as { error: string }).error).toMatch(
      /messages\[0\]\.content\[0\]: only data: URLs or width\/height/,
    );
  });

  it('reports bad input with its line and column, and unknown targets as 404', async () => {
    const broken = await render({ conversation: '{"messages": [\n  {"role": "user", "content": "hi"},\n]}' });
    expect(broken.status).toBe(400);
    expect((broken.body as { error: string }).error).toMatch(/^conversation: line 3, column 1: not valid JSON/);
    const conv = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] });
    expect((await render({ conversation: conv, target: { id: 'nope', stream: 'canonical' } })).status).toBe(404);
    expect((await render({ conversation: conv, target: { id: IDS.clean, stream: 'sample' } })).status).toBe(404);
    expect((await render({ conversation: conv, extra: 1 } as PlaygroundRequestInput)).status).toBe(400);
    expect((await call(run, '/api/playground/conversation')).status).toBe(400);
  });
});
