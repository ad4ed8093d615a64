// Gemma 4's special tokens and turn grammar, as text (docs/reference/models/gemma4.md#tokens);
// ids are looked up in the model's tokenizer (config.json states the media ones).

export const GEMMA4_TOKENS = {
  bos: '<bos>',
  eos: '<eos>',
  turnOpen: '<|turn>',
  /** The chat EOS: the model ends a turn with it (generation_config stops at `<eos>` and `<turn|>`). */
  turnClose: '<turn|>',
  channelOpen: '<|channel>',
  channelClose: '<channel|>',
  think: '<|think|>',
  /** `boi_token`: opens an image's run. */
  imageOpen: '<|image>',
  /** `image_token`: what the template writes per image, and the soft token the run repeats. */
  image: '<|image|>',
  /** `eoi_token`: closes an image's run. */
  imageClose: '<image|>',
  video: '<|video|>',
  toolCallOpen: '<|tool_call>',
  toolCallClose: '<tool_call|>',
  toolResponseOpen: '<|tool_response>',
  toolResponseClose: '<tool_response|>',
} as const;

/** The empty thought channel the 26B/31B templates write after `<|turn>model\n` when thinking is off. */
export const EMPTY_THOUGHT = `${GEMMA4_TOKENS.channelOpen}thought\n${GEMMA4_TOKENS.channelClose}`;

/** What one image item of a message becomes in the rendered text (the template's `\n\n<|image|>\n\n`). */
export const IMAGE_ITEM_TEXT = `\n\n${GEMMA4_TOKENS.image}\n\n`;

/** The run the processor writes for one image of `n` soft tokens (`Gemma4Processor.replace_image_token`). */
export function imageRun(n: number): string {
  return `${GEMMA4_TOKENS.imageOpen}${GEMMA4_TOKENS.image.repeat(n)}${GEMMA4_TOKENS.imageClose}`;
}

/** The generation prompt: `<|turn>model\n`, then the empty thought channel unless thinking is on. */
export function generationPrompt(enableThinking: boolean, emptyThought: boolean): string {
  return `${GEMMA4_TOKENS.turnOpen}model\n${!enableThinking && emptyThought ? EMPTY_THOUGHT : ''}`;
}

/**
 * Characters Python's `str.strip()` removes (Jinja's `trim`): `str.isspace()`, which counts
 * U+001C–U+001F and U+0085 and, unlike JavaScript's `\s`, not U+FEFF.
 */
const PY_SPACE = '[\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const PY_WHITESPACE = new RegExp(`^${PY_SPACE}+|${PY_SPACE}+$`, 'gu');

/**
 * The template's `strip_thinking` macro, which the history's model turns pass through: split at
 * `<channel|>`, keep of each part what comes before a `<|channel>` (all of it when none), join,
 * trim. So a turn rendered again loses its thought channel, empty or not.
 */
export function stripThinking(text: string): string {
  let out = '';
  for (const part of text.split(GEMMA4_TOKENS.channelClose)) {
    const at = part.indexOf(GEMMA4_TOKENS.channelOpen);
    out += at >= 0 ? part.slice(0, at) : part;
  }
  return out.replace(PY_WHITESPACE, '');
}
