// Kimi K2.5 / Kimi-VL special tokens, turn grammar and the tiktoken pre-tokenizer pattern, as text
// (docs/reference/models/kimi.md#tokens). Ids come from the model folder's tokenizer_config.json
// `added_tokens_decoder` (Kimi's tokenizer is tiktoken: `tiktoken.model` ranks plus these).

export const KIMI_TOKENS = {
  bos: '[BOS]',
  eos: '[EOS]',
  /** Ends every message, with no newline after it; the chat EOS. */
  imEnd: '<|im_end|>',
  imUser: '<|im_user|>',
  imAssistant: '<|im_assistant|>',
  imSystem: '<|im_system|>',
  /** Between the role name and the content: `<|im_assistant|>assistant<|im_middle|>`. */
  imMiddle: '<|im_middle|>',
  /** K2.5 opens a media item with it; Kimi-VL and K2's templates write `<|media_start|>` at the same place. */
  mediaBegin: '<|media_begin|>',
  mediaStart: '<|media_start|>',
  mediaContent: '<|media_content|>',
  mediaEnd: '<|media_end|>',
  mediaPad: '<|media_pad|>',
  thinkOpen: '<think>',
  thinkClose: '</think>',
  toolCallsSectionBegin: '<|tool_calls_section_begin|>',
  toolCallsSectionEnd: '<|tool_calls_section_end|>',
  toolCallBegin: '<|tool_call_begin|>',
  toolCallArgumentBegin: '<|tool_call_argument_begin|>',
  toolCallEnd: '<|tool_call_end|>',
} as const;

/**
 * tokenization_kimi.py's `pat_str`: Han runs on their own, letters with an optional leading
 * non-letter and English contractions, digits in threes, punctuation runs, newlines, spaces.
 * (JavaScript has no `&&` class intersection: `[\p{L}&&[^\p{Han}]]` is written with a lookahead.)
 */
export const KIMI_PATTERN_PYTHON = [
  '[\\p{Han}]+',
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  '\\p{N}{1,3}',
  ' ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*',
  '\\s*[\\r\\n]+',
  '\\s+(?!\\S)',
  '\\s+',
].join('|');

/** What opens a message of `role` (the role name is written out: `<|im_assistant|>assistant<|im_middle|>`). */
export function turnOpener(role: 'user' | 'assistant' | 'system' | 'tool', name: string = role): string {
  const t = KIMI_TOKENS;
  const token = role === 'user' ? t.imUser : role === 'assistant' ? t.imAssistant : t.imSystem;
  return `${token}${name}${t.imMiddle}`;
}

/** The media item the template writes (K2.5's spelling): `<|media_begin|>image<|media_content|><|media_pad|><|media_end|>`. */
export const IMAGE_ITEM_TEXT = `${KIMI_TOKENS.mediaBegin}image${KIMI_TOKENS.mediaContent}${KIMI_TOKENS.mediaPad}${KIMI_TOKENS.mediaEnd}`;

/**
 * The two token spaces of a media item (slime#1755): vLLM expands the one `<|media_pad|>` into the
 * image's N; the Hugging Face path of K2.5 keeps one and the vision tower's features replace it.
 * A run of pads is in one space or the other; a run whose length is neither 1 nor N is wrong.
 */
export type MediaSpace = 'collapsed' | 'expanded' | 'wrong';

export function mediaSpace(padRun: number, expected: number): MediaSpace {
  if (padRun === expected) return 'expanded';
  if (padRun === 1) return 'collapsed';
  return 'wrong';
}

/**
 * The spaces of a sequence's media runs: one space for all of them, or the finding that they mix
 * (some runs expanded, some collapsed: two stacks wrote one sequence). An image of N = 1 fits both
 * spaces and decides nothing.
 */
export function sequenceSpace(
  runs: readonly { pads: number; expected: number }[],
):
  | { space: 'collapsed' | 'expanded' | 'either'; wrong: number[] }
  | { mixed: { collapsed: number[]; expanded: number[] } } {
  const collapsed: number[] = [];
  const expanded: number[] = [];
  const wrong: number[] = [];
  runs.forEach((r, i) => {
    if (r.expected === 1 && r.pads === 1) return;
    const s = mediaSpace(r.pads, r.expected);
    (s === 'collapsed' ? collapsed : s === 'expanded' ? expanded : wrong).push(i);
  });
  if (collapsed.length > 0 && expanded.length > 0) return { mixed: { collapsed, expanded } };
  return { space: collapsed.length > 0 ? 'collapsed' : expanded.length > 0 ? 'expanded' : 'either', wrong };
}
