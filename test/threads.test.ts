// One run, divided between threads (pipeline/units.ts): `check --json` writes the same bytes with
// 0 threads (the main thread alone), 1 and 3, over the importer fixtures of every format (JSONL
// files streamed, whole JSON, msgpack, torch.save archives, unreadable files and records, ids
// repeated across files) and generated runs (slime with inline images in GRPO groups, rollscope
// JSONL), with the default units and with units small enough that every file but the smallest
// is cut between threads. A shard of a run gives the same report on any number of threads, and a
// thread that dies leaves its unit to the main thread. (Exports: test/export-workers.test.ts.)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateRun, STANDARD_RUN } from '../bench/generate.ts';
import { runCheck } from '../server/cli/check.ts';
import { AnalysisPool } from '../server/analysis-pool.ts';
import { analyzeUnits, checkPaths } from '../server/pipeline.ts';
import { alignedUnits, lineFeedsIn, planUnits, wholeSplits } from '../server/pipeline/units.ts';
import { readLines } from '../server/import/read/lines.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let dir = '';
let slimeRun = '';
let nativeRun = '';

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-threads-'));
  slimeRun = path.join(dir, 'standard', 'run.jsonl');
  await generateRun({ ...STANDARD_RUN, out: slimeRun, trajectories: 40, groupSize: 8, seed: 11 });
  nativeRun = path.join(dir, 'native', 'run.rollscope.jsonl');
  await generateRun({ out: nativeRun, trajectories: 16, groupSize: 4, seed: 13, faultyShare: 0.25 });
}, 240_000);

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

async function report(paths: string[], workers: number, extra: Record<string, unknown> = {}): Promise<string> {
  const out: string[] = [];
  await runCheck(paths, { json: true, workers, ...extra }, { write: (s) => out.push(s) });
  return out.join('');
}

describe('check --json on 0, 1 and 3 threads', () => {
  const inputs = () => [
    { name: 'every format', paths: [path.join(ROOT, 'test', 'fixtures')] },
    // Slime with images inline in GRPO groups, rollscope JSONL with image files, and the slime file
    // again: every id of the copy repeats, and its keys are `ID#2`.
    { name: 'generated runs, one given twice', paths: [slimeRun, nativeRun, slimeRun] },
  ];

  it.each(inputs().map((x) => x.name))(
    '%s: the same bytes',
    async (name) => {
      const input = inputs().find((x) => x.name === name)!;
      const alone = await report(input.paths, 0);
      expect(JSON.parse(alone).trajectories.length).toBeGreaterThan(10);
      expect(await report(input.paths, 1), '1 thread').toBe(alone);
      expect(await report(input.paths, 3, { unitBytes: 16 * 1024 }), '3 threads, small units').toBe(alone);
    },
    600_000,
  );

  it('a shard reads its splits on threads as on the main thread alone', async () => {
    for (const index of [0, 1, 2]) {
      const shard = { index, count: 3 };
      const alone = await report([slimeRun, nativeRun], 0, { shard });
      expect(await report([slimeRun, nativeRun], 3, { shard, unitBytes: 16 * 1024 })).toBe(alone);
    }
  }, 300_000);
});

describe('units', () => {
  it('cut a file at line starts into pieces whose lines, numbered on the main thread, are the lines of the file once each', async () => {
    const all: string[] = [];
    for await (const l of readLines(slimeRun)) all.push(`${l.line}:${l.offset}`);
    const planned = await planUnits(wholeSplits([slimeRun]), 64 * 1024, {});
    expect(planned.length).toBeGreaterThan(4);
    const seen: string[] = [];
    for (const u of alignedUnits(planned)) {
      expect(u.whole).toBe(false);
      for await (const l of readLines(slimeRun, { start: u.from, end: u.to, firstLine: u.firstLine }))
        seen.push(`${l.line}:${l.offset}`);
    }
    expect(seen).toEqual(all);
    expect(lineFeedsIn(slimeRun, 0, fs.statSync(slimeRun).size)).toBe(all.length);
  });

  it('are divided between the threads: each thread reads some, every unit is read once, none on the main thread', async () => {
    const expected: string[] = [];
    for await (const ev of checkPaths([slimeRun], { workers: 0, reportOnly: true, noStreams: true }))
      if (ev.type === 'trajectory') expected.push(ev.checked.trajectory.id);
    const pool = new AnalysisPool(2);
    try {
      const planned = await planUnits(wholeSplits([slimeRun]), 64 * 1024, {});
      const got: string[] = [];
      for await (const ev of analyzeUnits(
        alignedUnits(planned),
        { reportOnly: true, noStreams: true },
        [path.dirname(slimeRun)],
        pool,
      ))
        if (ev.type === 'trajectory') got.push(ev.checked.trajectory.id);
      expect(got).toEqual(expected);
      // Every unit came back from a worker (a unit read on the main thread is counted by none).
      expect(pool.unitsRead.reduce((a, b) => a + b, 0)).toBe(planned.length);
      for (const n of pool.unitsRead) expect(n).toBeGreaterThan(0);
    } finally {
      await pool.close();
    }
  }, 300_000);

  it('a unit whose thread dies is read on the main thread, its events already given not given twice', async () => {
    const expected: string[] = [];
    for await (const ev of checkPaths([slimeRun], { workers: 0, reportOnly: true, noStreams: true }))
      if (ev.type === 'trajectory') expected.push(ev.checked.trajectory.id);
    const pool = new AnalysisPool(2);
    try {
      const planned = await planUnits(wholeSplits([slimeRun]), 64 * 1024, {});
      const got: string[] = [];
      let killed = false;
      for await (const ev of analyzeUnits(
        alignedUnits(planned),
        { reportOnly: true, noStreams: true },
        [path.dirname(slimeRun)],
        pool,
      )) {
        if (ev.type !== 'trajectory') continue;
        got.push(ev.checked.trajectory.id);
        if (!killed) {
          killed = true;
          // Both workers die while their units are in flight: every unit left is read here.
          await Promise.all(
            (pool as unknown as { slots: { worker: { terminate(): Promise<number> } }[] }).slots.map((s) =>
              s.worker.terminate(),
            ),
          );
        }
      }
      expect(got).toEqual(expected);
    } finally {
      await pool.close();
    }
  }, 300_000);
});
