// Non-canonical BPE splits kept in stored generated ids: a warning at the first token of the
// split, with the tokenizer's own split, in real conversations rendered with the real template.
import { describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { analysisContext } from '../server/analysis/context.ts';
import { checkTrajectory } from '../server/analysis/checks.ts';
import { nonCanonicalSpans } from '../server/analysis/canonical-split.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const tok = profile.tokenizer;
const EOS = qwenNamed(profile.ids).eos;

async function check(t: Trajectory) {
  return checkTrajectory(t, analysisContext(t, profile));
}

/** Byte-level token of one byte (the 256 single-byte pieces of the vocabulary). */
function byteToken(b: number): number {
  for (let id = 0; id < 1024; id++) {
    const bytes = tok.pieceBytes(id);
    if (bytes.length === 1 && bytes[0] === b) return id;
  }
  throw new Error(`no token for byte ${b}`);
}

/** The trajectory with turn `turn`'s generated ids replaced (later prompts extended the same way, as kept-id loops do). */
function withGenerated(t: Trajectory, turn: number, gen: number[]): Trajectory {
  const old = t.turns[turn]!.generatedIds!;
  const at = t.turns[turn]!.promptIds!.length;
  const turns = t.turns.map((x, k) => {
    if (k === turn) return { ...x, generatedIds: gen, generatedLogprobs: gen.map(() => -0.1) };
    if (k < turn || !x.promptIds) return x;
    const p = x.promptIds;
    return { ...x, promptIds: [...p.slice(0, at), ...gen, ...p.slice(at + old.length)] };
  });
  return Trajectory.parse({ ...t, turns });
}

describe('non-canonical split in generated ids', () => {
  it('a sampler split " w"+"ill" is one warning at its first token, with the canonical " will"', async () => {
    const script = geometryScript('split');
    script.turns[0] = { ...script.turns[0]!, split: { word: ' will', pieces: [' w', 'ill'] } };
    const t = await buildTrajectory(profile, script, 'canonical');
    const clean = await buildTrajectory(profile, geometryScript('split'), 'canonical');
    const gen = t.turns[0]!.generatedIds!;
    const cleanGen = clean.turns[0]!.generatedIds!;
    const at = gen.findIndex((id, i) => id !== cleanGen[i]);
    expect(at).toBeGreaterThan(0);
    const r = await check(t);
    const found = r.findings.filter((f) => f.kind === 'non_canonical_split');
    expect(found).toEqual([
      expect.objectContaining({
        severity: 'warning',
        turn: 0,
        stream: 'canonical',
        index: r.alignment.turns[0]!.generated[0] + at,
        expected: { ids: [686], tokens: [' will'] },
        actual: { ids: [289, 483], tokens: [' w', 'ill'] },
      }),
    ]);
    expect(found[0]!.message).toContain('"·w" + "ill"');
    expect(r.findings.filter((f) => f.severity === 'error')).toEqual([]);
    expect((await check(clean)).findings).toEqual([]);
  });

  it('a split in turn 1 points at turn 1’s generation in the canonical stream; two splits in one turn report the first and count the rest', async () => {
    const t0 = await buildTrajectory(profile, geometryScript('two'), 'canonical');
    const lead = await tok.encode('I w');
    const gen = [...lead, 483, ...(await tok.encode(' now')), 289, 483, ...(await tok.encode(' say: AC = 5.')), EOS];
    const t = withGenerated(t0, 1, gen);
    const r = await check(t);
    const found = r.findings.filter((f) => f.kind === 'non_canonical_split');
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({
      turn: 1,
      stream: 'canonical',
      index: r.alignment.turns[1]!.generated[0] + lead.length - 1,
    });
    expect(r.alignment.turns[1]!.generated[0]).toBe(t.turns[1]!.promptIds!.length);
    expect(found[0]!.message).toContain('1 more such span');
    expect(await nonCanonicalSpans(tok, gen)).toEqual([
      { at: lead.length - 1, stored: [289, 483], canonical: [686] },
      { at: lead.length + 2, stored: [289, 483], canonical: [686] },
    ]);
  });

  it('a multibyte character written byte by byte is a split; one cut by the length limit is not', async () => {
    const bytes = [...new TextEncoder().encode('你')].map(byteToken);
    const head = await tok.encode('AC = 5 ');
    expect(await nonCanonicalSpans(tok, [...head, ...bytes, EOS])).toEqual([
      { at: head.length, stored: bytes, canonical: await tok.encode('你') },
    ]);
    // Cut after two of its three bytes (finish_reason "length"): no whole text to compare.
    const t0 = await buildTrajectory(profile, geometryScript('cut'), 'canonical');
    const cut = withGenerated(t0, 1, [...head, ...bytes.slice(0, 2)]);
    const turns = cut.turns.map((x, k) => (k === 1 ? { ...x, finishReason: 'length' } : x));
    const r = await check(Trajectory.parse({ ...cut, turns }));
    expect(r.findings.filter((f) => f.kind === 'non_canonical_split')).toEqual([]);
    // Stray bytes mid-text: compared up to where the text is whole, never past a bad byte.
    expect(await nonCanonicalSpans(tok, [...head, byteToken(0xff), ...(await tok.encode('x w')), 483])).toEqual([]);
  });

  it('special tokens cut the generation into segments: a split right after <tool_call> is found at its index', async () => {
    const open = tok.tokenToId('<tool_call>')!;
    const close = tok.tokenToId('</tool_call>')!;
    const head = await tok.encode('I will call it.\n');
    const body = await tok.encode('\n{"name": "calc", "arguments": {"expr": "3+4"}}\n');
    // `{"` is one token; the sampler wrote `{` + `"`.
    const brace = body.indexOf(tok.tokenToId('{"')!);
    expect(brace).toBeGreaterThanOrEqual(0);
    const split = [
      ...body.slice(0, brace),
      ...(await tok.encode('{')),
      ...(await tok.encode('"')),
      ...body.slice(brace + 1),
    ];
    const gen = [...head, open, ...split, close, EOS];
    expect(await nonCanonicalSpans(tok, gen)).toEqual([
      {
        at: head.length + 1 + brace,
        stored: [...(await tok.encode('{')), ...(await tok.encode('"'))],
        canonical: [tok.tokenToId('{"')!],
      },
    ]);
    expect(await nonCanonicalSpans(tok, [...head, open, ...body, close, EOS])).toEqual([]);
  });
});
