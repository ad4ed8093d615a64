// Gemma 3's ids, looked up by their text in the model's tokenizer (docs/reference/models/gemma3.md#tokens),
// and the turn grammar and image-span shape they make. A folder's config.json states the image
// ids (`boi_token_index`, `eoi_token_index`, `image_token_index`), which win over the text's.
import path from 'node:path';
import { z } from 'zod';
import type { TokenizerHandle } from '../../profiles/tokenizer.ts';
import type { FamilyIds, ModelFiles, TurnHeader } from '../family.ts';
import { GEMMA3_TOKENS, GEMMA3_TURNS } from './tokens.ts';

/** The ids Gemma 3's code and labels name (FamilyIds.named of a Gemma 3 model). */
export interface Gemma3Ids {
  bos: number;
  /** `<eos>`: a secondary stop (generation_config stops at it and at `<end_of_turn>`). */
  endOfText: number;
  startOfTurn: number;
  endOfTurn: number;
  /** The chat EOS (tokenizer_config.json `eos_token`, `<end_of_turn>`). */
  eos: number;
  newline: number;
  newline2: number;
  newline3: number;
  newline4: number;
  /** `model`: the role word of an assistant turn. */
  modelRole: number;
  startOfImage: number;
  endOfImage: number;
  imageSoftToken: number;
}

const tokenId = z.number().int().nonnegative();
const ConfigIds = z
  .object({
    boi_token_index: tokenId.optional(),
    eoi_token_index: tokenId.optional(),
    image_token_index: tokenId.optional(),
  })
  .passthrough();
const TokenContent = z.union([z.string(), z.object({ content: z.string() }).passthrough()]);
const TokenizerConfigEos = z.object({ eos_token: TokenContent.nullable().optional() }).passthrough();

function parsed<T>(schema: z.ZodType<T>, value: unknown, file: string): T | undefined {
  if (value === undefined) return undefined;
  const r = schema.safeParse(value);
  if (!r.success)
    throw new Error(`${file}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

/** Whether a tokenizer holds Gemma 3's turn and image tokens. */
export function isGemma3Tokenizer(tok: TokenizerHandle): boolean {
  return (
    tok.tokenOfText(GEMMA3_TOKENS.startOfTurn) !== undefined &&
    tok.tokenOfText(GEMMA3_TOKENS.endOfTurn) !== undefined &&
    tok.tokenOfText(GEMMA3_TOKENS.imageSoftToken) !== undefined
  );
}

export function gemma3Tokens(tok: TokenizerHandle, files: ModelFiles, where: string, notes: string[]): Gemma3Ids {
  const file = (name: string) => (files.dir ? path.join(files.dir, name) : `${where} ${name}`);
  const id = (text: string, what = text): number => {
    const v = tok.tokenOfText(text);
    if (v === undefined) throw new Error(`${where}: the tokenizer has no ${what} token; not a Gemma 3 tokenizer`);
    return v;
  };
  const config = parsed(ConfigIds, files.config, file('config.json'));
  const image = (key: keyof z.infer<typeof ConfigIds>, text: string): number => {
    const stated = config?.[key] as number | undefined;
    const found = tok.tokenOfText(text);
    if (stated !== undefined) {
      if (!tok.isValid(stated)) throw new Error(`${file('config.json')}: ${key} ${stated} is not in tokenizer.json`);
      if (found !== undefined && found !== stated)
        notes.push(`config.json ${key} is ${stated}, but tokenizer.json has ${text} at ${found}: ${stated} is used`);
      return stated;
    }
    return id(text);
  };
  const endOfTurn = id(GEMMA3_TOKENS.endOfTurn);
  const tc = parsed(TokenizerConfigEos, files.tokenizerConfig, file('tokenizer_config.json'));
  const eosText = typeof tc?.eos_token === 'string' ? tc.eos_token : tc?.eos_token?.content;
  let eos = endOfTurn;
  if (eosText !== undefined) {
    const v = tok.tokenOfText(eosText);
    if (v === undefined)
      throw new Error(`${file('tokenizer_config.json')}: eos_token ${eosText} is not a token of tokenizer.json`);
    eos = v;
  }
  return {
    bos: id(GEMMA3_TOKENS.bos),
    endOfText: id(GEMMA3_TOKENS.eos),
    startOfTurn: id(GEMMA3_TOKENS.startOfTurn),
    endOfTurn,
    eos,
    newline: id('\n', 'newline'),
    newline2: id('\n\n', '"\\n\\n"'),
    newline3: id('\n\n\n', '"\\n\\n\\n"'),
    newline4: id('\n\n\n\n', '"\\n\\n\\n\\n"'),
    modelRole: id(GEMMA3_TURNS.assistantRole, '"model" (one token)'),
    startOfImage: image('boi_token_index', GEMMA3_TOKENS.startOfImage),
    endOfImage: image('eoi_token_index', GEMMA3_TOKENS.endOfImage),
    imageSoftToken: image('image_token_index', GEMMA3_TOKENS.imageSoftToken),
  };
}

/**
 * `<start_of_turn>`, the role word, up to the newline (at most 8 tokens). The newline may be merged
 * with the content's own leading newlines (`user\n` + an image's `\n\n` tokenize as `user`, `\n\n\n`):
 * any newline run ends the header.
 */
function header(t: Gemma3Ids) {
  const newlines = new Set([t.newline, t.newline2, t.newline3, t.newline4]);
  return (tokens: readonly number[], at: number): TurnHeader | undefined => {
    if (tokens[at] !== t.startOfTurn) return undefined;
    let j = at + 1;
    while (j < tokens.length && !newlines.has(tokens[j]!) && tokens[j] !== t.startOfTurn && j - at < 8) j++;
    return {
      role: tokens[at + 1] === t.modelRole ? 'assistant' : 'other',
      roleSpan: [at + 1, Math.min(j, tokens.length)],
      end: Math.min(j + 1, tokens.length),
    };
  };
}

export function gemma3FamilyIds(t: Gemma3Ids): FamilyIds {
  return {
    eos: t.eos,
    grammar: {
      openers: [t.startOfTurn],
      header: header(t),
      endOfTurn: t.endOfTurn,
      afterEnd: [t.newline],
      stops: t.eos === t.endOfText ? [t.eos] : [t.eos, t.endOfText],
      // After a turn the model ended with `<eos>`, the template still writes `<end_of_turn>\n`.
      secondaryStops: [],
      stopOpensTurn: false,
    },
    media: {
      image: { begin: t.startOfImage, header: [], pad: t.imageSoftToken, end: t.endOfImage },
      collapsible: false,
    },
    named: { ...t },
  };
}

export function gemma3Named(ids: FamilyIds): Gemma3Ids {
  return ids.named as unknown as Gemma3Ids;
}
