// `check --json` carries the rollout-vs-trainer logprob metrics per trajectory and as run totals,
// and its threshold flags reach the analysis.
import { PassThrough } from 'node:stream';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { mismatchThresholds } from '../server/cli/mismatch-options.ts';
import { UsageError } from '../server/cli/command.ts';
import { logprobMismatch, runMismatch, type TrajectoryMismatch } from '../server/analysis/logprob-mismatch.ts';
import { checkPaths } from '../server/pipeline.ts';

const TRAIN = path.join('test', 'fixtures', 'torch', 'train_data_0.pt');
const ROLLOUT = path.join('test', 'fixtures', 'torch', 'rollout_data_0.pt');

async function checkJson(paths: string[], extra: Parameters<typeof runCheck>[1] = { json: true }) {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d: Buffer) => (text += d.toString()));
  const code = await runCheck(paths, { ...extra, json: true, workers: 0 }, out);
  return { code, report: CheckReport.parse(JSON.parse(text)) };
}

describe('check --json logprobs', () => {
  it('per trajectory and in the summary, as logprobMismatch and runMismatch compute them', async () => {
    const { report } = await checkJson([TRAIN]);
    const direct: TrajectoryMismatch[] = [];
    for await (const ev of checkPaths([TRAIN], {})) {
      if (ev.type !== 'trajectory') continue;
      const m = logprobMismatch(ev.checked.trajectory)!;
      direct.push(m);
      const entry = report.trajectories.find((t) => t.id === ev.checked.trajectory.id)!;
      expect(entry.logprobs).toMatchObject({
        tokens: m.tokens,
        meanAbsDelta: m.meanAbsDelta,
        maxAbsDelta: m.maxAbsDelta,
        k3: m.k3,
        maxRatio: m.maxRatio,
        pastCapShare: m.pastCapShare,
        firstPastThreshold: m.firstPastThreshold ?? null,
        shift: m.shift ?? null,
      });
      expect(entry.logprobs!.turns.map((t) => t.turn)).toEqual(m.turns.map((t) => t.turn));
    }
    expect(report.summary.logprobs).toEqual({
      ...runMismatch(direct),
      thresholds: { maxDelta: 1, meanDelta: 0.1, isCap: 2 },
    });
    const spike = report.trajectories.find((t) => t.id === 'rollout-0/sample-2')!;
    expect(spike.logprobs!.firstPastThreshold).toBe(spike.logprobs!.maxAt);
  });

  it('has no logprobs where there are no trainer logprobs', async () => {
    const { report } = await checkJson([ROLLOUT]);
    expect(report.trajectories.every((t) => t.logprobs === undefined)).toBe(true);
    expect(report.summary.logprobs).toBeUndefined();
  });

  it('the threshold flags reach the findings', async () => {
    const kinds = (r: CheckReport) =>
      r.trajectories.flatMap((t) => (t.findings as { kind: string }[]).map((f) => f.kind));
    expect(kinds((await checkJson([TRAIN])).report)).toContain('logprob_mismatch');
    const loose = await checkJson([TRAIN], { json: true, mismatch: mismatchThresholds({ 'max-logprob-delta': '5' }) });
    expect(kinds(loose.report)).not.toContain('logprob_mismatch');
    // A tight mean threshold reports sample 0's 0.01-nat drift too.
    const tight = await checkJson([TRAIN], {
      json: true,
      mismatch: mismatchThresholds({ 'mean-logprob-delta': '0.005' }),
    });
    const drift = tight.report.trajectories.find((t) => t.id === 'rollout-0/sample-0')!;
    expect((drift.findings as { kind: string }[]).map((f) => f.kind)).toContain('logprob_mismatch');
    expect(tight.report.summary.logprobs!.thresholds.meanDelta).toBe(0.005);
  });

  it('refuses a cap of 1 or less and a non-number', () => {
    expect(() => mismatchThresholds({ 'is-cap': '1' })).toThrow(UsageError);
    expect(() => mismatchThresholds({ 'max-logprob-delta': 'x' })).toThrow(/--max-logprob-delta/);
    expect(mismatchThresholds({ 'is-cap': '3' })).toEqual({ maxDelta: 1, meanDelta: 0.1, isCap: 3 });
  });
});
