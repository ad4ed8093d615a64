// The vLLM tool-call conversations of issue 25 end to end: agents calling tools through an OpenAI
// client send assistant messages with `content: null` (test/fixtures/generate-tool-calls.ts).
// Before, the Qwen template's loop over None raised and each trajectory became a read error
// ("cannot analyze trajectory …"); now they are rendered as vLLM renders them, check and export.
// And when a step does fail (the same conversation rendered with transformers' semantics), the
// trajectory is still there with an `analysis_failed` finding, and the checks on its ids still run.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeOrError, analyzeTrajectory } from '../server/pipeline/analyze.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { exportEvents } from '../server/export/run.ts';
import { readManifest } from '../server/export/manifest.ts';
import { comparePair } from '../server/pipeline/compare-runs.ts';
import { nativeJsonl } from '../server/model/native-jsonl.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import type { Finding } from '../server/model/finding.ts';
import type { RunEvent } from '../server/analysis/checked.ts';
import { openRunStore } from '../server/http/store.ts';
import { tokenStream, trajectoryDetail } from '../server/http/views.ts';
import { ListQuery } from '../server/http/api.ts';
import { FIXTURES } from './fixtures/generate-vllm.ts';

const run = promisify(execFile);
const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const LOG = path.join(FIXTURES, 'vllm', 'tool-calls.jsonl');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-tool-calls-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface CheckJson {
  trajectories: { id: string; profile: string; findings: Finding[] }[];
  errors: unknown[];
}

async function checkJson(file: string): Promise<{ status: number; doc: CheckJson }> {
  try {
    const { stdout } = await run(process.execPath, [path.join(REPO, 'bin/rollscope.js'), 'check', '--json', file]);
    return { status: 0, doc: JSON.parse(stdout) as CheckJson };
  } catch (e) {
    const err = e as { code: number; stdout: string };
    return { status: err.code, doc: JSON.parse(err.stdout) as CheckJson };
  }
}

/** The log's conversations as native trajectories (rendered with transformers' semantics: as given). */
async function asNative(): Promise<Trajectory[]> {
  const loaded = await loadFile(LOG);
  return loaded.trajectories.map((t) => ({ ...t, source: { ...t.source, format: 'native' as const } }));
}

describe('a vLLM chat log whose tool-call turns have content null', () => {
  it('checks: every conversation is a trajectory, none a read error; the Qwen3-VL ones are clean', async () => {
    const { doc } = await checkJson(LOG);
    expect(doc.errors).toEqual([]);
    expect(doc.trajectories).toHaveLength(3);
    const byProfile = (p: string) => doc.trajectories.filter((t) => t.profile === p);
    for (const t of byProfile('qwen3-vl')) expect(t.findings, t.id).toEqual([]);
    // Qwen2.5-VL's template writes no tool calls back: the next prompt lost the generated one.
    const [q25] = byProfile('qwen2.5-vl');
    expect(q25!.findings.map((f) => f.kind)).toContain('prefix_break');
    expect(doc.trajectories.flatMap((t) => t.findings).map((f) => f.kind)).not.toContain('analysis_failed');
  });

  it('exports every conversation (the prefix break repaired by the re-alignment)', async () => {
    const out = path.join(dir, 'batch.jsonl');
    const result = await exportRun([LOG], { out, workers: 0 });
    const m = readManifest(result.manifestFile);
    expect(m.counts).toMatchObject({ read: 3, exported: 3, rejected: 0, unreadable: 0 });
    expect(m.counts.repairedByFindingKind.prefix_break).toBe(1);
    const rows = fs
      .readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; images: unknown[] });
    // The tool result's image is one of the row's images.
    expect(rows.find((r) => r.id === 'tools-qwen3-vl')!.images).toHaveLength(2);
  });
});

