// The demo run's content: Geo3K-like geometry questions (diagram + question), multi-turn answers
// that call a calculator or a `zoom` tool, and for each trajectory the rollout-loop behaviour that
// produced it: kept ids (clean), or one of the failures the checks know. Declarative on purpose:
// write.ts builds and corrupts; test/demo.test.ts holds every trajectory to what its id promises.
import type { Message } from '../model/trajectory.ts';
import { stripReasoning, type BuildMode, type ScriptTurn } from './build.ts';
import { DIAGRAMS, ZOOMS, type DiagramName, type ZoomName } from './diagrams.ts';

export const DEMO_MODELS = {
  'qwen2.5-vl': 'Qwen/Qwen2.5-VL-7B-Instruct',
  'qwen3-vl': 'Qwen/Qwen3-VL-8B-Instruct',
} as const;
export type DemoProfile = keyof typeof DEMO_MODELS;

export const IMAGE_DIR = 'images';
export const imageUrl = (name: DiagramName | ZoomName): string => `${IMAGE_DIR}/${name}.png`;

interface Problem {
  diagram: DiagramName;
  question: string;
}

const PROBLEMS = {
  'right-triangle': { diagram: 'right-triangle', question: 'Find x.' },
  'circle-area': { diagram: 'circle-radius', question: 'Find the area of the circle. Round to the nearest hundredth.' },
  'parallel-lines': { diagram: 'parallel-lines', question: 'Lines l and m are parallel. Find m∠1.' },
  'tall-figure': { diagram: 'tall-figure', question: 'Find the area of figure ABCDE.' },
  isosceles: { diagram: 'isosceles', question: 'Find x.' },
  'inscribed-angle': { diagram: 'inscribed-angle', question: 'O is the center of the circle. Find x.' },
  trapezoid: { diagram: 'trapezoid', question: 'Find the area of the trapezoid.' },
} satisfies Record<string, Problem>;
export type ProblemName = keyof typeof PROBLEMS;

const SYSTEM =
  'You are a geometry tutor. Tools: calculator(expression) evaluates arithmetic; zoom(box) returns the region ' +
  '[left, top, right, bottom] of the figure, in pixels, enlarged. Call a tool with <tool_call>{"name": ..., "arguments": ...}</tool_call>. ' +
  'Finish with "Answer: <value>".';

/** The failure a rollout loop (or the trainer's data path) introduced after building the trajectory. */
export type Fault =
  /** The observation was appended as `<|im_start|>…` right after `<|im_end|>`, without the template's `\n`. */
  | { kind: 'drop-newline-after-eos'; turn: number }
  /** The record states the trainer's processor settings, but the engine expanded the pads with the model defaults. */
  | { kind: 'trainer-max-pixels'; maxPixels: number }
  /** The prompt was cut at `maxPromptLength` tokens (keeping the head), inside the image's pad run. */
  | { kind: 'truncate-prompt'; maxPromptLength: number }
  /** The stored loss mask is shifted one token to the right. */
  | { kind: 'shift-loss-mask' }
  /** The stored rollout logprobs miss the first generated token's entry (an off-by-one when they were collected). */
  | { kind: 'drop-first-logprob' }
  /** Tool messages were tokenized from their text parts only: the returned image never reaches the tokens. */
  | { kind: 'flatten-tool-images' }
  /** The engine returned NaN for one sampled token's logprob. */
  | { kind: 'nan-logprob'; turn: number; index: number }
  /** Every logprob of one turn written as 0.0: the sampler's values were missing and zero-filled. */
  | { kind: 'zero-filled-logprobs'; turn: number };

export interface DemoScenario {
  id: string;
  /** One sentence: what is wrong with the trajectory, or exactly "clean". */
  description: string;
  /** For clean trajectories worth a remark (a wrong answer, a length-truncated turn). */
  note?: string;
  profile: DemoProfile;
  problem: ProblemName;
  /** GRPO group: samples that share one prompt (within one step). */
  group?: string;
  /**
   * The rollout step (policy version) it was generated at. The demo run spans three: step 1 mostly
   * clean (and a group whose rewards are all equal), step 2 the image and logprob faults, step 3
   * the rollout loop that re-renders the chat (the prefix breaks appear there). vLLM call logs state none.
   */
  step?: number;
  reward: number;
  /** Rollout status as the framework records it (native records only). */
  status: 'completed' | 'truncated';
  mode: BuildMode;
  turns: ScriptTurn[];
  /** Store the training sample (slime layout) next to the turns. */
  sample?: boolean;
  /**
   * How the trajectory was recorded: rollscope's native record (default), or a vLLM call log, one
   * chat completion per line (such logs carry no training sample, group or status).
   */
  recordedAs?: 'native' | 'vllm';
  fault?: Fault;
  /** The user's text, when it is not the problem's question. */
  question?: string;
}

