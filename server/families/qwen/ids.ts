// Qwen's ids, looked up by their text in the model's tokenizer (docs/reference/tokens.md), and
// the ChatML turn grammar and vision-span shape they make: `<|im_start|>role\n … <|im_end|>\n`,
// `<|vision_start|>` + a run of `<|image_pad|>` (or `<|video_pad|>`) + `<|vision_end|>`.
// No id is written here: a folder's config.json states the vision ids (what the model places
// image features by), else their text gives them; the EOS is tokenizer_config.json's.
import path from 'node:path';
import { z } from 'zod';
import type { TokenizerHandle } from '../../profiles/tokenizer.ts';
import type { FamilyIds, ModelFiles, TurnGrammar, TurnHeader } from '../family.ts';

/** The ids Qwen's code and labels name (FamilyIds.named of a Qwen model). */
export interface QwenTokens {
  endOfText: number;
  imStart: number;
  imEnd: number;
  /** The chat EOS the model emits at the end of a turn (`<|im_end|>` for Qwen chat models). */
  eos: number;
  newline: number;
  visionStart: number;
  visionEnd: number;
  imagePad: number;
  videoPad: number;
  /** The role word after `<|im_start|>` that opens an assistant turn (one token in Qwen's vocabulary). */
  assistantRole: number;
}

/** The texts of Qwen's chat tokens (docs/reference/tokens.md#special-tokens). */
export const QWEN_TEXT = {
  endOfText: '<|endoftext|>',
  imStart: '<|im_start|>',
  imEnd: '<|im_end|>',
  newline: '\n',
  assistantRole: 'assistant',
  visionStart: '<|vision_start|>',
  visionEnd: '<|vision_end|>',
  imagePad: '<|image_pad|>',
  videoPad: '<|video_pad|>',
} as const;

const tokenId = z.number().int().nonnegative();
/** The fields of a model's `config.json` the ids come from (transformers' Qwen2.5-VL, Qwen3-VL and Qwen3.5 configs). */
const ConfigIds = z
  .object({
    image_token_id: tokenId.optional(),
    video_token_id: tokenId.optional(),
    vision_start_token_id: tokenId.optional(),
    vision_end_token_id: tokenId.optional(),
  })
  .passthrough();
const TokenContent = z.union([z.string(), z.object({ content: z.string() }).passthrough()]);
const TokenizerConfigEos = z.object({ eos_token: TokenContent.nullable().optional() }).passthrough();
const GenerationConfigEos = z.object({ eos_token_id: z.union([tokenId, z.array(tokenId)]).optional() }).passthrough();

