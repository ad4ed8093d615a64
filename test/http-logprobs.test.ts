// The logprob view, the run's ratio histogram and its list filter, and the compare routes of
// `serve --trained`, over HTTP on the slime dump fixtures (test/fixtures/torch/generate.py:
// sample 0 drifts by 0.01, sample 1 is shifted by one, sample 2 has one 3-nat spike at response
// token 40 and a duplicated <|im_end|> on the trained side).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ComparePair,
  CompareRun,
  LogprobView,
  RatioHistogram,
  TrajectoryDetail,
  TrajectoryList,
} from '../server/http/api.ts';
import { openRunStore } from '../server/http/store.ts';
import { startServer, type RunningServer } from '../server/http/server.ts';
import { openTrainedSide } from '../server/http/trained-side.ts';
import { checkPaths, type CheckedTrajectory } from '../server/pipeline.ts';
import { logprobMismatch } from '../server/analysis/logprob-mismatch.ts';
import { RATIO_BIN_COUNT, ratioBin, ratioBinRange } from '../server/analysis/ratio-histogram.ts';
import { compareRuns } from '../server/pipeline/compare-runs.ts';

const TORCH = path.join('test', 'fixtures', 'torch');
const ROLLOUT = path.join(TORCH, 'rollout_data_0.pt');
const TRAIN = path.join(TORCH, 'train_data_0.pt');
const appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-app-'));
fs.writeFileSync(path.join(appDir, 'index.html'), '<!doctype html><title>app</title>');

let trainServer: RunningServer;
let compareServer: RunningServer;
const trained = new Map<string, CheckedTrajectory>();

