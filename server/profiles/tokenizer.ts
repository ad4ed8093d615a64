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
const BYTE_TO_CHAR: string[] = [];
for (const [ch, b] of CHAR_TO_BYTE) BYTE_TO_CHAR[b] = ch;

/** Bytes as byte-level BPE writes them in a vocabulary (`bytes_to_unicode`: `\n` is `Ċ`, a space `Ġ`). */
export function byteLevelString(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += BYTE_TO_CHAR[b];
  return out;
}

/**
 * Most text the segment cache holds before it starts over (~16 MB of strings plus their ids):
 * what GRPO groups and turns share is re-cached at once, and memory stays flat on any run size.
 */
const SEGMENT_CACHE_CHARS = 8 * 1024 * 1024;
/** Characters `encodeUpTo` tokenizes at a time before it looks at the count again. */
const BOUNDED_PIECE = 64 * 1024;

export interface TokenizerJson {
  added_tokens?: {
    id: number;
    content: string;
    special?: boolean;
    lstrip?: boolean;
    rstrip?: boolean;
    single_word?: boolean;
    normalized?: boolean;
  }[];
  decoder?: { type?: string } | null;
  normalizer?: unknown;
  pre_tokenizer?: unknown;
  [key: string]: unknown;
}

/**
 * One `tokenizer.json` as bytes, with the few top-level fields a handle reads: shared by every
 * handle made from the same file (Qwen2-VL, 2.5-VL and 3-VL ship one BPE vocabulary and differ
 * only in how many added tokens they have). Each model's own tokenizer is built from the file
 * with its added-token list cut (`ownJson`), never by parsing and re-serializing the 11 MB.
 */
interface SharedVocabulary {
  sha256: string;
  /**
   * The file as UTF-8 bytes, outside the JS heap, decoded again whenever a tokenizer is built or a
   * filtered file hashed (holding its parse would cost ~100 MB of heap). As a string it would be
   * 22 MB of the heap for the whole run (Qwen's byte-level alphabet is not Latin-1: two bytes a
   * character), and V8 lets the old generation grow to a multiple of what stays live there.
   */
  bytes: Buffer;
  /** The parts of the file the handle reads. */
  parsed: Pick<TokenizerJson, 'added_tokens' | 'decoder' | 'normalizer' | 'pre_tokenizer'>;
  /** The library's tokenizer of the whole file, for the models that have every added token. */
  full?: RustTokenizer;
  /**
   * The library's tokenizer of the file with no added tokens (built once, undefined if it cannot
   * be): it encodes text between added tokens exactly as each model's own tokenizer does, so the
   * generations of a run share it (`TokenizerHandle.encode`).
   */
  base?: RustTokenizer | null;
}

/** The vocabulary's tokenizer without added tokens, or null when the file cannot be built so. */
function baseTokenizer(shared: SharedVocabulary): RustTokenizer | null {
  if (shared.base !== undefined) return shared.base;
  const json = jsonOf(shared);
  const span = topLevelSpans(json, ['added_tokens'])?.added_tokens;
  try {
    shared.base = span ? Tokenizer.fromString(`${json.slice(0, span[0])}[]${json.slice(span[1])}`) : null;
  } catch {
    shared.base = null;
  }
  return shared.base;
}
const sharedVocabularies = new Map<string, SharedVocabulary>();

const jsonOf = (shared: SharedVocabulary): string => shared.bytes.toString('utf8');

/**
 * Where the values of some top-level keys of a JSON object are (`[start, end)` in `json`), found
 * without parsing the rest: a tokenizer.json is mostly its vocabulary and merges. Undefined when
 * `json` is not an object.
 */
