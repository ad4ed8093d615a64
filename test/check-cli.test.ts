import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CheckReport } from '../server/report/check-report.ts';
import { readFileChunks } from '../server/import/stream.ts';
import { loadFile } from '../server/import/index.ts';
import { checkPaths, THREADS_FROM_BYTES, workersFor } from '../server/pipeline.ts';

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

  it('starts threads by itself for a big run on every core it may use, and always as many as asked', () => {
    expect(workersFor(undefined, THREADS_FROM_BYTES - 1, 8)).toBe(0);
    expect(workersFor(undefined, THREADS_FROM_BYTES, 2)).toBe(2);
    expect(workersFor(undefined, 10 * THREADS_FROM_BYTES, 16)).toBe(16);
    // One core: the main thread alone (a worker would only add its start-up).
    expect(workersFor(undefined, 10 * THREADS_FROM_BYTES, 1)).toBe(0);
    expect(workersFor(0, 10 * THREADS_FROM_BYTES, 8)).toBe(0);
    expect(workersFor(2, 1000, 1)).toBe(2);
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
