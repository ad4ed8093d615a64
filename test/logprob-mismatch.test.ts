// Rollout vs trainer logprobs on the slime train dumps (test/fixtures/torch/generate.py plants the
// faults): the metrics against a direct computation from the raw tensors, the shift detector, and
// the findings at their tokens.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_THRESHOLDS,
  logprobMismatch,
  mismatchFindings,
  runMismatch,
} from '../server/analysis/logprob-mismatch.ts';
import { loadFile } from '../server/import/index.ts';
import { type TorchTensor, readTorchSave } from '../server/import/read/torch-save.ts';

const DUMPS = path.join(import.meta.dirname, 'fixtures', 'torch');

interface RawSample {
  tokens: TorchTensor;
  loss_masks: TorchTensor;
  rollout_log_probs: TorchTensor;
  log_probs: TorchTensor;
  response_lengths: number;
}

/** The metrics computed the plain way, straight from the formulas, on the raw tensors. */
function direct(s: RawSample, cap: number) {
  const rollout = Array.from(s.rollout_log_probs.values);
  const trainer = Array.from(s.log_probs.values);
  const mask = Array.from(s.loss_masks.values);
  const deltas = rollout.flatMap((r, i) => (mask[i] === 1 ? [trainer[i]! - r] : []));
  const ratios = deltas.map(Math.exp);
  return {
    tokens: deltas.length,
    meanAbsDelta: deltas.reduce((a, d) => a + Math.abs(d), 0) / deltas.length,
    maxAbsDelta: Math.max(...deltas.map(Math.abs)),
    k3: deltas.reduce((a, d) => a + (Math.exp(d) - 1 - d), 0) / deltas.length,
    maxRatio: Math.max(...ratios),
    pastCapShare: ratios.filter((r) => r > cap || r < 1 / cap).length / ratios.length,
  };
}

describe('rollout vs trainer logprobs', async () => {
  const raw = (await readTorchSave(path.join(DUMPS, 'train_data_0.pt'))) as { samples: RawSample[] };
  for (const layout of ['train_data_0.pt', 'train_data_0_0.pt']) {
    it(`${layout}: every metric equals the direct computation, masked tokens never counted`, async () => {
      const loaded = await loadFile(path.join(DUMPS, layout));
      expect(loaded.format).toBe('slime-train');
      expect(loaded.trajectories).toHaveLength(raw.samples.length);
      loaded.trajectories.forEach((t, k) => {
        const m = logprobMismatch(t)!;
        const d = direct(raw.samples[k]!, DEFAULT_THRESHOLDS.isCap);
        expect(m.tokens).toBe(d.tokens);
        expect(m.meanAbsDelta).toBeCloseTo(d.meanAbsDelta, 12);
        expect(m.maxAbsDelta).toBeCloseTo(d.maxAbsDelta, 12);
        expect(m.k3).toBeCloseTo(d.k3, 12);
        expect(m.maxRatio).toBeCloseTo(d.maxRatio, 12);
        expect(m.pastCapShare).toBeCloseTo(d.pastCapShare, 12);
        // Per turn: the turns partition the trained tokens.
        expect(m.turns.reduce((a, x) => a + x.tokens, 0)).toBe(m.tokens);
      });
    });
  }

  it('says where they part: the drift, the shift by one, the single large mismatch; nothing on equal samples', async () => {
    const loaded = await loadFile(path.join(DUMPS, 'train_data_0.pt'));
    const [drift, shifted, spike, ...equal] = loaded.trajectories.map((t) => mismatchFindings(logprobMismatch(t)));
    // A uniform 0.01-nat drift is under both thresholds: no finding, but the metric sees it.
    expect(drift).toEqual([]);
    expect(logprobMismatch(loaded.trajectories[0]!)!.meanAbsDelta).toBeCloseTo(0.01, 4);
    expect(shifted!.map((f) => [f.kind, f.severity])).toEqual([['logprob_shift', 'error']]);
    expect(shifted![0]!.message).toMatch(/one position later/);
    const s = loaded.trajectories[2]!.sample!;
    const responseStart = s.tokens.length - s.responseLength!;
    expect(spike!.map((f) => [f.kind, f.index, f.stream])).toEqual([
      ['logprob_mismatch', responseStart + 40, 'sample'],
    ]);
    for (const f of equal) expect(f).toEqual([]);
  });

  it('a masked token with a huge difference does not count', async () => {
    const loaded = await loadFile(path.join(DUMPS, 'train_data_0.pt'));
    const t = structuredClone(loaded.trajectories[3]!);
    const mask = t.sample!.lossMask!;
    const masked = mask.indexOf(0);
    expect(masked).toBeGreaterThanOrEqual(0);
    t.sample!.trainerLogprobs![masked] = -50;
    expect(mismatchFindings(logprobMismatch(t))).toEqual([]);
    const unmasked = mask.indexOf(1);
    t.sample!.trainerLogprobs![unmasked] = -50;
    expect(mismatchFindings(logprobMismatch(t)).map((f) => f.kind)).toEqual(['logprob_mismatch']);
  });

  it('run totals weigh trajectories by their trained tokens', async () => {
    const loaded = await loadFile(path.join(DUMPS, 'train_data_0.pt'));
    const ms = loaded.trajectories.map((t) => logprobMismatch(t));
    const total = runMismatch(ms)!;
    const tokens = ms.reduce((a, m) => a + m!.tokens, 0);
    expect(total.tokens).toBe(tokens);
    expect(total.meanAbsDelta).toBeCloseTo(ms.reduce((a, m) => a + m!.meanAbsDelta * m!.tokens, 0) / tokens, 12);
    expect(total.maxAbsDelta).toBe(Math.max(...ms.map((m) => m!.maxAbsDelta)));
  });
});
