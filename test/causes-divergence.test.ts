// The divergence causes the field reports, each planted in a real conversation rendered with the
// real template and tokenizer, found at the exact token; and the same conversation kept clean
// checks clean.
import { describe, expect, it } from 'vitest';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { analysisContext } from '../server/analysis/context.ts';
import { checkTrajectory } from '../server/analysis/checks.ts';
import { commonPrefixLength } from '../server/analysis/diff.ts';
import type { Message, Trajectory } from '../server/model/trajectory.ts';
import { stripReasoning } from '../server/demo/build.ts';
import { imageInfos, tokenStream } from '../server/http/views.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { buildTrajectory, trainingSample, type Script, type ScriptTurn } from './support/build.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const qwen25 = loadProfile('qwen2.5-vl');
const qwen3 = loadProfile('qwen3-vl');

async function check(t: Trajectory, profile: ModelProfile) {
  return checkTrajectory(t, analysisContext(t, profile));
}

const USER: Message[] = [
  {
    role: 'user',
    content: [
      { type: 'image', image: 'diagram.png' },
      { type: 'text', text: 'In the figure, AB = 3 and BC = 4. Find AC.' },
    ],
  },
];

function script(id: string, turns: ScriptTurn[], messages: Message[] = USER): Script {
  return { id, messages, images: [{ width: 640, height: 480 }], turns };
}

/** Where turn 1's prompt stops extending turn 0's prompt ⧺ generation. */
function breakAt(t: Trajectory): number {
  const t0 = t.turns[0]!;
  return commonPrefixLength([...t0.promptIds!, ...t0.generatedIds!], t.turns[1]!.promptIds!);
}

const errors = (r: { findings: { severity: string }[] }) => r.findings.filter((f) => f.severity === 'error');

describe('reasoning stripped from the history', () => {
  const answer =
    '<think>\nAB and BC are the legs of a right triangle, so AC is the hypotenuse: √(9 + 16).\n</think>\n\nAC = √(3² + 4²) = 5.';
  const turns = (strip: boolean): ScriptTurn[] => [
    {
      answer,
      observation: [{ role: 'user', content: 'Now give only the number.' }],
      ...(strip ? { historyMessage: { role: 'assistant', content: stripReasoning(answer, '</think>') } } : {}),
    },
    { answer: '5' },
  ];

  it("Qwen3's history rendering drops `<think>…</think>`: prefix_break/reasoning_stripped at the `<think>` token", async () => {
    const t = await buildTrajectory(qwen3, script('think', turns(true)), 'rerender');
    const t0 = t.turns[0]!;
    const think = qwen3.tokenizer.tokenToId('<think>')!;
    expect(t0.generatedIds![0]).toBe(think);
    const at = breakAt(t);
    expect(at).toBe(t0.promptIds!.length);
    const r = await check(t, qwen3);
    expect(r.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'reasoning_stripped',
      severity: 'error',
      turn: 1,
      index: at,
      stream: 'prompt',
    });
    expect(r.findings.find((f) => f.kind === 'prefix_break')!.message).toMatch(/reasoning the model generated/);
    expect(errors(r).every((f) => (f as { cause?: string }).cause === 'reasoning_stripped')).toBe(true);
  });

  it('kept in the history (canonical), the same conversation checks clean', async () => {
    const t = await buildTrajectory(qwen3, script('think-kept', turns(false)), 'canonical');
    expect((await check(t, qwen3)).findings).toEqual([]);
  });
});

