// The server's run index built where each trajectory was analyzed (RunOptions `storeIndex`: a
// batch, on a worker or on this thread, hands out the summary facts, packed token set and group
// member instead of the streams) lists what the store builds from the full trajectories: the same summaries, the
// same answers to token-id queries, the same groups and steps; and a trajectory asked for in full
// still comes with its streams.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateRun, STANDARD_RUN } from '../bench/generate.ts';
import { AnalysisPool } from '../server/analysis-pool.ts';
import { indexFacts } from '../server/analysis/index-facts.ts';
import { logprobMismatch } from '../server/analysis/logprob-mismatch.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { analyzeInputs, type PipelineInput } from '../server/pipeline.ts';
import { readLines, type RecordLine } from '../server/import/read/lines.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURES = path.join(ROOT, 'test', 'fixtures');

let dir: string;
let generated: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-store-index-'));
  generated = path.join(dir, 'standard.jsonl');
  // GRPO groups of the standard run's shape (slime, inline images), with trainer logprobs.
  await generateRun({ ...STANDARD_RUN, trajectories: 48, out: generated });
}, 240_000);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const EVERYTHING = { offset: 0, limit: 100_000 } as const;

/** Token ids to query by: some of every trajectory's canonical stream, and one no tokenizer has. */
async function probeIds(store: RunStore): Promise<number[]> {
  const ids = new Set<number>([987_654_321]);
  for (const s of store.list({ sort: 'file', order: 'asc', ...EVERYTHING }).items) {
    const tokens = (await store.get(s.id))?.alignment.tokens ?? [];
    for (const at of [0, 7, Math.floor(tokens.length / 2), tokens.length - 1]) {
      const id = tokens[at];
      if (id !== undefined) ids.add(id);
    }
  }
  return [...ids].sort((a, b) => a - b).slice(0, 40);
}

/** Everything the store answers about its index, in one comparable value. */
function answers(store: RunStore, probes: readonly number[]) {
  const list = store.list({ sort: 'file', order: 'asc', ...EVERYTHING });
  return {
    summaries: JSON.stringify(list.items.map((s) => store.summary(s.id))),
    byToken: probes.map((id) => ({
      id,
      matches: store.list({ sort: 'id', order: 'asc', q: String(id), ...EVERYTHING }).items.map((s) => s.id),
    })),
    byFindings: store.list({ sort: 'findings', order: 'desc', ...EVERYTHING }).items.map((s) => s.id),
    byGroup: store.list({ sort: 'group', order: 'asc', ...EVERYTHING }).items.map((s) => s.id),
    groups: store.groups({ members: 'true', ...EVERYTHING }),
    groupFindings: list.items.map((s) => store.groupFindings(s.id)),
    steps: store.steps(),
    info: { ...store.info(), revision: 0 },
  };
}

