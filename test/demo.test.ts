// The demo run: written to a temp folder, read back through the same pipeline as `rollscope
// check`, and every trajectory held to what its id promises. Byte-identical across runs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DivergenceCause, Finding, FindingKind } from '../server/model/finding.ts';
import type { ReadError } from '../server/model/trajectory.ts';
import { checkPaths, type CheckedTrajectory } from '../server/pipeline.ts';
import { DEMO_DESCRIPTION, DEMO_FILE, DEMO_VLLM_FILE, writeDemoRun } from '../server/demo/write.ts';
import { command as demoCommand } from '../server/cli/commands/demo.ts';
import { UsageError } from '../server/cli/command.ts';

const EOS = 151645;
const NL = 198;
const IM_START = 151644;
const ENDOFTEXT = 151643;
const VISION_START = 151652;
const IMAGE_PAD = 151655;

/** What each failure tag in an id promises: the first error-level finding's kind, and its cause for divergences. */
const PROMISES: { tag: string; kind: FindingKind; cause?: DivergenceCause; prefixBreak?: boolean }[] = [
  { tag: 'dup-eos', kind: 'prefix_break', cause: 'duplicated_eos', prefixBreak: true },
  { tag: 'retokenized', kind: 'prefix_break', cause: 'retokenized', prefixBreak: true },
  { tag: 'tool-json-reserialized', kind: 'prefix_break', cause: 'tool_call_reserialized', prefixBreak: true },
  { tag: 'reasoning-stripped', kind: 'prefix_break', cause: 'reasoning_stripped', prefixBreak: true },
  { tag: 'secondary-eos', kind: 'prefix_break', cause: 'secondary_eos', prefixBreak: true },
  { tag: 'vision-token-generated', kind: 'image_count', cause: 'vision_token_generated' },
  { tag: 'placeholder-in-text', kind: 'image_count', cause: 'placeholder_in_text' },
  { tag: 'missing-newline', kind: 'prefix_break', cause: 'missing_newline', prefixBreak: true },
  { tag: 'pads-max-pixels', kind: 'placeholder_count' },
  { tag: 'image-truncated', kind: 'image_truncated' },
  { tag: 'image-dropped', kind: 'image_count' },
  { tag: 'mask-shifted', kind: 'mask_mismatch' },
  { tag: 'logprobs-short', kind: 'length_mismatch' },
  { tag: 'nan-logprob', kind: 'invalid_value' },
  { tag: 'zero-filled-logprobs', kind: 'invalid_value', cause: 'zero_filled_logprobs' },
];

let dirA = '';
let dirB = '';
let written: { files: string[]; trajectories: number };
const checked = new Map<string, CheckedTrajectory>();
const readErrors: ReadError[] = [];

beforeAll(async () => {
  dirA = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-demo-a-'));
  dirB = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-demo-b-'));
  written = await writeDemoRun(dirA);
  await writeDemoRun(path.join(dirB, 'nested', 'run'));
  for await (const ev of checkPaths([dirA], {})) {
    if (ev.type === 'error') readErrors.push(ev.error);
    if (ev.type === 'trajectory') checked.set(ev.checked.trajectory.id, ev.checked);
  }
}, 60_000);

afterAll(() => {
  for (const d of [dirA, dirB]) if (d) fs.rmSync(d, { recursive: true, force: true });
});

const errors = (c: CheckedTrajectory): Finding[] => c.findings.filter((f) => f.severity === 'error');

