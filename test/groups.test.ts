// GRPO group checks (server/analysis/groups.ts), the step of a trajectory, and the `groups` list
// of `check --json` on fixtures that state steps and groups (test/fixtures/generate-groups.ts).
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { GroupChecks, groupMember, type GroupMember } from '../server/analysis/groups.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { loadProfile, visionIdsOf } from '../server/profiles/profile.ts';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { stepFromPath, stepOf } from '../server/import/step.ts';
import { loadFile } from '../server/import/index.ts';
import { SLIME_GROUPS, VERL_GROUPS } from './fixtures/generate-groups.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

function checksOf(members: Partial<GroupMember>[]): GroupChecks {
  const checks = new GroupChecks();
  for (const m of members) checks.add({ group: 'g', ...m });
  return checks;
}
const fields = (checks: GroupChecks) => checks.summaries()[0]!.findings.map((f) => f.field);

describe('group checks', () => {
  it('flags a group whose rewards are all equal, and not one whose rewards differ', () => {
    const equal = checksOf([1, 1, 1].map((reward, i) => ({ reward, sample: `s${i}`, prompt: 'p' })));
    expect(fields(equal)).toEqual(['reward']);
    expect(equal.summaries()[0]).toMatchObject({ size: 3, reward_mean: 1, reward_std: 0, degenerate: true });
    const mixed = checksOf([1, 0, 1, 0].map((reward, i) => ({ reward, sample: `s${i}`, prompt: 'p' })));
    expect(fields(mixed)).toEqual([]);
    expect(mixed.summaries()[0]).toMatchObject({ reward_mean: 0.5, reward_std: 0.5, degenerate: false });
  });

  it('says nothing of a group of one, or of rewards not all stated', () => {
    expect(fields(checksOf([{ reward: 1, sample: 'a' }]))).toEqual([]);
    expect(
      fields(
        checksOf([
          { reward: 1, sample: 'a' },
          { reward: null, sample: 'b' },
        ]),
      ),
    ).toEqual([]);
    expect(checksOf([{ sample: 'a' }, { sample: 'b' }]).summaries()[0]).toMatchObject({
      reward_mean: null,
      reward_std: null,
      degenerate: false,
    });
  });

  it('flags token-identical samples only when every sample is the same', () => {
    expect(fields(checksOf([{ sample: 'x' }, { sample: 'x' }, { sample: 'x' }]))).toEqual(['sample']);
    expect(fields(checksOf([{ sample: 'x' }, { sample: 'x' }, { sample: 'y' }]))).toEqual([]);
    expect(fields(checksOf([{ sample: 'x' }, { sample: 'x' }, {}]))).toEqual([]);
    // A group remembers its first sample and whether any other differed, not every sample.
    expect(fields(checksOf([{ sample: 'x' }, { sample: 'y' }, { sample: 'x' }]))).toEqual([]);
    expect(fields(checksOf([{}, { sample: 'x' }, { sample: 'x' }]))).toEqual([]);
  });

  it('flags a group whose samples were asked different prompts, without calling it degenerate', () => {
    const checks = checksOf([
      { prompt: 'p', sample: 'a', reward: 1 },
      { prompt: 'q', sample: 'b', reward: 0 },
    ]);
    expect(fields(checks)).toEqual(['prompt']);
    expect(checks.summaries()[0]!.degenerate).toBe(false);
  });

  // A multi-turn sample: prompt (with one image) ⧺ response; a tool in the response returns a second image.
  const vision = visionIdsOf(loadProfile('qwen2.5-vl'))!;
  const { imageBegin: VS, imagePad: PAD } = vision;
  const VE = qwenNamed(loadProfile('qwen2.5-vl').ids).visionEnd;
  const prompt = [1, 2, VS, PAD, PAD, VE, 3];
  const member = (o: { answer: number[]; images: string[]; mask?: number[]; promptIds?: number[] }) =>
    groupMember(
      Trajectory.parse({
        id: 'x',
        source: { file: 'f.jsonl', line: 1, format: 'slime' },
        group: 'g',
        reward: o.answer[0]! % 2,
        turns: [{ promptIds: o.promptIds ?? prompt, generatedIds: o.answer.slice(0, 2) }],
        images: o.images.map((url) => ({ url })),
        sample: {
          tokens: [...prompt, ...o.answer],
          responseLength: o.answer.length,
          lossMask: o.mask ?? o.answer.map(() => 1),
        },
      }),
      vision,
    )!;

  it('compares what the prompt shows: images a tool returned later, or turns cut by a shifted mask, are not another prompt', () => {
    const answer = (k: number) => [10 + k, 11, VS, PAD, VE, 12];
    const checks = checksOf([
      member({ answer: answer(0), images: ['a.png', 'zoom-0.png'] }),
      member({ answer: answer(1), images: ['a.png', 'zoom-1.png'] }),
      // Turns cut from a mask shifted by one start the first turn one token late.
      member({
        answer: answer(2),
        images: ['a.png', 'zoom-2.png'],
        promptIds: [...prompt, 12],
        mask: [0, 1, 1, 1, 1, 1],
      }),
    ]);
    expect(fields(checks)).toEqual([]);
    const other = checksOf([
      member({ answer: answer(0), images: ['a.png', 'zoom-0.png'] }),
      member({ answer: answer(1), images: ['b.png', 'zoom-1.png'] }),
    ]);
    expect(fields(other)).toEqual(['prompt']);
  });

  it('keeps the same group id at two steps apart', () => {
    const checks = new GroupChecks();
    checks.add({ group: '0', step: 1, reward: 1 });
    checks.add({ group: '0', step: 2, reward: 1 });
    expect(checks.summaries().map((g) => [g.id, g.step, g.size])).toEqual([
      ['0', 1, 1],
      ['0', 2, 1],
    ]);
  });
});