async function get(server: RunningServer, p: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(server.url + p.replace(/^\//, ''));
  const type = res.headers.get('content-type');
  return { status: res.status, body: type?.includes('json') ? await res.json() : await res.arrayBuffer() };
}

/** Per trained token (mask 1, both logprobs finite): its absolute index and Δ, computed here directly. */
function trainedDeltas(c: CheckedTrajectory): { at: number; delta: number }[] {
  const s = c.trajectory.sample!;
  const offset = s.tokens.length - s.responseLength!;
  const out: { at: number; delta: number }[] = [];
  s.logprobs!.forEach((r, i) => {
    const p = s.trainerLogprobs![i];
    // No mask: all trained; a mask shorter than the response trains nothing past its end.
    const m = s.lossMask ? (s.lossMask[i] ?? 0) : 1;
    if (m === 1 && typeof r === 'number' && typeof p === 'number' && Number.isFinite(r) && Number.isFinite(p))
      out.push({ at: offset + i, delta: p - r });
  });
  return out;
}

beforeAll(async () => {
  for await (const ev of checkPaths([TRAIN], {}))
    if (ev.type === 'trajectory') trained.set(ev.checked.trajectory.id, ev.checked);
  const store = openRunStore([TRAIN], { pollMs: 0 });
  await store.ready;
  trainServer = await startServer({ store, port: 0, host: '127.0.0.1', appDir });
  const rolloutStore = openRunStore([ROLLOUT], { pollMs: 0 });
  await rolloutStore.ready;
  const side = openTrainedSide([ROLLOUT], [TRAIN], {}, [path.resolve(TORCH)]);
  await side.ready;
  compareServer = await startServer({ store: rolloutStore, port: 0, host: '127.0.0.1', appDir, trained: side });
}, 120_000);

afterAll(async () => {
  await trainServer?.close();
  await compareServer?.close();
});

describe('ratio bins', () => {
  it('put ratio 1 and the cap 2 on edges, and cover every ratio once', () => {
    expect(ratioBinRange(ratioBin(1))[0]).toBe(1);
    expect(ratioBinRange(ratioBin(2))[0]).toBe(2);
    expect(ratioBinRange(ratioBin(0.5))[0]).toBe(0.5);
    expect(ratioBin(1e-9)).toBe(0);
    expect(ratioBin(1e9)).toBe(RATIO_BIN_COUNT - 1);
    for (const r of [0.01, 0.3, 0.99, 1.01, 1.9, 7, 100]) {
      const [lo, hi] = ratioBinRange(ratioBin(r));
      expect(r >= lo && r < hi, String(r)).toBe(true);
    }
  });
});

describe('GET /api/trajectories/ID/logprobs', () => {
  it("gives every trained token's Δ and ratio, and the spike of sample 2 as the one token past the threshold", async () => {
    const id = 'rollout-0/sample-2';
    const c = trained.get(id)!;
    const { status, body } = await get(trainServer, `/api/trajectories/${encodeURIComponent(id)}/logprobs`);
    expect(status).toBe(200);
    const v = LogprobView.parse(body);
    expect(v.available).toBe(true);
    expect(v.ids).toEqual(c.trajectory.sample!.tokens);
    const direct = trainedDeltas(c);
    for (const { at, delta } of direct) {
      expect(v.delta[at]).toBeCloseTo(delta, 12);
      expect(v.ratio[at]).toBeCloseTo(Math.exp(delta), 12);
      expect(v.mask[at]).toBe(1);
    }
    const spike = c.trajectory.sample!.tokens.length - c.trajectory.sample!.responseLength! + 40;
    expect(direct.filter((d) => Math.abs(d.delta) > 1).map((d) => d.at)).toEqual([spike]);
    expect(v.pastThreshold).toEqual([spike]);
    expect(v.stats).toEqual(JSON.parse(JSON.stringify(logprobMismatch(c.trajectory))));
    // Prompt tokens carry nothing; masked tokens are marked 0 and never past the threshold.
    expect(v.delta.slice(0, v.responseStart).every((d) => d === null)).toBe(true);
    const masked = v.mask.flatMap((m, i) => (m === 0 ? [i] : []));
    expect(masked.length).toBeGreaterThan(0);
    expect(masked.some((i) => v.pastThreshold.includes(i))).toBe(false);
    expect(v.turns.map((t) => t.turn)).toEqual([0, 1, 2]);
    expect(v.turns[0]!.start).toBe(v.responseStart);
  });

  it("the logprob finding's target is the logprob view at its token", async () => {
    const id = 'rollout-0/sample-2';
    const detail = TrajectoryDetail.parse((await get(trainServer, `/api/trajectories/${encodeURIComponent(id)}`)).body);
    const f = detail.findings.find((x) => x.kind === 'logprob_mismatch')!;
    expect(f.target).toEqual({
      view: 'logprobs',
      token: logprobMismatch(trained.get(id)!.trajectory)!.firstPastThreshold,
    });
    const shifted = TrajectoryDetail.parse(
      (await get(trainServer, `/api/trajectories/${encodeURIComponent('rollout-0/sample-1')}`)).body,
    );
    expect(shifted.findings.find((x) => x.kind === 'logprob_shift')!.target).toMatchObject({ view: 'logprobs' });
  });

  it('says why a trajectory without trainer logprobs has none', async () => {
    const { body } = await get(compareServer, `/api/trajectories/${encodeURIComponent('rollout-0/sample-2')}/logprobs`);
    const v = LogprobView.parse(body);
    expect(v.available).toBe(false);
    expect(v.reason).toMatch(/no trainer logprobs/);
  });
});

describe('GET /api/run/ratios and the ratioBin filter', () => {
  it('counts every trained token once, and a bin lists exactly the trajectories with tokens in it', async () => {
    const h = RatioHistogram.parse((await get(trainServer, '/api/run/ratios')).body);
    const perTrajectory = [...trained.values()].map((c) => ({
      id: c.trajectory.id,
      bins: new Set(trainedDeltas(c).map((d) => ratioBin(Math.exp(d.delta)))),
      tokens: trainedDeltas(c).length,
    }));
    expect(h.tokens).toBe(perTrajectory.reduce((s, t) => s + t.tokens, 0));
    expect(h.trajectories).toBe(trained.size);
    expect(h.isCap).toBe(2);
    for (const b of h.bins) {
      const ids = perTrajectory.filter((t) => t.bins.has(b.bin)).map((t) => t.id);
      expect(b.trajectories, `bin ${b.bin}`).toBe(ids.length);
      if (ids.length === 0) continue;
      const list = TrajectoryList.parse((await get(trainServer, `/api/trajectories?ratioBin=${b.bin}`)).body);
      expect(list.items.map((s) => s.id).sort(), `bin ${b.bin}`).toEqual(ids.sort());
    }
    // The spike's e^-3 is the only ratio below 1/16.
    expect(h.bins[0]!.tokens).toBe(1);
  });

  it('refuses a bin that does not exist', async () => {
    const { status, body } = await get(trainServer, `/api/trajectories?ratioBin=${RATIO_BIN_COUNT}`);
    expect(status).toBe(400);
    expect((body as { error: string }).error).toContain('ratioBin');
  });
});

describe('serve --trained: the compare routes', () => {
  it('GET /api/compare lists the pairs compare finds, with the fields that differ', async () => {
    const expected = await compareRuns([ROLLOUT], [TRAIN], {});
    const run = CompareRun.parse((await get(compareServer, '/api/compare')).body);
    expect(run.available).toBe(true);
    expect(run.pairs.map((p) => [p.rollout.id, p.fields])).toEqual(
      expected.pairs.map((p) => [p.rollout.trajectory.id, [...new Set(p.findings.map((f) => f.field))]]),
    );
  });

  it('the duplicated-EOS pair: tokens differ at 477, in words, with both sides around it', async () => {
    const p = ComparePair.parse(
      (await get(compareServer, `/api/trajectories/${encodeURIComponent('rollout-0/sample-2')}/compare`)).body,
    );
    expect(p.joinedBy).toBe('id');
    const tokens = p.fields.find((f) => f.field === 'tokens')!;
    expect(tokens).toMatchObject({ state: 'differs', index: 477 });
    const w = tokens.window!;
    expect(w.trained[477 - w.from]).toBe('<|im_end|>');
    expect(w.trained[476 - w.from]).toBe('<|im_end|>');
    expect(p.tokens!.divergence).toMatchObject({ cause: 'duplicated_eos', bIndex: 477 });
    // Fields after an insertion are compared only up to it, and say so.
    expect(p.fields.find((f) => f.field === 'loss_mask')!.message).toContain('up to token 477');
    // The rollout's images with the sha256 of their bytes; the train dump holds none.
    expect(p.images.rollout).toHaveLength(2);
    expect(p.images.rollout.every((i) => /^[0-9a-f]{64}$/.test(i.sha256 ?? ''))).toBe(true);
    expect(p.images.trained).toHaveLength(0);
    expect(p.fields.find((f) => f.field === 'images')!.state).toBe('absent');
  });

  it('the short-mask pair: loss mask differs at 655', async () => {
    const p = ComparePair.parse(
      (await get(compareServer, `/api/trajectories/${encodeURIComponent('rollout-0/sample-4')}/compare`)).body,
    );
    expect(p.fields.find((f) => f.field === 'loss_mask')).toMatchObject({ state: 'differs', index: 655 });
    expect(p.fields.find((f) => f.field === 'tokens')!.state).toBe('same');
  });

  it("a rollout against its own export: both sides' images with the same sha256, and the trained preview", async () => {
    const rollout = [path.join('test', 'fixtures', 'vllm', 'chat-chained.jsonl')];
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-trained-'));
    const batch = path.join(dir, 'batch.jsonl');
    const out = spawnSync(process.execPath, ['bin/rollscope.js', 'export', ...rollout, '--out', batch], {
      encoding: 'utf8',
    });
    expect(out.status, out.stderr).toBe(0);
    const store = openRunStore(rollout, { pollMs: 0 });
    await store.ready;
    const side = openTrainedSide(rollout, [batch], {}, [dir]);
    await side.ready;
    const server = await startServer({ store, port: 0, host: '127.0.0.1', appDir, trained: side });
    try {
      const run = CompareRun.parse((await get(server, '/api/compare')).body);
      const withImages = run.pairs.find((p) => p.fields.length === 0)!;
      const p = ComparePair.parse(
        (await get(server, `/api/trajectories/${encodeURIComponent(withImages.rollout.id)}/compare`)).body,
      );
      expect(p.fields.every((f) => f.state === 'same')).toBe(true);
      expect(p.images.trained.length).toBe(p.images.rollout.length);
      expect(p.images.trained.length).toBeGreaterThan(0);
      expect(p.images.trained.map((i) => i.sha256)).toEqual(p.images.rollout.map((i) => i.sha256));
      const preview = p.images.trained[0]!.preview!;
      expect(preview).toContain('side=trained');
      const res = await fetch(server.url + preview.replace(/^\//, ''));
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/png');
    } finally {
      await server.close();
    }
  });

  it('without --trained: not available, and the pair routes answer 404', async () => {
    const run = CompareRun.parse((await get(trainServer, '/api/compare')).body);
    expect(run.available).toBe(false);
    const { status } = await get(trainServer, `/api/trajectories/${encodeURIComponent('rollout-0/sample-2')}/compare`);
    expect(status).toBe(404);
  });
});
