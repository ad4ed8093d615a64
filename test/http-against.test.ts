// `serve A --against B`'s API: the DiffRuns of the two runs, and one pair at token level.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkedReport } from '../server/cli/diff-runs.ts';
import { diffRuns } from '../server/report/diff-runs.ts';
import { AgainstPair, AgainstRun } from '../server/http/api.ts';
import { openAgainstSide, swapSides } from '../server/http/against.ts';
import { openRunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const A = path.join(ROOT, 'test/fixtures/vllm/chat-by-id.jsonl');
const B = path.join(ROOT, 'test/fixtures/diff-runs/vllm-fixed/chat-by-id.jsonl');
const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-app-'));
fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');
const reportOf = async (paths: readonly string[]) => (await checkedReport(paths, { workers: 0 })).report;

let server: RunningServer;
let plain: RunningServer;

beforeAll(async () => {
  const store = openRunStore([A], { pollMs: 0 });
  const side = openAgainstSide([A], [B], openRunStore([B], { pollMs: 0 }), reportOf);
  await Promise.all([store.ready, side.ready, side.store.ready]);
  server = await startServer({ store, port: 0, host: '127.0.0.1', appDir, against: side });
  const alone = openRunStore([A], { pollMs: 0 });
  await alone.ready;
  plain = await startServer({ store: alone, port: 0, host: '127.0.0.1', appDir });
}, 120_000);

afterAll(async () => {
  await server?.close();
  await plain?.close();
});

const get = async (s: RunningServer, p: string) => {
  const res = await fetch(new URL(p, s.url));
  return { status: res.status, body: (await res.json()) as unknown };
};

describe('/api/against', () => {
  it('answers the diff diff-runs gives for the two runs', async () => {
    const r = await get(server, '/api/against');
    expect(r.status).toBe(200);
    const run = AgainstRun.parse(r.body);
    expect(run.loading).toBe(false);
    expect(run.diff).toEqual(diffRuns(await reportOf([A]), await reportOf([B])));
    expect(run.diff!.summary.fixed).toBe(1);
  });

  it('without --against says it is not available, and the pair route answers 404', async () => {
    const r = AgainstRun.parse((await get(plain, '/api/against')).body);
    expect(r.available).toBe(false);
    expect((await get(plain, '/api/against/pair?a=x&b=x')).status).toBe(404);
  });

  it('opens a pair on its first differing stream, A left, the duplicated <|im_end|> on A marked first', async () => {
    const r = await get(server, '/api/against/pair?a=sess-dup-eos&b=sess-dup-eos');
    expect(r.status).toBe(200);
    const p = AgainstPair.parse(r.body);
    expect(p.stream).toBe('prompt');
    expect(p.turn).toBe(1);
    // The prompt A rendered from text that held the extra <|im_end|>, and its re-render, differ; nothing else.
    expect(p.streams.filter((s) => s.diverges).map((s) => `${s.name}:${s.turn}`)).toEqual(['prompt:1', 'rerender:-1']);
    const d = p.tokens!;
    expect(d.a.label).toBe('A turn 1 prompt');
    expect(d.b.ids.length).toBe(d.a.ids.length - 1);
    expect(d.divergence!.cause).toBe('duplicated_eos');
    const row = d.divergence!.row;
    expect(d.rowsB[row]).toBe(-1);
    expect(d.a.ids[d.rowsA[row]!]).toBe(d.a.ids[d.rowsA[row]! - 1]);
    // Another stream on request; one a side lacks is refused.
    const canonical = AgainstPair.parse(
      (await get(server, '/api/against/pair?a=sess-dup-eos&b=sess-dup-eos&stream=canonical')).body,
    );
    expect(canonical.stream).toBe('canonical');
    expect(canonical.tokens!.divergence).toBeNull();
    expect((await get(server, '/api/against/pair?a=sess-dup-eos&b=sess-dup-eos&stream=sample')).status).toBe(404);
  });

  it('refuses ids the diff did not pair, and a query without both', async () => {
    expect((await get(server, '/api/against/pair?a=geo-clean&b=sess-dup-eos')).status).toBe(404);
    expect((await get(server, '/api/against/pair?a=geo-clean')).status).toBe(400);
  });

  it('swapping a diff twice gives it back', async () => {
    const p = AgainstPair.parse((await get(server, '/api/against/pair?a=sess-dup-eos&b=sess-dup-eos')).body);
    expect(swapSides(swapSides(p.tokens!))).toEqual(p.tokens);
  });
});
