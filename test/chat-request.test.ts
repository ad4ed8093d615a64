// Differential tests of what vLLM and SGLang hand the chat template (server/analysis/chat-request.ts,
// used by check, export, `rollscope render --as vllm` and the gateway through renderText): every
// conversation is normalized and rendered by rollscope, and by an independent Python rewrite of
// vLLM's and SGLang's chat handling (test/support/vllm_chat.py) feeding Python jinja2 set up as
// transformers sets it up (test/support/render_jinja2.py), with the real Qwen-VL templates. The
// texts must be identical byte for byte; a request the server refuses must be refused by both
// (rollscope keeps it as written and reports it).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { renderText, type RenderSemantics, type RequestRejection } from '../server/analysis/render.ts';
import { normalizeChatLikeVllm } from '../server/analysis/chat-request.ts';
import type { Message } from '../server/model/trajectory.ts';
import { loadProfile, type BuiltinProfileName } from '../server/profiles/profile.ts';
import { ChatTemplate } from '../server/profiles/template.ts';
import { parsePythonJson } from '../server/profiles/python-literal.ts';

const SCRIPT = fileURLToPath(new URL('./support/render_jinja2.py', import.meta.url));
const SUPPORT = fileURLToPath(new URL('./support', import.meta.url));
const hasPython = spawnSync('python3', ['-c', 'import jinja2']).status === 0;

interface Conversation {
  name: string;
  messages: unknown[];
  tools?: unknown[];
  addGenerationPrompt?: boolean;
}

const user = (content: unknown): object => ({ role: 'user', content });
const call = (name: string, args: unknown, extra: object = {}): object => ({
  id: `call_${name}`,
  type: 'function',
  function: { name, arguments: args },
  ...extra,
});
const img = (url = 'data:image/png;base64,iVBORw0KGgo='): object => ({ type: 'image_url', image_url: { url } });
const text = (t: unknown): object => ({ type: 'text', text: t });

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'zoom',
      description: 'Zoom into a box',
      parameters: { type: 'object', properties: { box: { type: 'array' } }, required: ['box'] },
    },
  },
  { type: 'function', function: { name: 'crop' } },
  { function: { name: 'rotate', parameters: { type: 'object' }, strict: true }, defer_loading: true },
];