/** A tool call as Qwen models write it (Python json.dumps spacing, as the Qwen3-VL template renders it). */
function toolCall(name: string, args: Record<string, unknown>, compact = false): string {
  const json = compact ? JSON.stringify({ name, arguments: args }) : pyJson({ name, arguments: args });
  return `<tool_call>\n${json}\n</tool_call>`;
}

/** `json.dumps` with its default separators (", " and ": "). */
function pyJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pyJson).join(', ')}]`;
  if (v && typeof v === 'object')
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`)
      .join(', ')}}`;
  return JSON.stringify(v);
}

const tool = (content: string): Message[] => [{ role: 'tool', content }];

function zoomBox(name: ZoomName): number[] {
  const { box } = ZOOMS[name];
  return [box.left, box.top, box.left + box.width, box.top + box.height];
}

function zoomResult(name: ZoomName, keepImage = true): Message[] {
  const z = ZOOMS[name];
  const text = `Region [${zoomBox(name).join(', ')}] enlarged to ${z.width}×${z.height}.`;
  return [
    {
      role: 'tool',
      content: [...(keepImage ? [{ type: 'image', image: imageUrl(name) }] : []), { type: 'text', text }],
    },
  ];
}

/** The images a scenario's conversation holds, in order of appearance. */
export function scenarioImages(s: DemoScenario): (DiagramName | ZoomName)[] {
  const zooms = s.turns.flatMap((t) =>
    (t.observation ?? []).flatMap((m) =>
      (Array.isArray(m.content) ? m.content : [])
        .map((p) => (typeof p === 'string' ? undefined : p.image))
        .filter((x): x is string => typeof x === 'string'),
    ),
  );
  const names = Object.keys(ZOOMS) as ZoomName[];
  return [PROBLEMS[s.problem].diagram, ...zooms.map((url) => names.find((n) => imageUrl(n) === url)!)];
}

export function scenarioMessages(s: DemoScenario): Message[] {
  const p = PROBLEMS[s.problem];
  return [
    { role: 'system', content: SYSTEM },
    {
      role: 'user',
      content: [
        { type: 'image', image: imageUrl(p.diagram) },
        { type: 'text', text: s.question ?? p.question },
      ],
    },
  ];
}

export function imageSize(name: DiagramName | ZoomName): { width: number; height: number } {
  const d = name in DIAGRAMS ? DIAGRAMS[name as DiagramName] : ZOOMS[name as ZoomName];
  return { width: d.width, height: d.height };
}

const RIGHT_TRIANGLE_GROUP = 'prompt-0412';
const ISOSCELES_GROUP = 'prompt-0388';
const TRAPEZOID_GROUP = 'prompt-0977';

const pythagoras = (lead: string): ScriptTurn[] => [
  { answer: `${lead}\n${toolCall('calculator', { expression: 'sqrt(6**2 + 8**2)' })}`, observation: tool('10.0') },
  { answer: 'x = √(36 + 64) = √100 = 10.\nAnswer: 10' },
];

const parallelZoom = (keepImage: boolean): ScriptTurn[] => [
  {
    answer: `The label of angle 1 is small. Let me zoom in on the lower intersection.\n${toolCall('zoom', { box: zoomBox('parallel-lines-angle-1') })}`,
    observation: zoomResult('parallel-lines-angle-1', keepImage),
  },
  {
    answer:
      'Angle 1 lies above m and to the left of t. The 65° angle at l corresponds to the angle above m to the right of t, ' +
      'and angle 1 forms a linear pair with it: m∠1 = 180° − 65° = 115°.\nAnswer: 115',
  },
];

const circleArea: ScriptTurn[] = [
  {
    answer: `The radius is 5 cm, so the area is π·5².\n${toolCall('calculator', { expression: '3.14159265 * 5**2' })}`,
    observation: tool('78.5398163'),
  },
  { answer: 'The area is about 78.54 cm².\nAnswer: 78.54' },
];

const inscribed = (last: string): ScriptTurn[] => [
  {
    answer: `x is an inscribed angle on arc AB, and the central angle AOB = 110° stands on the same arc, so x is half of it.\n${toolCall('calculator', { expression: '110 / 2' })}`,
    observation: tool('55.0'),
  },
  { answer: last },
];

const THINKING_ANSWER =
  '<think>\nThe bases are 7 and 13 and the height is 6, so the area is (7 + 13) / 2 · 6 = 10 · 6 = 60.\n</think>\n\nThe area of the trapezoid is (7 + 13) / 2 · 6 = 60 cm².\nAnswer: 60';

const trapezoidLead = 'The area of a trapezoid is (a + b) / 2 · h, with bases 7 and 13 and height 6.';

export const DEMO_SCENARIOS: DemoScenario[] = [
  {
    id: 'geo-001-clean',
    description: 'clean',
    step: 1,
    profile: 'qwen2.5-vl',
    problem: 'right-triangle',
    group: RIGHT_TRIANGLE_GROUP,
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    turns: pythagoras('Angle B is a right angle, so x is the hypotenuse: x = √(6² + 8²).'),
  },
  {
    id: 'geo-002-clean-wrong-answer',
    description: 'clean',
    note: 'The tokens are fine; the model added the legs instead of using the Pythagorean theorem, so the reward is 0.',
    step: 1,
    profile: 'qwen2.5-vl',
    problem: 'right-triangle',
    group: RIGHT_TRIANGLE_GROUP,
    reward: 0,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    turns: [
      {
        answer: `x is the third side, so I add the two given sides.\n${toolCall('calculator', { expression: '6 + 8' })}`,
        observation: tool('14'),
      },
      { answer: 'x = 14.\nAnswer: 14' },
    ],
  },
  {
    id: 'geo-003-dup-eos',
    description:
      'The rollout loop decoded the answer with its special tokens and re-rendered the chat (vime #331), so the next prompt holds `<|im_end|>` twice where the model closed its turn.',
    step: 3,
    profile: 'qwen2.5-vl',
    problem: 'right-triangle',
    group: RIGHT_TRIANGLE_GROUP,
    reward: 1,
    status: 'completed',
    mode: 'legacy',
    turns: pythagoras('Angle B is a right angle, so AC = x is the hypotenuse and x² = 6² + 8². I will compute it.'),
  },
  {
    id: 'geo-004-retokenized',
    description:
      'The sampler wrote " will" as the two tokens " w" + "ill"; the next call sent the answer back as chat text and vLLM tokenized it again, merging them, so the next prompt no longer extends what the model generated.',
    profile: 'qwen2.5-vl',
    problem: 'right-triangle',
    reward: 1,
    status: 'completed',
    recordedAs: 'vllm',
    mode: 'rerender',
    turns: pythagoras('Since angle B is a right angle, I will use the Pythagorean theorem: x = √(6² + 8²).').map(
      (t, k) => (k === 0 ? { ...t, split: { word: ' will', pieces: [' w', 'ill'] } } : t),
    ),
  },
  {
    id: 'geo-005-clean-zoom',
    description: 'clean',
    note: 'The zoom tool returns a cropped image: the second vision span sits in the tool turn.',
    profile: 'qwen2.5-vl',
    problem: 'parallel-lines',
    reward: 1,
    status: 'completed',
    recordedAs: 'vllm',
    mode: 'canonical',
    turns: parallelZoom(true),
  },
  {
    id: 'geo-006-image-dropped',
    description:
      'The zoom tool returned an image, but the rollout loop tokenized only the text of the tool message: the conversation has 2 images and the tokens 1 vision span, so the trainer gets pixels for an image no token refers to.',
    step: 2,
    profile: 'qwen2.5-vl',
    problem: 'parallel-lines',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    fault: { kind: 'flatten-tool-images' },
    turns: parallelZoom(true),
  },
  {
    id: 'geo-007-missing-newline',
    description:
      'The tool result was appended right after the generated `<|im_end|>` without the `\\n` the chat template puts there, so the next prompt is not what the template renders.',
    step: 3,
    profile: 'qwen2.5-vl',
    problem: 'circle-area',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    fault: { kind: 'drop-newline-after-eos', turn: 1 },
    turns: circleArea,
  },
  {
    id: 'geo-008-mask-shifted',
    description:
      'The stored loss mask is shifted one token to the right: the first generated token is left out of training and the `\\n` after the first `<|im_end|>` is trained on.',
    step: 2,
    profile: 'qwen2.5-vl',
    problem: 'circle-area',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    fault: { kind: 'shift-loss-mask' },
    turns: circleArea,
  },
  {
    id: 'geo-009-clean-length-truncated',
    description: 'clean',
    note: 'The first answer hit max_tokens (finish_reason "length", no `<|im_end|>` generated); the loop closed it with `<|im_end|>\\n` before the follow-up, as the template does.',
    step: 1,
    group: ISOSCELES_GROUP,
    profile: 'qwen2.5-vl',
    problem: 'isosceles',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    turns: [
      {
        answer:
          'Two sides of the triangle are marked equal, so it is isosceles and the base angles at B and C are equal; both are 70°. ' +
          'The three angles of a triangle add up to 180°, so x + 70 + 70 = 180, which gives x =',
        truncated: true,
        observation: [
          { role: 'user', content: 'Your answer was cut off by the length limit. Please state the final answer.' },
        ],
      },
      { answer: 'x = 180 − 140 = 40.\nAnswer: 40' },
    ],
  },
  {
    id: 'geo-010-logprobs-short',
    description:
      "The stored rollout logprobs miss the first generated token's entry, one fewer than the response tokens: the trainer pairs each response token with the logprob of the token after it.",
    step: 1,
    group: ISOSCELES_GROUP,
    profile: 'qwen2.5-vl',
    problem: 'isosceles',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    fault: { kind: 'drop-first-logprob' },
    turns: [
      {
        answer: `The base angles are both 70°, so x = 180 − 2 · 70.\n${toolCall('calculator', { expression: '180 - 2*70' })}`,
        observation: tool('40'),
      },
      { answer: 'x = 40.\nAnswer: 40' },
    ],
  },
  {
    id: 'geo-011-pads-max-pixels',
    description:
      'The trainer processes images with max_pixels=200704 (grid 1×26×36, 234 pad tokens) but the rollout engine expanded the diagram with the model default (391 pad tokens).',
    step: 2,
    profile: 'qwen2.5-vl',
    problem: 'inscribed-angle',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    fault: { kind: 'trainer-max-pixels', maxPixels: 256 * 28 * 28 },
    turns: inscribed('x = 110° / 2 = 55°.\nAnswer: 55'),
  },
  {
    id: 'geo-012-nan-logprob',
    description:
      'The engine returned NaN as the logprob of one sampled token in the final answer; it would poison the importance ratio.',
    step: 2,
    profile: 'qwen2.5-vl',
    problem: 'inscribed-angle',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    fault: { kind: 'nan-logprob', turn: 1, index: 2 },
    turns: inscribed('An inscribed angle is half the central angle on the same arc: x = 55°.\nAnswer: 55'),
  },
  {
    id: 'geo-013-image-truncated',
    description:
      "The prompt was cut at max_prompt_length=384 tokens, inside the tall diagram's 576 pad tokens: no `<|vision_end|>`, and the model answered from the top of the figure only.",
    step: 2,
    profile: 'qwen2.5-vl',
    problem: 'tall-figure',
    reward: 0,
    status: 'completed',
    mode: 'canonical',
    fault: { kind: 'truncate-prompt', maxPromptLength: 384 },
    turns: [{ answer: 'I can see a rectangle with sides 6 and 10, so the area is 6 × 10 = 60.\nAnswer: 60' }],
  },
  {
    id: 'geo-014-qwen3-clean',
    description: 'clean',
    step: 3,
    profile: 'qwen3-vl',
    problem: 'trapezoid',
    group: TRAPEZOID_GROUP,
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    turns: [
      {
        answer: `${trapezoidLead}\n${toolCall('calculator', { expression: '(7 + 13) / 2 * 6' })}`,
        observation: tool('60.0'),
      },
      { answer: 'The area is 60 cm².\nAnswer: 60' },
    ],
  },
  {
    id: 'geo-015-qwen3-tool-json-reserialized',
    description:
      'The model wrote its tool call as compact JSON; the rollout loop parsed it into tool_calls and the chat template re-serialized it with spaces, so the next prompt rewrites what the model generated.',
    step: 3,
    profile: 'qwen3-vl',
    problem: 'trapezoid',
    group: TRAPEZOID_GROUP,
    reward: 1,
    status: 'completed',
    mode: 'rerender',
    turns: [
      {
        answer: `${trapezoidLead}\n${toolCall('calculator', { expression: '(7 + 13) / 2 * 6' }, true)}`,
        historyMessage: {
          role: 'assistant',
          content: trapezoidLead,
          tool_calls: [
            { type: 'function', function: { name: 'calculator', arguments: { expression: '(7 + 13) / 2 * 6' } } },
          ],
        },
        observation: tool('60.0'),
      },
      { answer: 'The area is 60 cm².\nAnswer: 60' },
    ],
  },
  {
    id: 'geo-016-qwen3-clean-wrong-answer',
    description: 'clean',
    note: 'The tokens are fine; the model forgot to halve the sum of the bases, so the reward is 0.',
    step: 3,
    profile: 'qwen3-vl',
    problem: 'trapezoid',
    group: TRAPEZOID_GROUP,
    reward: 0,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    turns: [
      {
        answer: `The area is the sum of the bases times the height.\n${toolCall('calculator', { expression: '(7 + 13) * 6' })}`,
        observation: tool('120'),
      },
      { answer: 'The area is 120 cm².\nAnswer: 120' },
    ],
  },
  {
    id: 'geo-017-qwen3-clean-zoom',
    description: 'clean',
    note: 'A tall diagram (448×1008) and a zoomed crop returned inside the tool response.',
    profile: 'qwen3-vl',
    problem: 'tall-figure',
    reward: 1,
    status: 'completed',
    recordedAs: 'vllm',
    mode: 'canonical',
    turns: [
      {
        answer: `The height of the triangle is written very small. Let me zoom in on it.\n${toolCall('zoom', { box: zoomBox('tall-figure-height') })}`,
        observation: zoomResult('tall-figure-height'),
      },
      {
        answer:
          'The height of triangle CDE is 8. The rectangle has area 6 × 10 = 60 and the triangle ½ × 6 × 8 = 24, so the figure has area 60 + 24 = 84.\nAnswer: 84',
      },
    ],
  },
  {
    id: 'geo-018-qwen3-reasoning-stripped',
    description:
      "The model reasoned inside `<think>…</think>` before answering; the user's follow-up was sent with the chat history rendered the way Qwen3's template renders it, reasoning dropped before the last user turn, so the next prompt no longer holds what the model generated.",
    step: 3,
    group: TRAPEZOID_GROUP,
    profile: 'qwen3-vl',
    problem: 'trapezoid',
    reward: 1,
    status: 'completed',
    mode: 'rerender',
    turns: [
      {
        answer: THINKING_ANSWER,
        historyMessage: { role: 'assistant', content: stripReasoning(THINKING_ANSWER, '</think>') },
        observation: [{ role: 'user', content: 'Give the answer in square millimetres.' }],
      },
      { answer: '60 cm² = 6000 mm².\nAnswer: 6000' },
    ],
  },
  {
    id: 'geo-019-secondary-eos',
    description:
      'The model ended its first answer with `<|endoftext|>`, its secondary stop token; the rollout loop only knew `<|im_end|>`, took the turn for length-truncated and closed it with `<|im_end|>\\n` after the `<|endoftext|>`.',
    step: 3,
    profile: 'qwen2.5-vl',
    problem: 'isosceles',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    turns: [
      {
        answer: `The base angles are equal, so x = 180 − 2 · 70.\n${toolCall('calculator', { expression: '180 - 2*70' })}`,
        stoppedBy: 'endoftext',
        closedAsTruncated: true,
        observation: tool('40'),
      },
      { answer: 'x = 40.\nAnswer: 40' },
    ],
  },
  {
    id: 'geo-020-vision-token-generated',
    description:
      'The model wrote `<|vision_start|><|image_pad|><|vision_end|>` in its own answer to point at the figure: no image stands behind those tokens, but a trainer that counts `<|image_pad|>` tokens pairs them with pixels.',
    step: 2,
    profile: 'qwen2.5-vl',
    problem: 'circle-area',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    turns: [
      {
        answer: `In the figure <|vision_start|><|image_pad|><|vision_end|> the radius is 5 cm, so the area is π·5².\n${toolCall('calculator', { expression: '3.14159265 * 5**2' })}`,
        observation: tool('78.5398163'),
      },
      { answer: 'The area is about 78.54 cm².\nAnswer: 78.54' },
    ],
  },
  {
    id: 'geo-021-placeholder-in-text',
    description:
      'The question text holds the literal string `<|image_pad|>` (left over from a dataset export), which the tokenizer turns into the image placeholder token: the prompt has one image and one stray placeholder.',
    step: 1,
    profile: 'qwen2.5-vl',
    problem: 'parallel-lines',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    question: 'Lines l and m are parallel. Find m∠1. (figure: <|image_pad|>)',
    turns: [
      {
        answer:
          'The 65° angle at l and the angle above m to the right of t are corresponding angles; angle 1 forms a linear pair with it: m∠1 = 180° − 65° = 115°.\nAnswer: 115',
      },
    ],
  },
  {
    id: 'geo-022-zero-filled-logprobs',
    description:
      'The rollout logprobs of the final answer were missing and written as 0.0 (zero-filled): every importance ratio of that turn is computed against probability 1.',
    step: 2,
    profile: 'qwen2.5-vl',
    problem: 'inscribed-angle',
    reward: 1,
    status: 'completed',
    mode: 'canonical',
    sample: true,
    fault: { kind: 'zero-filled-logprobs', turn: 1 },
    turns: inscribed('The inscribed angle x subtends the same arc as the 110° central angle, so x = 55°.\nAnswer: 55'),
  },
];
