// A model folder whose special and vision tokens have other ids, and the fixtures re-encoded to
// those ids: built from a shipped profile's own tokenizer.json by a permutation of ids, so the
// same text tokenizes to the permuted ids. A run checked with `--model FOLDER` must then give
// the same findings at the same places as the original run with the built-in profile; any id
// the code took from anywhere but the profile shows up as a difference.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { decode, encode } from '@msgpack/msgpack';
import type { ModelProfile } from '../../server/profiles/profile.ts';
import { TokenizerHandle } from '../../server/profiles/tokenizer.ts';
import { qwenNamed } from '../../server/families/qwen/ids.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');

/** Ids to move (an involution for `movedIds`; any one-way map moves ids where nothing was). */
export type IdPermutation = ReadonlyMap<number, number>;

/**
 * The profile's added tokens (`<|endoftext|>` … its last) swapped with the ordinary ids from 100000
 * on, and the newline, `\n\n` and the role words with ids from 99990 on: every id rollscope reads
 * from a profile moves, the vocabulary keeps its size (ids past it stay outside it).
 */
export function movedIds(profile: ModelProfile): IdPermutation {
  const perm = new Map<number, number>();
  const swap = (a: number, b: number) => {
    perm.set(a, b);
    perm.set(b, a);
  };
  const added = TokenizerHandle.addedTokensOf(profile.tokenizer.ownJson()).map((t) => t.id);
  added.forEach((id, k) => swap(id, 100000 + k));
  ['\n', '\n\n', 'assistant', 'system', 'user'].forEach((text, k) =>
    swap(profile.tokenizer.tokenOfText(text)!, 99990 + k),
  );
  return perm;
}

const mapped = (perm: IdPermutation, id: number) => perm.get(id) ?? id;

/** Config names of the generation a built-in VL profile is (what transformers writes in config.json). */
const MODEL_TYPE: Record<string, string> = {
  'qwen2-vl': 'qwen2_vl',
  'qwen2.5-vl': 'qwen2_5_vl',
  'qwen3-vl': 'qwen3_vl',
};

export interface MovedFolderOptions {
  /** Files to leave out (to see what the loader says of a folder without them). */
  omit?: readonly string[];
  /** Where the chat template goes: `chat_template.jinja` or tokenizer_config.json's `chat_template`. */
  template?: 'jinja' | 'tokenizer_config';
  /** config.json `model_type` (default: the profile's generation). */
  modelType?: string;
}

/** Writes `dir` as a Hugging Face model folder of `profile` with ids moved by `perm`. */
export function writeMovedFolder(
  dir: string,
  profile: ModelProfile,
  perm: IdPermutation,
  opts: MovedFolderOptions = {},
): void {
  fs.mkdirSync(dir, { recursive: true });
  const omit = new Set(opts.omit ?? []);
  const write = (name: string, content: string) => {
    if (!omit.has(name)) fs.writeFileSync(path.join(dir, name), content);
  };
  const tok = JSON.parse(profile.tokenizer.ownJson()) as {
    added_tokens: { id: number; content: string }[];
    model: { vocab: Record<string, number> };
  };
  for (const t of tok.added_tokens) t.id = mapped(perm, t.id);
  for (const [piece, id] of Object.entries(tok.model.vocab)) tok.model.vocab[piece] = mapped(perm, id);
  write('tokenizer.json', JSON.stringify(tok));
  const s = qwenNamed(profile.ids);
  const decoder = Object.fromEntries(
    tok.added_tokens.map((t) => [String(t.id), { content: t.content, special: t.content.startsWith('<|') }]),
  );
  write(
    'tokenizer_config.json',
    JSON.stringify({
      added_tokens_decoder: decoder,
      eos_token: '<|im_end|>',
      pad_token: '<|endoftext|>',
      ...(opts.template === 'jinja' ? {} : { chat_template: profile.templateSource }),
    }),
  );
  if (opts.template === 'jinja') write('chat_template.jinja', profile.templateSource);
  write(
    'config.json',
    JSON.stringify({
      model_type: opts.modelType ?? MODEL_TYPE[profile.family] ?? profile.family,
      image_token_id: mapped(perm, s.imagePad),
      video_token_id: mapped(perm, s.videoPad),
      vision_start_token_id: mapped(perm, s.visionStart),
      vision_end_token_id: mapped(perm, s.visionEnd),
      vision_config: {
        patch_size: profile.vision.patchSize,
        spatial_merge_size: profile.vision.mergeSize,
        ...(profile.vision.tokensPerSecond !== undefined ? { tokens_per_second: profile.vision.tokensPerSecond } : {}),
      },
    }),
  );
  const v = profile.vision;
  write(
    'preprocessor_config.json',
    JSON.stringify({
      patch_size: v.patchSize,
      merge_size: v.mergeSize,
      temporal_patch_size: v.temporalPatchSize,
      ...(v.patchSize === 16
        ? { size: { shortest_edge: v.minPixels, longest_edge: v.maxPixels } }
        : { min_pixels: v.minPixels, max_pixels: v.maxPixels }),
    }),
  );
  // Qwen3-VL's repository ships its video processor's bounds in their own file.
  if (v.video)
    write(
      'video_preprocessor_config.json',
      JSON.stringify({ size: { shortest_edge: v.video.minPixels, longest_edge: v.video.maxPixels } }),
    );
  write('generation_config.json', JSON.stringify({ eos_token_id: [mapped(perm, s.eos), mapped(perm, s.endOfText)] }));
}