describe('tool-call JSON re-serialized', () => {
  // The model wrote keys in its own order, compact, with `2.0`; the loop parsed the call and the
  // template wrote `tool_call.arguments | tojson` back.
  const written = '<tool_call>\n{"arguments": {"b": 2.0, "a": 3}, "name": "calc"}\n</tool_call>';
  const turns = (parsed: boolean): ScriptTurn[] => [
    {
      answer: `I will add the two numbers.\n${written}`,
      observation: [{ role: 'tool', content: '5' }],
      ...(parsed
        ? {
            historyMessage: {
              role: 'assistant',
              content: 'I will add the two numbers.',
              tool_calls: [{ type: 'function', function: { name: 'calc', arguments: { b: 2.0, a: 3 } } }],
            },
          }
        : {}),
    },
    { answer: 'AC = 5.' },
  ];

  // Qwen3-VL's template renders `tool_calls` (Qwen2/2.5-VL's chat template has no tool-call branch).
  for (const profile of [qwen3]) {
    it(`${profile.family}: prefix_break/tool_call_reserialized at the first rewritten token`, async () => {
      const t = await buildTrajectory(profile, script('json', turns(true)), 'rerender');
      const t0 = t.turns[0]!;
      const at = breakAt(t);
      // Inside the tool call the model generated.
      expect(at).toBeGreaterThan(t0.promptIds!.length);
      expect(at).toBeLessThan(t0.promptIds!.length + t0.generatedIds!.length);
      const r = await check(t, profile);
      const f = r.findings.find((x) => x.kind === 'prefix_break')!;
      expect(f).toMatchObject({ cause: 'tool_call_reserialized', severity: 'error', turn: 1, index: at });
      expect(f.message).toContain('`{"arguments":·{"b":·2.0,·"a":·3},·"name":·"calc"}`');
      expect(f.message).toContain('`{"name":·"calc",·"arguments":·{"b":·2,·"a":·3}}`');
      expect(errors(r).every((x) => (x as { cause?: string }).cause === 'tool_call_reserialized')).toBe(true);
      expect(
        (await check(await buildTrajectory(profile, script('json', turns(false)), 'canonical'), profile)).findings,
      ).toEqual([]);
    });
  }

  it('a tool call with other arguments is not a re-serialization', async () => {
    const t = await buildTrajectory(qwen3, script('json-other', turns(true)), 'rerender');
    const tampered = {
      ...t,
      turns: t.turns.map((x, k) =>
        k === 0
          ? x
          : {
              ...x,
              messages: x.messages!.map((m) =>
                m.role === 'assistant'
                  ? { ...m, tool_calls: [{ type: 'function', function: { name: 'calc', arguments: { b: 7, a: 3 } } }] }
                  : m,
              ),
            },
      ),
    };
    const rendered = await buildTrajectory(
      qwen3,
      script('json-other', [
        { ...turns(true)[0]!, historyMessage: tampered.turns[1]!.messages![2] as Message },
        turns(true)[1]!,
      ]),
      'rerender',
    );
    const f = (await check(rendered, qwen3)).findings.find((x) => x.kind === 'prefix_break')!;
    expect(f.cause).not.toBe('tool_call_reserialized');
  });
});

