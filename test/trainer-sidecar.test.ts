// The trainer sidecar (docs/native-format.md, "Trainer sidecar"): trainer arrays for a run whose
// trainer rollscope does not read, joined to the trajectories by id before the checks.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readTrainerSidecar } from '../server/import/trainer-sidecar.ts';

const ROOT = path.join(import.meta.dirname, '..');
const SAMPLES = path.join(ROOT, 'test', 'fixtures', 'slime', 'samples.jsonl');

describe('trainer sidecar', () => {
  const records = fs
    .readFileSync(SAMPLES, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { index: number; rollout_log_probs: number[] });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-sidecar-'));
  const sidecar = path.join(dir, 'trainer.jsonl');
  const lp0 = records[0]!.rollout_log_probs;
  const lp1 = records[1]!.rollout_log_probs;
  fs.writeFileSync(
    sidecar,
    [
      JSON.stringify({ trajectory_id: 'sample-0', log_probs: lp0, ref_log_probs: lp0.map((x) => x - 0.1) }),
      JSON.stringify({ trajectory_id: 'sample-1', log_probs: [lp1[0], ...lp1.slice(0, -1)] }),
      JSON.stringify({ trajectory_id: 'sample-2', log_probs: 'not a list' }),
      '{"log_probs": [1, 2',
      '',
    ].join('\n'),
  );

  it('reads each line, and names the file, line and field of the bad ones', async () => {
    const { side, errors } = await readTrainerSidecar(sidecar);
    expect(Object.keys(side)).toEqual(['sample-0', 'sample-1']);
    expect(side['sample-0']!.refLogprobs).toHaveLength(lp0.length);
    expect(errors.map((e) => [e.file, e.line, e.field])).toEqual([
      [sidecar, 3, 'log_probs'],
      [sidecar, 4, expect.anything()],
    ]);
  });

  it('check --trainer joins it by id: metrics where it names a trajectory, the shift found, the bad lines an error', () => {
    const r = spawnSync(
      process.execPath,
      [path.join(ROOT, 'bin', 'rollscope.js'), 'check', SAMPLES, '--trainer', sidecar, '--json'],
      {
        encoding: 'utf8',
        cwd: ROOT,
      },
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`${sidecar}:3 log_probs`);
    const report = JSON.parse(r.stdout) as {
      trajectories: { id: string; logprobs?: { meanAbsDelta: number }; findings: { kind: string }[] }[];
    };
    const byId = Object.fromEntries(report.trajectories.map((t) => [t.id, t]));
    expect(byId['sample-0']!.logprobs!.meanAbsDelta).toBe(0);
    expect(byId['sample-1']!.findings.map((f) => f.kind)).toContain('logprob_shift');
    expect(byId['sample-3']!.logprobs).toBeUndefined();
    const missing = spawnSync(
      process.execPath,
      [path.join(ROOT, 'bin', 'rollscope.js'), 'check', SAMPLES, '--trainer', path.join(dir, 'nope.jsonl')],
      { encoding: 'utf8', cwd: ROOT },
    );
    expect([missing.status, missing.stderr]).toEqual([2, expect.stringContaining('--trainer: no such file')]);
  });
});
