import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { CheckReport } from '../server/report/check-report.ts';
import { sideReport } from '../server/cli/diff-runs.ts';
import { diffExitStatus, diffFindings, diffRuns, DiffRuns, type DiffFinding } from '../server/report/diff-runs.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BEFORE = 'test/fixtures/vllm/chat-by-id.jsonl';
/** The same run with the duplicated `<|im_end|>` of `sess-dup-eos` fixed (test/fixtures/generate-diff-runs.ts). */
const AFTER = 'test/fixtures/diff-runs/vllm-fixed/chat-by-id.jsonl';
const FIXED_ID = 'sess-dup-eos';

const cli = (...args: string[]) =>
  spawnSync(process.execPath, ['bin/rollscope.js', 'diff-runs', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, NO_COLOR: '1' },
  });

const opts = { workers: 0 };

describe('diff-runs on a run and the same run with one template fix', async () => {
  const before = await sideReport(path.join(ROOT, BEFORE), opts);
  const after = await sideReport(path.join(ROOT, AFTER), opts);

  it('puts the fixed break in findings_removed of exactly its pair, and nothing else changes', () => {
    const broken = before.trajectories.find((t) => t.id === FIXED_ID)!;
    const planted = (broken.findings as DiffFinding[]).filter((f) => f.cause === 'duplicated_eos');
    expect(planted.map((f) => f.kind).sort()).toEqual(['prefix_break', 'rerender_mismatch']);

    const d = DiffRuns.parse(diffRuns(before, after));
    expect(d.pairs).toHaveLength(before.trajectories.length);
    expect(d.only_a).toEqual([]);
    expect(d.only_b).toEqual([]);
    for (const p of d.pairs) {
      expect(p.paired_by).toBe('id');
      expect(p.a.id).toBe(p.b.id);
      expect(p.findings_added).toEqual([]);
      if (p.a.id === FIXED_ID) {
        expect(p.findings_removed).toEqual(planted);
        expect(p.changed).toBe(true);
      } else {
        expect(p.findings_removed).toEqual([]);
        expect(p.changed).toBe(false);
      }
      expect(p.reward_delta ?? 0).toBe(0);
      expect(p.length_delta ?? 0).toBe(0);
      expect(p.mean_abs_delta_change ?? 0).toBe(0);
    }
    expect(d.summary).toMatchObject({
      pairs: 3,
      changed: 1,
      fixed: 1,
      broke: 0,
      findings_added: 0,
      findings_removed: planted.length,
      removed_by_kind: { 'prefix_break/duplicated_eos': 1, 'rerender_mismatch/duplicated_eos': 1 },
      new_error_kinds: [],
      new_finding_kinds: [],
    });
    expect(diffExitStatus(d, 'new-errors')).toBe(0);
  });

  it('the same on a log without ids (a missing newline fixed; trajectories named by their first line)', async () => {
    const chained = {
      a: await sideReport(path.join(ROOT, 'test/fixtures/vllm/chat-chained.jsonl'), opts),
      b: await sideReport(path.join(ROOT, 'test/fixtures/diff-runs/vllm-fixed/chat-chained.jsonl'), opts),
    };
    const d = diffRuns(chained.a, chained.b);
    expect(d.pairs).toHaveLength(chained.a.trajectories.length);
    expect(d.pairs.every((p) => p.same_prompt === true && p.findings_added.length === 0)).toBe(true);
    const changed = d.pairs.filter((p) => p.changed);
    expect(changed).toHaveLength(1);
    expect(changed[0]!.findings_removed.map((f) => `${f.kind}/${f.cause}`)).toEqual(['prefix_break/missing_newline']);
    expect(d.summary).toMatchObject({ fixed: 1, broke: 0, id_pairs_prompt_differs: 0, new_error_kinds: [] });
  });

  it('the other way round, the break is new in its pair and fails --fail-on new-errors', () => {
    const d = diffRuns(after, before);
    const changed = d.pairs.filter((p) => p.changed);
    expect(changed.map((p) => p.a.id)).toEqual([FIXED_ID]);
    expect(changed[0]!.findings_added.map((f) => f.kind).sort()).toEqual(['prefix_break', 'rerender_mismatch']);
    expect(d.summary.new_error_kinds).toEqual(['prefix_break/duplicated_eos', 'rerender_mismatch/duplicated_eos']);
    expect(diffExitStatus(d, 'new-errors')).toBe(1);
    expect(diffExitStatus(d, 'new-findings')).toBe(1);
    expect(diffExitStatus(d, 'never')).toBe(0);
  });

  it('a run against itself changes nothing', () => {
    const d = diffRuns(before, before);
    expect(d.pairs.every((p) => !p.changed && p.findings_moved.length === 0)).toBe(true);
    expect(d.summary.changed).toBe(0);
  });

  it('reads check --json files as well as runs; the CLI writes the contract and exits by --fail-on', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-diff-'));
    const a = path.join(dir, 'before.json');
    fs.writeFileSync(a, JSON.stringify(before));
    const json = cli(a, AFTER, '--json', '--workers', '0');
    expect(json.status, json.stderr).toBe(0);
    const d = DiffRuns.parse(JSON.parse(json.stdout));
    expect(d.pairs.filter((p) => p.findings_removed.length > 0).map((p) => p.a.id)).toEqual([FIXED_ID]);

    const text = cli(AFTER, a, '--workers', '0');
    expect(text.status).toBe(1);
    expect(text.stdout).toContain('broke in 1 pair(s)');
    expect(text.stdout).toContain(`✗ ${FIXED_ID}`);
    expect(text.stdout).toContain('new: prefix_break/duplicated_eos (turn 1, prompt token');
    expect(cli(AFTER, a, '--workers', '0', '--fail-on', 'never').status).toBe(0);
  });

  it('exits 2 on bad arguments and a report that is not valid, naming the file and field', () => {
    expect(cli(BEFORE).status).toBe(2);
    expect(cli(BEFORE, AFTER, '--fail-on', 'sometimes').stderr).toContain('--fail-on takes new-errors');
    expect(cli(BEFORE, 'test/fixtures/no-such-run').status).toBe(2);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-diff-'));
    const bad = path.join(dir, 'bad.json');
    const doc = structuredClone(before) as unknown as { trajectories: { source: { line: unknown } }[] };
    doc.trajectories[1]!.source.line = 'seven';
    fs.writeFileSync(bad, JSON.stringify(doc));
    const r = cli(bad, AFTER);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`${bad}: not a valid check report: trajectories.1.source.line`);
  });
});

