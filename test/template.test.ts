// Differential tests: every case is rendered by ChatTemplate and by Python jinja2 configured as
// transformers configures it (test/support/render_jinja2.py), and the outputs must be identical
// byte for byte. Inputs are JSON text so both sides decode the same document: Python with
// json.loads, ChatTemplate with parsePythonJson (and, when the text has no Python-only numbers,
// also with plain JSON.parse, the path callers holding ordinary JavaScript data take).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ChatTemplate, TemplateError, type ChatTemplateInput } from '../server/profiles/template.ts';
import { PyFloat, parsePythonJson } from '../server/profiles/python-literal.ts';
import { mulberry32 } from '../server/util/random.ts';

const VL_TEMPLATE_FILES = ['qwen2-vl.jinja', 'qwen2.5-vl.jinja', 'qwen3-vl.jinja'] as const;
const TEXT_TEMPLATE_FILES = [
  'qwen2.5.jinja',
  'qwen2.5-math.jinja',
  'qwen3.jinja',
  'qwen3-instruct-2507.jinja',
  'qwen3-thinking-2507.jinja',
] as const;
const TEMPLATE_FILES = [...VL_TEMPLATE_FILES, ...TEXT_TEMPLATE_FILES] as const;
const templateSource = (file: string): string =>
  readFileSync(new URL(`../server/families/qwen/templates/${file}`, import.meta.url), 'utf8');
const SCRIPT = fileURLToPath(new URL('./support/render_jinja2.py', import.meta.url));

// ---------------------------------------------------------------------------------------------
// Case construction. `raw(text)` splices literal JSON into a case (Python floats like 2.0, big
// ints, integer-like keys in source order) where a JavaScript value cannot express it.

const rawTexts: string[] = [];
function raw(text: string): string {
  rawTexts.push(text);
  return `@@raw${rawTexts.length - 1}@@`;
}
function jsonText(value: unknown): string {
  return JSON.stringify(value).replace(/"@@raw(\d+)@@"/g, (_, i: string) => {
    const text = rawTexts[Number(i)];
    if (text === undefined) throw new Error(`no raw text ${i}`);
    return text;
  });
}

interface Case {
  name: string;
  template: string;
  /** JSON text of the render variables (messages, tools, add_generation_prompt, extras). */
  input: string;
  /** Decode string tool-call arguments first (vLLM does this before rendering). */
  parseArguments?: boolean;
  /** Python must raise (and so must ChatTemplate). */
  expectError?: boolean;
  /** The error messages must match too. */
  sameError?: boolean;
  /** The text holds nothing JSON.parse loses, so plain JavaScript data must render the same. */
  plain?: boolean;
}

const img = { type: 'image', image: 'file:///data/cat.png' };
const vid = { type: 'video', video: ['file:///f0.jpg', 'file:///f1.jpg'] };
const txt = (text: string): { type: string; text: string } => ({ type: 'text', text });
const user = (content: unknown): { role: string; content: unknown } => ({ role: 'user', content });
const assistant = (content: unknown, extra: object = {}): object => ({ role: 'assistant', content, ...extra });
const tool = (content: unknown): { role: string; content: unknown } => ({ role: 'tool', content });
const call = (name: string, args: unknown): object => ({
  type: 'function',
  id: `call_${name}`,
  function: { name, arguments: args },
});

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'zoom_in',
      description: 'Zoom into a region 放大区域 🔍 (RTL: تكبير)',
      parameters: {
        type: 'object',
        properties: {
          bbox: { type: 'array', items: { type: 'number' }, default: raw('[0.0, 0.5, 1.0, 1.5e3]') },
          scale: { type: 'number', minimum: raw('1.0'), maximum: raw('1E+2'), default: raw('2.0') },
          offset: { type: 'number', default: raw('-0.0') },
          seed: { type: 'integer', default: raw('12345678901234567890123'), min: raw('-9007199254740993') },
          epsilon: { type: 'number', default: raw('1e-7') },
          huge: raw('1e300'),
          weird: raw('[NaN, Infinity, -Infinity]'),
          by_index: raw('{"2": "two", "1": "one", "b": 3, "a": 4, "10": 5}'),
        },
        required: ['bbox'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'crop',
      description: 'Crop "quoted" \\ backslash\ttab',
      parameters: { type: 'object', properties: {} },
    },
  },
];

