// vLLM logs read as vLLM writes them: grouped by vLLM's own session_id, ambiguous prefix chains
// reported instead of guessed, echo logprobs, usage.prompt_tokens, a prompt cut on the left inside
// an image, bad values in a first call, logprob arrays one short/long. Fixtures and the planted
// faults' indices come from test/fixtures/generate-sources.ts.
import { fileContext } from '../server/import/importer.ts';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import { FIXTURES } from './fixtures/generate-vllm.ts';
import { PLANTED_FILE, type Planted } from './fixtures/generate-sources.ts';

const planted = JSON.parse(fs.readFileSync(PLANTED_FILE, 'utf8')) as Planted[];
const fixture = (rel: string) => path.join(FIXTURES, rel);
const byId = (ts: readonly Trajectory[], id: string) => {
  const t = ts.find((x) => x.id === id);
  if (!t) throw new Error(`no trajectory "${id}" among ${ts.map((x) => x.id).join(', ')}`);
  return t;
};
async function check(rel: string) {
  const loaded = await loadFile(fixture(rel));
  expect(loaded.errors).toEqual([]);
  const checked = await Promise.all(
    loaded.trajectories.map((t) => analyzeTrajectory(t, {}, [path.dirname(fixture(rel))])),
  );
  return { loaded, checked };
}