const finding = (o: Partial<DiffFinding>): DiffFinding => ({
  kind: 'prefix_break',
  cause: 'duplicated_eos',
  severity: 'error',
  turn: 1,
  index: 70,
  stream: 'prompt',
  message: 'm',
  ...o,
});

describe('findings across a pair', () => {
  it('a finding whose token moved is the same finding, not one removed and one added', () => {
    const a = [finding({ index: 70 }), finding({ kind: 'placeholder_count', cause: undefined, index: 12, turn: 0 })];
    const b = [finding({ index: 74 }), finding({ kind: 'placeholder_count', cause: undefined, index: 12, turn: 0 })];
    const d = diffFindings(a, b);
    expect(d.added).toEqual([]);
    expect(d.removed).toEqual([]);
    expect(d.moved).toEqual([{ finding: b[0], index_a: 70, index_b: 74 }]);
  });

  it('another cause, turn, stream or severity is another finding', () => {
    for (const other of [
      { cause: 'missing_newline' },
      { turn: 2 },
      { stream: 'canonical' },
      { severity: 'warning' },
    ] as Partial<DiffFinding>[]) {
      const d = diffFindings([finding({})], [finding(other)]);
      expect(d.removed).toEqual([finding({})]);
      expect(d.added).toEqual([finding(other)]);
    }
  });

  it('two of the same kind, one gone: the one left at its index is kept', () => {
    const d = diffFindings([finding({ index: 5 }), finding({ index: 9 })], [finding({ index: 9 })]);
    expect(d.removed).toEqual([finding({ index: 5 })]);
    expect(d.added).toEqual([]);
    expect(d.moved).toEqual([]);
  });
});

type Entry = CheckReport['trajectories'][number];
const entry = (id: string, extra: Partial<Entry> & Record<string, unknown> = {}): Entry =>
  ({
    id,
    source: { file: 'run.jsonl', line: 1 },
    format: 'native',
    model: null,
    profile: 'qwen2.5-vl',
    findings: [],
    limitations: [],
    group: null,
    step: null,
    ...extra,
  }) as Entry;