export function topLevelSpans(json: string, keys: readonly string[]): Record<string, [number, number]> | undefined {
  const wanted = new Set(keys);
  const out: Record<string, [number, number]> = {};
  let i = json.indexOf('{');
  if (i < 0 || json.slice(0, i).trim() !== '') return undefined;
  let depth = 0;
  let key: string | undefined;
  let valueStart = -1;
  let expectKey = false;
  let found = 0;
  for (; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x22) {
      // A string: find its end (skipping escapes); at depth 1 in key position it is a key.
      const start = i;
      for (i++; i < json.length && json.charCodeAt(i) !== 0x22; i++) if (json.charCodeAt(i) === 0x5c) i++;
      if (depth === 1 && expectKey) {
        key = JSON.parse(json.slice(start, i + 1)) as string;
        expectKey = false;
      }
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth === 1) expectKey = true;
    } else if (c === 0x7d || c === 0x5d || (c === 0x2c && depth === 1)) {
      if (depth === 1 && key !== undefined && valueStart >= 0) {
        if (wanted.has(key)) {
          if (!(key in out)) found++;
          out[key] = [valueStart, i];
          // Hugging Face writes the vocabulary (`model`, most of the file) last: stop before it.
          if (found === wanted.size) return out;
        }
        key = undefined;
        valueStart = -1;
      }
      if (c === 0x2c) expectKey = true;
      else depth--;
      if (depth === 0) return out;
    } else if (c === 0x3a && depth === 1) valueStart = i + 1;
  }
  return undefined;
}

/**
 * The values of some top-level keys of a JSON object, each parsed on its own: parsing all of a
 * tokenizer.json (vocabulary and merges) makes ~150 MB of objects the handle never reads, and a
 * heap grown that far stays big for the rest of the run. Undefined when `json` is not an object.
 */
export function topLevelFields(json: string, keys: readonly string[]): Record<string, unknown> | undefined {
  const spans = topLevelSpans(json, keys);
  if (!spans) return undefined;
  return Object.fromEntries(Object.entries(spans).map(([k, [a, b]]) => [k, JSON.parse(json.slice(a, b))]));
}

function sharedVocabulary(file: string | Buffer): SharedVocabulary {
  // A string hashes as its UTF-8 bytes: the same digest either way.
  const sha256 = createHash('sha256').update(file).digest('hex');
  let v = sharedVocabularies.get(sha256);
  if (!v) {
    const bytes = typeof file === 'string' ? Buffer.from(file, 'utf8') : file;
    const json = typeof file === 'string' ? file : file.toString('utf8');
    const { added_tokens, decoder, normalizer, pre_tokenizer } = (topLevelFields(json, [
      'added_tokens',
      'decoder',
      'normalizer',
      'pre_tokenizer',
    ]) ?? JSON.parse(json)) as TokenizerJson;
    v = { sha256, bytes, parsed: { added_tokens, decoder, normalizer, pre_tokenizer } };
    sharedVocabularies.set(sha256, v);
  }
  return v;
}

/**
 * The pre-tokenizer of Qwen2's byte-level BPE (every Qwen-VL generation ships it): a regex split,
 * then the byte mapping. None of its alternatives matches a newline followed by a character that
 * is not whitespace (`[^\r\n\p{L}\p{N}]?\p{L}+` excludes the newline, `[^\s\p{L}\p{N}]+[\r\n]*` and
 * the `\s` ones end at it), so a word always starts right after such a newline, and BPE never
 * merges across words: the text's ids are its lines' ids end to end.
 */
