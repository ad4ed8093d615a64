import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CheckReport } from '../server/report/check-report.ts';
import { readFileChunks } from '../server/import/stream.ts';
import { loadFile } from '../server/import/index.ts';
import { checkPaths, WORKERS_FROM_BYTES, workersFor } from '../server/pipeline.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURE = 'test/fixtures/slime/samples.jsonl';
const check = (...args: string[]) =>
  spawnSync(process.execPath, ['bin/rollscope.js', 'check', FIXTURE, '--workers', '0', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, NO_COLOR: '1' },
  });

describe('check on a terminal', () => {
  it('summarises by finding kind with examples and file:line by default; --all lists every trajectory', () => {
    const report = CheckReport.parse(JSON.parse(check('--json').stdout));
    const kinds = Object.entries(report.summary.findingsByKind).filter(([, n]) => n > 0);
    expect(kinds.length).toBeGreaterThan(0);

    const summary = check();
    expect(summary.stderr).toBe(''); // no progress line when stderr is not a terminal
    for (const [kind, n] of kinds) expect(summary.stdout).toContain(`${kind}: ${n} finding(s)`);
    expect(summary.stdout).toMatch(new RegExp(`${FIXTURE.replace(/[./]/g, '\\$&')}:\\d+`));
    // Clean trajectories are counted, not listed.
    expect(summary.stdout).not.toContain('✓');
    expect(summary.stdout).toContain(`${report.summary.trajectories} trajectories: ${report.summary.clean} clean`);

    const all = check('--all');
    const listed = all.stdout.split('\n').filter((l) => /^[✓✗!?] /.test(l));
    expect(listed).toHaveLength(report.summary.trajectories);
    expect(all.status).toBe(summary.status);
  });

  it('starts workers by itself only for a big run, and always when asked', () => {
    expect(workersFor(undefined, 50e6)).toBe(0);
    expect(workersFor(0, 10 * WORKERS_FROM_BYTES)).toBe(0);
    expect(workersFor(2, 1000)).toBe(2);
    expect(workersFor(undefined, WORKERS_FROM_BYTES, 2, 0.1)).toBe(0);
    expect(workersFor(undefined, WORKERS_FROM_BYTES, 4, 0.2)).toBe(4);
    expect(workersFor(undefined, WORKERS_FROM_BYTES, 16, 0)).toBe(8);
    // A machine other work keeps busy gets no workers: they would compete with the main thread.
    expect(workersFor(undefined, WORKERS_FROM_BYTES, 2, 1.2)).toBe(0);
    expect(workersFor(undefined, WORKERS_FROM_BYTES, 8, 4)).toBe(4);
    expect(workersFor(3, WORKERS_FROM_BYTES, 2, 9)).toBe(3);
  });

  it('streams slime JSONL in batches (memory bounded by the batch), with the ids of the file loaded whole', async () => {
    const file = path.join(ROOT, FIXTURE);
    const kinds: string[] = [];
    for await (const chunk of readFileChunks(file, { batchLines: 2 })) kinds.push(chunk.kind);
    expect(kinds.length).toBeGreaterThan(1);
    expect(new Set(kinds)).toEqual(new Set(['lines']));
    const whole = (await loadFile(file)).trajectories.map((t) => t.id);
    const streamed: string[] = [];
    for await (const ev of checkPaths([file], { workers: 0 }))
      if (ev.type === 'trajectory') streamed.push(ev.checked.trajectory.id);
    expect(streamed).toEqual(whole);
  });
});