describe.each([
  {
    name: 'the fixtures of every format',
    paths: () => [
      path.join(FIXTURES, 'vllm', 'chat-by-id.jsonl'),
      path.join(FIXTURES, 'vllm', 'malformed.jsonl'),
      path.join(FIXTURES, 'slime', 'samples.jsonl'),
      path.join(FIXTURES, 'groups', 'slime', 'samples.jsonl'),
      path.join(FIXTURES, 'groups', 'verl'),
      path.join(FIXTURES, 'verl', 'agent_loop.jsonl'),
      path.join(FIXTURES, 'areal', 'trajectories.json'),
      path.join(FIXTURES, 'prime-rl', 'training-samples', 'rank_0.bin'),
      path.join(FIXTURES, 'agent-lightning', 'completed-rollouts.jsonl'),
      // A slime train dump: trainer logprobs beside the rollout's (the summary's mismatch figures).
      path.join(FIXTURES, 'torch', 'train_data_0.pt'),
    ],
    withLogprobs: true,
  },
  { name: 'a generated run', paths: () => [generated], withLogprobs: false },
])('the run index of $name', ({ paths, withLogprobs }) => {
  /** Indexed from the full trajectories, on this thread (the store's own pass over the streams). */
  let fromFull: RunStore;
  let onThisThread: RunStore;
  let onOneWorker: RunStore;
  let onWorkers: RunStore;
  beforeAll(async () => {
    fromFull = openRunStore(paths(), { pollMs: 0, workers: 0, storeIndex: false });
    onThisThread = openRunStore(paths(), { pollMs: 0, workers: 0 });
    onOneWorker = openRunStore(paths(), { pollMs: 0, workers: 1, poolFromBytes: 0 });
    onWorkers = openRunStore(paths(), { pollMs: 0, workers: 2, poolFromBytes: 0 });
    await Promise.all([fromFull.ready, onThisThread.ready, onOneWorker.ready, onWorkers.ready]);
  }, 240_000);
  afterAll(() => {
    for (const s of [fromFull, onThisThread, onOneWorker, onWorkers]) s?.close();
  });

  it('built in the batch and on the workers lists the same entries as built from the full trajectories', async () => {
    const probes = await probeIds(fromFull);
    const expected = answers(fromFull, probes);
    expect(expected.byToken.some((q) => q.matches.length > 0)).toBe(true);
    const summaries = JSON.parse(expected.summaries) as { mismatch: unknown }[];
    expect(summaries.length).toBeGreaterThan(0);
    expect(summaries.some((s) => s.mismatch !== null)).toBe(withLogprobs);
    expect(expected.groups.items.length).toBeGreaterThan(0);
    expect(answers(onThisThread, probes)).toEqual(expected);
    expect(answers(onOneWorker, probes), 'one worker').toEqual(expected);
    expect(answers(onWorkers, probes), 'two workers').toEqual(expected);
  }, 120_000);

  it('gives the full analysis, streams and all, of a trajectory indexed without its streams', async () => {
    for (const s of fromFull.list({ sort: 'file', order: 'asc', offset: 0, limit: 6 }).items) {
      const full = await fromFull.get(s.id);
      for (const store of [onThisThread, onOneWorker, onWorkers]) {
        const got = await store.get(s.id);
        expect(got?.alignment.tokens, s.id).toEqual(full?.alignment.tokens);
        expect(got?.trajectory.turns, s.id).toEqual(full?.trajectory.turns);
        expect(got?.findings, s.id).toEqual(full?.findings);
      }
    }
  }, 120_000);
});

describe('a served run on workers', () => {
  it('comes back with its index facts and without its streams', async () => {
    const lines: RecordLine[] = [];
    for await (const l of readLines(generated)) lines.push(l);
    async function* inputs(): AsyncGenerator<PipelineInput> {
      yield { kind: 'lines', file: generated, format: 'slime', lines };
      yield { kind: 'end', file: generated };
    }
    const full = new Map<string, ReturnType<typeof indexFacts>>();
    for await (const ev of analyzeInputs(inputs(), {}, [dir]))
      if (ev.type === 'trajectory')
        full.set(ev.checked.trajectory.id, indexFacts(ev.checked, logprobMismatch(ev.checked.trajectory)));
    const pool = new AnalysisPool(2);
    try {
      let seen = 0;
      for await (const ev of analyzeInputs(inputs(), { storeIndex: true }, [dir], pool)) {
        if (ev.type !== 'trajectory') continue;
        seen++;
        const c = ev.checked;
        expect(c.alignment.tokens).toEqual([]);
        expect(c.trajectory.turns.every((t) => (t.promptIds?.length ?? 0) === 0)).toBe(true);
        expect(c.report?.member).not.toBeNull();
        const { tokenSet, ...facts } = c.index!;
        const { tokenSet: fullSet, ...fullFacts } = full.get(c.trajectory.id)!;
        expect(facts).toEqual(fullFacts);
        expect(Buffer.from(tokenSet).equals(Buffer.from(fullSet))).toBe(true);
      }
      expect(seen).toBe(full.size);
      expect(seen).toBeGreaterThan(0);
    } finally {
      await pool.close();
    }
  }, 240_000);
});
