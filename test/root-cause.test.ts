// Root cause first (issue 33 #4): the findings of a trajectory grouped by the event that caused
// them, the root named first and what follows from it said only where it adds something.
import { describe, expect, it } from 'vitest';
import { consequenceText, rootCauses } from '../server/analysis/root-cause.ts';
import type { Finding } from '../server/model/finding.ts';

describe('root causes', () => {
  it('the tokens the model wrote as vision tokens head every image-pad finding they upset', () => {
    // The slime sample, in the order the checks list its findings: 5 errors citing 6, 47 and
    // 43/44 pads for one image, "image pads changed" first and "model wrote vision tokens" fourth.
    const f = (
      kind: Finding['kind'],
      cause: Finding['cause'],
      message: string,
      stream?: Finding['stream'],
    ): Finding => ({
      kind,
      ...(cause ? { cause } : {}),
      severity: 'error',
      turn: 0,
      index: 120,
      ...(stream ? { stream } : {}),
      message,
    });
    const findings: Finding[] = [
      f(
        'rerender_mismatch',
        'image_tokens_changed',
        're-render of turn 0 differs at token 120: image pads changed',
        'rerender',
      ),
      f('image_count', undefined, 'the stream holds 2 vision spans for 1 image'),
      f('placeholder_count', undefined, 'image 0 has 6 pad tokens where its size gives 47'),
      f('image_count', 'vision_token_generated', "turn 0's generated text holds 3 vision tokens: the model wrote them"),
      f('placeholder_range', undefined, 'image 0 has 43 pads in one run and 44 in the other'),
      { ...f('group', undefined, 'one sample in its group'), severity: 'warning' },
    ];
    const groups = rootCauses(findings);
    // One event: the model's vision tokens, named first; everything about the image's pads under it.
    expect(groups[0]!.root).toBe(3);
    expect(groups[0]!.consequences.map((c) => c.index).sort()).toEqual([0, 1, 2, 4]);
    // The group finding is its own, and last.
    expect(groups.map((g) => g.root)).toEqual([3, 5]);
    // Each finding is in exactly one group.
    const all = groups.flatMap((g) => [g.root, ...g.consequences.map((c) => c.index)]).sort((a, b) => a - b);
    expect(all).toEqual(findings.map((_, i) => i));
  });

  it('without the model writing vision tokens, the earliest break heads: the prefix break before its re-render', () => {
    const base = { severity: 'error' as const, turn: 1, index: 534 };
    const findings: Finding[] = [
      {
        ...base,
        kind: 'rerender_mismatch',
        cause: 'secondary_eos',
        message: 're-render differs at token 534: <|im_end|> twice',
      },
      {
        ...base,
        kind: 'prefix_break',
        cause: 'secondary_eos',
        message: "turn 1's prompt stops extending turn 0 at token 534: <|im_end|> twice",
      },
    ];
    const [g] = rootCauses(findings);
    expect(g!.root).toBe(1);
    expect(g!.consequences).toEqual([{ index: 0, text: 're-render differs at token 534' }]);
  });

  it('a consequence says only what the root does not: the same reason is said once', () => {
    const root = "turn 1's prompt stops extending turn 0 at token 534: `<|im_end|>` appears twice";
    expect(consequenceText('re-render of turn 0 differs at token 534: `<|im_end|>` appears twice', root)).toBe(
      're-render of turn 0 differs at token 534',
    );
    expect(
      consequenceText('stored sample differs at token 534: `<|im_end|>` appears twice; 13 tokens more', root),
    ).toBe('stored sample differs at token 534; 13 tokens more');
    // Nothing in common: the sentence as it was.
    expect(consequenceText('mask differs at token 9: trained where generated', root)).toBe(
      'mask differs at token 9: trained where generated',
    );
  });
});
