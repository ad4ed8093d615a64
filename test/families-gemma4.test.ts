// Gemma 4 (server/families/gemma4/): the image token count against a Python port of transformers'
// processor and vLLM's estimate (test/support/gemma4_reference.py) over thousands of sizes and
// every `max_soft_tokens` the processor accepts; the turn grammar against the public chat template
// rendered by Python jinja2 and tokenized by a model folder built from public facts
// (test/support/gemma4-folder.ts): the thinking channel stripped from history, and the empty
// thought channel only the generation prompt holds, found at its token.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import tokenizers from 'tokenizers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EMPTY_THOUGHT,
  GEMMA4_TOKENS,
  generationPrompt,
  IMAGE_ITEM_TEXT,
  imageRun,
  stripThinking,
} from '../server/families/gemma4/tokens.ts';
import {
  aspectRatioPreservingSize,
  GEMMA4_IMAGE_DEFAULTS,
  SUPPORTED_SOFT_TOKENS,
  vllmSoftTokens,
} from '../server/families/gemma4/vision.ts';
import { familyOfModelName } from '../server/families/index.ts';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { mulberry32 } from '../server/util/random.ts';
import { GEMMA4_SPECIAL_IDS, GEMMA4_TEMPLATE, writeGemma4Folder } from './support/gemma4-folder.ts';
import { imageRuns, NO_EARLIER_MEDIA } from './support/media-runs.ts';

const REFERENCE = fileURLToPath(new URL('./support/gemma4_reference.py', import.meta.url));
const RENDER = fileURLToPath(new URL('./support/render_jinja2.py', import.meta.url));

