import { describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { analysisContext } from '../server/analysis/context.ts';
import { checkTrajectory } from '../server/analysis/checks.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';

const profile = loadProfile('qwen2.5-vl');
const EOS = 151645;
const NL = 198;
const PAD = 151655;

async function check(t: Trajectory) {
  return checkTrajectory(t, analysisContext(t, profile));
}

describe('canonical trajectories', () => {
  it('a canonical multi-turn trajectory has no findings, and realign reproduces the last prompt ⧺ generation', async () => {
    const t = await buildTrajectory(profile, geometryScript('clean'), 'canonical');
    const r = await check(t);
    expect(r.findings).toEqual([]);
    const last = t.turns[1]!;
    expect(r.alignment.tokens).toEqual([...last.promptIds!, ...last.generatedIds!]);
    expect(r.alignment.promptLength).toBe(t.turns[0]!.promptIds!.length);
    // 640×480 on Qwen2.5-VL defaults: 391 pads (docs/reference/image-math.md#worked-examples).
    expect(r.alignment.tokens.filter((x) => x === PAD)).toHaveLength(391);
    expect(r.alignment.placeholderRanges).toHaveLength(1);
    expect(r.alignment.imageGridThw).toEqual([[1, 34, 46]]);
  });
});

describe('vime #331: the legacy re-render duplicates <|im_end|>', () => {
  it('prefix_break/duplicated_eos at the exact index, rerender_mismatch as an error, canonical = prompt once + generated verbatim + suffix', async () => {
    const legacy = await buildTrajectory(profile, geometryScript('vime-331'), 'legacy');
    const clean = await buildTrajectory(profile, geometryScript('vime-331'), 'canonical');
    const t0 = legacy.turns[0]!;
    const eosAt = t0.promptIds!.length + t0.generatedIds!.length; // first token after the generated <|im_end|>
    expect(legacy.turns[1]!.promptIds![eosAt - 1]).toBe(EOS);
    expect(legacy.turns[1]!.promptIds![eosAt]).toBe(EOS);

    const r = await check(legacy);
    const prefix = r.findings.find((f) => f.kind === 'prefix_break');
    expect(prefix).toMatchObject({
      cause: 'duplicated_eos',
      severity: 'error',
      turn: 1,
      index: eosAt,
      stream: 'prompt',
    });
    const rerender = r.findings.find((f) => f.kind === 'rerender_mismatch');
    expect(rerender).toMatchObject({ cause: 'duplicated_eos', severity: 'error', index: eosAt });

    // Canonical re-alignment of the broken data equals the cleanly built stream.
    const cleanLast = clean.turns[1]!;
    expect(r.alignment.tokens).toEqual([...cleanLast.promptIds!, ...cleanLast.generatedIds!]);
    expect(r.alignment.tokens.slice(eosAt - 1, eosAt + 2)).toEqual([EOS, NL, 151644]);
    // Mask: generated ids 1, observation 0.
    const span = r.alignment.turns[0]!;
    expect(r.alignment.lossMask.slice(span.generated[0], span.generated[1]).every((m) => m === 1)).toBe(true);
    expect(r.alignment.lossMask.slice(span.observation[0], span.observation[1]).every((m) => m === 0)).toBe(true);
    expect(r.alignment.logprobs.slice(span.generated[0], span.generated[1])).toEqual(t0.generatedLogprobs);
  });
});

describe('length-truncated turn', () => {
  it('canonical appends <|im_end|>\\n after a generation cut by max_tokens', async () => {
    const script = geometryScript('truncated');
    script.turns[0]!.truncated = true;
    const t = await buildTrajectory(profile, script, 'canonical');
    const r = await check(t);
    expect(r.findings).toEqual([]);
    const span = r.alignment.turns[0]!;
    expect(r.alignment.tokens[span.generated[1] - 1]).not.toBe(EOS);
    expect(r.alignment.tokens.slice(span.observation[0], span.observation[0] + 3)).toEqual([EOS, NL, 151644]);
    expect(r.alignment.lossMask[span.observation[0]]).toBe(0);
  });

  it('a next prompt that never closes the truncated turn is prefix_break/missing_eos', async () => {
    const script = geometryScript('truncated-unclosed');
    script.turns[0]!.truncated = true;
    const t = await buildTrajectory(profile, script, 'canonical');
    const t0 = t.turns[0]!;
    const at = t0.promptIds!.length + t0.generatedIds!.length;
    const p1 = t.turns[1]!.promptIds!;
    expect(p1.slice(at, at + 2)).toEqual([EOS, NL]);
    const broken = Trajectory.parse({
      ...t,
      turns: [t0, { ...t.turns[1]!, promptIds: [...p1.slice(0, at), ...p1.slice(at + 2)] }],
    });
    const r = await check(broken);
    expect(r.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'missing_eos',
      index: at,
      turn: 1,
    });
  });
});