const conversations: { name: string; input: Record<string, unknown>; parseArguments?: boolean; error?: boolean }[] = [
  { name: 'user only, generation prompt', input: { messages: [user('Hello')], add_generation_prompt: true } },
  {
    name: 'system and user, no generation prompt',
    input: { messages: [{ role: 'system', content: 'Be terse.' }, user('Hi')], add_generation_prompt: false },
  },
  {
    name: 'system as content parts',
    input: {
      messages: [{ role: 'system', content: [txt('You are '), txt('terse.')] }, user([img, txt('What?')])],
      add_generation_prompt: true,
    },
  },
  {
    name: 'image part {"type":"image"}',
    input: { messages: [user([{ type: 'image' }, txt('Describe.')])], add_generation_prompt: true },
  },
  {
    name: 'image_url part',
    input: {
      messages: [
        user([
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'high' } },
          txt('What is this?'),
        ]),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'bare image and text parts without type',
    input: {
      messages: [
        user([{ image: 'file:///a.png' }, { text: 'Compare with' }, { image_url: 'http://x/b.jpg' }, { text: '.' }]),
      ],
    },
  },
  {
    name: 'videos',
    input: {
      messages: [user([vid, { video: 'file:///clip.mp4' }, txt('Summarize both.')])],
      add_generation_prompt: true,
    },
  },
  {
    name: 'add_vision_id across turns',
    input: {
      messages: [
        { role: 'system', content: 'You compare pictures.' },
        user([img, txt('and'), { type: 'image_url', image_url: { url: 'x' } }, vid]),
        assistant('Two pictures and a video.'),
        user([{ image: 'y' }, txt('third?'), { video: 'z' }]),
      ],
      add_vision_id: true,
      add_generation_prompt: true,
    },
  },
  {
    name: 'add_vision_id false',
    input: { messages: [user([img, img, txt('two')])], add_vision_id: false, add_generation_prompt: true },
  },
  {
    name: 'multi-turn with assistant turns',
    input: {
      messages: [
        user([img, txt('What is it?')]),
        assistant('A cat.'),
        user('Color?'),
        assistant([txt('Orange'), txt(', mostly.')]),
        user('Thanks'),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'unicode',
    input: {
      messages: [
        { role: 'system', content: '你好，世界。日本語テキスト。한국어.' },
        user([txt('emoji 👨‍👩‍👧‍👦 🇯🇵 😀'), img, txt('RTL: مرحبا بالعالم שלום עולם \u200f')]),
        assistant(
          'combining: e\u0301 Z\u0324\u0354\u0367\u0311 a\u030a; nbsp:\u00a0; zwsp:\u200b; bom:\ufeff; lone: \ud800',
        ),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'odd whitespace',
    input: {
      messages: [
        { role: 'system', content: '\n\nleading newlines' },
        user([txt('trailing newlines\n\n'), txt('\ttabs\tinside\t'), img, txt('  spaces before token  <|im_end|>')]),
        assistant('windows\r\nline\r\nendings\r\n'),
        user('   '),
        assistant('{{ not a tag }} {% raw %} {# nor a comment #}'),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'empty content',
    input: {
      messages: [{ role: 'system', content: '' }, user(''), assistant(''), user([]), assistant([])],
      add_generation_prompt: true,
    },
  },
  { name: 'text null in a part', input: { messages: [user([txt('a'), { type: 'text', text: null }, txt('b')])] } },
  { name: 'role null', input: { messages: [{ role: null, content: 'who?' }, user('me')] } },
  {
    name: 'string parts',
    input: { messages: [user(['an image of a video', 'plain words'])], add_generation_prompt: true },
  },
  {
    name: 'tools list with system',
    input: {
      messages: [{ role: 'system', content: 'Use tools.' }, user([img, txt('Zoom on the sign.')])],
      tools: TOOLS,
      add_generation_prompt: true,
    },
  },
  { name: 'tools list without system', input: { messages: [user('Hi')], tools: TOOLS, add_generation_prompt: true } },
  {
    name: 'tool call with dict arguments, nested numbers',
    input: {
      messages: [
        user([img, txt('Zoom in.')]),
        assistant('', {
          tool_calls: [
            call('zoom_in', {
              bbox: raw('[0.0, 1.5e3, -0.0, 2.5, 1e16, 1e-5]'),
              scale: raw('2.0'),
              seed: raw('18446744073709551617'),
              neg: raw('-9007199254740993'),
              order: raw('{"2": "two", "1": "one", "10": {"b": 1, "a": 2}}'),
              note: 'café ✓ "quoted" \\ back\nnewline\u0001',
              flags: [true, false, null],
            }),
          ],
        }),
        tool([img, txt('zoomed')]),
      ],
      tools: TOOLS,
      add_generation_prompt: true,
    },
  },
  {
    name: 'tool call with string arguments (verbatim)',
    input: {
      messages: [
        user('Zoom.'),
        assistant('Sure.', {
          tool_calls: [call('zoom_in', '{"scale":2.0,  "2":1,"1":2, "big": 123456789012345678901234567890}')],
        }),
        tool('ok'),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'tool call with string arguments parsed as Python would',
    parseArguments: true,
    input: {
      messages: [
        user('Zoom.'),
        assistant('Sure.', {
          tool_calls: [
            call(
              'zoom_in',
              '{"scale":2.0,  "2":1,"1":2, "big": 123456789012345678901234567890, "e": 1e5, "z": -0.0, "n": NaN, "u": "\\u00e9\\ud83d\\ude00"}',
            ),
          ],
        }),
        tool('ok'),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'tool calls without function wrapper, several per turn',
    input: {
      messages: [
        user('Two calls.'),
        assistant('Let me check.', {
          tool_calls: [
            { name: 'crop', arguments: { x: 1 } },
            { name: 'zoom_in', arguments: raw('{"scale": 3.0}') },
          ],
        }),
        tool('cropped'),
        tool('zoomed'),
        assistant('Done.'),
      ],
    },
  },
  {
    name: 'assistant tool call without content key',
    input: {
      messages: [user('Go.'), { role: 'assistant', tool_calls: [call('crop', {})] }, tool('{"ok": true}')],
      add_generation_prompt: true,
    },
  },
  {
    name: 'consecutive tool messages with images and videos',
    input: {
      messages: [
        { role: 'system', content: 'sys' },
        user([img, txt('Inspect.')]),
        assistant('', { tool_calls: [call('zoom_in', { scale: raw('2.0') }), call('crop', {})] }),
        tool([img, txt('zoomed')]),
        tool('plain result'),
        tool([vid, { image_url: { url: 'u' } }, txt('clip')]),
        user([img, txt('And this one?')]),
      ],
      add_vision_id: true,
      add_generation_prompt: true,
    },
  },
  { name: 'tool message first', input: { messages: [tool('orphan'), user('Hi')], add_generation_prompt: true } },
  {
    name: 'conversation ending with tool messages',
    input: { messages: [user('q'), assistant('', { tool_calls: [call('crop', {})] }), tool('a'), tool('b')] },
  },
  {
    name: 'assistant list content with image part',
    input: { messages: [user('Draw'), assistant([img, txt('Here.')])], add_generation_prompt: true },
  },
  {
    name: 'extra template variables',
    input: { messages: [user('x')], bos_token: '<s>', documents: [{ title: 'd' }], add_generation_prompt: true },
  },
  // Text conversations as text models see them (string content), and Qwen3's thinking handling.
  {
    name: 'text multi-turn with system',
    input: {
      messages: [
        { role: 'system', content: 'You solve math problems.' },
        user('What is 2+2?'),
        assistant('4'),
        user('And 3+3?'),
        assistant('6'),
        user('Thanks.'),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'enable_thinking false',
    input: { messages: [user('Hi')], add_generation_prompt: true, enable_thinking: false },
  },
  {
    name: 'enable_thinking true',
    input: { messages: [user('Hi')], add_generation_prompt: true, enable_thinking: true },
  },
  {
    name: 'reasoning_content in history',
    input: {
      messages: [
        user('Q1'),
        assistant('A1', { reasoning_content: '\nthinking about Q1\n' }),
        user('Q2'),
        assistant('A2', { reasoning_content: 'thinking about Q2' }),
      ],
    },
  },
  {
    name: 'reasoning_content null and a trailing assistant turn',
    input: { messages: [user('Q1'), assistant('A1', { reasoning_content: null })], enable_thinking: false },
  },
  {
    name: '<think> in the content of history turns',
    input: {
      messages: [
        user('Q1'),
        assistant('<think>\nreason 1\n</think>\n\nanswer 1'),
        user('Q2'),
        assistant('<think>reason 2</think>answer 2'),
        user('Q3'),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'multi-step tool use with reasoning after the last query',
    input: {
      messages: [
        { role: 'system', content: 'Use tools.' },
        user('Weather in Paris?'),
        assistant('', {
          reasoning_content: 'I need the weather tool.',
          tool_calls: [call('get_weather', '{"city": "Paris"}')],
        }),
        tool('{"temp": 21}'),
        assistant('It is 21 degrees.', { reasoning_content: 'The tool said 21.' }),
      ],
      tools: TOOLS,
    },
  },
  {
    name: 'user turn that is a tool response, then a generation prompt',
    input: {
      messages: [
        user('Start.'),
        assistant('<think>plan</think>Calling.', { tool_calls: [call('crop', { x: 1 })] }),
        user('<tool_response>\ncropped\n</tool_response>'),
      ],
      add_generation_prompt: true,
    },
  },
  {
    name: 'assistant content null raises',
    input: { messages: [user('Go.'), assistant(null, { tool_calls: [call('crop', {})] })] },
    error: true,
  },
];

const cases: Case[] = [];
for (const file of TEMPLATE_FILES) {
  for (const c of conversations) {
    const plain = !c.parseArguments && !JSON.stringify(c.input).includes('@@raw');
    cases.push({
      name: `${file}: ${c.name}`,
      template: templateSource(file),
      input: jsonText(c.input),
      parseArguments: c.parseArguments,
      // The VL templates iterate list content and fail on null content; the text ones differ per case.
      expectError: c.error && (VL_TEMPLATE_FILES as readonly string[]).includes(file),
      plain,
    });
  }
}

// Printing and json semantics, checked with small templates.
const PRINT_ALL = '{% for v in values %}{{ v }}|{{ v|tojson }}|{{ v|string }}|{{ [v] }}\n{% endfor %}';
const withValues = (values: string): string => `{"messages": [], "values": ${values}}`;
cases.push(
  {
    name: 'print: special values',
    template: PRINT_ALL,
    input:
      withValues(String.raw`[2.0, 1.5e3, -0.0, 0.0, 1e16, 1e15, 9999999999999998.0, 123456789012345.6, 1e-5, 0.0001, 0.00012,
      1e22, 5e-324, 1.7976931348623157e308, 1e400, -1e400, NaN, 12345678901234567890, -9007199254740993, 0, -0, 7, true, false,
      null, "it's", "say \"hi\"", "both ' and \"", "back\\slash", {"2": 1, "1": [2.0, null]}, [], {}, "tab\there\r\n",
      "\u00a0nbsp\u200bzw\u200djoin\u2028ls\u0085nel\u007fdel\u0001c0\u00ad\ue000pua", "\ud83d\ude00 emoji \ud800 lone \udfff",
      "e\u0301 combining", "עברית", "中文", "\u0378 unassigned"]`),
  },
  {
    name: 'tojson options',
    template: [
      '{{ d|tojson(indent=2) }}',
      '{{ d|tojson(indent=0) }}',
      '{{ d|tojson(sort_keys=true) }}',
      "{{ d|tojson(separators=(',', ':')) }}",
      '{{ d|tojson(ensure_ascii=true) }}',
      "{{ d|tojson(indent='\\t', sort_keys=true) }}",
      '{{ [] | tojson(indent=2) }}{{ {} | tojson(indent=2) }}',
      '{{ d|tojson(false, 4) }}',
      '{{ d|tojson(true, none, none, true) }}',
      '{{ "x" | tojson }}{{ 3 | tojson }}{{ 2.5 | tojson }}{{ none | tojson }}{{ true | tojson }}',
    ].join('\n'),
    input: String.raw`{"messages": [], "d": {"b": 1, "a": [1.0, {"é": "ü😀", "10": null, "9": true}], "": "", "Z": -0.0, "😀": 1, "\uffff": 2, "ctl": "\u0000\u001f\u007f\u2028"}}`,
  },
  {
    name: 'concatenation, join, string, constants',
    template:
      "{{ 'a' ~ none ~ 2.0 ~ true ~ x ~ undefined_var }}|{{ [1, 2.0, none, 'x', true, x] | join(', ') }}|{{ 'abc' | join('-') }}|" +
      '{{ none }}|{{ true }}{{ false }}|{{ x is none }}|{{ y is none }}|{{ y is defined }}|{{ undefined_var }}|{{ (1, "a") }}|' +
      '{{ 1.5 }}|{{ 3 / 2 }}|{{ 4 / 2 }}|{{ 7 // 2 }}|{{ x * 2 }}|{{ d }}|{{ d | string }}|{{ d.keys() | list | join }}',
    input: '{"messages": [], "x": 1.0, "y": null, "d": {"k": [1, 2.0], "j": {"3": "3", "1": "1"}}}',
  },
  {
    name: 'namespace repr',
    template: "{% set ns = namespace(n=0, f=2.0, s='x') %}{% set ns.n = ns.n + 1 %}{{ ns }}|{{ ns.n }}|{{ ns.f }}",
    input: '{"messages": []}',
  },
  {
    name: 'loop controls and iteration',
    template:
      "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}{% if loop.index > 3 %}{% break %}{% endif %}" +
      '{{ loop.index }}:{{ m.role }};{% endfor %}|{% for k in d %}{{ k }},{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|' +
      "{% for c in 'héllo😀' %}[{{ c }}]{% endfor %}|{% for z in nothing %}x{% else %}empty{% endfor %}|{% for i in range(2, 9, 3) %}{{ i }}{% endfor %}",
    input: jsonText({
      messages: [{ role: 'system' }, { role: 'user' }, { role: 'assistant' }, { role: 'user' }, { role: 'assistant' }],
      d: raw('{"2": 2.0, "1": null, "a": [1.5]}'),
    }),
  },
  {
    name: 'raise_exception',
    template: "{{ raise_exception('Conversation roles must alternate user/assistant') }}",
    input: '{"messages": []}',
    expectError: true,
    sameError: true,
  },
  {
    name: 'tojson of undefined raises',
    template: '{{ nothing | tojson }}',
    input: '{"messages": []}',
    expectError: true,
  },
);

// json.loads acceptance: valid documents print the same, invalid ones raise on both sides.
const LOADS = '{{ x }}|{{ x|tojson }}';
const loads = (name: string, input: string): Case => ({ name: `json.loads: ${name}`, template: LOADS, input });
cases.push(
  loads('whitespace and NaN', ' \n\t{"messages": [], "x": NaN}\r\n '),
  loads('duplicate keys keep first position, last value', '{"messages":[],"x":{"a":1,"b":2,"a":3}}'),
  loads('escapes', String.raw`{"messages":[],"x":"\ud83d\ude00 pair \ud800 lone \u00E9 \/ \b\f\"\\"}`),
  loads('exponent forms', '{"messages":[],"x":[1E+2, 1e-400, 123456789e-30, -0, -0.0e0, 0e5, 1.0e-4]}'),
  loads('4300-digit int', `{"messages":[],"x":${'9'.repeat(4300)}}`),
  loads('4301-digit int', `{"messages":[],"x":${'9'.repeat(4301)}}`),
  loads('trailing comma', '{"messages":[],"x":[1,]}'),
  loads('leading zero', '{"messages":[],"x":01}'),
  loads('bare dot', '{"messages":[],"x":1.}'),
  loads('leading dot', '{"messages":[],"x":.5}'),
  loads('plus sign', '{"messages":[],"x":+1}'),
  loads('single quotes', "{'messages':[]}"),
  loads('BOM', '\ufeff{"messages":[]}'),
  loads('raw tab in string', '{"messages":[],"x":"a\tb"}'),
  loads('extra data', '{"messages":[]} x'),
  loads('lowercase nan', '{"messages":[],"x":nan}'),
  loads('bad escape', String.raw`{"messages":[],"x":"\x41"}`),
  loads('truncated escape', String.raw`{"messages":[],"x":"\u12"}`),
  loads('unterminated', '{"messages":[],"x":"abc'),
);

// Float and int printing over many values from a fixed-seed generator.
function* randomNumbers(seed: number): Generator<string> {
  const next = mulberry32(seed).nextUint32;
  const view = new DataView(new ArrayBuffer(8));
  for (;;) {
    view.setUint32(0, next());
    view.setUint32(4, next());
    const bits = view.getFloat64(0);
    if (Number.isFinite(bits)) {
      const text = String(bits);
      yield /[.e]/.test(text) ? text : `${text}.0`;
    }
    yield `${next() % 2 ? '-' : ''}${next() % 100000}.${next() % 1000}e${(next() % 60) - 30}`;
    yield `${next() % 2 ? '-' : ''}${String(next()).repeat(1 + (next() % 4))}`;
    yield `${(next() % 2 ** 20) / 2 ** (next() % 30)}`.replace(/^(\d+)$/, '$1.0');
  }
}
{
  const gen = randomNumbers(20240607);
  const values = Array.from({ length: 600 }, () => gen.next().value ?? '0');
  cases.push({
    name: 'print: 600 seeded random numbers',
    template: '{% for v in values %}{{ v }} {{ v|tojson }} {{ [v] }}\n{% endfor %}',
    input: withValues(`[${values.join(',')}]`),
  });
}

// ---------------------------------------------------------------------------------------------
// Running both sides

type Outcome = { ok: string } | { error: string };

function runPython(all: readonly Case[]): Outcome[] {
  const payload = `[${all
    .map(
      (c) =>
        `{"template": ${JSON.stringify(c.template)}, "input": ${JSON.stringify(c.input)}, "parse_arguments": ${c.parseArguments === true}}`,
    )
    .join(',')}]`;
  const run = spawnSync('python3', [SCRIPT], { input: payload, maxBuffer: 256 * 1024 * 1024 });
  if (run.error) throw run.error;
  if (run.status !== 0) throw new Error(`render_jinja2.py failed (${run.status}): ${run.stderr.toString()}`);
  const results = JSON.parse(run.stdout.toString('utf8')) as Outcome[];
  if (results.length !== all.length) throw new Error(`expected ${all.length} results, got ${results.length}`);
  return results;
}

const compiled = new Map<string, ChatTemplate>();
function templateFor(source: string): ChatTemplate {
  let t = compiled.get(source);
  if (!t) compiled.set(source, (t = new ChatTemplate(source)));
  return t;
}

function asMap(value: unknown, what: string): Map<string, unknown> {
  if (!(value instanceof Map)) throw new Error(`${what} is not an object`);
  return value as Map<string, unknown>;
}

/** The vLLM step the Python side mirrors: string tool-call arguments decoded as JSON. */
function parseToolArguments(messages: unknown[]): void {
  for (const message of messages) {
    const calls = asMap(message, 'message').get('tool_calls');
    if (!Array.isArray(calls)) continue;
    for (const c of calls) {
      const callMap = asMap(c, 'tool call');
      const fn = callMap.has('function') ? asMap(callMap.get('function'), 'function') : callMap;
      const args = fn.get('arguments');
      if (typeof args === 'string') fn.set('arguments', parsePythonJson(args));
    }
  }
}

function renderPythonParsed(c: Case): string {
  const variables = asMap(parsePythonJson(c.input), 'input');
  const messages = variables.get('messages');
  if (!Array.isArray(messages)) throw new Error('messages is not a list');
  if (c.parseArguments) parseToolArguments(messages);
  const input: ChatTemplateInput = { ...Object.fromEntries(variables), messages };
  return templateFor(c.template).render(input);
}

function outcome(render: () => string): Outcome {
  try {
    return { ok: render() };
  } catch (err) {
    return { error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
  }
}

const reference = runPython(cases);

describe('ChatTemplate matches Python jinja2 (transformers setup)', () => {
  it.each(cases.map((c, i) => [c.name, c, i] as const))('%s', (_name, c, i) => {
    const expected = reference[i];
    if (expected === undefined) throw new Error('missing reference');
    const actual = outcome(() => renderPythonParsed(c));
    if (c.expectError) expect(expected, 'Python should raise').toHaveProperty('error');
    if ('error' in expected) {
      expect(actual, `Python raised ${expected.error}`).toHaveProperty('error');
      if (c.sameError && 'error' in actual) expect(actual.error).toBe(expected.error);
      return;
    }
    if ('error' in actual)
      throw new Error(
        `ChatTemplate raised, Python rendered ${JSON.stringify(expected.ok.slice(0, 200))}: ${actual.error}`,
      );
    expect(actual.ok).toBe(expected.ok);

    // Plain JSON.parse data renders the same whenever the text has nothing JavaScript loses.
    if (c.plain) {
      const plain = JSON.parse(c.input) as ChatTemplateInput;
      expect(templateFor(c.template).render(plain)).toBe(expected.ok);
    }
  });
});

describe('templates', () => {
  it('are the files docs/reference/chat-templates.md#the-files lists, with its sizes and hashes', () => {
    const doc = readFileSync(new URL('../docs/reference/chat-templates.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('## The files'), doc.indexOf('## Jinja settings'));
    const rows = [...section.matchAll(/^\| `([^`]+\.jinja)` +\|[^|]+\| (\d+) +\| `([0-9a-f]{64})` \|$/gm)].map((m) => ({
      file: m[1]!,
      bytes: Number(m[2]),
      sha256: m[3]!,
    }));
    const folder = readdirSync(new URL('../server/families/qwen/templates/', import.meta.url)).filter((f) =>
      f.endsWith('.jinja'),
    );
    expect(rows.map((r) => r.file).sort()).toEqual(folder.sort());
    for (const r of rows) {
      const bytes = readFileSync(new URL(`../server/families/qwen/templates/${r.file}`, import.meta.url));
      expect({ file: r.file, bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') }).toEqual(
        r,
      );
    }
    // Every built-in profile's template is one of them.
    expect([...TEMPLATE_FILES].sort()).toEqual(folder.sort());
  });

  it('renders the examples of docs/reference/chat-templates.md', () => {
    const qwen2 = new ChatTemplate(templateSource('qwen2-vl.jinja'));
    expect(
      qwen2.render({
        messages: [{ role: 'user', content: [{ type: 'image' }, { type: 'text', text: 'Describe.' }] }],
        add_generation_prompt: true,
      }),
    ).toBe(
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe.<|im_end|>\n<|im_start|>assistant\n',
    );
    const qwen3 = new ChatTemplate(templateSource('qwen3-vl.jinja'));
    const out = qwen3.render({
      messages: [
        { role: 'user', content: 'Zoom.' },
        { role: 'assistant', content: '', tool_calls: [{ function: { name: 'zoom', arguments: { x: 1 } } }] },
        { role: 'tool', content: [{ type: 'image' }, { type: 'text', text: 'zoomed' }] },
      ],
      add_generation_prompt: true,
    });
    expect(out).toContain(
      '<|im_start|>assistant\n<tool_call>\n{"name": "zoom", "arguments": {"x": 1}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n<|vision_start|><|image_pad|><|vision_end|>zoomed\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('raise_exception throws TemplateError', () => {
    expect(() => new ChatTemplate("{{ raise_exception('no') }}").render({ messages: [] })).toThrow(TemplateError);
  });
});

describe('parsePythonJson', () => {
  it('keeps key order, float-ness and exact integers', () => {
    const v = asMap(
      parsePythonJson('{"2": 1, "1": 2.0, "b": 12345678901234567890, "a": [1e5, -0, NaN, -Infinity]}'),
      'value',
    );
    expect([...v.keys()]).toEqual(['2', '1', 'b', 'a']);
    expect(v.get('2')).toBe(1);
    expect(v.get('1')).toEqual(new PyFloat(2));
    expect(v.get('b')).toBe(12345678901234567890n);
    const list = v.get('a');
    expect(Array.isArray(list)).toBe(true);
    const [e5, zero, nan, inf] = list as unknown[];
    expect(String(e5)).toBe('100000.0');
    expect(Object.is(zero, 0)).toBe(true);
    expect(String(nan)).toBe('nan');
    expect(String(inf)).toBe('-inf');
  });

  it('rejects what json.loads rejects', () => {
    for (const bad of ['', '[1,]', '{"a":1,}', '01', '1.', '-', '[1] 2', "'a'", '"\\x"', 'nan', 'Infinity1']) {
      expect(() => parsePythonJson(bad), bad).toThrow(SyntaxError);
    }
  });
});