describe('a turn ended by the secondary EOS <|endoftext|>', () => {
  const turns = (closedAsTruncated: boolean): ScriptTurn[] => [
    {
      answer:
        'I will compute the hypotenuse.\n<tool_call>\n{"name": "calc", "arguments": {"expr": "sqrt(3**2+4**2)"}}\n</tool_call>',
      stoppedBy: 'endoftext',
      closedAsTruncated,
      observation: [{ role: 'tool', content: '5.0' }],
    },
    { answer: 'AC = 5.' },
  ];

  it('closed with <|im_end|>\\n as if length-truncated: prefix_break/secondary_eos at the appended <|im_end|>', async () => {
    const t = await buildTrajectory(qwen25, script('eot', turns(true)), 'canonical');
    const t0 = t.turns[0]!;
    const end = t0.promptIds!.length + t0.generatedIds!.length;
    expect(t0.generatedIds![t0.generatedIds!.length - 1]).toBe(qwenNamed(qwen25.ids).endOfText);
    expect(t.turns[1]!.promptIds!.slice(end, end + 2)).toEqual([
      qwenNamed(qwen25.ids).eos,
      qwenNamed(qwen25.ids).newline,
    ]);
    const r = await check(t, qwen25);
    expect(r.findings.find((f) => f.kind === 'prefix_break')).toMatchObject({
      cause: 'secondary_eos',
      severity: 'error',
      turn: 1,
      index: end,
      expected: [],
      actual: [qwenNamed(qwen25.ids).eos],
    });
    expect(errors(r).every((f) => (f as { cause?: string }).cause === 'secondary_eos')).toBe(true);
    // The canonical stream closes the turn with `\n` only.
    const span = r.alignment.turns[0]!;
    expect(r.alignment.tokens.slice(span.generated[1] - 1, span.generated[1] + 2)).toEqual([
      qwenNamed(qwen25.ids).endOfText,
      qwenNamed(qwen25.ids).newline,
      qwenNamed(qwen25.ids).imStart,
    ]);
  });

  it('closed with `\\n` only, it checks clean with its training sample (mask 1 on <|endoftext|>, 0 on the `\\n`); a re-render is warned about', async () => {
    const t = await buildTrajectory(qwen25, script('eot-clean', turns(false)), 'canonical');
    const sample = trainingSample(t, qwen25);
    const r = await check({ ...t, sample }, qwen25);
    expect(r.findings.filter((f) => f.kind !== 'rerender_mismatch')).toEqual([]);
    // Re-rendering decoded text would turn the model's <|endoftext|> into <|im_end|>: said as a warning, with its cause.
    const span = r.alignment.turns[0]!;
    expect(r.findings.filter((f) => f.kind === 'rerender_mismatch')).toEqual([
      expect.objectContaining({
        cause: 'secondary_eos',
        severity: 'warning',
        index: span.generated[1] - 1,
        expected: [qwenNamed(qwen25.ids).endOfText],
        actual: [qwenNamed(qwen25.ids).eos],
      }),
    ]);
  });
});

