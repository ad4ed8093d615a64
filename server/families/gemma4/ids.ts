// Gemma 4's ids, looked up by their text in the model's tokenizer (docs/reference/models/gemma4.md#tokens);
// config.json's `boi_token_id`, `eoi_token_id`, `image_token_id`, `video_token_id` win over the text's.
import path from 'node:path';
import { z } from 'zod';
import type { TokenizerHandle } from '../../profiles/tokenizer.ts';
import type { FamilyIds, ModelFiles, TurnHeader } from '../family.ts';
import { GEMMA4_TOKENS } from './tokens.ts';

export interface Gemma4Ids {
  bos: number;
  endOfText: number;
  turnOpen: number;
  turnClose: number;
  /** The chat EOS (tokenizer_config.json `eos_token`; `<turn|>`). */
  eos: number;
  channelOpen: number;
  channelClose: number;
  newline: number;
  modelRole: number;
  imageOpen: number;
  image: number;
  imageClose: number;
  video: number;
}

const tokenId = z.number().int().nonnegative();
const ConfigIds = z
  .object({
    boi_token_id: tokenId.optional(),
    eoi_token_id: tokenId.optional(),
    image_token_id: tokenId.optional(),
    video_token_id: tokenId.optional(),
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

export function isGemma4Tokenizer(tok: TokenizerHandle): boolean {
  return (
    tok.tokenOfText(GEMMA4_TOKENS.turnOpen) !== undefined && tok.tokenOfText(GEMMA4_TOKENS.turnClose) !== undefined
  );
}

export function gemma4Tokens(tok: TokenizerHandle, files: ModelFiles, where: string, notes: string[]): Gemma4Ids {
  const file = (name: string) => (files.dir ? path.join(files.dir, name) : `${where} ${name}`);
  const id = (text: string, what = text): number => {
    const v = tok.tokenOfText(text);
    if (v === undefined) throw new Error(`${where}: the tokenizer has no ${what} token; not a Gemma 4 tokenizer`);
    return v;
  };
  const config = parsed(ConfigIds, files.config, file('config.json'));
  const media = (key: keyof z.infer<typeof ConfigIds>, text: string): number => {
    const stated = config?.[key] as number | undefined;
    const found = tok.tokenOfText(text);
    if (stated === undefined) return id(text);
    if (!tok.isValid(stated)) throw new Error(`${file('config.json')}: ${key} ${stated} is not in tokenizer.json`);
    if (found !== undefined && found !== stated)
      notes.push(`config.json ${key} is ${stated}, but tokenizer.json has ${text} at ${found}: ${stated} is used`);
    return stated;
  };
  const turnClose = id(GEMMA4_TOKENS.turnClose);
  const tc = parsed(TokenizerConfigEos, files.tokenizerConfig, file('tokenizer_config.json'));
  const eosText = typeof tc?.eos_token === 'string' ? tc.eos_token : tc?.eos_token?.content;
  const eos = eosText !== undefined ? id(eosText, `eos_token ${eosText}`) : turnClose;
  return {
    bos: id(GEMMA4_TOKENS.bos),
    endOfText: id(GEMMA4_TOKENS.eos),
    turnOpen: id(GEMMA4_TOKENS.turnOpen),
    turnClose,
    eos,
    channelOpen: id(GEMMA4_TOKENS.channelOpen),
    channelClose: id(GEMMA4_TOKENS.channelClose),
    newline: id('\n', 'newline'),
    modelRole: id('model', '"model" (one token)'),
    imageOpen: media('boi_token_id', GEMMA4_TOKENS.imageOpen),
    image: media('image_token_id', GEMMA4_TOKENS.image),
    imageClose: media('eoi_token_id', GEMMA4_TOKENS.imageClose),
    video: media('video_token_id', GEMMA4_TOKENS.video),
  };
}

function header(t: Gemma4Ids) {
  return (tokens: readonly number[], at: number): TurnHeader | undefined => {
    if (tokens[at] !== t.turnOpen) return undefined;
    let j = at + 1;
    while (j < tokens.length && tokens[j] !== t.newline && tokens[j] !== t.turnOpen && j - at < 8) j++;
    return {
      role: tokens[at + 1] === t.modelRole ? 'assistant' : 'other',
      roleSpan: [at + 1, Math.min(j, tokens.length)],
      end: Math.min(j + 1, tokens.length),
    };
  };
}

export function gemma4FamilyIds(t: Gemma4Ids): FamilyIds {
  const eos = t.eos === t.endOfText ? [t.eos] : [t.eos, t.endOfText];
  return {
    eos: t.eos,
    grammar: {
      openers: [t.turnOpen],
      header: header(t),
      endOfTurn: t.turnClose,
      afterEnd: [t.newline],
      stops: eos,
      secondaryStops: [],
      stopOpensTurn: false,
    },
    media: {
      image: { begin: t.imageOpen, header: [], pad: t.image, end: t.imageClose },
      video: { begin: t.imageOpen, header: [], pad: t.video, end: t.imageClose },
      collapsible: false,
    },
    named: { ...t },
  };
}

export const gemma4Named = (ids: FamilyIds): Gemma4Ids => ids.named as unknown as Gemma4Ids;
