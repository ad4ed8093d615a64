// The HTTP API without a browser: the real server in-process on a real run (real tokenizer,
// template and PNG), every response checked against its zod schema as the app would read it.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiffResult, ImageInfo, RunInfo, TokenStream, TrajectoryDetail, TrajectoryList } from '../server/http/api.ts';
import { openRunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { findingTarget, tokenStream } from '../server/http/views.ts';
import { IDS, writeFixtureRun } from './e2e/fixture.ts';

const EOS = 151645;
let dir: string;
let server: RunningServer;
const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-app-'));

async function get(p: string): Promise<{ status: number; body: unknown; type: string | null }> {
  const res = await fetch(server.url + p.replace(/^\//, ''));
  const type = res.headers.get('content-type');
  const body = type?.includes('json') ? await res.json() : Buffer.from(await res.arrayBuffer());
  return { status: res.status, body, type };
}

function rawGet(port: number, p: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, headers: { Host: host } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-http-'));
  await writeFixtureRun(dir);
  fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');
  const store = openRunStore([dir], { pollMs: 0 });
  await store.ready;
  server = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
});

afterAll(async () => {
  await server?.close();
});

describe('run and list', () => {
  it('GET /api/run counts trajectories per finding kind', async () => {
    const { status, body } = await get('/api/run');
    expect(status).toBe(200);
    const info = RunInfo.parse(body);
    expect(info.trajectories).toBe(4);
    expect(info.health).toEqual({ ok: 1, warning: 0, error: 3 });
    expect(info.counts.kind).toMatchObject({ prefix_break: 1, placeholder_count: 1, image_truncated: 1 });
    expect(info.counts.cause.duplicated_eos).toBe(1);
  });

  it('filters by kind, cause, status, text and token id; sorts', async () => {
    const ids = async (q: string) =>
      TrajectoryList.parse((await get(`/api/trajectories?${q}`)).body).items.map((s) => s.id);
    expect(await ids('kind=prefix_break')).toEqual([IDS.duplicatedEos]);
    expect(await ids('cause=duplicated_eos')).toEqual([IDS.duplicatedEos]);
    expect(await ids('status=ok')).toEqual([IDS.clean]);
    expect(await ids('q=truncated')).toEqual([IDS.truncated]);
    // <tool_call> (151657) occurs only in the two-turn trajectories, not in the one cut inside the image.
    expect((await ids('q=151657')).sort()).toEqual([IDS.clean, IDS.duplicatedEos, IDS.wrongPads].sort());
    expect(await ids('sort=id&order=asc')).toEqual([IDS.clean, IDS.duplicatedEos, IDS.truncated, IDS.wrongPads]);
    const page = TrajectoryList.parse((await get('/api/trajectories?sort=id&order=asc&offset=1&limit=2')).body);
    expect(page.total).toBe(4);
    expect(page.items.map((s) => s.id)).toEqual([IDS.duplicatedEos, IDS.truncated]);
  });

  it('rejects a bad query with 400 and a JSON error', async () => {
    const r = await get('/api/trajectories?kind=nonsense');
    expect(r.status).toBe(400);
    expect((r.body as { error: string }).error).toMatch(/kind/);
  });
});

describe('one trajectory', () => {
  it('detail lists findings, streams, images and the diffs worth showing', async () => {
    const d = TrajectoryDetail.parse((await get(`/api/trajectories/${IDS.duplicatedEos}`)).body);
    expect(d.findings.map((f) => f.kind).sort()).toEqual(['prefix_break', 'rerender_mismatch']);
    expect(d.streams.map((s) => `${s.name}:${s.turn}`)).toEqual([
      'canonical:-1',
      'prompt:0',
      'prompt:1',
      'rerender:-1',
    ]);
    expect(d.diffs[0]).toMatchObject({ a: 'prompt', b: 'prompt', turn: 1, diverges: true });
    expect(d.images[0]).toMatchObject({
      width: 640,
      height: 480,
      expectedPads: 391,
      actualPads: 391,
      hasPreview: true,
    });
  });

  it("each finding says where to see it, and its diff diverges at the finding's token", async () => {
    const d = TrajectoryDetail.parse((await get(`/api/trajectories/${IDS.duplicatedEos}`)).body);
    const prefix = d.findings.find((f) => f.kind === 'prefix_break')!;
    expect(prefix.target).toEqual({ view: 'diff', a: 'prompt', b: 'prompt', turn: 1, side: 'b', token: prefix.index });
    const rerender = d.findings.find((f) => f.kind === 'rerender_mismatch')!;
    expect(rerender.target).toMatchObject({ view: 'diff', a: 'canonical', b: 'rerender', side: 'a' });
    // The diff the server points at is built from the same expected stream as the check.
    for (const f of [prefix, rerender]) {
      const t = f.target!;
      if (t.view !== 'diff') throw new Error('expected a diff target');
      const diff = DiffResult.parse(
        (await get(`/api/trajectories/${IDS.duplicatedEos}/diff?a=${t.a}&b=${t.b}&turn=${t.turn}`)).body,
      );
      expect(t.side === 'a' ? diff.divergence?.aIndex : diff.divergence?.bIndex, f.kind).toBe(f.index);
    }
    // A finding no diff shows opens its own stream at its token.
    const pads = TrajectoryDetail.parse((await get(`/api/trajectories/${IDS.wrongPads}`)).body);
    const count = pads.findings.find((f) => f.kind === 'placeholder_count')!;
    expect(count.target).toEqual({
      view: 'stream',
      stream: count.stream,
      turn: count.stream === 'prompt' ? count.turn : -1,
      token: count.index >= 0 ? count.index : null,
    });
  });

  it('a finding whose diff the trajectory lacks opens its stream; one no stream holds opens nothing', () => {
    const prefix = {
      kind: 'prefix_break',
      severity: 'error',
      turn: 2,
      index: 40,
      stream: 'prompt',
      message: 'm',
    } as const;
    const streams = [{ name: 'prompt', turn: 2, length: 50, label: 'turn 2' }] as const;
    const promptDiff = [{ a: 'prompt', b: 'prompt', turn: 2 }] as const;
    expect(findingTarget(prefix, promptDiff, streams)).toMatchObject({ view: 'diff', turn: 2, side: 'b', token: 40 });
    // The pair of another turn does not show this break.
    expect(findingTarget(prefix, [{ a: 'prompt', b: 'prompt', turn: 1 }], streams)).toEqual({
      view: 'stream',
      stream: 'prompt',
      turn: 2,
      token: 40,
    });
    expect(findingTarget({ ...prefix, kind: 'invalid_value', stream: 'sample', index: -1 }, [], streams)).toBeNull();
  });

  it('the stream has visible pieces, mask, logprobs, turn marks and vision spans', async () => {
    const s = TokenStream.parse((await get(`/api/trajectories/${IDS.clean}/stream?name=canonical`)).body);
    // One piece per distinct id, whitespace made visible.
    expect(
      Object.keys(s.pieces)
        .map(Number)
        .sort((x, y) => x - y),
    ).toEqual([...new Set(s.ids)].sort((x, y) => x - y));
    expect(s.pieces[EOS]).toBe('<|im_end|>');
    expect(s.pieces[198]).toBe('⏎');
    expect(Object.values(s.pieces).some((p) => p.startsWith('·'))).toBe(true);
    expect(s.specialIds).toContain(EOS);
    expect(s.specialIds).not.toContain(198);
    expect(s.turns.filter((m) => m.what === 'generated').map((m) => m.turn)).toEqual([0, 1]);
    const gen = s.turns.find((m) => m.what === 'generated')!;
    expect(s.lossMask![gen.index]).toBe(1);
    expect(s.lossMask![gen.index - 1]).toBe(0);
    expect(s.logprobs![gen.index]).toBeLessThan(0);
    expect(s.vision).toHaveLength(1);
    // One row of pads per row of merged cells: grid_w / merge_size = 46 / 2.
    expect(s.vision[0]).toMatchObject({
      image: 0,
      padLength: 391,
      expectedPads: 391,
      gridThw: [1, 34, 46],
      cellsWide: 23,
    });
  });

  it('a stream cut inside its image shows the open span and the expected count', async () => {
    const s = TokenStream.parse((await get(`/api/trajectories/${IDS.truncated}/stream?name=prompt&turn=0`)).body);
    expect(s.vision[0]).toMatchObject({ padLength: 200, end: -1, expectedPads: 391 });
  });

  it('the prefix diff lands on the duplicated <|im_end|>, with its cause and the text around it', async () => {
    const d = DiffResult.parse(
      (await get(`/api/trajectories/${IDS.duplicatedEos}/diff?a=prompt&b=prompt&turn=1`)).body,
    );
    const dv = d.divergence!;
    expect(dv.cause).toBe('duplicated_eos');
    expect(d.b.ids[dv.bIndex]).toBe(EOS);
    expect(d.b.ids[dv.bIndex - 1]).toBe(EOS);
    expect(d.rowsB[dv.row]).toBe(dv.bIndex);
    expect(d.rowsA[dv.row]).toBe(-1);
    expect(dv.textB[1]).toBe('<|im_end|>');
    expect(dv.textA[0].endsWith('<|im_end|>')).toBe(true);
    expect(dv.explanation).toMatch(/appears twice/);
    // Only the extra token differs; the observation after a's end is not a difference.
    expect(d.hunks).toHaveLength(1);
    expect(d.prefixOnly).toBe(true);
  });

  it('canonical vs re-render of a clean trajectory agrees', async () => {
    const d = DiffResult.parse((await get(`/api/trajectories/${IDS.clean}/diff?a=canonical&b=rerender`)).body);
    expect(d.divergence).toBeNull();
    expect(d.rowsA.every((a, i) => a === d.rowsB[i])).toBe(true);
  });

  it('image metadata states grid, settings and pad counts; the preview is a resized PNG', async () => {
    const info = ImageInfo.parse((await get(`/api/trajectories/${IDS.wrongPads}/images/0`)).body);
    expect(info.layout).toMatchObject({ gridThw: [1, 34, 46], padCount: 391, cellsWide: 23, cellsHigh: 17 });
    expect(info.expectedPads).toBe(391);
    expect(info.actualPads).toBeGreaterThan(391);
    const r = await get(`/api/trajectories/${IDS.wrongPads}/images/0/preview?w=160`);
    expect(r.status).toBe(200);
    expect(r.type).toBe('image/png');
    const meta = await sharp(r.body as Buffer).metadata();
    expect([meta.width, meta.height]).toEqual([160, 120]);
  });

  it('unknown ids, images and streams are 404 with a JSON error', async () => {
    for (const p of [
      '/api/trajectories/nope',
      `/api/trajectories/${IDS.clean}/images/7`,
      `/api/trajectories/${IDS.clean}/stream?name=sample`,
      `/api/trajectories/${IDS.clean}/images/first`,
      `/api/trajectories/${IDS.clean}/nothing`,
      '/api/trajectories/nope/stream',
      '/api/nothing',
    ]) {
      const r = await get(p);
      expect(r.status, p).toBe(404);
      expect(typeof (r.body as { error: string }).error).toBe('string');
    }
  });
});

describe('invalid logprobs', () => {
  it('a NaN logprob (as Python json writes it) is reported by index, not silently dropped', async () => {
    const line = fs.readFileSync(path.join(dir, 'run.rollscope.jsonl'), 'utf8').split('\n')[0]!;
    const t = JSON.parse(line) as { id: string; turns: { generatedLogprobs: number[] }[] };
    t.id = 'nan-logprob';
    t.turns[1]!.generatedLogprobs[2] = 12345;
    const nanDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-nan-'));
    fs.writeFileSync(path.join(nanDir, 'nan.rollscope.jsonl'), `${JSON.stringify(t).replace('12345', 'NaN')}\n`);
    const store = openRunStore([nanDir], { pollMs: 0 });
    await store.ready;
    const c = (await store.get('nan-logprob'))!;
    const s = TokenStream.parse(tokenStream(c, 'prompt', 1, {}));
    const at = c.trajectory.turns[1]!.promptIds!.length + 2;
    expect(s.badLogprobs).toEqual([at]);
    expect(s.logprobs![at]).toBeNull();
    expect(JSON.stringify(s)).not.toContain('NaN');
    store.close();
  });
});

describe('a NaN reward', () => {
  it('lists and opens the trajectory (reward null, its invalid_value finding naming it), and sorts by reward', async () => {
    const line = fs.readFileSync(path.join(dir, 'run.rollscope.jsonl'), 'utf8').split('\n')[0]!;
    const t = JSON.parse(line) as { id: string; reward?: number };
    const nanDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-nan-reward-'));
    const rewarded = (id: string, reward: string) =>
      JSON.stringify({ ...t, id, reward: 12345 }).replace('"reward":12345', `"reward":${reward}`);
    fs.writeFileSync(
      path.join(nanDir, 'run.rollscope.jsonl'),
      `${[rewarded('nan-reward', 'NaN'), rewarded('inf-reward', '-Infinity'), rewarded('one', '1')].join('\n')}\n`,
    );
    const store = openRunStore([nanDir], { pollMs: 0 });
    await store.ready;
    const nanServer = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
    try {
      const list = await fetch(`${nanServer.url}api/trajectories?sort=reward`);
      expect(list.status).toBe(200);
      const items = TrajectoryList.parse(await list.json()).items;
      expect(Object.fromEntries(items.map((i) => [i.id, i.reward]))).toEqual({
        'nan-reward': null,
        'inf-reward': null,
        one: 1,
      });
      const one = await fetch(`${nanServer.url}api/trajectories/nan-reward`);
      expect(one.status).toBe(200);
      const detail = TrajectoryDetail.parse(await one.json());
      expect(detail.summary.reward).toBeNull();
      expect(detail.findings).toContainEqual(
        expect.objectContaining({ kind: 'invalid_value', field: 'reward', actual: 'NaN' }),
      );
    } finally {
      await nanServer.close();
      store.close();
    }
  });
});

describe('boundaries', () => {
  it('refuses a Host header it does not serve (DNS rebinding) and accepts loopback names', async () => {
    const port = new URL(server.url).port;
    expect((await rawGet(Number(port), '/api/run', 'evil.example')).status).toBe(421);
    expect((await rawGet(Number(port), '/api/run', `evil.example:${port}`)).status).toBe(421);
    expect((await rawGet(Number(port), '/api/run', `localhost:${port}`)).status).toBe(200);
    expect((await rawGet(Number(port), '/api/run', `127.0.0.1:${port}`)).status).toBe(200);
  });

  it('serves the app folder and nothing outside it', async () => {
    const port = Number(new URL(server.url).port);
    expect((await rawGet(port, '/', `127.0.0.1:${port}`)).body).toContain('<title>app</title>');
    const outside = await rawGet(port, '/..%2f..%2f..%2fetc%2fpasswd', `127.0.0.1:${port}`);
    expect(outside.status).toBe(404);
    expect(outside.body).not.toContain('root:');
  });
});

describe('a file being written', () => {
  it('picks up records appended to a watched file, and ignores a half-written last line', async () => {
    const src = fs.readFileSync(path.join(dir, 'run.rollscope.jsonl'), 'utf8').trim().split('\n');
    const growDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-grow-'));
    fs.copyFileSync(path.join(dir, 'diagram.png'), path.join(growDir, 'diagram.png'));
    const file = path.join(growDir, 'live.rollscope.jsonl');
    fs.writeFileSync(file, `${src[0]}\n`);
    const store = openRunStore([growDir], { pollMs: 0 });
    await store.ready;
    expect(store.info().trajectories).toBe(1);
    const half = Math.floor(src[1]!.length / 2);
    fs.appendFileSync(file, src[1]!.slice(0, half));
    await store.refresh();
    expect(store.info().trajectories).toBe(1);
    expect(store.info().errors).toEqual([]);
    fs.appendFileSync(file, `${src[1]!.slice(half)}\n${src[2]}\n`);
    await store.refresh();
    expect(store.info().trajectories).toBe(3);
    expect(store.info().errors).toEqual([]);
    // A new file in the folder is picked up too.
    fs.writeFileSync(path.join(growDir, 'more.rollscope.jsonl'), `${src[3]}\n`);
    await store.refresh();
    expect(store.info().trajectories).toBe(4);
    expect(store.list({ sort: 'id', order: 'asc', offset: 0, limit: 10 }).items.map((s) => s.id)).toEqual([
      IDS.clean,
      IDS.duplicatedEos,
      IDS.truncated,
      IDS.wrongPads,
    ]);
    // Re-loaded on demand (cache of one) gives the same analysis.
    const again = await store.get(IDS.duplicatedEos);
    expect(again?.findings.map((f) => f.kind)).toContain('prefix_break');
    store.close();
  });
});