describe('vision tokens that are no image', () => {
  it('the model writes <|vision_start|><|image_pad|><|vision_end|>: one image_count/vision_token_generated at its first token, no miscount', async () => {
    const said = 'The figure is <|vision_start|><|image_pad|><|vision_end|> a right triangle, so AC = 5.';
    const t = await buildTrajectory(
      qwen25,
      script('gen-vision', [
        { answer: 'Let me think.', observation: [{ role: 'user', content: 'Go on.' }] },
        { answer: said },
      ]),
      'canonical',
    );
    const t1 = t.turns[1]!;
    const at = t1.generatedIds!.indexOf(qwenNamed(qwen25.ids).visionStart);
    expect(at).toBeGreaterThan(0);
    const r = await check(t, qwen25);
    expect(errors(r)).toEqual([
      expect.objectContaining({
        kind: 'image_count',
        cause: 'vision_token_generated',
        turn: 1,
        index: r.alignment.turns[1]!.generated[0] + at,
        stream: 'canonical',
        actual: 3,
      }),
    ]);
  });

  it('a lone <|vision_start|> the model wrote (no pad) is a warning: no trainer takes it for an image', async () => {
    const t = await buildTrajectory(
      qwen25,
      script('gen-vision-start', [{ answer: 'The figure<|vision_start|> shows AC = 5.' }]),
      'canonical',
    );
    const t0 = t.turns[0]!;
    const r = await check(t, qwen25);
    expect(errors(r)).toEqual([]);
    expect(r.findings.filter((f) => f.kind === 'image_count')).toEqual([
      expect.objectContaining({
        kind: 'image_count',
        cause: 'vision_token_generated',
        severity: 'warning',
        index: t0.promptIds!.length + t0.generatedIds!.indexOf(qwenNamed(qwen25.ids).visionStart),
      }),
    ]);
  });

  it('a vision span generated in turn 0 and kept in the next prompt: found in turn 0, the image checks count one image', async () => {
    const said = 'Here: <|vision_start|><|image_pad|><|vision_end|>. I will compute it.';
    const t = await buildTrajectory(
      qwen25,
      script('gen-vision-0', [
        { answer: said, observation: [{ role: 'tool', content: '5.0' }] },
        { answer: 'AC = 5.' },
      ]),
      'canonical',
    );
    const t0 = t.turns[0]!;
    const r = await check(t, qwen25);
    expect(errors(r)).toEqual([
      expect.objectContaining({
        kind: 'image_count',
        cause: 'vision_token_generated',
        turn: 0,
        index: t0.promptIds!.length + t0.generatedIds!.indexOf(qwenNamed(qwen25.ids).visionStart),
      }),
    ]);
  });

  it('a vision span the model wrote before a tool returns an image: that image keeps its own pad count', async () => {
    const t = await buildTrajectory(
      qwen25,
      {
        id: 'gen-vision-then-image',
        messages: USER,
        images: [
          { width: 640, height: 480 },
          { width: 320, height: 240 },
        ],
        turns: [
          {
            answer: 'Look at <|vision_start|><|image_pad|><|vision_end|> closely.',
            observation: [
              {
                role: 'user',
                content: [
                  { type: 'image', image: 'zoom.png' },
                  { type: 'text', text: 'Here is the corner.' },
                ],
              },
            ],
          },
          { answer: 'AC = 5.' },
        ],
      },
      'canonical',
    );
    const p1 = t.turns[1]!.promptIds!;
    const runs: number[] = [];
    for (let i = 0; i < p1.length; i++) {
      if (p1[i] !== qwenNamed(qwen25.ids).imagePad || p1[i - 1] === qwenNamed(qwen25.ids).imagePad) continue;
      let j = i;
      while (p1[j] === qwenNamed(qwen25.ids).imagePad) j++;
      runs.push(j - i);
    }
    // 640×480 → 391 pads, the model's own pad, 320×240 → 99 pads.
    expect(runs).toEqual([391, 1, 99]);
    const r = await check(t, qwen25);
    expect(errors(r)).toEqual([
      expect.objectContaining({ kind: 'image_count', cause: 'vision_token_generated', turn: 0 }),
    ]);
    expect(r.alignment.tokens).toEqual([...p1, ...t.turns[1]!.generatedIds!]);
    // Without turn 1's prompt ids the observation is rendered from the messages: same stream.
    const { promptIds: _, ...turn1 } = t.turns[1]!;
    const fromMessages = await check({ ...t, turns: [t.turns[0]!, turn1] }, qwen25);
    expect(fromMessages.alignment.turns[0]!.observationFrom).toBe('messages');
    expect(fromMessages.alignment.tokens).toEqual([...p1, ...t.turns[1]!.generatedIds!]);
    // The browser's image panel pairs each image with its own pad run, not with the model's pad.
    const viewed = await analyzeTrajectory(t, { workers: 0 }, []);
    expect(imageInfos(viewed, {}).map((i) => i.actualPads)).toEqual([391, 99]);
    const spans = tokenStream(viewed, 'prompt', 1, {}).vision;
    expect(spans.map((x) => [x.image, x.padLength])).toEqual([
      [0, 391],
      [1, 99],
    ]);
  });

  it('the user typed the string <|image_pad|>: image_count/placeholder_in_text at it, and the real image keeps its 391 pads', async () => {
    const messages: Message[] = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'My notes say the token <|image_pad|> marks a picture. ' },
          { type: 'image', image: 'diagram.png' },
          { type: 'text', text: 'In the figure, AB = 3 and BC = 4. Find AC.' },
        ],
      },
    ];
    const t = await buildTrajectory(qwen25, script('typed-pad', [{ answer: 'AC = 5.' }], messages), 'canonical');
    const p = t.turns[0]!.promptIds!;
    const typed = p.findIndex(
      (id, i) => id === qwenNamed(qwen25.ids).imagePad && p[i - 1] !== qwenNamed(qwen25.ids).visionStart,
    );
    const real = p.indexOf(qwenNamed(qwen25.ids).visionStart);
    expect(typed).toBeGreaterThan(0);
    expect(typed).toBeLessThan(real);
    expect(p.filter((id) => id === qwenNamed(qwen25.ids).imagePad)).toHaveLength(391 + 1);
    const r = await check(t, qwen25);
    expect(r.findings).toEqual([
      expect.objectContaining({
        kind: 'image_count',
        cause: 'placeholder_in_text',
        severity: 'error',
        turn: 0,
        index: typed,
        stream: 'prompt',
      }),
    ]);
    expect(r.alignment.placeholderRanges.map((x) => x.length)).toContain(391);
  });
});
