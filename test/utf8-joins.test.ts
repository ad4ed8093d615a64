// Characters byte-level BPE splits across tokens (`△` = e2 96 b3 as `\xe2\x96` + `\xb3`): the
// server finds the tokens each one spans, on the real Qwen tokenizers, and sends the character.
import { describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { decodeLenient, partialByteJoins, visiblePiece } from '../server/profiles/tokenizer.ts';
import { pieces } from '../server/http/views.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const TEXT = 'Angle △ABC ≥ 90°: 漢字 🙂 done';

describe('partial UTF-8 tokens', () => {
  for (const name of ['qwen2.5-vl', 'qwen3-vl'] as const) {
    it(`${name}: every token that is partial bytes is in a join, and each join spells its characters`, async () => {
      const profile = loadProfile(name);
      const tok = profile.tokenizer;
      const ids = await tok.encode(TEXT);
      const partial = ids.flatMap((id, i) => (tok.wholeUtf8(id) ? [] : [i]));
      // The real tokenizer does split some of these characters, or this test proves nothing.
      expect(partial.length).toBeGreaterThanOrEqual(3);
      expect(partial.map((i) => tok.piece(ids[i]!)).some((p) => p.includes('\\x'))).toBe(true);

      const joins = partialByteJoins(tok, ids);
      const joined = new Set(joins.flatMap((j) => Array.from({ length: j.end - j.start }, (_, k) => j.start + k)));
      expect([...joined].sort((a, b) => a - b)).toEqual(partial);
      for (const j of joins) {
        expect(j.end - j.start).toBeGreaterThan(1);
        expect(j.text).toBe(visiblePiece(await tok.decode(ids.slice(j.start, j.end))));
        expect(j.text).not.toContain('\\x');
      }
      // Whole tokens as they are, joins as their text: the string again.
      let shown = '';
      for (let i = 0; i < ids.length; ) {
        const j = joins.find((x) => x.start === i);
        shown += j ? j.text : visiblePiece(tok.piece(ids[i]!));
        i = j ? j.end : i + 1;
      }
      expect(shown).toBe(visiblePiece(TEXT));
      expect(joins.map((j) => j.text.replace(/·/g, '')).join('')).toMatch(/△/);
    });
  }

  it('the stream views send the joins with the pieces', async () => {
    const profile = loadProfile('qwen2.5-vl');
    const ids = await profile.tokenizer.encode(`<|im_start|>user\n${TEXT}<|im_end|>`);
    const p = pieces(profile, ids);
    expect(p.joins).toEqual(partialByteJoins(profile.tokenizer, ids));
    const triangle = p.joins.find((j) => j.text.includes('△'))!;
    expect(triangle).toBeDefined();
    // The chips keep their raw bytes for the hover.
    expect(p.pieces[ids[triangle.start]!]).toMatch(/\\xe2/);
  });

  it('a special token between the bytes ends the run: no character is made across it', () => {
    const profile = loadProfile('qwen2.5-vl');
    const tok = profile.tokenizer;
    // The two halves of △ as the tokenizer splits them, with <|im_end|> between.
    const [lead, tail] = [tok.tokenToId('Ġâĸ'), tok.tokenToId('³')];
    expect(lead).toBeDefined();
    expect(tail).toBeDefined();
    expect(partialByteJoins(tok, [lead!, tail!])).toEqual([{ start: 0, end: 2, text: '·△' }]);
    expect(partialByteJoins(tok, [lead!, qwenNamed(profile.ids).imEnd, tail!])).toEqual([]);
    // A lone continuation byte or a cut-off lead byte joins nothing.
    expect(partialByteJoins(tok, [tail!, tail!])).toEqual([]);
    expect(partialByteJoins(tok, [lead!])).toEqual([]);
  });

  it('decodeLenient keeps valid characters and shows stray bytes as \\xNN', () => {
    expect(decodeLenient(Uint8Array.from([0x61, 0xe2, 0x96, 0xb3, 0xb3, 0xc0, 0x80]))).toBe('a△\\xb3\\xc0\\x80');
  });
});