const conversations: Conversation[] = [
  {
    name: 'OpenAI-client tool loop: assistant content null with tool calls (string arguments), tool results',
    messages: [
      { role: 'system', content: 'Use the tools.' },
      user([img(), text('What does the sign say?')]),
      { role: 'assistant', content: null, tool_calls: [call('zoom', '{"box": [0.1, 0.2, 0.5, 0.5]}')] },
      { role: 'tool', tool_call_id: 'call_zoom', content: [img(), text('zoomed')] },
      { role: 'assistant', content: null, tool_calls: [call('crop', '{}'), call('zoom', '{"box":[1,2]}')] },
      { role: 'tool', tool_call_id: 'call_crop', content: 'cropped' },
      { role: 'tool', tool_call_id: 'call_zoom', content: [text('part one'), text('part two')] },
    ],
    tools: TOOLS,
    addGenerationPrompt: true,
  },
  {
    name: 'assistant tool call with missing content, and with empty-string content',
    messages: [
      user('Go.'),
      { role: 'assistant', tool_calls: [call('crop', '{"x": 2.0, "y": 1e5, "z": -0.0}')] },
      { role: 'tool', content: 'ok' },
      { role: 'assistant', content: '', tool_calls: [call('crop', { x: 1, nested: { b: [true, null] } })] },
      { role: 'tool', content: 'ok again' },
    ],
    addGenerationPrompt: true,
  },
  {
    name: 'arguments: invalid JSON, JSON null, a JSON list, empty, null, missing, an object',
    messages: [
      user('x'),
      {
        role: 'assistant',
        content: 'Calling.',
        tool_calls: [
          call('a', '{bad'),
          call('b', 'null'),
          call('c', '[1, 2.50]'),
          call('d', ''),
          call('e', null),
          { type: 'function', function: { name: 'f' } },
          call('g', { already: 'an object' }),
          call('h', '  {"spaced": "out"}  '),
        ],
      },
      { role: 'assistant', content: 'No calls.', tool_calls: [] },
    ],
  },
  {
    name: 'reasoning_content and reasoning on assistant turns, name on messages',
    messages: [
      { role: 'system', content: 'You are terse.', name: 'setup' },
      { role: 'user', content: 'Why?', name: 'alice' },
      { role: 'assistant', content: 'Because.', reasoning_content: 'think think' },
      { role: 'user', content: 'Sure?' },
      { role: 'assistant', content: 'Yes.', reasoning: 'r', reasoning_content: 'rc', name: 'bot' },
    ],
    addGenerationPrompt: true,
  },
  {
    name: 'parts of every kind vLLM knows, string parts, text null',
    messages: [
      user([
        'a bare string part, ',
        text('text, '),
        { type: 'input_text', text: 'input_text, ' },
        { type: 'output_text', text: 'output_text, ' },
        { type: 'refusal', refusal: 'refusal, ' },
        { type: 'thinking', thinking: 'thinking, ' },
        text(null),
        { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'auto' },
        img(),
        { image_url: 'data:image/png;base64,BBBB' },
        { type: 'video_url', video_url: { url: 'file:///clip.mp4' } },
        { type: 'audio_url', audio_url: { url: 'file:///a.wav' } },
        { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } },
        text('end.'),
      ]),
    ],
    addGenerationPrompt: true,
  },
  {
    name: 'tool results: text parts joined, an image kept as a part, empty and null content',
    messages: [
      user('Look.'),
      { role: 'assistant', content: null, tool_calls: [call('zoom', '{}')] },
      { role: 'tool', tool_call_id: 'call_zoom', content: [text('line 1'), text('line 2')] },
      { role: 'tool', content: [] },
      { role: 'tool', content: null },
      { role: 'tool', content: [text('see:'), img()] },
    ],
    addGenerationPrompt: true,
  },
  {
    name: 'system as parts, multi-turn history with string contents',
    messages: [
      { role: 'system', content: [text('You are '), text('helpful.')] },
      user([img(), text('One.')]),
      { role: 'assistant', content: 'A cat.' },
      user('Two?'),
      { role: 'assistant', content: [text('Orange'), text(', mostly.')] },
      user([img(), img(), text('Three images in all.')]),
    ],
    addGenerationPrompt: true,
  },
  {
    name: 'keys vLLM does not pass on (refusal, audio, function_call, extra fields)',
    messages: [
      { role: 'user', content: 'Hi', extra: 'dropped' },
      { role: 'assistant', content: 'Hello', refusal: null, audio: null, function_call: null, annotations: [] },
    ],
    addGenerationPrompt: true,
  },
  // What vLLM refuses: rollscope renders it as written and reports it.
  {
    name: 'refused: a qwen-vl-utils image part {"type": "image", "image": ...}',
    messages: [user([{ type: 'image', image: 'file:///cat.png' }, text('What?')])],
    addGenerationPrompt: true,
  },
  {
    name: 'refused: a tool call without its "function" object',
    messages: [user('x'), { role: 'assistant', content: '', tool_calls: [{ name: 'calc', arguments: { q: 1 } }] }],
  },
  {
    name: 'refused: an unknown part type',
    messages: [user([{ type: 'input_file', file_id: 'f1' }, text('read it')])],
  },
  {
    name: 'refused: an image_url part whose image_url is a string',
    messages: [user([{ type: 'image_url', image_url: 'http://x/y.png' }])],
  },
];

const TEMPLATES: BuiltinProfileName[] = ['qwen2.5-vl', 'qwen3-vl'];
const SERVERS: RenderSemantics[] = ['vllm', 'sglang', 'transformers'];

type PyOutcome = { ok: string } | { error: string } | { refused: string };

interface Row {
  model: BuiltinProfileName;
  as: RenderSemantics;
  c: Conversation;
}
const matrix: Row[] = TEMPLATES.flatMap((model) =>
  SERVERS.flatMap((as) => conversations.map((c): Row => ({ model, as, c }))),
);

function inputText(c: Conversation): string {
  return JSON.stringify({
    messages: c.messages,
    ...(c.tools ? { tools: c.tools } : {}),
    add_generation_prompt: c.addGenerationPrompt === true,
  });
}

function runPython(rows: readonly Row[]): PyOutcome[] {
  const payload = JSON.stringify(
    rows.map((r) => ({
      template: loadProfile(r.model).templateSource,
      input: inputText(r.c),
      normalize: r.as === 'transformers' ? null : r.as,
    })),
  );
  const run = spawnSync('python3', [SCRIPT], { input: payload, maxBuffer: 64 << 20 });
  if (run.status !== 0) throw new Error(`render_jinja2.py failed: ${run.stderr.toString()}`);
  return JSON.parse(run.stdout.toString('utf8')) as PyOutcome[];
}