const QWEN2_PRE_TOKENIZER = JSON.stringify({
  type: 'Sequence',
  pretokenizers: [
    {
      type: 'Split',
      pattern: {
        Regex:
          "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      },
      behavior: 'Isolated',
      invert: false,
    },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
  ],
});

/**
 * Where `text` may be cut into lines that encode on their own: after each newline followed by
 * printable ASCII or a letter (certainly not whitespace under any Unicode reading; NFC composes
 * nothing with a newline). Undefined when there is no such place.
 */
const LINE_START = /\n(?=[\x21-\x7e\p{L}])/gu;
function lineCuts(text: string): string[] | undefined {
  LINE_START.lastIndex = 0;
  if (!LINE_START.test(text)) return undefined;
  const lines: string[] = [];
  let from = 0;
  LINE_START.lastIndex = 0;
  for (let m = LINE_START.exec(text); m; m = LINE_START.exec(text)) {
    lines.push(text.slice(from, m.index + 1));
    from = m.index + 1;
  }
  lines.push(text.slice(from));
  return lines;
}

export class TokenizerHandle {
  readonly vocabSize: number;
  /** The library's tokenizer of this model's own file (what transformers and vLLM load for it), built on first need. */
  private ownTokenizer: RustTokenizer | undefined;
  /**
   * What encodes text between added tokens and answers vocabulary lookups: the shared base
   * tokenizer when added tokens split text literally (one build serves every generation of a
   * run, a ~0.4 s build per thread saved for each), else the model's own.
   */
  private readonly vocabulary: RustTokenizer;
  /** Added tokens of the shared file this model does not have. */
  private readonly droppedContents: readonly string[];
  private exactSha256: string | undefined;
  private readonly specialIds: Set<number>;
  private readonly addedContent = new Map<number, string>();
  private readonly addedIds = new Map<string, number>();
  private readonly byteLevel: boolean;
  /**
   * SentencePiece-style pieces (Gemma): `▁` stands for a space and `<0xNN>` for one byte (the
   * decoder's Replace and ByteFallback steps), so a piece's bytes are not its text's.
   */
  private readonly metaspace: boolean;
  private readonly asciiAdded: boolean;
  // Per-id caches as arrays the size of the vocabulary, allocated up front: an array filled at
  // scattered ids up to 151k would fall back to dictionary elements (a hash lookup per token).
  private readonly pieceBytesCache: (Uint8Array | undefined)[];
  private readonly pieceTextCache: (string | undefined)[];
  /** 0: not yet known, 1: the token's bytes are whole UTF-8, 2: they are not. */
  private readonly wholeUtf8Cache: Uint8Array;
  private readonly addedFlags: Uint8Array;
  /** Splits text at added tokens, as the tokenizer's added vocabulary does before normalising; undefined when unsafe. */
  private readonly addedSplitter: RegExp | undefined;
  /** Whether a segment's ids are its lines' ids end to end (the Qwen2 pre-tokenizer, NFC or no normalizer). */
  private readonly linesEncodeAlone: boolean;
  private readonly segmentCache = new Map<string, number[]>();
  /** Characters held by segmentCache: bounded by size, not count (answers are long and rarely repeat). */
  private segmentCacheChars = 0;
  /** Characters the segment cache may hold before it starts over. */
  segmentCacheLimit = SEGMENT_CACHE_CHARS;

  private constructor(
    private readonly shared: SharedVocabulary,
    private readonly added: NonNullable<TokenizerJson['added_tokens']>,
    dropped: NonNullable<TokenizerJson['added_tokens']>,
  ) {
    const parsed = shared.parsed;
    this.droppedContents = dropped.map((t) => t.content);
    // Segment encoding is exact only when added tokens match literally (no lstrip/rstrip/single_word/normalized):
    // then the library itself splits the text at them first and encodes each piece on its own.
    const literal = added.every((t) => !t.lstrip && !t.rstrip && !t.single_word && t.normalized === false);
    if (literal && added.length > 0) {
      const alternatives = added
        .map((t) => t.content)
        .sort((a, b) => b.length - a.length)
        .map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      this.addedSplitter = new RegExp(`(${alternatives.join('|')})`);
    }
    const normalizer = parsed.normalizer as { type?: string } | null | undefined;
    this.linesEncodeAlone =
      JSON.stringify(parsed.pre_tokenizer) === QWEN2_PRE_TOKENIZER &&
      (normalizer === null || normalizer === undefined || normalizer.type === 'NFC');
    const base = this.addedSplitter ? baseTokenizer(shared) : null;
    this.vocabulary = base ?? this.own;
    // The vocabulary proper, then the added tokens this model has (the highest ids in Qwen's files).
    // The library counts entries; a vocabulary whose ids were reassigned runs past its count, so
    // its end is the first id after the count that has no token.
    const end = (tok: RustTokenizer, withAdded: boolean): number => {
      let n = tok.getVocabSize(withAdded);
      while (tok.idToToken(n) != null) n++;
      return n;
    };
    this.vocabSize = base
      ? Math.max(end(base, false), ...added.map((t) => t.id + 1))
      : dropped.length === 0
        ? end(this.own, true)
        : Math.max(end(this.own, false), ...added.map((t) => t.id + 1));
    this.specialIds = new Set(added.filter((t) => t.special).map((t) => t.id));
    this.pieceBytesCache = new Array<Uint8Array | undefined>(this.vocabSize).fill(undefined);
    this.pieceTextCache = new Array<string | undefined>(this.vocabSize).fill(undefined);
    this.wholeUtf8Cache = new Uint8Array(this.vocabSize);
    this.addedFlags = new Uint8Array(this.vocabSize);
    for (const t of added) {
      this.addedContent.set(t.id, t.content);
      this.addedIds.set(t.content, t.id);
      if (t.id >= 0 && t.id < this.vocabSize) this.addedFlags[t.id] = 1;
    }
    const decoder = JSON.stringify(parsed.decoder ?? {});
    this.byteLevel = decoder.includes('ByteLevel');
    this.metaspace = !this.byteLevel && decoder.includes('ByteFallback') && decoder.includes('\u2581');
    // The ByteLevel decoder maps a token's characters through the byte alphabet, in which
    // printable ASCII stands for itself: only then are an added token's bytes its UTF-8 content.
    this.asciiAdded = added.every((t) => /^[\x21-\x7e]*$/.test(t.content));
  }

  private get own(): RustTokenizer {
    this.ownTokenizer ??=
      this.droppedContents.length === 0
        ? (this.shared.full ??= Tokenizer.fromString(jsonOf(this.shared)))
        : Tokenizer.fromString(this.ownJson());
    return this.ownTokenizer;
  }

  /**
   * @param keepAddedToken drop added tokens this model's tokenizer does not have (an older generation lacks a newer one's reasoning tags),
   *   so a shared vocabulary file serves several model generations exactly.
   * @param json the file's text, or its bytes as read (UTF-8)
   */
  static fromJson(json: string | Buffer, keepAddedToken?: (id: number) => boolean): TokenizerHandle {
    const shared = sharedVocabulary(json);
    const all = shared.parsed.added_tokens ?? [];
    const kept = keepAddedToken ? all.filter((t) => keepAddedToken(t.id)) : all;
    return new TokenizerHandle(
      shared,
      kept,
      all.filter((t) => !kept.includes(t)),
    );
  }

  /** The added tokens a tokenizer.json lists (read once per file, as `fromJson` reads it). */
  static addedTokensOf(json: string | Buffer): readonly { id: number; content: string }[] {
    return sharedVocabulary(json).parsed.added_tokens ?? [];
  }

  /** SHA-256 of the tokenizer.json this model's tokenizer is (its added tokens filtered, as the model has them). */
  get sha256(): string {
    if (this.droppedContents.length === 0) return this.shared.sha256;
    this.exactSha256 ??= createHash('sha256').update(this.ownJson()).digest('hex');
    return this.exactSha256;
  }

  /**
   * This model's own tokenizer.json: the shared file with its `added_tokens` list cut to the
   * tokens this model has, the rest byte for byte (re-serializing 11 MB would cost more than
   * building the tokenizer).
   */
  ownJson(): string {
    const json = jsonOf(this.shared);
    if (this.droppedContents.length === 0) return json;
    const span = topLevelSpans(json, ['added_tokens'])?.added_tokens;
    if (!span) return JSON.stringify({ ...(JSON.parse(json) as TokenizerJson), added_tokens: this.added });
    const [start, end] = span;
    return `${json.slice(0, start)}${JSON.stringify(this.added)}${json.slice(end)}`;
  }

  /** Exactly the library's encoding of `text` (no special tokens added). */
  async encodeDirect(text: string): Promise<number[]> {
    const enc = await this.own.encode(text, null, { addSpecialTokens: false });
    return enc.getIds();
  }

  /**
   * The same ids as `encodeDirect`, computed segment by segment between added tokens with a
   * cache: conversations re-rendered turn after turn, and GRPO groups sharing one prompt, repeat
   * the same segments, so each is tokenized once (a test checks equality on random texts).
   */
  async encode(text: string): Promise<number[]> {
    if (!this.addedSplitter) return this.encodeDirect(text);
    const parts = text.split(this.addedSplitter);
    // The segments this call uses are held here: the cache may start over while it awaits the
    // tokenizer (another encode on this handle filled it), and that must not lose them.
    const known = new Map<string, number[]>();
    const wanted = new Set<string>();
    for (let i = 0; i < parts.length; i += 2) {
      const p = parts[i]!;
      if (p === '' || known.has(p)) continue;
      const hit = this.segmentCache.get(p);
      if (hit) known.set(p, hit);
      else wanted.add(p);
    }
    const missing = [...wanted];
    if (missing.length > 0) {
      const ids = await this.encodeSegments(missing);
      missing.forEach((m, i) => known.set(m, ids[i]!));
      this.remember(missing, ids);
    }
    const out: number[] = [];
    parts.forEach((p, i) => {
      if (p === '') return;
      if (i % 2 === 1) out.push(this.addedIds.get(p)!);
      else for (const id of known.get(p)!) out.push(id);
    });
    return out;
  }

  /**
   * The library's ids of segments (text without added tokens), in one batch. Where lines encode on
   * their own, a segment goes as its lines and the lines the cache knows are not sent: a
   * re-rendered turn (`assistant\n` then the answer) and the answer alone share their lines.
   */
  private async encodeSegments(segments: readonly string[]): Promise<number[][]> {
    const linesOf = segments.map((seg) => (this.linesEncodeAlone ? lineCuts(seg) : undefined) ?? [seg]);
    const known = new Map<string, number[]>();
    const send = new Set<string>();
    for (const lines of linesOf)
      for (const line of lines) {
        if (known.has(line) || send.has(line)) continue;
        const hit = this.segmentCache.get(line);
        if (hit) known.set(line, hit);
        else send.add(line);
      }
    const sent = [...send];
    if (sent.length > 0) {
      const ids = (await this.vocabulary.encodeBatch(sent, { addSpecialTokens: false })).map((e) => e.getIds());
      sent.forEach((line, i) => known.set(line, ids[i]!));
      // Lines of longer segments are worth keeping on their own (they are what two segments share).
      const whole = new Set(segments);
      const lines = sent.filter((line) => !whole.has(line));
      this.remember(
        lines,
        lines.map((line) => known.get(line)!),
      );
    }
    return linesOf.map((lines) => {
      if (lines.length === 1) return known.get(lines[0]!)!;
      const out: number[] = [];
      for (const line of lines) for (const id of known.get(line)!) out.push(id);
      return out;
    });
  }

  /** Keep segments' ids in the cache, which starts over when it would hold too much. */
  private remember(texts: readonly string[], ids: readonly number[][]): void {
    const adding = texts.reduce((n, t) => n + t.length, 0);
    if (this.segmentCache.size + texts.length > 200_000 || this.segmentCacheChars + adding > this.segmentCacheLimit) {
      this.segmentCache.clear();
      this.segmentCacheChars = 0;
    }
    texts.forEach((t, i) => this.segmentCache.set(t, ids[i]!));
    this.segmentCacheChars += adding;
  }

  /**
   * `encode(text)`, or undefined as soon as the ids are known to number more than `max`: a long
   * text is tokenized a piece at a time, cut where lines encode on their own (so the pieces' ids
   * are the text's), and a piece too long to fit (each token spells at most `maxPieceBytes` bytes)
   * is not tokenized at all. What a gateway in front of an engine needs for a prompt the engine
   * will refuse anyway: no more work than the limit.
   */
  async encodeUpTo(text: string, max: number): Promise<number[] | undefined> {
    if (text.length <= BOUNDED_PIECE || !this.addedSplitter || !this.linesEncodeAlone) {
      if (!this.linesEncodeAlone && Buffer.byteLength(text) > (max + 1) * this.maxPieceBytes()) return undefined;
      const ids = await this.encode(text);
      return ids.length > max ? undefined : ids;
    }
    const out: number[] = [];
    for (let from = 0; from < text.length; ) {
      // The next cut at a line start at least BOUNDED_PIECE characters on (or the end).
      LINE_START.lastIndex = Math.min(text.length, from + BOUNDED_PIECE);
      const m = LINE_START.exec(text);
      const to = m ? m.index + 1 : text.length;
      const piece = text.slice(from, to);
      if (Buffer.byteLength(piece) > (max - out.length + 1) * this.maxPieceBytes()) return undefined;
      for (const id of await this.encode(piece)) out.push(id);
      if (out.length > max) return undefined;
      from = to;
    }
    return out;
  }

  private maxPieceBytesValue: number | undefined;

  /** The most bytes one token spells (a run of spaces, for Qwen: 128). */
  maxPieceBytes(): number {
    if (this.maxPieceBytesValue === undefined) {
      let most = 0;
      for (const [piece, id] of Object.entries(this.vocabulary.getVocab(true))) {
        // Byte-level pieces spell one byte per character; an added token its UTF-8 content.
        const bytes = this.byteLevel && !this.addedFlags[id] ? piece.length : Buffer.byteLength(piece);
        if (bytes > most) most = bytes;
      }
      this.maxPieceBytesValue = Math.max(1, most);
    }
    return this.maxPieceBytesValue;
  }

  /**
   * `encode(text)` for reading only: a text with no added token in it (one segment) comes back as
   * the segment cache's own array, not a copy. Callers must not change it.
   */
  async encodeReadonly(text: string): Promise<readonly number[]> {
    if (!this.addedSplitter || this.addedSplitter.test(text)) return this.encode(text);
    if (text === '') return [];
    const hit = this.segmentCache.get(text);
    if (hit) return hit;
    return this.encode(text);
  }

  async encodeBatch(texts: string[]): Promise<number[][]> {
    if (texts.length === 0) return [];
    if (this.addedSplitter) return Promise.all(texts.map((t) => this.encode(t)));
    const encs = await this.own.encodeBatch(texts, { addSpecialTokens: false });
    return encs.map((e) => e.getIds());
  }

  /**
   * The library's decode. For byte-level BPE it is computed here, synchronously: the ByteLevel
   * decoder joins the tokens' bytes (added tokens' printable-ASCII contents map to themselves)
   * and reads them as lossy UTF-8, which is what `decodeSync` does; the library's own call would
   * wait for its thread pool and need the model's own tokenizer built.
   */
  async decode(ids: readonly number[], skipSpecialTokens = false): Promise<string> {
    const valid = ids.filter((id) => this.isValid(id));
    if (!this.byteLevel || !this.asciiAdded) return this.own.decode(valid, skipSpecialTokens);
    return this.decodeSync(skipSpecialTokens ? valid.filter((id) => !this.specialIds.has(id)) : valid);
  }

  isValid(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.vocabSize;
  }

  isSpecial(id: number): boolean {
    return this.specialIds.has(id);
  }

  /** Any added token (special or not: tool-call and reasoning tags can be added but not special, as in Qwen's vocabulary). */
  isAdded(id: number): boolean {
    // Every added token this model has is inside its vocabulary (vocabSize counts them).
    return this.isValid(id) && this.addedFlags[id] === 1;
  }

  tokenToId(content: string): number | undefined {
    const added = this.addedIds.get(content);
    if (added !== undefined) return added;
    // Not an added token of this model: the vocabulary's (a dropped one is in neither).
    return this.droppedContents.includes(content) ? undefined : (this.vocabulary.tokenToId(content) ?? undefined);
  }

  /**
   * The id of `text` when this vocabulary holds it as one token (an added token's content, or one
   * entry of the byte-level BPE vocabulary, `\n` being `Ċ`), else undefined: how a profile finds the
   * ids of the newline and of role words without assuming a vocabulary.
   */
  tokenOfText(text: string): number | undefined {
    const added = this.addedIds.get(text);
    if (added !== undefined) return added;
    if (!this.byteLevel) return this.tokenToId(text);
    let chars = '';
    for (const b of new TextEncoder().encode(text)) chars += BYTE_TO_CHAR[b];
    return this.tokenToId(chars);
  }

  /** The raw bytes a token stands for (added tokens: their UTF-8 content; an id that is none: no bytes). */
  pieceBytes(id: number): Uint8Array {
    if (!this.isValid(id)) return NO_BYTES;
    const cached = this.pieceBytesCache[id];
    if (cached) return cached;
    let bytes: Uint8Array;
    const added = this.addedContent.get(id);
    // The decoder's Replace step applies to added tokens too (Gemma's whitespace runs are added tokens).
    if (added !== undefined) bytes = new TextEncoder().encode(this.metaspace ? added.replaceAll('\u2581', ' ') : added);
    else {
      const raw = this.vocabulary.idToToken(id) ?? '';
      const byte = this.metaspace ? /^<0x([0-9A-F]{2})>$/.exec(raw) : null;
      if (byte) bytes = Uint8Array.of(Number.parseInt(byte[1]!, 16));
      else if (this.metaspace) bytes = new TextEncoder().encode(raw.replaceAll('\u2581', ' '));
      else if (!this.byteLevel) bytes = new TextEncoder().encode(raw);
      else {
        const out: number[] = [];
        for (const ch of raw) out.push(CHAR_TO_BYTE.get(ch) ?? 0x3f);
        bytes = Uint8Array.from(out);
      }
    }
    this.pieceBytesCache[id] = bytes;
    return bytes;
  }

  /** Whether the token's bytes are valid UTF-8 on their own (no character split off to a neighbour). */
  wholeUtf8(id: number): boolean {
    if (!this.isValid(id)) return validWhole(NO_BYTES);
    let whole = this.wholeUtf8Cache[id]!;
    if (whole === 0) {
      whole = validWhole(this.pieceBytes(id)) ? 1 : 2;
      this.wholeUtf8Cache[id] = whole;
    }
    return whole === 1;
  }

  /** The text of a valid token whose bytes are whole UTF-8. */
  private wholeText(id: number): string {
    let text = this.pieceTextCache[id];
    if (text === undefined) {
      text = lenientUtf8.decode(this.pieceBytes(id));
      this.pieceTextCache[id] = text;
    }
    return text;
  }

  /** Decoded text of one token; bytes that are not valid UTF-8 on their own show as `\xNN`. */
  piece(id: number): string {
    if (!this.isValid(id)) return `⟨invalid ${id}⟩`;
    const bytes = this.pieceBytes(id);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return Array.from(bytes, (b) =>
        b < 0x80 ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`,
      ).join('');
    }
  }

  /** Synchronous decode for byte-level BPE (what the ByteLevel decoder does); used for display and cause classification. */
  decodeSync(ids: readonly number[], start = 0, end = ids.length): string {
    // Tokens that are whole characters decode on their own: join their (cached) texts.
    let allWhole = true;
    for (let i = start; i < end && allWhole; i++) allWhole = this.isValid(ids[i]!) && this.wholeUtf8(ids[i]!);
    if (allWhole) {
      let text = '';
      for (let i = start; i < end; i++) text += this.wholeText(ids[i]!);
      return text;
    }
    let total = 0;
    for (let i = start; i < end; i++) total += this.bytesOf(ids[i]!).length;
    if (total > decodeBuffer.length) decodeBuffer = new Uint8Array(Math.max(total, decodeBuffer.length * 2));
    let at = 0;
    for (let i = start; i < end; i++) {
      const b = this.bytesOf(ids[i]!);
      for (let k = 0; k < b.length; k++) decodeBuffer[at++] = b[k]!;
    }
    return lenientUtf8.decode(decodeBuffer.subarray(0, total));
  }

  private bytesOf(id: number): Uint8Array {
    return this.isValid(id) ? this.pieceBytes(id) : new TextEncoder().encode(`⟨invalid ${id}⟩`);
  }
}

/** The bytes `decodeSync` joins, in one buffer reused across calls (decoding is synchronous). */
let decodeBuffer = new Uint8Array(1 << 16);
// ignoreBOM: a U+FEFF the tokens spell is text (the ByteLevel decoder keeps it), at the start as anywhere else.
const lenientUtf8 = new TextDecoder('utf-8', { ignoreBOM: true });
const NO_BYTES = new Uint8Array(0);

/** Tokens `start..end-1` whose bytes form characters only together (a character split across tokens), and that text. */
export interface ByteJoin {
  start: number;
  end: number;
  text: string;
}

/** Bytes of the UTF-8 sequence `lead` starts (0: not a lead byte). */
function utf8Length(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Length of the valid UTF-8 character at `bytes[p]`, or 0 (overlong forms and surrogates are invalid). */
function validCharAt(bytes: Uint8Array, p: number): number {
  const len = utf8Length(bytes[p]!);
  if (len <= 1 || p + len > bytes.length) return len === 1 ? 1 : 0;
  try {
    strictUtf8.decode(bytes.subarray(p, p + len));
    return len;
  } catch {
    return 0;
  }
}

/** UTF-8 text of `bytes`, each byte that is not part of a valid character shown as `\xNN`. */
export function decodeLenient(bytes: Uint8Array): string {
  let out = '';
  for (let p = 0; p < bytes.length; ) {
    const len = validCharAt(bytes, p);
    if (len === 0) {
      out += `\\x${bytes[p]!.toString(16).padStart(2, '0')}`;
      p++;
    } else {
      out += len === 1 ? String.fromCharCode(bytes[p]!) : strictUtf8.decode(bytes.subarray(p, p + len));
      p += len;
    }
  }
  return out;
}

/**
 * Where byte-level BPE split a character across tokens (`△` = e2 96 b3 as `\xe2\x96` + `\xb3`):
 * each run of tokens that a valid multi-byte character spans, with the text the run decodes to.
 * Added tokens (special tokens, image pads) are whole on their own and end a run.
 */
export function partialByteJoins(tok: TokenizerHandle, ids: readonly number[]): ByteJoin[] {
  const joins: ByteJoin[] = [];
  let i = 0;
  while (i < ids.length) {
    if (!tok.isValid(ids[i]!) || tok.isAdded(ids[i]!)) {
      i++;
      continue;
    }
    // A run of ordinary tokens: their bytes end to end, and which token holds each byte.
    const from = i;
    while (i < ids.length && tok.isValid(ids[i]!) && !tok.isAdded(ids[i]!)) i++;
    if (ids.slice(from, i).every((id) => tok.wholeUtf8(id))) continue;
    const parts = ids.slice(from, i).map((id) => tok.pieceBytes(id));
    const starts: number[] = [];
    let total = 0;
    for (const b of parts) {
      starts.push(total);
      total += b.length;
    }
    const bytes = new Uint8Array(total);
    const owner = new Int32Array(total);
    parts.forEach((b, k) => {
      bytes.set(b, starts[k]!);
      owner.fill(k, starts[k]!, starts[k]! + b.length);
    });
    // Tokens k..m-1 of the run that characters crossing token boundaries tie together.
    let group: [number, number] | undefined;
    const flush = () => {
      if (!group) return;
      const [k, m] = group;
      const text = decodeLenient(bytes.subarray(starts[k]!, starts[m - 1]! + parts[m - 1]!.length));
      joins.push({ start: from + k, end: from + m, text: visiblePiece(text) });
      group = undefined;
    };
    for (let p = 0; p < total; ) {
      const len = validCharAt(bytes, p);
      if (len > 1 && owner[p] !== owner[p + len - 1]) {
        const k = owner[p]!;
        const m = owner[p + len - 1]! + 1;
        if (group && k < group[1]) group[1] = m;
        else {
          flush();
          group = [k, m];
        }
      }
      p += Math.max(1, len);
    }
    flush();
  }
  return joins;
}

function validWhole(bytes: Uint8Array): boolean {
  try {
    strictUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Make whitespace and special tokens visible: `⏎` for newline, `·` for space, `→` for tab. */
export function visiblePiece(piece: string): string {
  return piece.replace(/ /g, '·').replace(/\n/g, '⏎').replace(/\t/g, '→').replace(/\r/g, '␍');
}
