// Kimi (server/families/kimi/): the NaViT resize of K2.5 and Kimi-VL's count against a Python port
// of the upstream code (test/support/kimi_reference.py) over thousands of sizes and the settings the
// released configs use; the two token spaces of a media item and a sequence that mixes them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { familyOfModelName } from '../server/families/index.ts';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { KIMI_SPECIAL_IDS, KIMI_TEMPLATE, writeKimiFolder } from './support/kimi-folder.ts';
import { IMAGE_ITEM_TEXT, mediaSpace, sequenceSpace, turnOpener } from '../server/families/kimi/tokens.ts';
import {
  KIMI_K25_MEDIA_DEFAULTS,
  type KimiMediaConfig,
  kimiVlImageTokens,
  navitResizeImage,
} from '../server/families/kimi/vision.ts';
import { mulberry32 } from '../server/util/random.ts';
import { imageRuns, NO_EARLIER_MEDIA } from './support/media-runs.ts';

const REFERENCE = fileURLToPath(new URL('./support/kimi_reference.py', import.meta.url));
const RENDER = fileURLToPath(new URL('./support/render_jinja2.py', import.meta.url));

const SETTINGS: [string, KimiMediaConfig][] = [
  ['K2.5 released media_proc_cfg', KIMI_K25_MEDIA_DEFAULTS],
  ['K2.5 video frame (in_patch_limit_each_frame 4096)', { ...KIMI_K25_MEDIA_DEFAULTS, inPatchLimit: 4096 }],
  ['side limit 256', { ...KIMI_K25_MEDIA_DEFAULTS, patchLimitOnOneSide: 256 }],
  ['K3-sized budget 65536', { ...KIMI_K25_MEDIA_DEFAULTS, inPatchLimit: 65536 }],
  ['fixed_output_tokens 64', { ...KIMI_K25_MEDIA_DEFAULTS, fixedOutputTokens: 64 }],
];
const VL_LIMITS = [4096, 16384, 1024];

function sizes(): [number, number][] {
  const out: [number, number][] = [
    [640, 480],
    [1920, 1080],
    [4032, 3024],
    [3000, 3000],
    [1, 1],
    [13, 13],
    [14, 14],
    [28, 28],
    [20000, 10],
    [10, 20000],
    [7200, 100],
  ];
  const rnd = mulberry32(0x4b1);
  for (let i = 0; i < 3000; i++) {
    const side = () => 1 + Math.floor(rnd.next() * [100, 2000, 12000][Math.floor(rnd.next() * 3)]!);
    out.push([side(), side()]);
  }
  return out;
}