type Ours = { ok: string; rejected: RequestRejection[] } | { error: string; rejected: RequestRejection[] };

function renderOurs(r: Row, parse: (text: string) => unknown): Ours {
  const rejected: RequestRejection[] = [];
  const doc = parse(inputText(r.c)) as Map<string, unknown> | Record<string, unknown>;
  const get = (k: string) => (doc instanceof Map ? doc.get(k) : doc[k]);
  try {
    const ok = renderText(loadProfile(r.model), get('messages') as Message[], {
      as: r.as,
      tools: get('tools') as unknown[] | undefined,
      addGenerationPrompt: r.c.addGenerationPrompt === true,
      onRejected: (x) => rejected.push(x),
    });
    return { ok, rejected };
  } catch (e) {
    return { error: (e as Error).message, rejected };
  }
}

describe.skipIf(!hasPython && !process.env.CI)(
  'vLLM and SGLang request handling matches an independent Python rewrite',
  () => {
    const reference = runPython(matrix);

    it.each(matrix.map((r, i) => [`${r.model} as ${r.as}: ${r.c.name}`, r, i] as const))('%s', (_n, r, i) => {
      const want = reference[i]!;
      // Both the importers' data (JSON.parse) and Python-faithful values (parsePythonJson, as `render` reads them).
      for (const parse of [JSON.parse, parsePythonJson]) {
        const ours = renderOurs(r, parse);
        if ('refused' in want) {
          expect(ours.rejected.length, `Python refused (${want.refused}); rollscope reported nothing`).toBeGreaterThan(
            0,
          );
          continue;
        }
        expect(ours.rejected, 'rollscope reported a rejection Python does not make').toEqual([]);
        if ('error' in want) {
          expect(ours, `Python raised ${want.error}`).toHaveProperty('error');
          continue;
        }
        if ('error' in ours) throw new Error(`rollscope raised (${ours.error}), Python rendered`);
        expect(ours.ok).toBe(want.ok);
      }
    });

    it('the matrix holds renders, template errors and refusals', () => {
      const count = (k: string) => reference.filter((o) => k in o).length;
      expect(count('ok')).toBeGreaterThan(40);
      expect(count('refused')).toBeGreaterThanOrEqual(8);
      // transformers semantics with content null: the Qwen3-VL template's for loop raises, as in Python.
      expect(count('error')).toBeGreaterThanOrEqual(2);
    });
  },
);

describe('content format detection agrees with vLLM', () => {
  const templates = [
    ...(['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl'] as const).map((m) => loadProfile(m).templateSource),
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}",
    "{% set ms = messages[1:] %}{% for m in ms | reverse if m.role %}{% for c in m['content'] %}{{ c.text }}{% endfor %}{% endfor %}",
    '{% for message in messages %}{% for c in messages[0].content %}{{ c }}{% endfor %}{% endfor %}',
    '{% for message in messages %}{% if message.content is string %}{{ message.content }}{% else %}{% for part in message.content %}{{ part.text }}{% endfor %}{% endif %}{% endfor %}',
  ];
  it.skipIf(!hasPython && !process.env.CI)('on the shipped templates and on templates shaped otherwise', () => {
    const script = `import json, sys\nsys.path.insert(0, ${JSON.stringify(SUPPORT)})\nfrom vllm_chat import content_format\nprint(json.dumps([content_format(t) for t in json.loads(sys.stdin.read())]))`;
    const run = spawnSync('python3', ['-c', script], { input: JSON.stringify(templates) });
    if (run.status !== 0) throw new Error(run.stderr.toString());
    const python = JSON.parse(run.stdout.toString()) as string[];
    expect(templates.map((t) => new ChatTemplate(t).contentFormat)).toEqual(python);
    expect(python).toEqual(['openai', 'openai', 'openai', 'string', 'openai', 'string', 'openai']);
  });

  it('a string-format template gets content as one string, parts joined with "\\n"', () => {
    const out = normalizeChatLikeVllm(
      [user([text('a'), 'b']), { role: 'assistant', content: null }, { role: 'tool', content: [text('x'), text('y')] }],
      { contentFormat: 'string' },
    );
    expect(out).toEqual([
      { role: 'user', content: 'a\nb' },
      { role: 'assistant', content: '' },
      { role: 'tool', content: 'x\ny' },
    ]);
  });
});
