// The Gemma 3 fixtures (test/fixtures/generate-gemma3.ts) hold their planted breaks where the
// generator says, found with the Gemma 3 family's own functions on the real tokenizer: the oracle
// `check` must agree with once the checks ask the family (docs/reference/models/gemma3.md).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { gemma3Named } from '../server/families/gemma3/ids.ts';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { CUT_AT, GEMMA3_SAMPLES } from './fixtures/generate-gemma3.ts';
import { imageRuns, NO_EARLIER_MEDIA } from './support/media-runs.ts';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'gemma3');
const lines = (name: string) =>
  fs
    .readFileSync(path.join(DIR, name), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('Gemma 3 fixtures', () => {
  let p: ModelProfile;
  beforeAll(() => {
    p = loadProfile('gemma3');
  }, 300_000);

  it('slime and verl: clean samples are canonical renders; each break sits at its token', async () => {
    const t = gemma3Named(p.ids);
    const slime = lines('slime.jsonl');
    const verl = lines('verl.jsonl');
    expect(slime.map((s) => s.metadata.fixture)).toEqual([...GEMMA3_SAMPLES]);
    GEMMA3_SAMPLES.forEach((name, i) => {
      const tokens: number[] = slime[i].tokens;
      const v = verl[i];
      // The two shapes hold one sequence.
      expect([...v.prompt_ids, ...v.response_ids], name).toEqual(tokens);
      const spans = p.modelFamily.findMediaSpans(tokens, p.ids);
      const doubled = tokens.findIndex((id, k) => id === t.endOfTurn && tokens[k + 1] === t.endOfTurn);
      if (name === 'pads-short') expect(spans.map((s) => s.padLength)).toEqual([255]);
      else if (name === 'cut-image') {
        expect(spans[0]).toMatchObject({ start: -1, padStart: 0 });
        // The cut dropped the tokens before the run and the run's first CUT_AT − padStart pads.
        const whole = p.modelFamily.findMediaSpans(slime[1].tokens, p.ids)[0]!;
        expect(256 - spans[0]!.padLength).toBe(CUT_AT - whole.padStart);
      } else
        expect(
          spans.map((s) => [s.padLength, s.end - s.padStart]),
          name,
        ).toEqual([[256, 256]]);
      if (name === 'duplicated-eot') expect(doubled).toBeGreaterThan(0);
      else expect(doubled, name).toBe(-1);
      // The loss mask covers exactly the generated tokens.
      expect(slime[i].loss_mask.length).toBe(slime[i].response_length);
    });
    // The clean multi-turn sample is the canonical render of its conversation: prompt, answer,
    // `<end_of_turn>`, the template's continuation, the second answer and its `<end_of_turn>`.
    const clean = slime[0].tokens as number[];
    const text = p.template.render({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image' },
            { type: 'text', text: 'In the figure, the legs are 6 and 8. Find the hypotenuse.' },
          ],
        },
        { role: 'assistant', content: 'The hypotenuse is 10.' },
        { role: 'user', content: 'Why?' },
        { role: 'assistant', content: 'Because 6² + 8² = 100, and its square root is 10.' },
      ],
      bos_token: '<bos>',
    });
    const ids = await p.tokenizer.encode(text);
    const image = { kind: 'image' as const, tokens: p.modelFamily.imageTokens(280, 210, p.vision) };
    const canonical = await p.modelFamily.expandMedia(
      { text, ids },
      imageRuns([image]),
      NO_EARLIER_MEDIA,
      p.ids,
      p.tokenizer,
    );
    // The render ends with `<end_of_turn>\n`; the sample ends at the model's `<end_of_turn>`.
    expect(clean).toEqual(canonical.slice(0, -1));
  });

  it('vLLM: the second call of the re-tokenized trajectory breaks the prefix at the split word', () => {
    const calls = lines('vllm.jsonl').filter((c) => c.trajectory_id === 'gemma3-retokenized');
    expect(calls).toHaveLength(2);
    const first = [...calls[0].response.prompt_token_ids, ...calls[0].response.choices[0].token_ids];
    const second: number[] = calls[1].response.prompt_token_ids;
    let at = 0;
    while (first[at] === second[at]) at++;
    expect(p.tokenizer.piece(first[at]!)).toBe(' i');
    expect(p.tokenizer.piece(second[at]!)).toBe(' is');
    // The other multi-turn trajectories continue their first call exactly.
    for (const id of ['gemma3-clean-multi', 'gemma3-duplicated-eot']) {
      const [a, b] = lines('vllm.jsonl').filter((c) => c.trajectory_id === id);
      const head = [...a.response.prompt_token_ids, ...a.response.choices[0].token_ids];
      expect(b.response.prompt_token_ids.slice(0, head.length), id).toEqual(head);
    }
  });
});
