// Agent Lightning rollouts whose calls do not extend each other (a merge mismatch, classified as
// Agent Lightning's daemon does), token ids outside the chat format, and a prompt cut on the left
// inside an image. Fixtures and planted indices: test/fixtures/generate-sources.ts.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { FIXTURES } from './fixtures/generate-vllm.ts';
import { PLANTED_FILE, type Planted } from './fixtures/generate-sources.ts';

const planted = JSON.parse(fs.readFileSync(PLANTED_FILE, 'utf8')) as Planted[];

async function check(rel: string) {
  const file = path.join(FIXTURES, rel);
  const loaded = await loadFile(file);
  expect(loaded.format).toBe('agent-lightning');
  expect(loaded.errors).toEqual([]);
  return Promise.all(loaded.trajectories.map((t) => analyzeTrajectory(t, {}, [path.dirname(file)])));
}

describe('every planted fault is found at its index, and nothing else of its kind', () => {
  for (const file of [...new Set(planted.map((p) => p.file))].filter((f) => f.startsWith('agent-lightning/'))) {
    it(file, async () => {
      const checked = await check(file);
      const ids = checked.map((c) => c.trajectory.id);
      for (const p of planted.filter((x) => x.file === file)) expect(ids).toContain(p.trajectory);
      for (const c of checked) {
        const want = planted.filter((p) => p.file === file && p.trajectory === c.trajectory.id);
        const kinds = new Set(want.map((p) => p.kind));
        const got = c.findings.filter((f) => kinds.has(f.kind));
        expect(
          got.map((f) => ({ kind: f.kind, turn: f.turn, index: f.index })),
          c.trajectory.id,
        ).toEqual(want.map((p) => ({ kind: p.kind, turn: p.turn, index: p.index })));
        want.forEach((p, i) => {
          if (p.severity) expect(got[i]!.severity).toBe(p.severity);
          if (p.image !== undefined) expect(got[i]!.image).toBe(p.image);
          if (p.expected !== undefined) expect(got[i]!.expected).toEqual(p.expected);
          if (p.actual !== undefined) expect(got[i]!.actual).toEqual(p.actual);
        });
      }
    });
  }
});

describe('merge mismatches', () => {
  it('a split rollout says where the chain broke and why, in Agent Lightning terms', async () => {
    const checked = await check('agent-lightning/merge-mismatch.jsonl');
    const split = (id: string) =>
      checked.find((c) => c.trajectory.id === id)!.findings.find((f) => f.kind === 'chain_split')!;
    expect(split('ro-template (chain 2 of 2)').message).toMatch(/template_mismatch/);
    expect(split('ro-template (chain 2 of 2)').cause).toBe('template_changed');
    expect(split('ro-retoken (chain 2 of 2)').message).toMatch(/retoken_mismatch/);
    expect(split('ro-retoken (chain 2 of 2)').cause).toBe('retokenized');
    expect(split('ro-retoken (chain 1 of 2)').message).toMatch(/continues in call 2/);
    // A rollout whose calls extend each other stays one clean trajectory.
    const clean = checked.find((c) => c.trajectory.id === 'ro-clean')!;
    expect(clean.trajectory.turns).toHaveLength(2);
    expect(clean.findings).toEqual([]);
  });

  it('the existing clean fixtures get no chain_split', async () => {
    for (const rel of ['completed-rollouts.jsonl', 'events-triplet.json', 'rollout-v02.json', 'triplets-v02.jsonl']) {
      const loaded = await loadFile(path.join(FIXTURES, 'agent-lightning', rel));
      expect(
        loaded.trajectories.flatMap((t) => t.sourceFindings ?? []),
        rel,
      ).toEqual([]);
    }
  });
});

describe('a prompt cut on the left by a max prompt length', () => {
  it('is reported once, at token 0, with the pads missing', async () => {
    const [c] = await check('agent-lightning/truncated-left.jsonl');
    expect(c!.findings.filter((f) => f.severity === 'error').map((f) => [f.kind, f.index])).toEqual([
      ['image_truncated', 0],
    ]);
    expect(c!.findings[0]!.message).toMatch(/10 of its 80 <\|image_pad\|>/);
  });
});

describe('token ids outside the chat format', () => {
  it('one warning that the boundary rules were skipped, not an error per turn', async () => {
    const [c] = await check('agent-lightning/plain-text.jsonl');
    expect(c!.findings.map((f) => [f.kind, f.severity])).toEqual([['chat_format_unrecognized', 'warning']]);
  });

  it('chat-format trajectories get no such warning', async () => {
    const checked = await check('agent-lightning/completed-rollouts.jsonl');
    for (const c of checked) expect(c.findings.filter((f) => f.kind === 'chat_format_unrecognized')).toEqual([]);
  });
});