const report = (trajectories: Entry[]): CheckReport => ({
  version: 1,
  trajectories,
  groups: [],
  models: [],
  errors: [],
  summary: {
    trajectories: trajectories.length,
    clean: 0,
    withErrors: 0,
    withWarningsOnly: 0,
    notCheckable: 0,
    unreadableRecords: 0,
    findingsByKind: {},
  },
});

describe('pairing', () => {
  it('a pair by id whose first prompts differ is counted, so ids that are line numbers do not pass unseen', () => {
    const d = diffRuns(
      report([entry('line 3', { prompt_hash: 'p' }), entry('line 5', { prompt_hash: 'q' })]),
      report([entry('line 3', { prompt_hash: 'q' }), entry('line 5', { prompt_hash: 'q' })]),
    );
    expect(d.pairs.map((p) => p.same_prompt)).toEqual([false, true]);
    expect(d.summary.id_pairs_prompt_differs).toBe(1);
  });

  it('by id first (duplicates k-th with k-th), then by prompt: the k-th sample of a prompt with the k-th', () => {
    const a = report([
      entry('x', { step: 1 }),
      entry('x#2', { step: 1 }),
      entry('a-0', { prompt_hash: 'p', reward: 0, step: 2 }),
      entry('a-1', { prompt_hash: 'p', reward: 1, step: 2 }),
      entry('lonely', { prompt_hash: 'q' }),
    ]);
    const b = report([
      entry('x#2', { step: 1 }),
      entry('b-0', { prompt_hash: 'p', reward: 1, step: 2 }),
      entry('b-1', { prompt_hash: 'p', reward: 1, step: 2 }),
      entry('b-2', { prompt_hash: 'p', reward: 1, step: 2 }),
      entry('x', { step: 1 }),
    ]);
    const d = diffRuns(a, b);
    expect(d.pairs.map((p) => [p.a.id, p.b.id, p.paired_by])).toEqual([
      ['x', 'x', 'id'],
      ['x#2', 'x#2', 'id'],
      ['a-0', 'b-0', 'prompt'],
      ['a-1', 'b-1', 'prompt'],
    ]);
    expect(d.pairs[2]!.prompt_samples).toEqual({ a: 2, b: 3 });
    expect(d.pairs.map((p) => p.same_prompt)).toEqual([null, null, true, true]);
    expect(d.pairs[2]!.reward_delta).toBe(1);
    expect(d.only_a.map((e) => e.id)).toEqual(['lonely']);
    expect(d.only_b.map((e) => e.id)).toEqual(['b-2']);
    expect(d.summary.steps.map((s) => [s.step, s.pairs, s.reward_changed, s.only_a, s.only_b])).toEqual([
      [1, 2, 0, 0, 0],
      [2, 2, 1, 0, 1],
      [null, 0, 0, 1, 0],
    ]);
    expect(d.summary.reward_delta_mean).toBe(0.5);
  });
});

describe('per pair changes', () => {
  const lp = (mean: number) => ({
    tokens: 10,
    meanAbsDelta: mean,
    maxAbsDelta: 2 * mean,
    maxAt: 3,
    k3: 0,
    maxRatio: 1,
    pastCapShare: 0,
    firstPastThreshold: null,
    turns: [],
    shift: null,
  });
  it('the length and logprob-mismatch changes, counted per step', () => {
    const d = diffRuns(
      report([
        entry('t', { step: 4, response_tokens: 100, logprobs: lp(0.5) }),
        entry('u', { step: 4, response_tokens: 10 }),
      ]),
      report([
        entry('t', { step: 4, response_tokens: 80, logprobs: lp(0.125) }),
        entry('u', { step: 4, response_tokens: 10 }),
      ]),
    );
    const [t, u] = d.pairs;
    expect(t).toMatchObject({ length_delta: -20, mean_abs_delta_change: -0.375, changed: true });
    expect(t!.logprobs_b).toEqual({ meanAbsDelta: 0.125, maxAbsDelta: 0.25, pastCapShare: 0 });
    expect(u).toMatchObject({ length_delta: 0, mean_abs_delta_change: null, changed: false });
    expect(d.summary.steps).toEqual([
      expect.objectContaining({
        step: 4,
        pairs: 2,
        changed: 1,
        length_changed: 1,
        length_delta_mean: -10,
        logprobs_changed: 1,
      }),
    ]);
  });
});