describe('image tokens against the Python port', () => {
  const all = sizes();
  const r = spawnSync('python3', [REFERENCE], {
    input: JSON.stringify({
      sizes: all,
      navit: SETTINGS.map(([, s]) => ({
        patch: s.patchSize,
        merge: s.mergeKernelSize,
        in_patch_limit: s.inPatchLimit,
        side: s.patchLimitOnOneSide,
        fixed: s.fixedOutputTokens,
      })),
      vl: VL_LIMITS,
    }),
    encoding: 'utf8',
    maxBuffer: 256 << 20,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  const got = JSON.parse(r.stdout) as { navit: (number[] | null)[][]; vl: number[][] };

  SETTINGS.forEach(([name, s], si) => {
    it(`navit_resize_image, ${name}: ${all.length} sizes`, () => {
      const bad: string[] = [];
      all.forEach(([w, h], i) => {
        let have: number[] | null;
        try {
          const n = navitResizeImage(w, h, s);
          have = [n.newWidth, n.newHeight, n.padWidth, n.padHeight, n.numTokens];
        } catch {
          have = null;
        }
        if (JSON.stringify(have) !== JSON.stringify(got.navit[si]![i]))
          bad.push(`${w}×${h}: ${have} vs ${got.navit[si]![i]}`);
      });
      expect(bad.slice(0, 10)).toEqual([]);
    });
  });

  VL_LIMITS.forEach((limit, li) => {
    it(`Kimi-VL get_image_tokens, in_token_limit ${limit}`, () => {
      const bad = all.filter(([w, h], i) => kimiVlImageTokens(w, h, limit) !== got.vl[li]![i]);
      expect(bad.slice(0, 10)).toEqual([]);
    });
  });

  it('worked examples of docs/reference/models/kimi.md', () => {
    const n = (w: number, h: number) => navitResizeImage(w, h, KIMI_K25_MEDIA_DEFAULTS).numTokens;
    expect(n(640, 480)).toBe(23 * 18); // padded to 644×504, never enlarged
    expect(n(1920, 1080)).toBe(69 * 39);
    // 288·216 = 62208 patches over 16384: shrunk by sqrt(16384/62208), sides truncated, then padded.
    expect(navitResizeImage(4032, 3024, KIMI_K25_MEDIA_DEFAULTS)).toEqual({
      newWidth: 2069,
      newHeight: 1551,
      padWidth: 3,
      padHeight: 17,
      numTokens: 74 * 56,
    });
    // A 7200 px side is cut to the 512-patch limit (7168 px).
    expect(navitResizeImage(7200, 100, KIMI_K25_MEDIA_DEFAULTS).newWidth).toBe(7168);
    expect(n(13, 13)).toBe(1);
  });
});

describe('two token spaces', () => {
  it('a run is expanded (N pads), collapsed (one) or wrong', () => {
    expect(mediaSpace(414, 414)).toBe('expanded');
    expect(mediaSpace(1, 414)).toBe('collapsed');
    expect(mediaSpace(413, 414)).toBe('wrong');
  });

  it('a sequence is in one space; mixing them is a finding, a one-token image decides nothing', () => {
    expect(
      sequenceSpace([
        { pads: 414, expected: 414 },
        { pads: 30, expected: 30 },
      ]),
    ).toEqual({ space: 'expanded', wrong: [] });
    expect(
      sequenceSpace([
        { pads: 1, expected: 414 },
        { pads: 1, expected: 30 },
      ]),
    ).toEqual({ space: 'collapsed', wrong: [] });
    expect(sequenceSpace([{ pads: 1, expected: 1 }])).toEqual({ space: 'either', wrong: [] });
    expect(
      sequenceSpace([
        { pads: 414, expected: 414 },
        { pads: 1, expected: 30 },
      ]),
    ).toEqual({
      mixed: { collapsed: [1], expanded: [0] },
    });
    expect(
      sequenceSpace([
        { pads: 1, expected: 414 },
        { pads: 29, expected: 30 },
      ]),
    ).toEqual({ space: 'collapsed', wrong: [1] });
  });

  it('the template texts', () => {
    expect(turnOpener('assistant')).toBe('<|im_assistant|>assistant<|im_middle|>');
    expect(IMAGE_ITEM_TEXT).toBe('<|media_begin|>image<|media_content|><|media_pad|><|media_end|>');
  });
});

describe('Kimi K2.5 as a registered family, from the built model folder (tiktoken.model)', () => {
  let dir: string;
  let p: ModelProfile;
  const template = fs.readFileSync(KIMI_TEMPLATE, 'utf8');
  beforeAll(() => {
    dir = writeKimiFolder(fs.mkdtempSync(path.join(os.tmpdir(), 'kimi-')));
    p = loadProfile(dir);
  }, 300_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const user = { role: 'user', content: [{ type: 'image' }, { type: 'text', text: 'what is shown here' }] };

  it('reads the tiktoken vocabulary with the special tokens at their ids', async () => {
    expect(p.modelFamily.name).toBe('kimi');
    expect(familyOfModelName('moonshotai/Kimi-K2.5')?.name).toBe('kimi');
    expect(familyOfModelName('moonshotai/Kimi-VL-A3B-Instruct')?.name).toBe('kimi');
    for (const [content, id] of KIMI_SPECIAL_IDS) expect(p.tokenizer.tokenOfText(content), content).toBe(id);
    expect(p.tokenizer.tokenOfText('<|reserved_token_163589|>')).toBe(163589);
    // The ranks are Qwen's (themselves a tiktoken vocabulary): where the two patterns split alike
    // (lower-case words, no digits), the converted BPE gives Qwen's ids.
    const qwen = loadProfile('qwen2.5');
    const text = 'the hypotenuse of a right triangle is the longest side';
    expect(await p.tokenizer.encode(text)).toEqual(await qwen.tokenizer.encode(text));
    expect(p.ids.grammar.afterEnd).toEqual([]);
    expect(p.ids.media.collapsible).toBe(true);
  });

  it('renders byte for byte as Python jinja2: no newline after <|im_end|>, earlier reasoning as <think></think>', () => {
    const messages = [
      user,
      { role: 'assistant', content: 'a triangle', reasoning_content: 'It has three sides.' },
      { role: 'user', content: 'sure' },
    ];
    const r = spawnSync('python3', [RENDER], {
      input: JSON.stringify([{ template, input: JSON.stringify({ messages, add_generation_prompt: true }) }]),
      encoding: 'utf8',
    });
    const text = (JSON.parse(r.stdout) as { ok: string }[])[0]!.ok;
    expect(p.template.render({ messages, add_generation_prompt: true })).toBe(text);
    expect(text).toBe(
      '<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>' +
        '<|im_user|>user<|im_middle|><|media_begin|>image<|media_content|><|media_pad|><|media_end|>\nwhat is shown here<|im_end|>' +
        '<|im_assistant|>assistant<|im_middle|><think></think>a triangle<|im_end|>' +
        '<|im_user|>user<|im_middle|>sure<|im_end|><|im_assistant|>assistant<|im_middle|>',
    );
  });

  it('two token spaces: vLLM expands the one pad to N, the HF path keeps it; each is found, mixing them is a finding', async () => {
    const text = p.template.render({
      messages: [user, { role: 'user', content: [{ type: 'image' }] }],
      add_generation_prompt: true,
    });
    const ids = await p.tokenizer.encode(text);
    expect(p.modelFamily.countPlaceholders(ids, p.ids)).toEqual({ images: 2, videos: 0 });
    const a = p.modelFamily.imageTokens(640, 480, p.vision);
    const b = p.modelFamily.imageTokens(1920, 1080, p.vision);
    expect([a.padCount, b.padCount]).toEqual([414, 2691]);
    const items = [
      { kind: 'image' as const, tokens: a },
      { kind: 'image' as const, tokens: b },
    ];
    const vllm = await p.modelFamily.expandMedia({ text, ids }, imageRuns(items), NO_EARLIER_MEDIA, p.ids, p.tokenizer);
    const hf = await p.modelFamily.expandMedia(
      { text, ids },
      imageRuns([undefined, undefined]),
      NO_EARLIER_MEDIA,
      p.ids,
      p.tokenizer,
    );
    expect(hf).toEqual(ids);
    const runs = (tokens: number[]) =>
      p.modelFamily
        .findMediaSpans(tokens, p.ids)
        .map((s, k) => ({ pads: s.padLength, expected: items[k]!.tokens.padCount }));
    expect(sequenceSpace(runs(vllm))).toEqual({ space: 'expanded', wrong: [] });
    expect(sequenceSpace(runs(hf))).toEqual({ space: 'collapsed', wrong: [] });
    const mixed = await p.modelFamily.expandMedia(
      { text, ids },
      imageRuns([items[0], undefined]),
      NO_EARLIER_MEDIA,
      p.ids,
      p.tokenizer,
    );
    expect(sequenceSpace(runs(mixed))).toEqual({ mixed: { collapsed: [1], expanded: [0] } });
    const [span] = p.modelFamily.findMediaSpans(vllm, p.ids);
    expect(vllm.slice(span!.start, span!.padStart)).toEqual([163602, p.tokenizer.tokenOfText('image'), 163603]);
  });

  it("parses tool calls as vLLM's kimi_k2 parser", () => {
    const text =
      'Let me compute.<|tool_calls_section_begin|><|tool_call_begin|>functions.calc:0<|tool_call_argument_begin|>{"expr": "6*8"}<|tool_call_end|><|tool_calls_section_end|>';
    expect(p.modelFamily.toolCalls.parse(text)).toEqual({
      content: 'Let me compute.',
      calls: [{ name: 'calc', arguments: '{"expr": "6*8"}' }],
    });
    expect(p.modelFamily.toolCalls.parse('plain answer')).toEqual({ content: 'plain answer', calls: [] });
  });
});