describe('a step that fails: the trajectory is kept with an analysis_failed finding', () => {
  it('a render that raises (content null with transformers semantics) still checks the ids', async () => {
    const [t] = await asNative();
    // A NaN logprob in the last turn: the value check must still report it.
    t!.turns[2]!.generatedLogprobs![1] = Number.NaN;
    const checked = await analyzeTrajectory(t!, {}, [path.dirname(LOG)]);
    const failed = checked.findings.filter((f) => f.kind === 'analysis_failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({
      severity: 'error',
      turn: 2,
      field: 'turns.2.messages',
      actual: { step: 'render', error: 'Expected iterable or object type in for loop: got NullValue' },
    });
    expect(failed[0]!.message).toMatch(/^the render step failed \(turn 2, turns\.2\.messages\): Expected iterable/);
    expect(checked.findings).toContainEqual(
      expect.objectContaining({ kind: 'invalid_value', field: 'turns.2.generatedLogprobs', turn: 2 }),
    );
    // The re-alignment did not need the render: the canonical stream is there.
    expect(checked.alignment.tokens.length).toBeGreaterThan(t!.turns[2]!.promptIds!.length);
  });

  it('an exception outside any step (a worker that died) still gives the trajectory', async () => {
    const [t] = await asNative();
    const ev = await analyzeOrError(t!, Promise.reject(new Error('worker exited with code 134')), {});
    expect(ev.type).toBe('trajectory');
    if (ev.type !== 'trajectory') return;
    expect(ev.checked.trajectory.turns).toHaveLength(3);
    expect(ev.checked.findings).toEqual([
      expect.objectContaining({
        kind: 'analysis_failed',
        actual: { step: 'checks', error: 'worker exited with code 134' },
      }),
    ]);
  });

  it('export rejects it with its reason, counted in the manifest, never as unreadable', async () => {
    const trajectories = await asNative();
    async function* events(): AsyncGenerator<RunEvent> {
      for (const t of trajectories)
        yield { type: 'trajectory', checked: await analyzeTrajectory(t, {}, [path.dirname(LOG)]) };
    }
    const out = path.join(dir, 'failed.jsonl');
    const result = await exportEvents(events(), { out });
    const c = result.manifest.counts;
    expect(c.unreadable).toBe(0);
    expect(c.read).toBe(c.exported + c.rejected);
    expect(c.byReason.analysis_failed).toBeGreaterThanOrEqual(2);
    expect(c.byFindingKind.analysis_failed).toBe(c.byReason.analysis_failed);
    const rejects = fs
      .readFileSync(result.rejectsFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string | null; reasons: string[]; messages: string[] });
    const failed = rejects.filter((r) => r.reasons.includes('analysis_failed'));
    for (const r of failed) {
      expect(r.id).not.toBeNull();
      expect(r.messages.join('\n')).toMatch(/the render step failed/);
    }
  });

  it('serve lists it with the finding and shows its streams', async () => {
    const served = path.join(dir, 'served');
    fs.mkdirSync(served);
    fs.writeFileSync(path.join(served, 'run.rollscope.jsonl'), nativeJsonl(await asNative()));
    const store = openRunStore([served], { pollMs: 0 });
    await store.ready;
    const list = store.list(ListQuery.parse({ kind: 'analysis_failed', sort: 'id', order: 'asc' }));
    expect(list.total).toBeGreaterThanOrEqual(2);
    const id = list.items[0]!.id;
    const c = (await store.get(id))!;
    const detail = trajectoryDetail(store.summary(id)!, c, store.options());
    expect(detail.findings.some((f) => f.kind === 'analysis_failed')).toBe(true);
    const stream = tokenStream(c, 'prompt', 0, {});
    expect(stream.ids.length).toBeGreaterThan(0);
    store.close();
  });

  it('compare: a pair whose comparison raises gets the finding instead of ending the run', async () => {
    const [t] = await asNative();
    const checked = await analyzeTrajectory(t!, {}, [path.dirname(LOG)]);
    const broken = { ...checked, trajectory: { ...checked.trajectory, sample: { tokens: null } } } as never;
    const findings = comparePair(checked, broken);
    expect(findings).toEqual([
      expect.objectContaining({ kind: 'analysis_failed', actual: expect.objectContaining({ step: 'compare' }) }),
    ]);
  });
});
