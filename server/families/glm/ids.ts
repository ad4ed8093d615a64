// GLM-4.xV's ids, looked up by their text in the model's tokenizer (docs/reference/models/glm.md#tokens);
// config.json's `image_token_id`, `video_token_id`, `image_start_token_id`, `image_end_token_id`
// win over the text's (GLM-4.5V's pads are not GLM-4.1V's).
import path from 'node:path';
import { z } from 'zod';
import type { TokenizerHandle } from '../../profiles/tokenizer.ts';
import type { FamilyIds, ModelFiles, TurnHeader } from '../family.ts';
import { GLM_TOKENS } from './tokens.ts';

export interface GlmIds {
  gmask: number;
  sop: number;
  endOfText: number;
  system: number;
  user: number;
  assistant: number;
  observation: number;
  /** The chat EOS: the first stop (`<|user|>`). */
  eos: number;
  newline: number;
  beginOfImage: number;
  endOfImage: number;
  beginOfVideo: number;
  endOfVideo: number;
  image: number;
  video: number;
}

const tokenId = z.number().int().nonnegative();
const ConfigIds = z
  .object({
    image_token_id: tokenId.optional(),
    video_token_id: tokenId.optional(),
    image_start_token_id: tokenId.optional(),
    image_end_token_id: tokenId.optional(),
    video_start_token_id: tokenId.optional(),
    video_end_token_id: tokenId.optional(),
  })
  .passthrough();

function parsed<T>(schema: z.ZodType<T>, value: unknown, file: string): T | undefined {
  if (value === undefined) return undefined;
  const r = schema.safeParse(value);
  if (!r.success)
    throw new Error(`${file}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

export function isGlmTokenizer(tok: TokenizerHandle): boolean {
  return [GLM_TOKENS.gmask, GLM_TOKENS.user, GLM_TOKENS.assistant, GLM_TOKENS.observation].every(
    (t) => tok.tokenOfText(t) !== undefined,
  );
}

export function glmTokens(tok: TokenizerHandle, files: ModelFiles, where: string, notes: string[]): GlmIds {
  const file = (name: string) => (files.dir ? path.join(files.dir, name) : `${where} ${name}`);
  const id = (text: string, what = text): number => {
    const v = tok.tokenOfText(text);
    if (v === undefined) throw new Error(`${where}: the tokenizer has no ${what} token; not a GLM tokenizer`);
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
  const user = id(GLM_TOKENS.user);
  return {
    gmask: id(GLM_TOKENS.gmask),
    sop: id(GLM_TOKENS.sop),
    endOfText: id(GLM_TOKENS.endOfText),
    system: id(GLM_TOKENS.system),
    user,
    assistant: id(GLM_TOKENS.assistant),
    observation: id(GLM_TOKENS.observation),
    eos: user,
    newline: id('\n', 'newline'),
    beginOfImage: media('image_start_token_id', GLM_TOKENS.beginOfImage),
    endOfImage: media('image_end_token_id', GLM_TOKENS.endOfImage),
    beginOfVideo: media('video_start_token_id', GLM_TOKENS.beginOfVideo),
    endOfVideo: media('video_end_token_id', GLM_TOKENS.endOfVideo),
    image: media('image_token_id', GLM_TOKENS.image),
    video: media('video_token_id', GLM_TOKENS.video),
  };
}

/** A role token, then the newline the template writes after it (not after `<|assistant|>` when a `<think>` follows at once). */
function header(t: GlmIds) {
  const roles = new Set([t.system, t.user, t.assistant, t.observation]);
  return (tokens: readonly number[], at: number): TurnHeader | undefined => {
    const id = tokens[at]!;
    if (!roles.has(id)) return undefined;
    const end = tokens[at + 1] === t.newline ? at + 2 : at + 1;
    return {
      role: id === t.assistant ? 'assistant' : 'other',
      roleSpan: [at, at + 1],
      end: Math.min(end, tokens.length),
    };
  };
}

export function glmFamilyIds(t: GlmIds): FamilyIds {
  return {
    eos: t.eos,
    grammar: {
      openers: [t.system, t.user, t.assistant, t.observation],
      header: header(t),
      endOfTurn: undefined,
      afterEnd: [],
      stops: [t.user, t.observation, t.endOfText],
      secondaryStops: [],
      stopOpensTurn: true,
    },
    media: {
      image: { begin: t.beginOfImage, header: [], pad: t.image, end: t.endOfImage },
      // A video is `<|begin_of_video|>`, then per frame an image-delimited run of `<|video|>`
      // (vLLM) or `<|image|>` (transformers) and its second; each frame's run is a span.
      video: { begin: t.beginOfImage, header: [], pad: t.video, end: t.endOfImage },
      collapsible: false,
    },
    named: { ...t },
  };
}

export const glmNamed = (ids: FamilyIds): GlmIds => ids.named as unknown as GlmIds;
