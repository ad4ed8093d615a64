// Under load: bench/serve-load.ts in its quick mode, from the suite. 50 concurrent
// clients browse a served 400-trajectory run (generated with the real tokenizer, template and
// PNGs by bench/generate.ts) for 10 s on 127.0.0.1; the figures are printed. Asserted: no failed
// request, the UI answered during and after, memory at the end of the load not above its level at
// the start by more than a margin. No timing is asserted (the machine may be busy).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, expect, it } from 'vitest';
import { printFigure } from '../bench/lib.ts';
import { loadRun, QUICK, serveLoad, serveLoadFigure, type ServeLoadOptions } from '../bench/serve-load.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-load-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

it('50 concurrent clients for 10 s: no failed request, bounded memory, the UI answers during and after', async () => {
  const run = await loadRun(true, dir);
  expect(run.trajectories).toBe(QUICK.trajectories);
  const o: ServeLoadOptions = {
    file: run.file,
    clients: QUICK.clients,
    seconds: QUICK.seconds,
    readySeconds: 240,
    rssCapMB: 4096,
  };
  const r = await serveLoad(o);
  const figure = serveLoadFigure(run, o, r);
  const sink = new PassThrough();
  printFigure(figure, sink);
  sink.end();
  console.log(
    `[load] ${String(sink.read() ?? '')
      .trim()
      .split('\n')
      .join('\n[load] ')}`,
  );

  expect(r.outcome, r.message).toBe('done');
  expect(r.trajectories).toBe(run.trajectories);
  expect(r.failureSamples).toEqual([]);
  expect(r.failures).toBe(0);
  // Every kind of request was made, and many of them (not a load that never started).
  expect(Object.keys(r.byRoute).sort()).toEqual([
    'app page',
    'app script',
    'detail',
    'diff',
    'image preview',
    'list filtered',
    'list page',
    'run info',
    'stream',
  ]);
  expect(r.requests).toBeGreaterThan(QUICK.clients * 4);
  expect(r.uiDuring.asked).toBeGreaterThan(0);
  expect(r.uiDuring.answered).toBe(r.uiDuring.asked);
  expect(r.uiAfter).toBe(true);
  // Bounded: the cache of analyses is an LRU of 8 and previews 128; nothing else may pile up.
  expect(r.rssLastQuarterMB).toBeLessThan(r.rssFirstQuarterMB + 256);
  expect(r.rssAtEndMB).toBeLessThan(r.rssAtStartMB + 512);
}, 300_000);
