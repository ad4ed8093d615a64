// The inspector's view of bad values: every trajectory of test/fixtures/values/ is in the
// overview (none lost to a read error), its detail lists the planted finding, and the stream the
// finding names opens with the finding's token inside it (what the token view highlights).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenStream, TrajectoryDetail, TrajectoryList } from '../server/http/api.ts';
import { openRunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import type { Planted } from './fixtures/generate-values.ts';

const SRC = path.join('test', 'fixtures', 'values');
const planted = JSON.parse(fs.readFileSync(path.join(SRC, 'planted.json'), 'utf8')) as Planted;
const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-values-app-'));
let dir = '';
let server: RunningServer;

async function get(p: string): Promise<unknown> {
  const res = await fetch(server.url + p.replace(/^\//, ''));
  expect(res.status, p).toBe(200);
  return res.json();
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-values-http-'));
  fs.cpSync(SRC, dir, { recursive: true });
  fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');
  const store = openRunStore([dir], { pollMs: 0 });
  await store.ready;
  server = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
});
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(appDir, { recursive: true, force: true });
});

describe('bad values in the inspector', () => {
  it('every trajectory is in the overview, each finding opens at its token', async () => {
    const ids = Object.values(planted).flatMap((byId) => Object.keys(byId));
    const list = TrajectoryList.parse(await get('/api/trajectories?limit=1000'));
    expect(list.total).toBe(ids.length);
    for (const [, byId] of Object.entries(planted))
      for (const [id, want] of Object.entries(byId)) {
        const item = list.items.find((x) => x.id === id);
        expect(item, id).toBeDefined();
        const detail = TrajectoryDetail.parse(await get(`/api/trajectories/${encodeURIComponent(id)}`));
        for (const w of want) {
          const f = detail.findings.find((x) => x.kind === w.kind && x.index === w.index && x.stream === w.stream);
          expect(f, `${id}: ${w.kind} at ${w.index}`).toBeDefined();
          const s = TokenStream.parse(
            await get(`/api/trajectories/${encodeURIComponent(id)}/stream?name=${f!.stream}&turn=${f!.turn}`),
          );
          // A length fault points just past the shorter array, at most one past the stream's end.
          expect(f!.index, `${id}: ${w.kind} inside ${f!.stream}`).toBeLessThanOrEqual(s.ids.length);
          if (w.field === 'sample.tokens') expect(s.ids[f!.index]).toBe(f!.actual);
          if (w.field === 'sample.logprobs' && !w.cause && f!.actual === 'NaN')
            expect(s.badLogprobs).toContain(f!.index);
        }
      }
  });
});