describe('step of a trajectory', () => {
  it('reads step folders and step-named files, closest to the file first', () => {
    expect(stepFromPath(path.join('run', 'rollouts', 'step_12', 'rank_0.bin'))).toBe(12);
    expect(stepFromPath(path.join('ckpt', 'global_step_40', 'step_3', 'a.jsonl'))).toBe(3);
    expect(stepFromPath(path.join('dumps', 'step-7.jsonl.gz'))).toBe(7);
    expect(stepFromPath(path.join('run', 'steps', 'samples.jsonl'))).toBeUndefined();
    expect(stepFromPath(path.join('run', 'stepper_1', 'x.jsonl'))).toBeUndefined();
  });

  it('accepts stated steps as integers or digit strings only', () => {
    expect(stepOf(4)).toBe(4);
    expect(stepOf('4')).toBe(4);
    expect(stepOf(-1)).toBeUndefined();
    expect(stepOf(1.5)).toBeUndefined();
    expect(stepOf('v4')).toBeUndefined();
  });

  it('takes AReaL versions as the step, and prime-rl its step folder and stored advantage', async () => {
    const dump = await loadFile(path.join(FIXTURES, 'areal', 'rollout', '4', '17.jsonl'));
    expect(dump.trajectories.map((t) => [t.step, t.group])).toEqual(dump.trajectories.map(() => [4, '17']));
    const tensors = await loadFile(path.join(FIXTURES, 'areal', 'trajectories.json'));
    expect(
      tensors.trajectories.every((t) => t.step === (t.meta?.policy_versions as { max: number } | undefined)?.max),
    ).toBe(true);
    const prime = await loadFile(path.join(FIXTURES, 'prime-rl', 'rollouts', 'step_0', 'rank_0.bin'));
    expect(prime.trajectories.length).toBeGreaterThan(0);
    expect(prime.trajectories.every((t) => t.step === 0)).toBe(true);
    expect(prime.trajectories.some((t) => typeof t.advantage === 'number')).toBe(true);
    const unstepped = await loadFile(path.join(FIXTURES, 'prime-rl', 'training-samples', 'rank_0.bin'));
    expect(unstepped.trajectories.every((t) => t.step === undefined)).toBe(true);
  });

  it('takes slime rollout_id as the step and a verl step folder as the step', async () => {
    const slime = await loadFile(path.join(FIXTURES, 'groups', 'slime', 'samples.jsonl'));
    expect(new Set(slime.trajectories.map((t) => t.step))).toEqual(new Set([0, 1]));
    const verl = await loadFile(path.join(FIXTURES, 'groups', 'verl', 'step_3', 'agent_loop.jsonl'));
    expect(verl.trajectories.map((t) => [t.step, t.group])).toEqual([
      [3, 'a'],
      [3, 'a'],
      [3, 'b'],
      [3, 'b'],
    ]);
  });
});

describe('check --json groups', () => {
  let report: CheckReport;
  beforeAll(async () => {
    let text = '';
    const out = new Writable({
      write(chunk, _enc, done) {
        text += String(chunk);
        done();
      },
    });
    const status = await runCheck([path.join(FIXTURES, 'groups')], { json: true }, out);
    expect(status).toBe(0); // group findings are warnings
    report = CheckReport.parse(JSON.parse(text));
  }, 60_000);

  it('lists every planted group with its step and size, degenerate ones (and only those) flagged', () => {
    const planted = [...SLIME_GROUPS, ...VERL_GROUPS];
    expect(report.groups.map((g) => ({ id: g.id, step: g.step, size: g.size, degenerate: g.degenerate }))).toEqual(
      planted.map((g) => ({ id: g.group, step: g.step, size: g.samples.length, degenerate: g.degenerate })),
    );
    expect(report.groups.map((g) => g.findings.map((f) => (f as { field: string }).field))).toEqual(
      planted.map((g) => g.findings),
    );
  });

  it('gives each group the mean and spread of its stated rewards', () => {
    const planted = [...SLIME_GROUPS, ...VERL_GROUPS];
    report.groups.forEach((g, i) => {
      const rewards = planted[i]!.samples.map((s) => s.reward);
      const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
      const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / rewards.length);
      expect(g.reward_mean).toBeCloseTo(mean, 12);
      expect(g.reward_std).toBeCloseTo(std, 12);
    });
  });

  it('lists its group’s findings in every member’s findings too, after its own, counted once per group', () => {
    const groups = new Map(report.groups.map((g) => [`${g.step}:${g.id}`, g]));
    let listed = 0;
    for (const t of report.trajectories) {
      const g = groups.get(`${t.step}:${t.group}`)!;
      const own = t.findings.filter((f) => (f as { kind: string }).kind !== 'group');
      expect(t.findings, t.id).toEqual([...own, ...g.findings]);
      listed += g.findings.length;
    }
    expect(listed).toBeGreaterThan(report.summary.findingsByKind.group!);
    // A member whose only findings are its group's is still clean: they never decide a trajectory's health.
    const clean = report.trajectories.filter((t) => t.findings.every((f) => (f as { kind: string }).kind === 'group'));
    expect(report.summary.clean).toBe(clean.length);
  });

  it('names each trajectory its group and step, and counts the group findings', () => {
    expect(report.trajectories.every((t) => t.group !== null && t.step !== null)).toBe(true);
    expect(report.trajectories.filter((t) => t.step === 3).map((t) => t.group)).toEqual(['a', 'a', 'b', 'b']);
    const planted = [...SLIME_GROUPS, ...VERL_GROUPS].reduce((n, g) => n + g.findings.length, 0);
    expect(report.summary.findingsByKind.group).toBe(planted);
  });
});