describe('prefix_break causes', () => {
  async function brokenAt(edit: (p: number[], at: number) => number[]) {
    const t = await buildTrajectory(profile, geometryScript('x'), 'canonical');
    const t0 = t.turns[0]!;
    const at = t0.promptIds!.length + t0.generatedIds!.length;
    const p1 = edit(t.turns[1]!.promptIds!.slice(), at);
    return { at, r: await check(Trajectory.parse({ ...t, turns: [t0, { ...t.turns[1]!, promptIds: p1 }] })) };
  }
  it('missing_newline: <|im_end|> directly followed by <|im_start|>', async () => {
    const { at, r } = await brokenAt((p, at) => [...p.slice(0, at), ...p.slice(at + 1)]);
    expect(r.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({ cause: 'missing_newline', index: at });
  });
  it('missing_eos: the generated <|im_end|> dropped', async () => {
    const { at, r } = await brokenAt((p, at) => [...p.slice(0, at - 1), ...p.slice(at)]);
    expect(r.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({ cause: 'missing_eos', index: at - 1 });
  });
  it('retokenized: same text, canonical BPE split of a non-canonical generation', async () => {
    const t = await buildTrajectory(profile, geometryScript('retok'), 'canonical');
    const t0 = t.turns[0]!;
    // "I will" -> split " will" into " w" + "ill" in the generation (a non-canonical split the sampler can emit).
    const w = await profile.tokenizer.encode(' will');
    const split = [...(await profile.tokenizer.encode(' w')), ...(await profile.tokenizer.encode('ill'))];
    expect(w).toHaveLength(1);
    const gen = t0.generatedIds!;
    const i = gen.indexOf(w[0]!);
    const nonCanonical = [...gen.slice(0, i), ...split, ...gen.slice(i + 1)];
    const broken = Trajectory.parse({
      ...t,
      turns: [{ ...t0, generatedIds: nonCanonical, generatedLogprobs: nonCanonical.map(() => -0.1) }, t.turns[1]],
    });
    const r = await check(broken);
    expect(r.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'retokenized',
      index: t0.promptIds!.length + i,
    });
  });
  it('image_tokens_changed: the next prompt expanded the image with other max_pixels', async () => {
    const { r } = await brokenAt((p) => {
      const first = p.indexOf(PAD);
      return [...p.slice(0, first), ...new Array(300).fill(PAD), ...p.slice(first + 391)];
    });
    expect(r.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({ cause: 'image_tokens_changed' });
  });
  it('template_changed: whitespace stripped from the history', async () => {
    const t = await buildTrajectory(
      profile,
      {
        ...geometryScript('ws'),
        turns: [{ answer: 'Answer:  3\n\n', observation: [{ role: 'user', content: 'sure?' }] }, { answer: 'yes' }],
      },
      'canonical',
    );
    const t0 = t.turns[0]!;
    const stripped = await profile.tokenizer.encode('Answer: 3');
    const p1 = t.turns[1]!.promptIds!;
    const start = t0.promptIds!.length;
    const rebuilt = [...p1.slice(0, start), ...stripped, ...p1.slice(start + t0.generatedIds!.length - 1)];
    const r = await check(Trajectory.parse({ ...t, turns: [t0, { ...t.turns[1]!, promptIds: rebuilt }] }));
    expect(r.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({ cause: 'template_changed' });
    expect(r.findings.find((f) => f.kind === 'prefix_break')!.message).toContain('whitespace');
  });
});

describe('image and field checks', () => {
  it('placeholder_count when the pad run does not match the image size; image_truncated when cut inside', async () => {
    const t = await buildTrajectory(profile, geometryScript('pads'), 'canonical');
    const wrong = Trajectory.parse({ ...t, images: [{ width: 1920, height: 1080 }] });
    const r = await check(wrong);
    expect(r.findings.find((f) => f.kind === 'placeholder_count')).toMatchObject({
      expected: 2691,
      actual: 391,
      severity: 'error',
    });

    const p0 = t.turns[0]!.promptIds!;
    const cut = p0.slice(0, p0.indexOf(PAD) + 100);
    const truncated = Trajectory.parse({ ...t, turns: [{ ...t.turns[0]!, promptIds: cut, generatedIds: [] }] });
    const r2 = await check(truncated);
    expect(r2.findings.find((f) => f.kind === 'image_truncated')).toMatchObject({
      expected: 391,
      actual: 100,
      image: 0,
    });
  });

  it('image_count when images are listed but the tokens hold more vision spans', async () => {
    const t = await buildTrajectory(profile, geometryScript('count'), 'canonical');
    const r = await check(Trajectory.parse({ ...t, images: [], sample: undefined, turns: t.turns, meta: {} }));
    expect(r.findings.some((f) => f.kind === 'image_count')).toBe(false); // no images listed: nothing to compare
    const two = Trajectory.parse({ ...t, images: [t.images[0], { width: 100, height: 100 }] });
    expect((await check(two)).findings.find((f) => f.kind === 'image_count')).toMatchObject({ expected: 2, actual: 1 });
  });

  it('sample fields: length_mismatch, mask_mismatch, invalid_value, placeholder_range, sample_mismatch', async () => {
    const t = await buildTrajectory(profile, geometryScript('sample'), 'canonical');
    const { alignment } = await check(t);
    const promptLen = alignment.promptLength;
    const resp = alignment.tokens.length - promptLen;
    const good = {
      tokens: alignment.tokens,
      responseLength: resp,
      lossMask: alignment.lossMask.slice(promptLen),
      logprobs: alignment.logprobs.slice(promptLen),
      placeholderRanges: alignment.placeholderRanges,
      imageGridThw: [[1, 34, 46]],
    };
    expect((await check(Trajectory.parse({ ...t, sample: good }))).findings).toEqual([]);

    const short = await check(Trajectory.parse({ ...t, sample: { ...good, logprobs: good.logprobs.slice(1) } }));
    expect(short.findings.find((f) => f.kind === 'length_mismatch')).toMatchObject({
      expected: resp,
      actual: resp - 1,
    });

    const shifted = [0, ...good.lossMask.slice(0, -1)];
    const m = await check(Trajectory.parse({ ...t, sample: { ...good, lossMask: shifted } }));
    expect(m.findings.find((f) => f.kind === 'mask_mismatch')).toMatchObject({
      index: promptLen,
      expected: 1,
      actual: 0,
    });

    const nan = good.logprobs.slice();
    nan[3] = NaN;
    const n = await check(Trajectory.parse({ ...t, sample: { ...good, logprobs: nan } }));
    expect(n.findings.find((f) => f.kind === 'invalid_value')).toMatchObject({ index: promptLen + 3 });

    const bigId = good.tokens.slice();
    bigId[5] = 999_999;
    const b = await check(Trajectory.parse({ ...t, sample: { ...good, tokens: bigId } }));
    expect(b.findings.find((f) => f.kind === 'invalid_value')).toMatchObject({ index: 5, actual: 999_999 });

    const range = await check(
      Trajectory.parse({
        ...t,
        sample: { ...good, placeholderRanges: [{ offset: good.placeholderRanges[0]!.offset + 1, length: 391 }] },
      }),
    );
    expect(range.findings.find((f) => f.kind === 'placeholder_range')).toBeDefined();

    const eosIdx = alignment.turns[0]!.generated[1];
    const dup = [...good.tokens.slice(0, eosIdx), EOS, ...good.tokens.slice(eosIdx)];
    const s = await check(
      Trajectory.parse({
        ...t,
        sample: { ...good, tokens: dup, responseLength: resp + 1, lossMask: undefined, logprobs: undefined },
      }),
    );
    expect(s.findings.find((f) => f.kind === 'sample_mismatch')).toMatchObject({
      cause: 'duplicated_eos',
      index: eosIdx,
    });
  });
});
