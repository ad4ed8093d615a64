// GLM-4.xV (server/families/glm/): smart_resize with its temporal factor against a Python port of
// transformers' (test/support/glm_reference.py) over thousands of sizes, frame counts and the
// settings GLM checkpoints and RL recipes use; the duplicated role token; the two video layouts.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { familyOfModelName } from '../server/families/index.ts';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { GLM_SPECIAL_IDS, GLM_TEMPLATE, writeGlmFolder } from './support/glm-folder.ts';
import { duplicatedStop, GLM_TOKENS, videoPlaceholder } from '../server/families/glm/tokens.ts';
import { glm45ToolCalls } from '../server/families/glm/tool-calls.ts';
import {
  GLM4V_CLASS_DEFAULTS,
  GLM4V_MODEL_DEFAULTS,
  type GlmVision,
  glmImageTokens,
  glmSmartResize,
} from '../server/families/glm/vision.ts';
import { mulberry32 } from '../server/util/random.ts';
import { imageRuns, NO_EARLIER_MEDIA } from './support/media-runs.ts';

const REFERENCE = fileURLToPath(new URL('./support/glm_reference.py', import.meta.url));
const RENDER = fileURLToPath(new URL('./support/render_jinja2.py', import.meta.url));

function python(input: unknown): { resize: ([number, number] | null)[][] } {
  const r = spawnSync('python3', [REFERENCE], { input: JSON.stringify(input), encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`glm_reference.py failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const SETTINGS: [string, GlmVision][] = [
  ['class defaults (12544 … 11760000)', GLM4V_CLASS_DEFAULTS],
  ['checkpoint defaults (12544 … 9633792)', GLM4V_MODEL_DEFAULTS],
  ['max_pixels 1280·28·28 (RL recipes)', { ...GLM4V_MODEL_DEFAULTS, maxPixels: 1280 * 28 * 28 }],
  ['min 3136, max 12845056', { ...GLM4V_MODEL_DEFAULTS, minPixels: 3136, maxPixels: 12845056 }],
];

function cases(): [number, number, number][] {
  const out: [number, number, number][] = [
    [2, 480, 640],
    [2, 1080, 1920],
    [2, 3024, 4032],
    [2, 70, 700],
    [2, 10, 10],
    [2, 27, 5000],
    [2, 1, 300],
    [2, 42, 1400],
    [1, 480, 640],
    [3, 480, 640],
    [16, 720, 1280],
  ];
  const rnd = mulberry32(0x61a);
  const frames = [2, 2, 2, 2, 4, 8, 16, 32, 3, 5];
  for (let i = 0; i < 4000; i++) {
    const side = () => 1 + Math.floor(rnd.next() * [100, 1500, 6000][Math.floor(rnd.next() * 3)]!);
    out.push([frames[Math.floor(rnd.next() * frames.length)]!, side(), side()]);
  }
  // Sides at half a factor (the half-to-even trap).
  for (let k = 1; k < 60; k++) out.push([2, 14 + 28 * k, 1400]);
  return out;
}

describe('smart_resize (GLM) against transformers (Python)', () => {
  const all = cases();
  const got = python({
    cases: all,
    settings: SETTINGS.map(([, s]) => ({
      patch: s.patchSize,
      merge: s.mergeSize,
      temporal: s.temporalPatchSize,
      min: s.minPixels,
      max: s.maxPixels,
    })),
  });
  SETTINGS.forEach(([name, s], si) => {
    it(`${name}: ${all.length} (frames, h, w)`, () => {
      const bad: string[] = [];
      all.forEach(([t, h, w], i) => {
        let have: [number, number] | null;
        try {
          const r = glmSmartResize(t, h, w, s);
          have = [r.height, r.width];
        } catch {
          have = null;
        }
        const want = got.resize[si]![i]!;
        if (JSON.stringify(have) !== JSON.stringify(want)) bad.push(`${t}×${h}×${w}: ${have} vs ${want}`);
      });
      expect(bad.slice(0, 10)).toEqual([]);
    });
  });

  it('a still image counts as two frames against max_pixels', () => {
    // 3024×4032 is 12.2 MP: within 9633792 as one frame? No, and as two even less so; a
    // 2200×2200 image (4.84 MP) fits once but not twice, so GLM shrinks it where Qwen would not.
    const r = glmImageTokens(2200, 2200, GLM4V_MODEL_DEFAULTS);
    expect(2 * 2212 * 2212).toBeGreaterThan(GLM4V_MODEL_DEFAULTS.maxPixels);
    expect(r.resizedHeight).toBeLessThan(2200);
    expect(r.padCount).toBe((r.gridThw[1] * r.gridThw[2]) / 4);
    expect(glmImageTokens(640, 480, GLM4V_MODEL_DEFAULTS)).toEqual({
      resizedHeight: 476,
      resizedWidth: 644,
      gridThw: [1, 34, 46],
      padCount: 391,
    });
  });
});

describe('turns and video placeholders', () => {
  it('the stop token written again as the next opener is found at its second occurrence', () => {
    const USER = 151336;
    const OBS = 151338;
    const stops = new Set([USER, OBS, 151329]);
    expect(duplicatedStop([1, 2, OBS, 3, USER], stops)).toBeUndefined();
    expect(duplicatedStop([1, 2, OBS, OBS, 3], stops)).toBe(3);
    expect(duplicatedStop([1, 2, 2, 3], stops)).toBeUndefined();
  });

  it('transformers repeats <|image|> in a video, vLLM writes <|video|>; frames carry their whole second', () => {
    const hf = videoPlaceholder([0, 1.5, 3.9], 2, 'transformers');
    const vllm = videoPlaceholder([0, 1.5, 3.9], 2, 'vllm');
    const frame = (pad: string, t: number) => `${GLM_TOKENS.beginOfImage}${pad}${pad}${GLM_TOKENS.endOfImage}${t}`;
    expect(hf).toBe(
      `${GLM_TOKENS.beginOfVideo}${frame('<|image|>', 0)}${frame('<|image|>', 1)}${frame('<|image|>', 3)}${GLM_TOKENS.endOfVideo}`,
    );
    expect(vllm).toBe(hf.replaceAll('<|image|>', '<|video|>'));
  });
});

describe('GLM-4.1V as a registered family, from the built model folder', () => {
  let dir: string;
  let p: ModelProfile;
  const template = fs.readFileSync(GLM_TEMPLATE, 'utf8');
  beforeAll(() => {
    dir = writeGlmFolder(fs.mkdtempSync(path.join(os.tmpdir(), 'glm-')));
    p = loadProfile(dir);
  }, 300_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const user = { role: 'user', content: [{ type: 'image' }, { type: 'text', text: 'What is x?' }] };

  it('is recognized by config.json and model names; the ids are the ones config.json and the tokenizer state', () => {
    expect(p.modelFamily.name).toBe('glm');
    for (const n of ['zai-org/GLM-4.1V-9B-Thinking', 'zai-org/GLM-4.5V', 'zai-org/GLM-4.6V-Flash'])
      expect(familyOfModelName(n)?.name, n).toBe('glm');
    expect(familyOfModelName('zai-org/GLM-4.5')?.name).toBeUndefined();
    for (const [content, id] of GLM_SPECIAL_IDS) expect(p.tokenizer.tokenOfText(content), content).toBe(id);
    expect(p.ids.media.image).toEqual({ begin: 151339, header: [], pad: 151343, end: 151340 });
    expect(p.ids.grammar.endOfTurn).toBeUndefined();
    expect(p.ids.grammar.stopOpensTurn).toBe(true);
    expect(p.ids.grammar.stops).toEqual([151336, 151338, 151329]);
    expect(p.vision.maxPixels).toBe(9633792);
  });

  it('renders byte for byte as Python jinja2 and expands each image to its smart_resize count', async () => {
    const messages = [user, { role: 'assistant', content: 'x = 10' }, { role: 'user', content: 'Why?' }];
    const r = spawnSync('python3', [RENDER], {
      input: JSON.stringify([{ template, input: JSON.stringify({ messages, add_generation_prompt: true }) }]),
      encoding: 'utf8',
    });
    const text = (JSON.parse(r.stdout) as { ok: string }[])[0]!.ok;
    expect(p.template.render({ messages, add_generation_prompt: true })).toBe(text);
    expect(text).toBe(
      '[gMASK]<sop><|user|>\n<|begin_of_image|><|image|><|end_of_image|>What is x?<|assistant|>\nx = 10<|user|>\nWhy?<|assistant|>\n',
    );
    const ids = await p.tokenizer.encode(text);
    expect(p.modelFamily.countPlaceholders(ids, p.ids)).toEqual({ images: 1, videos: 0 });
    const image = p.modelFamily.imageTokens(640, 480, p.vision);
    expect(image.padCount).toBe(391);
    const expanded = await p.modelFamily.expandMedia(
      { text, ids },
      imageRuns([{ tokens: image }]),
      NO_EARLIER_MEDIA,
      p.ids,
      p.tokenizer,
    );
    const hf = await p.tokenizer.encodeDirect(text.replace('<|image|>', '<|image|>'.repeat(391)));
    expect(expanded).toEqual(hf);
    const [span] = p.modelFamily.findMediaSpans(expanded, p.ids);
    expect(span).toMatchObject({ kind: 'image', padLength: 391 });
    expect(expanded[span!.end]).toBe(151340);
    // mRoPE: the image block holds t = const, rows over the 17×23 merged grid; text resumes after it.
    const pos = p.modelFamily.positionIds(expanded, [{ kind: 'image', grid: image.gridThw }], p.ids, p.vision);
    const at = span!.padStart;
    expect(pos.rows[0]!.slice(at, at + 391).every((v) => v === at)).toBe(true);
    expect(Math.max(...pos.rows[1]!.slice(at, at + 391))).toBe(at + 16);
    expect(Math.max(...pos.rows[2]!.slice(at, at + 391))).toBe(at + 22);
    expect(pos.rows[0]![at + 392]).toBe(at + 23 + 1);
  });

  it('the stop token kept in the response and written again by the template is found at its second occurrence', async () => {
    const prompt = await p.tokenizer.encode(p.template.render({ messages: [user], add_generation_prompt: true }));
    const answer = await p.tokenizer.encode('x = 10');
    const stop = p.ids.grammar.stops[0]!;
    const next = await p.tokenizer.encode('<|user|>\nWhy?<|assistant|>\n');
    const stops = new Set(p.ids.grammar.stops);
    // Right: the model's stop token opens the next turn; the template's continuation adds only what follows it.
    expect(duplicatedStop([...prompt, ...answer, stop, ...next.slice(1)], stops)).toBeUndefined();
    // Wrong: the continuation re-renders the role token after the kept stop token.
    const broken = [...prompt, ...answer, stop, ...next];
    expect(duplicatedStop(broken, stops)).toBe(prompt.length + answer.length + 1);
  });
});

describe("vLLM's glm45 tool parser", () => {
  it('parses calls, deserializes values as json.loads / literal_eval would, and dumps them as json.dumps', () => {
    const text =
      'Let me look.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>\n' +
      '<arg_key>f</arg_key>\n<arg_value>2.50</arg_value>\n<arg_key>b</arg_key>\n<arg_value>True</arg_value>\n' +
      '<arg_key>l</arg_key>\n<arg_value>[1, "a"]</arg_value>\n<arg_key>o</arg_key>\n<arg_value>{"k": null}</arg_value>\n' +
      '<arg_key>s</arg_key>\n<arg_value> plain text </arg_value>\n</tool_call>';
    // Python's json.dumps of what vLLM's _deserialize makes of each value (json.loads, else ast.literal_eval).
    const py = spawnSync(
      'python3',
      [
        '-c',
        `import json, ast, re, sys
def deser(v):
    try: return json.loads(v)
    except Exception: pass
    try: return ast.literal_eval(v)
    except Exception: return v
pairs = re.findall(r"<arg_key>(.*?)</arg_key>\\s*<arg_value>(.*?)</arg_value>", sys.stdin.read(), re.DOTALL)
print(json.dumps({k.strip(): deser(v.strip()) for k, v in pairs}), end="")`,
      ],
      { input: text, encoding: 'utf8' },
    );
    const pythonDumps = py.stdout;
    expect(pythonDumps).toContain('\\u5317');
    expect(glm45ToolCalls.parse(text)).toEqual({
      content: 'Let me look.',
      calls: [{ name: 'get_weather', arguments: pythonDumps }],
    });
    expect(glm45ToolCalls.parse('no call here')).toEqual({ content: 'no call here', calls: [] });
    // A call without the newline after its name does not match: no calls, the whole text as content.
    const bad = '<tool_call>get_weather<arg_key>city</arg_key><arg_value>x</arg_value></tool_call>';
    expect(glm45ToolCalls.parse(bad)).toEqual({ content: bad, calls: [] });
  });
});