/** Keys whose arrays hold token ids in the formats' records (nested arrays included). */
const ID_KEYS = [
  'token_ids',
  'prompt_token_ids',
  'response_token_ids',
  'tokens',
  'promptIds',
  'generatedIds',
  'observationIds',
  'prompt_ids',
  'response_ids',
  'input_ids',
  'output_ids',
  'prompt',
  // SGLang's [logprob, id, text] triples.
  'input_token_logprobs',
  'output_token_logprobs',
];
const ID_ARRAY = new RegExp(`"(${ID_KEYS.join('|')})"\\s*:\\s*\\[`, 'g');

/** The end (exclusive) of the bracketed array that opens at `open`, strings skipped. */
function arrayEnd(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (ch === '[') depth++;
    else if (ch === ']' && --depth === 0) return i + 1;
  }
  return text.length;
}

/** The non-negative integers of a JSON array's text mapped, strings and other numbers left as they are. */
function remapIntegers(json: string, perm: IdPermutation): string {
  let out = '';
  for (let i = 0; i < json.length; ) {
    const ch = json[i]!;
    if (ch === '"') {
      let j = i + 1;
      for (; j < json.length && json[j] !== '"'; j++) if (json[j] === '\\') j++;
      out += json.slice(i, j + 1);
      i = j + 1;
    } else if (/[-0-9]/.test(ch)) {
      const n = /^-?\d+(\.\d+)?([eE][-+]?\d+)?/.exec(json.slice(i, i + 40))?.[0] ?? ch;
      out += /^\d+$/.test(n) ? String(mapped(perm, Number(n))) : n;
      i += n.length;
    } else {
      out += ch;
      i++;
    }
  }
  return out;
}

/**
 * JSON or JSON-lines text with its token ids moved, the rest byte for byte (NaN, number formats,
 * broken lines kept as they are): the integers of the id arrays, and vLLM's `"token_id:N"` tokens.
 */
export function remapJsonText(text: string, perm: IdPermutation): string {
  const spans: [number, number][] = [];
  for (const m of text.matchAll(ID_ARRAY)) {
    const open = m.index + m[0].length - 1;
    spans.push([open, arrayEnd(text, open)]);
  }
  let out = '';
  let at = 0;
  for (const [s, e] of spans) {
    if (s < at) continue; // nested in an array already remapped
    out += text.slice(at, s);
    out += remapIntegers(text.slice(s, e), perm);
    at = e;
  }
  out += text.slice(at);
  return out.replace(/"token_id:(\d+)"/g, (_, n: string) => `"token_id:${mapped(perm, Number(n))}"`);
}

/** A prime-rl msgpack file with its ids moved: each struct's first field (`input_ids` / `token_ids`). */
export function remapPrimeRlBytes(bytes: Uint8Array, perm: IdPermutation): Uint8Array {
  const structs = decode(bytes) as unknown[][];
  for (const s of structs) {
    const ids = s[0];
    if (Array.isArray(ids)) s[0] = ids.map((id) => (typeof id === 'number' ? mapped(perm, id) : id));
  }
  return encode(structs);
}

/**
 * The fixture tree copied to `root` with its ids moved: JSON and JSON-lines text, prime-rl's
 * msgpack; slime's torch.save dumps are written again by their generator (test/fixtures/torch/
 * generate.py) from the re-encoded slime samples.
 */
export function writeMovedFixtures(root: string, perm: IdPermutation, from = FIXTURES): void {
  const copy = (dir: string) => {
    for (const e of fs.readdirSync(path.join(from, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      const dst = path.join(root, rel);
      if (e.isDirectory()) {
        fs.mkdirSync(dst, { recursive: true });
        copy(rel);
      } else if (/\.(jsonl?|json)$/.test(e.name))
        fs.writeFileSync(dst, remapJsonText(fs.readFileSync(path.join(from, rel), 'utf8'), perm));
      else if (e.name.endsWith('.bin'))
        fs.writeFileSync(dst, remapPrimeRlBytes(fs.readFileSync(path.join(from, rel)), perm));
      else if (!/\.(ts|py|pt)$/.test(e.name)) fs.copyFileSync(path.join(from, rel), dst);
    }
  };
  fs.mkdirSync(root, { recursive: true });
  copy('.');
  fs.mkdirSync(path.join(root, 'torch'), { recursive: true });
  const torch = spawnSync('python3', [path.join(from, 'torch', 'generate.py'), root], { encoding: 'utf8' });
  if (torch.status !== 0) throw new Error(`torch/generate.py failed: ${torch.stderr}`);
}