describe('every planted fault is found at its index, and nothing else of its kind', () => {
  const files = [...new Set(planted.map((p) => p.file))].filter((f) => f.startsWith('vllm/'));
  for (const file of files) {
    it(file, async () => {
      const { checked } = await check(file);
      for (const c of checked) {
        const want = planted.filter((p) => p.file === file && p.trajectory === c.trajectory.id);
        const kinds = new Set(want.map((p) => p.kind));
        const got = c.findings.filter((f) => kinds.has(f.kind));
        expect(
          got.map((f) => ({ kind: f.kind, turn: f.turn, index: f.index })),
          `${file} ${c.trajectory.id}`,
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

describe('grouping by the ids vLLM states', () => {
  it("two sessions with the same first turn, second calls in the other order, are grouped by vLLM's request.session_id", async () => {
    const { loaded, checked } = await check('vllm/sessions.jsonl');
    expect(loaded.trajectories.map((t) => [t.id, t.source.lines, t.meta?.groupedBy])).toEqual([
      ['sess-a', [1, 4], 'request.session_id'],
      ['sess-b', [2, 3], 'request.session_id'],
    ]);
    // Each second turn is its own session's (the follow-up question is in its messages).
    const last = (t: Trajectory) => JSON.stringify(t.turns[1]!.messages!.at(-1));
    expect(last(byId(loaded.trajectories, 'sess-a'))).toContain('Why?');
    expect(last(byId(loaded.trajectories, 'sess-b'))).toContain('And the area?');
    for (const c of checked) expect(c.findings.filter((f) => f.severity === 'error')).toEqual([]);
  });

  it('the same calls without ids: both conversations say prefix chaining was ambiguous (not reported clean)', async () => {
    const { checked } = await check('vllm/twins-no-ids.jsonl');
    expect(checked).toHaveLength(2);
    for (const c of checked) {
      const f = c.findings.find((x) => x.kind === 'grouping_ambiguous');
      expect(f?.severity).toBe('error');
      expect(f?.message).toMatch(/session_id/);
    }
    expect(checked[0]!.findings.find((f) => f.kind === 'grouping_ambiguous')!.message).toContain('line 2');
  });

  it('no ambiguity on the clean chained fixtures (GRPO siblings, n = 2)', async () => {
    for (const rel of ['vllm/chat-chained.jsonl', 'vllm/tito.jsonl', 'vllm/completions.jsonl']) {
      const loaded = await loadFile(fixture(rel));
      expect(loaded.trajectories.flatMap((t) => t.sourceFindings ?? [])).toEqual([]);
    }
  });

  it('ids in every place vLLM and the frameworks state them', async () => {
    const { vllmImporter } = await import('../server/import/vllm.ts');
    const base = JSON.parse(fs.readFileSync(fixture('vllm/sessions.jsonl'), 'utf8').split('\n')[0]!);
    delete base.request.session_id;
    const variants: [Record<string, unknown>, string][] = [
      [{ ...base, headers: { 'X-Session-ID': 's1' } }, 'headers.x-session-id'],
      [{ ...base, request: { ...base.request, vllm_xargs: { session_id: 's1' } } }, 'request.vllm_xargs.session_id'],
      [
        { ...base, request: { ...base.request, sampling_params: { extra_args: { session_id: 's1' } } } },
        'request.sampling_params.extra_args.session_id',
      ],
      [{ ...base, request: { ...base.request, session_id: 's1' } }, 'request.session_id'],
      [{ ...base, conversation_id: 's1' }, 'conversation_id'],
    ];
    for (const [value, field] of variants) {
      const r = vllmImporter.importRecords([{ line: 1, offset: 0, length: 1, value }], fileContext('x.jsonl'));
      expect(r.trajectories.map((t) => [t.id, t.meta?.groupedBy])).toEqual([['s1', field]]);
    }
  });
});

describe('echo, usage, truncation, bad values, lengths', () => {
  it('echo: true takes the generated logprobs (the last len(token_ids)), not a length_mismatch', async () => {
    const { loaded, checked } = await check('vllm/echo.jsonl');
    expect(loaded.trajectories).toHaveLength(2);
    const [withIds, fromStrings] = loaded.trajectories;
    expect(fromStrings!.turns[0]!.generatedIds).toEqual(withIds!.turns[0]!.generatedIds);
    expect(fromStrings!.turns[0]!.generatedLogprobs).toEqual(withIds!.turns[0]!.generatedLogprobs);
    for (const t of loaded.trajectories) {
      expect(t.turns[0]!.generatedLogprobs).toHaveLength(t.turns[0]!.generatedIds!.length);
      expect(t.turns[0]!.generatedLogprobs!.every((x) => typeof x === 'number' && x < 0)).toBe(true);
      expect(t.turns[0]!.generatedText).toBeUndefined();
    }
    for (const c of checked) expect(c.findings.filter((f) => f.severity === 'error')).toEqual([]);
  });

  it('usage.prompt_tokens that agrees with the render: no finding', async () => {
    const { checked } = await check('vllm/usage.jsonl');
    // Nothing at all on the clean text-only call (no re-render mismatch past the rendered prompt either).
    const agrees = checked.find((c) => c.trajectory.id === 'usage-agrees')!;
    expect(agrees.findings).toEqual([]);
    const other = checked.find((c) => c.trajectory.id === 'usage-other-template')!;
    expect(other.findings.find((f) => f.kind === 'prompt_tokens_mismatch')!.message).toMatch(
      /another chat template or system prompt/,
    );
  });

  it('a prompt cut on the left inside an image says how many pads of which image are missing', async () => {
    const { checked } = await check('vllm/truncated-left.jsonl');
    const cut = checked.find((c) => c.trajectory.id === 'cut-in-image')!;
    const f = cut.findings.find((x) => x.kind === 'image_truncated' && x.index === 0)!;
    expect(f.message).toMatch(/cut on the left inside image 0/);
    expect(f.message).toMatch(/10 of its \d+ <\|image_pad\|>/);
    // Reported once, as the cut (not also as a short pad run of image 0).
    expect(cut.findings.filter((x) => x.kind === 'placeholder_count')).toEqual([]);
    const whole = checked.find((c) => c.trajectory.id === 'whole')!;
    expect(whole.findings.filter((x) => x.severity === 'error')).toEqual([]);
  });

  it('a bad value in the first call: the conversation keeps its first turn', async () => {
    const { loaded } = await check('vllm/bad-first-call.jsonl');
    expect(loaded.trajectories).toHaveLength(4);
    for (const t of loaded.trajectories) {
      expect(t.turns).toHaveLength(2);
      expect(t.source.line % 2).toBe(1);
    }
  });
});