function python(script: string, input: unknown): unknown {
  const r = spawnSync('python3', [script], { input: JSON.stringify(input), encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`${script} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const TEMPLATE = fs.readFileSync(GEMMA4_TEMPLATE, 'utf8');
/** Renders each variables object with the public Gemma 4 template by Python jinja2 (as transformers does). */
function render(variables: Record<string, unknown>[]): string[] {
  const out = python(
    RENDER,
    variables.map((v) => ({ template: TEMPLATE, input: JSON.stringify({ bos_token: '<bos>', ...v }) })),
  ) as { ok?: string; error?: string }[];
  return out.map((r) => {
    if (r.error) throw new Error(r.error);
    return r.ok!;
  });
}

function sizes(): [number, number][] {
  const out: [number, number][] = [
    [640, 480],
    [1920, 1080],
    [768, 768],
    [3, 900],
    [900, 3],
    [2, 10000],
    [1, 1],
    [48, 48],
    [4032, 3024],
  ];
  const rnd = mulberry32(0x6e4a);
  for (let i = 0; i < 3000; i++) {
    const side = () => 1 + Math.floor(rnd.next() * [64, 1000, 8000][Math.floor(rnd.next() * 3)]!);
    out.push([side(), side()]);
  }
  return out;
}

describe('soft tokens against transformers and vLLM (Python)', () => {
  const all = sizes();
  const settings = SUPPORTED_SOFT_TOKENS.map((n) => ({ ...GEMMA4_IMAGE_DEFAULTS, maxSoftTokens: n }));
  const got = python(REFERENCE, {
    sizes: all,
    settings: settings.map((s) => ({ patch: s.patchSize, pool: s.poolingKernelSize, max_soft: s.maxSoftTokens })),
  }) as { hf: ([number, number, number] | null)[][]; vllm: number[][] };

  settings.forEach((s, si) => {
    it(`max_soft_tokens ${s.maxSoftTokens}: ${all.length} sizes`, () => {
      const bad: string[] = [];
      all.forEach(([w, h], i) => {
        const want = got.hf[si]![i];
        let have: [number, number, number] | null;
        try {
          const r = aspectRatioPreservingSize(h, w, s);
          have = [r.height, r.width, r.softTokens];
        } catch {
          have = null;
        }
        if (JSON.stringify(have) !== JSON.stringify(want)) bad.push(`${w}×${h}: ${have} vs ${want}`);
        if (vllmSoftTokens(w, h, s) !== got.vllm[si]![i]) bad.push(`${w}×${h}: vLLM ${got.vllm[si]![i]}`);
        // Sides are multiples of 48 and the count never passes the budget.
        if (have && (have[0] % 48 !== 0 || have[1] % 48 !== 0 || have[2] > s.maxSoftTokens))
          bad.push(`${w}×${h}: ${have}`);
      });
      expect(bad.slice(0, 10)).toEqual([]);
    });
  });

  it('the worked examples of docs/reference/models/gemma4.md', () => {
    expect(aspectRatioPreservingSize(480, 640, GEMMA4_IMAGE_DEFAULTS)).toEqual({
      height: 672,
      width: 912,
      softTokens: 266,
    });
    expect(aspectRatioPreservingSize(1080, 1920, GEMMA4_IMAGE_DEFAULTS)).toEqual({
      height: 576,
      width: 1056,
      softTokens: 264,
    });
    // 3×900: one side rounds to zero; transformers takes 48 px and floor(900/3)·48 capped at 280·48.
    expect(aspectRatioPreservingSize(900, 3, GEMMA4_IMAGE_DEFAULTS)).toEqual({
      height: 13440,
      width: 48,
      softTokens: 280,
    });
    expect(vllmSoftTokens(3, 900, GEMMA4_IMAGE_DEFAULTS)).toBe(280);
  });
});

describe('turns and images with the built model folder', () => {
  const { Tokenizer } = tokenizers;
  let dir: string;
  let tok: InstanceType<typeof Tokenizer>;
  const encode = async (text: string) => (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
  beforeAll(() => {
    dir = writeGemma4Folder(fs.mkdtempSync(path.join(os.tmpdir(), 'gemma4-')));
    tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
  }, 300_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('the special tokens are single tokens at the ids config.json states', async () => {
    for (const [content, id] of GEMMA4_SPECIAL_IDS) expect(await encode(content), content).toEqual([id]);
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
    expect(await encode(GEMMA4_TOKENS.imageOpen)).toEqual([cfg.boi_token_id]);
    expect(await encode(GEMMA4_TOKENS.imageClose)).toEqual([cfg.eoi_token_id]);
    expect(await encode(GEMMA4_TOKENS.image)).toEqual([cfg.image_token_id]);
  });

  it('a rendered prompt gives the ids transformers’ Gemma 4 chat-template test expects', async () => {
    const [text] = render([
      { messages: [{ role: 'user', content: 'Write a long essay about Portugal.' }], add_generation_prompt: true },
    ]);
    expect(text).toBe(
      '<bos><|turn>user\nWrite a long essay about Portugal.<turn|>\n<|turn>model\n<|channel>thought\n<channel|>',
    );
    expect(await encode(text!)).toEqual([
      2, 105, 2364, 107, 6974, 496, 1440, 20494, 1003, 23613, 236761, 106, 107, 105, 4368, 107, 100, 45518, 107, 101,
    ]);
    expect(text!.endsWith(generationPrompt(false, true))).toBe(true);
  });

  it('the empty thought channel is only in the generation prompt: the next turn breaks the prefix at its first token', async () => {
    const user = { role: 'user', content: 'What is 2+2?' };
    const [prompt, next] = render([
      { messages: [user], add_generation_prompt: true },
      {
        messages: [user, { role: 'assistant', content: 'Four.' }, { role: 'user', content: 'And 3+3?' }],
        add_generation_prompt: true,
      },
    ]);
    const rollout = [...(await encode(prompt!)), ...(await encode('Four.')), 106];
    const rerendered = await encode(next!);
    let at = 0;
    while (rollout[at] === rerendered[at]) at++;
    const prefix = await encode(`<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n`);
    expect(at).toBe(prefix.length);
    expect(rollout.slice(at, at + 4)).toEqual(await encode(EMPTY_THOUGHT));
    expect(rerendered[at]).toBe((await encode('Four'))[0]);
  });

  it("strip_thinking: the history loses a model turn's thought channel, as the template's macro does", () => {
    const rnd = mulberry32(7);
    const pieces = ['<|channel>', '<channel|>', 'thought\n', ' ', '\n', 'a', 'Four.', '\u00a0', '\ufeff', '\x1c'];
    const texts = Array.from({ length: 300 }, () =>
      Array.from({ length: 1 + Math.floor(rnd.next() * 8) }, () => pieces[Math.floor(rnd.next() * pieces.length)]).join(
        '',
      ),
    );
    const rendered = render(
      texts.map((t) => ({
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: t },
        ],
      })),
    );
    const head = '<bos><|turn>user\nq<turn|>\n<|turn>model\n';
    texts.forEach((t, i) => {
      expect(rendered[i]!.startsWith(head)).toBe(true);
      expect(stripThinking(t), JSON.stringify(t)).toBe(rendered[i]!.slice(head.length, -'<turn|>\n'.length));
    });
    expect(stripThinking('<|channel>thought\nadd them<channel|>Four.')).toBe('Four.');
  });

  it('an image item becomes <|image> + N × <|image|> + <image|> once the processor expands it', async () => {
    const [text] = render([
      {
        messages: [{ role: 'user', content: [{ type: 'image' }, { type: 'text', text: 'Describe.' }] }],
        add_generation_prompt: true,
      },
    ]);
    expect(text).toContain(`<|turn>user\n${IMAGE_ITEM_TEXT}Describe.`);
    const n = aspectRatioPreservingSize(480, 640, GEMMA4_IMAGE_DEFAULTS).softTokens;
    const ids = await encode(text!.replace(GEMMA4_TOKENS.image, imageRun(n)));
    const start = ids.indexOf(255999);
    expect(ids.slice(start, start + n + 2)).toEqual([255999, ...Array(n).fill(258880), 258882]);
    expect(ids.filter((id) => id === 258880)).toHaveLength(n);
  });
});

describe('Gemma 4 as a registered family, from the built model folder', () => {
  let dir: string;
  let p: ModelProfile;
  beforeAll(() => {
    dir = writeGemma4Folder(fs.mkdtempSync(path.join(os.tmpdir(), 'gemma4-family-')));
    p = loadProfile(dir);
  }, 300_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is recognized by its config.json and model names, with the ids config.json states', () => {
    expect(p.modelFamily.name).toBe('gemma4');
    expect(familyOfModelName('google/gemma-4-31B-it')?.name).toBe('gemma4');
    expect(familyOfModelName('google/gemma-3-4b-it')?.name).toBe('gemma3');
    expect(p.ids.media.image).toEqual({ begin: 255999, header: [], pad: 258880, end: 258882 });
    expect(p.ids.eos).toBe(106);
    expect(p.ids.grammar.stops).toEqual([106, 1]);
    expect(p.vision.extra?.maxSoftTokens).toBe(280);
  });

  it('renders conversations byte for byte as Python jinja2 (thinking on and off, images, history with thoughts)', () => {
    const I = { type: 'image' };
    const cases = [
      { messages: [{ role: 'user', content: 'Hi' }], add_generation_prompt: true },
      { messages: [{ role: 'user', content: 'Hi' }], add_generation_prompt: true, enable_thinking: true },
      {
        messages: [
          { role: 'system', content: ' Be brief. ' },
          { role: 'user', content: [I, { type: 'text', text: 'What is it?' }] },
          { role: 'assistant', content: '<|channel>thought\nA cat, surely.<channel|>A cat.' },
          { role: 'user', content: 'Sure?' },
        ],
        add_generation_prompt: true,
      },
    ];
    const py = render(cases);
    cases.forEach((c, i) => expect(p.template.render({ ...c, bos_token: '<bos>' }), `case ${i}`).toBe(py[i]));
  });

  it('expands each <|image|> placeholder to its run, as the processor text tokenizes', async () => {
    const text = p.template.render({
      messages: [{ role: 'user', content: [{ type: 'image' }, { type: 'text', text: 'A' }, { type: 'image' }] }],
      add_generation_prompt: true,
      bos_token: '<bos>',
    });
    const ids = await p.tokenizer.encode(text);
    expect(p.modelFamily.countPlaceholders(ids, p.ids)).toEqual({ images: 2, videos: 0 });
    const items = [
      { kind: 'image' as const, tokens: p.modelFamily.imageTokens(640, 480, p.vision) },
      { kind: 'image' as const, tokens: p.modelFamily.imageTokens(3, 900, p.vision) },
    ];
    const expanded = await p.modelFamily.expandMedia(
      { text, ids },
      imageRuns(items),
      NO_EARLIER_MEDIA,
      p.ids,
      p.tokenizer,
    );
    const parts = text.split(GEMMA4_TOKENS.image);
    const hfText = parts[0]! + imageRun(266) + parts[1]! + imageRun(280) + parts[2]!;
    expect(expanded).toEqual(await p.tokenizer.encodeDirect(hfText));
    expect(p.modelFamily.findMediaSpans(expanded, p.ids).map((s) => [s.kind, s.padLength, s.end > s.padStart])).toEqual(
      [
        ['image', 266, true],
        ['image', 280, true],
      ],
    );
    expect(p.modelFamily.countPlaceholders(expanded, p.ids)).toEqual({ images: 0, videos: 0 });
  });
});
