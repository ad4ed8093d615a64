// A tiktoken vocabulary (`tiktoken.model`: one `base64(token bytes) rank` per line) as the
// byte-level BPE `tokenizer.json` Hugging Face's tokenizers library runs, the way transformers
// converts one (`TikTokenConverter.extract_vocab_merges_from_model`): each token's string is its
// bytes through the GPT-2 byte alphabet, its id its rank; a merge is every split of a token into
// two tokens, ordered by the merged token's rank; a pre-token that is itself a token is taken whole
// (`ignore_merges`, as tiktoken does). The pattern and the special tokens are the model's
// (its tokenization file states them; docs/reference/models/kimi.md#tokens).
import { byteLevelString } from './tokenizer.ts';

/** The ranks of a `tiktoken.model` text, keyed by the token's bytes as a Latin-1 string. Throws naming the line. */
export function readTiktokenRanks(text: string, file: string): Map<string, number> {
  const ranks = new Map<string, number>();
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const [b64, rank] = line.trim().split(/\s+/);
    const r = Number(rank);
    if (!b64 || !Number.isInteger(r) || r < 0) throw new Error(`${file}:${i + 1}: not a "base64 rank" line`);
    ranks.set(Buffer.from(b64, 'base64').toString('latin1'), r);
  });
  return ranks;
}

const toUnicode = (latin1: string): string => byteLevelString(Buffer.from(latin1, 'latin1'));

export function tiktokenTokenizerJson(
  ranks: ReadonlyMap<string, number>,
  pattern: string,
  special: readonly { id: number; content: string }[],
): string {
  const vocab: Record<string, number> = {};
  const merges: [string, string, number][] = [];
  for (const [token, rank] of ranks) {
    vocab[toUnicode(token)] = rank;
    if (token.length === 1) continue;
    const local: [string, string, number][] = [];
    for (let k = 1; k < token.length; k++) {
      const l = token.slice(0, k);
      const r = token.slice(k);
      if (ranks.has(l) && ranks.has(r)) local.push([l, r, rank]);
    }
    local.sort((a, b) => ranks.get(a[0])! - ranks.get(b[0])! || ranks.get(a[1])! - ranks.get(b[1])!);
    merges.push(...local);
  }
  merges.sort((a, b) => a[2] - b[2]);
  return JSON.stringify({
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: special.map((t) => ({
      id: t.id,
      content: t.content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: true,
      vocab,
      merges: merges.map(([l, r]) => [toUnicode(l), toUnicode(r)]),
    },
  });
}
