// A Hugging Face `tokenizer.json` loaded with Hugging Face's own Rust tokenizers library
// (npm `tokenizers`), so ids are exactly what transformers and vLLM produce.
// Encoding and decoding are async in that binding; pieces for display are computed
// synchronously from the vocabulary (byte-level BPE), once per tokenizer.
import tokenizers from 'tokenizers';
import { createHash } from 'node:crypto';

const { Tokenizer } = tokenizers;
type RustTokenizer = InstanceType<typeof Tokenizer>;

/** GPT-2 byte-level alphabet: byte -> printable unicode char (the `bytes_to_unicode` table of byte-level BPE). */
function byteLevelAlphabet(): Map<string, number> {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const charToByte = new Map<string, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    if (printable.includes(b)) charToByte.set(String.fromCodePoint(b), b);
    else charToByte.set(String.fromCodePoint(256 + extra++), b);
  }
  return charToByte;
}
const CHAR_TO_BYTE = byteLevelAlphabet();

export interface TokenizerJson {
  added_tokens?: { id: number; content: string; special?: boolean }[];
  decoder?: { type?: string } | null;
  [key: string]: unknown;
}

export class TokenizerHandle {
  readonly vocabSize: number;
  readonly sha256: string;
  private readonly rust: RustTokenizer;
  private readonly specialIds: Set<number>;
  private readonly addedContent = new Map<number, string>();
  private readonly byteLevel: boolean;
  private pieceBytesCache: (Uint8Array | undefined)[] = [];

  private constructor(json: string, parsed: TokenizerJson) {
    this.sha256 = createHash('sha256').update(json).digest('hex');
    this.rust = Tokenizer.fromString(json);
    this.vocabSize = this.rust.getVocabSize(true);
    this.specialIds = new Set((parsed.added_tokens ?? []).filter((t) => t.special).map((t) => t.id));
    for (const t of parsed.added_tokens ?? []) this.addedContent.set(t.id, t.content);
    this.byteLevel = JSON.stringify(parsed.decoder ?? {}).includes('ByteLevel');
  }

  /**
   * @param keepAddedToken drop added tokens this model's tokenizer does not have (Qwen2-VL lacks Qwen3's `<think>`),
   *   so a shared vocabulary file serves several model generations exactly.
   */
  static fromJson(json: string, keepAddedToken?: (id: number) => boolean): TokenizerHandle {
    const parsed = JSON.parse(json) as TokenizerJson;
    if (keepAddedToken && parsed.added_tokens) {
      parsed.added_tokens = parsed.added_tokens.filter((t) => keepAddedToken(t.id));
      json = JSON.stringify(parsed);
    }
    return new TokenizerHandle(json, parsed);
  }

  async encode(text: string): Promise<number[]> {
    const enc = await this.rust.encode(text, null, { addSpecialTokens: false });
    return enc.getIds();
  }

  async encodeBatch(texts: string[]): Promise<number[][]> {
    if (texts.length === 0) return [];
    const encs = await this.rust.encodeBatch(texts, { addSpecialTokens: false });
    return encs.map((e) => e.getIds());
  }

  async decode(ids: readonly number[], skipSpecialTokens = false): Promise<string> {
    const valid = ids.filter((id) => this.isValid(id));
    return this.rust.decode(valid, skipSpecialTokens);
  }

  isValid(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.vocabSize;
  }

  isSpecial(id: number): boolean {
    return this.specialIds.has(id);
  }

  /** Any added token (special or not: `<tool_call>`, `<think>` are added but not special in Qwen's vocabulary). */
  isAdded(id: number): boolean {
    return this.addedContent.has(id);
  }

  tokenToId(content: string): number | undefined {
    return this.rust.tokenToId(content) ?? undefined;
  }

  /** The raw bytes a token stands for (added tokens: their UTF-8 content). */
  pieceBytes(id: number): Uint8Array {
    const cached = this.pieceBytesCache[id];
    if (cached) return cached;
    let bytes: Uint8Array;
    const added = this.addedContent.get(id);
    if (added !== undefined) bytes = new TextEncoder().encode(added);
    else {
      const raw = this.isValid(id) ? (this.rust.idToToken(id) ?? '') : '';
      if (!this.byteLevel) bytes = new TextEncoder().encode(raw);
      else {
        const out: number[] = [];
        for (const ch of raw) out.push(CHAR_TO_BYTE.get(ch) ?? 0x3f);
        bytes = Uint8Array.from(out);
      }
    }
    this.pieceBytesCache[id] = bytes;
    return bytes;
  }

  /** Decoded text of one token; bytes that are not valid UTF-8 on their own show as `\xNN`. */
  piece(id: number): string {
    if (!this.isValid(id)) return `⟨invalid ${id}⟩`;
    const bytes = this.pieceBytes(id);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return Array.from(bytes, (b) => (b < 0x80 ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`)).join('');
    }
  }

  /** Synchronous decode for byte-level BPE (what the ByteLevel decoder does); used for display and cause classification. */
  decodeSync(ids: readonly number[]): string {
    let total = 0;
    const parts = ids.map((id) => {
      const b = this.isValid(id) ? this.pieceBytes(id) : new TextEncoder().encode(`⟨invalid ${id}⟩`);
      total += b.length;
      return b;
    });
    const all = new Uint8Array(total);
    let at = 0;
    for (const p of parts) {
      all.set(p, at);
      at += p.length;
    }
    return new TextDecoder('utf-8').decode(all);
  }
}

/** Make whitespace and special tokens visible: `⏎` for newline, `·` for space, `→` for tab. */
export function visiblePiece(piece: string): string {
  return piece.replace(/ /g, '·').replace(/\n/g, '⏎').replace(/\t/g, '→').replace(/\r/g, '␍');
}