function parsed<T>(schema: z.ZodType<T>, value: unknown, file: string): T | undefined {
  if (value === undefined) return undefined;
  const r = schema.safeParse(value);
  if (!r.success)
    throw new Error(`${file}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

/** Whether a tokenizer holds ChatML's turn tokens. */
export function hasChatTokens(tok: TokenizerHandle): boolean {
  return tok.tokenOfText(QWEN_TEXT.imStart) !== undefined && tok.tokenOfText(QWEN_TEXT.imEnd) !== undefined;
}

/**
 * A Qwen model's ids: the chat tokens by their text; the vision tokens from config.json
 * (`image_token_id`, …), else by their text; the EOS from tokenizer_config.json `eos_token`, else
 * generation_config.json, else `<|im_end|>` (each fallback with a note).
 */
export function qwenTokens(tok: TokenizerHandle, files: ModelFiles, where: string, notes: string[]): QwenTokens {
  const dir = files.dir;
  const file = (name: string) => (dir ? path.join(dir, name) : `${where} ${name}`);
  const id = (text: string, what = text): number => {
    const v = tok.tokenOfText(text);
    if (v === undefined)
      throw new Error(`${where}: the tokenizer has no ${what} token; rollscope supports Qwen tokenizers`);
    return v;
  };
  const chat = {
    endOfText: id(QWEN_TEXT.endOfText),
    imStart: id(QWEN_TEXT.imStart),
    imEnd: id(QWEN_TEXT.imEnd),
    newline: id(QWEN_TEXT.newline, 'newline'),
    assistantRole: id(QWEN_TEXT.assistantRole, '"assistant" (one token)'),
  };
  const config = parsed(ConfigIds, files.config, file('config.json'));
  if (dir && !files.config)
    notes.push('config.json absent: the vision token ids are those tokenizer.json gives their text');
  const vision = (key: keyof z.infer<typeof ConfigIds>, text: string): number => {
    const stated = config?.[key] as number | undefined;
    const found = tok.tokenOfText(text);
    if (stated !== undefined) {
      if (!tok.isValid(stated)) throw new Error(`${file('config.json')}: ${key} ${stated} is not in tokenizer.json`);
      if (found !== undefined && found !== stated)
        notes.push(`config.json ${key} is ${stated}, but tokenizer.json has ${text} at ${found}: ${stated} is used`);
      return stated;
    }
    if (found === undefined)
      throw new Error(`${dir ?? where}: no ${key} in config.json and no ${text} token in tokenizer.json`);
    return found;
  };
  const ids = {
    visionStart: vision('vision_start_token_id', QWEN_TEXT.visionStart),
    visionEnd: vision('vision_end_token_id', QWEN_TEXT.visionEnd),
    imagePad: vision('image_token_id', QWEN_TEXT.imagePad),
    videoPad: vision('video_token_id', QWEN_TEXT.videoPad),
  };
  const tc = parsed(TokenizerConfigEos, files.tokenizerConfig, file('tokenizer_config.json'));
  const eosToken = tc?.eos_token;
  const eosText = typeof eosToken === 'string' ? eosToken : eosToken?.content;
  let eos: number | undefined;
  if (eosText !== undefined) {
    eos = tok.tokenOfText(eosText);
    if (eos === undefined)
      throw new Error(`${file('tokenizer_config.json')}: eos_token ${eosText} is not a token of tokenizer.json`);
  } else if (dir) {
    const stated = parsed(GenerationConfigEos, files.generationConfig, file('generation_config.json'))?.eos_token_id;
    eos = Array.isArray(stated) ? stated[0] : stated;
    notes.push(
      eos !== undefined
        ? `tokenizer_config.json states no eos_token: the first generation_config.json eos_token_id (${eos}) is the EOS`
        : `neither tokenizer_config.json nor generation_config.json states the EOS: ${QWEN_TEXT.imEnd} is`,
    );
  }
  return { ...chat, ...ids, eos: eos ?? chat.imEnd };
}

/** ChatML's turn header at `at`: `<|im_start|>`, the role word, up to the newline (at most 8 tokens). */
function chatmlHeader(t: QwenTokens) {
  return (tokens: readonly number[], at: number): TurnHeader | undefined => {
    if (tokens[at] !== t.imStart) return undefined;
    let j = at + 1;
    while (j < tokens.length && tokens[j] !== t.newline && tokens[j] !== t.imStart && j - at < 8) j++;
    return {
      role: tokens[at + 1] === t.assistantRole ? 'assistant' : 'other',
      roleSpan: [at + 1, Math.min(j, tokens.length)],
      end: Math.min(j + 1, tokens.length),
    };
  };
}

/** The generic view of a Qwen model's ids (FamilyIds). */
export function familyIds(t: QwenTokens): FamilyIds {
  const grammar: TurnGrammar = {
    openers: [t.imStart],
    header: chatmlHeader(t),
    endOfTurn: t.imEnd,
    afterEnd: [t.newline],
    // The chat EOS first, then the secondary EOS of the generation config, which vLLM also stops at.
    stops: t.eos === t.endOfText ? [t.eos] : [t.eos, t.endOfText],
    secondaryStops: t.eos === t.endOfText ? [] : [t.endOfText],
    stopOpensTurn: false,
  };
  return {
    eos: t.eos,
    grammar,
    media: {
      image: { begin: t.visionStart, header: [], pad: t.imagePad, end: t.visionEnd },
      video: { begin: t.visionStart, header: [], pad: t.videoPad, end: t.visionEnd },
      collapsible: false,
    },
    named: { ...t },
  };
}

/** The Qwen names of a Qwen model's ids. */
export function qwenNamed(ids: FamilyIds): QwenTokens {
  return ids.named as unknown as QwenTokens;
}