describe('rollscope demo run', () => {
  it('writes a native JSONL, a vLLM call log and the PNG diagrams they refer to by relative path; everything reads back', () => {
    expect(readErrors).toEqual([]);
    expect(written.files.slice(0, 2)).toEqual([path.join(dirA, DEMO_FILE), path.join(dirA, DEMO_VLLM_FILE)]);
    expect(written.files.slice(2).every((f) => f.startsWith(path.join(dirA, 'images')) && f.endsWith('.png'))).toBe(
      true,
    );
    expect(written.trajectories).toBe(checked.size);
    expect(checked.size).toBeGreaterThanOrEqual(12);
    expect(checked.size).toBeLessThanOrEqual(24);
    expect([...checked.keys()].sort()).toEqual(Object.keys(DEMO_DESCRIPTION).sort());
    const formats = [...checked.values()].map((c) => c.trajectory.source.format);
    expect(new Set(formats)).toEqual(new Set(['native', 'vllm']));
    for (const c of checked.values()) {
      for (const img of c.trajectory.images) {
        expect(path.isAbsolute(img.url!)).toBe(false);
        // Sizes come from the PNG bytes (sharp), not from the record.
        expect(img).toMatchObject({ sizeFrom: 'bytes' });
        expect(img.unavailable).toBeUndefined();
      }
    }
    const sizes = new Set(
      [...checked.values()].flatMap((c) => c.trajectory.images.map((i) => `${i.width}x${i.height}`)),
    );
    expect(sizes).toContain('448x336');
    expect(sizes).toContain('640x480');
    expect([...sizes].some((s) => Number(s.split('x')[1]) > 2 * Number(s.split('x')[0]))).toBe(true); // a tall diagram
  });

  it('every trajectory shows what its id promises: clean ones have no findings, broken ones their failure first', () => {
    for (const id of Object.keys(DEMO_DESCRIPTION)) {
      const c = checked.get(id);
      if (!c) throw new Error(`${id} was not read back`);
      const promise = PROMISES.filter((p) => id.includes(`-${p.tag}`));
      if (id.includes('-clean')) {
        expect(promise, id).toEqual([]);
        expect(DEMO_DESCRIPTION[id], id).toBe('clean');
        expect(c.findings, id).toEqual([]);
        continue;
      }
      expect(promise, `${id} names no known failure`).toHaveLength(1);
      const p = promise[0]!;
      expect(DEMO_DESCRIPTION[id], id).not.toBe('clean');
      const first = errors(c)[0];
      expect(first, id).toMatchObject({ kind: p.kind, ...(p.cause ? { cause: p.cause } : {}) });
      // Every error in the trajectory is the same failure seen from another stream, never a second, unrelated one.
      if (p.cause)
        expect(
          errors(c).every((f) => f.cause === p.cause),
          id,
        ).toBe(true);
      else
        expect(
          errors(c).every((f) => f.kind === p.kind),
          id,
        ).toBe(true);
      if (p.prefixBreak)
        expect(
          c.findings.find((f) => f.kind === 'prefix_break'),
          id,
        ).toMatchObject({ cause: p.cause, turn: 1, severity: 'error' });
    }
  });

  it('the divergences point at the token at fault', () => {
    const prefixBreak = (id: string) => {
      const c = checked.get(id)!;
      const f = c.findings.find((x) => x.kind === 'prefix_break')!;
      return { prompt: c.trajectory.turns[f.turn]!.promptIds!, at: f.index };
    };
    const dup = prefixBreak('geo-003-dup-eos');
    expect(dup.prompt.slice(dup.at - 1, dup.at + 2)).toEqual([EOS, EOS, NL]);
    const nl = prefixBreak('geo-007-missing-newline');
    expect(nl.prompt.slice(nl.at - 1, nl.at + 1)).toEqual([EOS, IM_START]);

    const retok = checked.get('geo-004-retokenized')!;
    const f = retok.findings.find((x) => x.kind === 'prefix_break')!;
    const tok = retok.profile.tokenizer;
    expect(tok.decodeSync(f.expected as number[])).toBe(tok.decodeSync(f.actual as number[]));
    expect(f.expected).not.toEqual(f.actual);

    const think = prefixBreak('geo-018-qwen3-reasoning-stripped');
    const thinking = checked.get('geo-018-qwen3-reasoning-stripped')!;
    expect(think.at).toBe(thinking.trajectory.turns[0]!.promptIds!.length);
    expect(thinking.trajectory.turns[0]!.generatedIds![0]).toBe(thinking.profile.tokenizer.tokenToId('<think>'));
    const eot = prefixBreak('geo-019-secondary-eos');
    expect(eot.prompt.slice(eot.at - 1, eot.at + 2)).toEqual([ENDOFTEXT, EOS, NL]);
    const stray = (id: string) => {
      const c = checked.get(id)!;
      const f = c.findings.find((x) => x.kind === 'image_count')!;
      const t = c.trajectory.turns[f.turn]!;
      return { f, stream: [...t.promptIds!, ...(t.generatedIds ?? [])], t };
    };
    const gen = stray('geo-020-vision-token-generated');
    expect(gen.stream[gen.f.index]).toBe(VISION_START);
    expect(gen.f.index).toBeGreaterThanOrEqual(gen.t.promptIds!.length);
    const typed = stray('geo-021-placeholder-in-text');
    expect(typed.stream[typed.f.index]).toBe(IMAGE_PAD);
    expect(typed.stream[typed.f.index - 1]).not.toBe(VISION_START);
    expect(typed.f.index).toBeLessThan(typed.t.promptIds!.length);

    const cut = checked.get('geo-013-image-truncated')!.findings[0]!;
    expect(cut.actual as number).toBeLessThan(cut.expected as number);
    const pads = checked.get('geo-011-pads-max-pixels')!;
    expect(pads.trajectory.processor?.maxPixels).toBeDefined();
    expect(pads.findings[0]!.actual).not.toBe(pads.findings[0]!.expected);
  });

  it('covers both model generations, GRPO groups sharing one prompt, rewards, and a length-truncated turn handled correctly', () => {
    const all = [...checked.values()];
    const profiles = new Set(all.map((c) => c.profile.family));
    expect(profiles).toEqual(new Set(['qwen2.5-vl', 'qwen3-vl']));
    expect(all.filter((c) => c.profile.family === 'qwen3-vl' && c.findings.length === 0).length).toBeGreaterThanOrEqual(
      2,
    );
    for (const c of all) {
      expect(c.trajectory.model, c.trajectory.id).toMatch(/^Qwen\//);
      expect(typeof c.trajectory.reward).toBe('number');
      // vLLM call logs carry no status and no free-form metadata; native records state both.
      if (c.trajectory.source.format === 'native') {
        expect(c.trajectory.status).toBeDefined();
        expect(c.trajectory.meta?.description).toBe(DEMO_DESCRIPTION[c.trajectory.id]);
      }
    }
    expect(all.some((c) => c.trajectory.reward === 0) && all.some((c) => c.trajectory.reward === 1)).toBe(true);

    // GRPO groups are the samples of one prompt at one step: they share the first prompt.
    const groups = new Map<string, CheckedTrajectory[]>();
    for (const c of all) {
      if (!c.trajectory.group) continue;
      const key = `${c.trajectory.step}/${c.trajectory.group}`;
      groups.set(key, [...(groups.get(key) ?? []), c]);
    }
    expect(groups.size).toBeGreaterThanOrEqual(4);
    for (const [g, members] of groups) {
      const first = members[0]!.trajectory.turns[0]!.promptIds;
      for (const m of members) expect(m.trajectory.turns[0]!.promptIds, `${g}: ${m.trajectory.id}`).toEqual(first);
    }
    const sizes = [...groups.values()].map((m) => m.length);
    expect(sizes.some((n) => n >= 3) && sizes.includes(1)).toBe(true);
    // A degenerate group: rewards all equal, every advantage zero.
    const degenerate = [...groups.values()].filter(
      (m) => m.length >= 2 && new Set(m.map((c) => c.trajectory.reward)).size === 1,
    );
    expect(degenerate.length).toBeGreaterThanOrEqual(1);
    for (const m of degenerate) for (const c of m) expect(c.trajectory.advantage).toBe(0);

    const truncated = all.filter((c) => c.trajectory.turns.some((t) => t.finishReason === 'length'));
    expect(truncated.some((c) => c.findings.length === 0)).toBe(true);
    // Multi-turn with tools, and a tool that returns an image (two vision spans in a clean trajectory).
    expect(all.filter((c) => c.trajectory.turns.length >= 2).length).toBeGreaterThanOrEqual(12);
    expect(all.some((c) => c.findings.length === 0 && c.alignment.placeholderRanges.length === 2)).toBe(true);
  });

  it('spans three steps, the prefix breaks appearing at one of them', () => {
    const all = [...checked.values()];
    const stepOf = (c: CheckedTrajectory) => c.trajectory.step;
    expect(new Set(all.map(stepOf).filter((s) => s !== undefined))).toEqual(new Set([1, 2, 3]));
    // Only vLLM call logs state no step.
    for (const c of all) expect(stepOf(c) === undefined, c.trajectory.id).toBe(c.trajectory.source.format === 'vllm');
    const breaks = (step: number) =>
      all.filter((c) => stepOf(c) === step && c.findings.some((f) => f.kind === 'prefix_break')).length;
    expect(breaks(1)).toBe(0);
    expect(breaks(2)).toBe(0);
    expect(breaks(3)).toBeGreaterThanOrEqual(4);
  });

  it('is byte-identical across runs and independent of the folder it is written to', () => {
    const rel = (root: string, files: string[]) => files.map((f) => path.relative(root, f)).sort();
    const list = (root: string): string[] =>
      fs
        .readdirSync(root, { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => path.join(e.parentPath, e.name));
    const b = path.join(dirB, 'nested', 'run');
    const filesA = rel(dirA, list(dirA));
    expect(filesA).toEqual(rel(dirA, written.files));
    expect(rel(b, list(b))).toEqual(filesA);
    for (const f of filesA)
      expect(fs.readFileSync(path.join(b, f)).equals(fs.readFileSync(path.join(dirA, f))), f).toBe(true);
  });

  it('`rollscope demo` refuses a non-empty folder without --force, and writes with it', async () => {
    await expect(demoCommand.run(['--out', dirA])).rejects.toThrow(UsageError);
    await expect(demoCommand.run([])).rejects.toThrow(/--out/);
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await demoCommand.run(['--out', dirA, '--force'])).toBe(0);
      expect(out.mock.calls.map((c) => String(c[0])).join('')).toContain('geo-003-dup-eos');
    } finally {
      out.mockRestore();
    }
  });
});
