// Prompt ids without tokenizing a history twice. A chat request is rendered with the profile's
// template as vLLM renders it (messages normalized like vLLM's chat_utils, `normalizeMessagesLikeVllm`);
// its ids reuse the previous call's up to the last turn opener both texts share and tokenize only
// what follows (the last answer and the new messages): the tokenizer splits text at added tokens
// before anything else, so the text before one tokenizes the same whatever comes after
// (docs/reference/tokens.md; the same property `TokenizerHandle.encode` caches segments by).
// Continuity builds the next prompt the canonical way instead: previous prompt ⧺ generated ids ⧺
// the EOS-aware boundary ⧺ the template's suffix for the new messages (server/analysis/realign.ts).
import type { Message } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import {
  boundaryIds,
  renderText,
  observationSuffixText,
  tokenizeExpanded,
  turnStopIds,
  type RenderSemantics,
} from '../analysis/render.ts';
import { padCountExpansions } from '../analysis/render.ts';
import type { ChatRequest } from './protocol.ts';
import { RESERVED_TEMPLATE_KWARGS } from './fields.ts';

/** The prompt text the engine's chat endpoint renders (`as`: whose request handling: the engine's), or why it cannot be predicted. */
export function renderChatPrompt(
  profile: ModelProfile,
  req: ChatRequest,
  as: RenderSemantics,
): { text: string } | { unknown: string } {
  if (req.chat_template) return { unknown: 'the request brings its own chat_template' };
  if (req.continue_final_message) return { unknown: 'continue_final_message is not predicted' };
  const kwargs = req.chat_template_kwargs ?? {};
  const reserved = RESERVED_TEMPLATE_KWARGS.find((k) => k in kwargs);
  if (reserved) return { unknown: `chat_template_kwargs.${reserved} names a template argument the engine sets` };
  const documents = as === 'vllm' && Array.isArray(req.documents) ? { documents: req.documents } : {};
  try {
    return {
      text: renderText(profile, req.messages, {
        as,
        addGenerationPrompt: req.add_generation_prompt ?? true,
        ...(req.tools && req.tools.length > 0 ? { tools: req.tools } : {}),
        templateArgs: { ...kwargs, ...documents },
      }),
    };
  } catch (e) {
    return { unknown: `the template refuses the messages: ${(e as Error).message}` };
  }
}

export interface TextTokens {
  text: string;
  /** As tokenized: one pad per image. */
  ids: number[];
}

/** Index of the n-th (0-based) `id` in `ids`, or -1. */
function nthIndex(ids: readonly number[], id: number, n: number): number {
  let seen = 0;
  for (let i = 0; i < ids.length; i++) if (ids[i] === id && seen++ === n) return i;
  return -1;
}

/**
 * `text`'s ids, reusing `prev`'s up to the last turn opener inside the prefix both texts share.
 * `tokenizedChars` is how much was tokenized now (the tests check it stays the new part). With
 * `maxTokens`, a text whose ids would pass it is not tokenized past the point that shows it
 * (`ids` undefined): a prompt the engine refuses costs the gateway no more than the limit.
 */
export async function tokenizeExtending(
  profile: ModelProfile,
  prev: TextTokens | undefined,
  text: string,
  maxTokens?: number,
): Promise<{ text: string; ids: number[] | undefined; tokenizedChars: number }> {
  let cut = 0;
  let reuse = 0;
  if (prev) {
    const n = Math.min(prev.text.length, text.length);
    let common = 0;
    while (common < n && prev.text.charCodeAt(common) === text.charCodeAt(common)) common++;
    // The opener (the family's turn token, an added token) nearest before the end of the shared text.
    let anchor = -1;
    let opener = -1;
    let openerText = '';
    for (const id of profile.ids.grammar.openers) {
      const text = profile.tokenizer.piece(id);
      const at = prev.text.lastIndexOf(text, common);
      if (at > anchor) [anchor, opener, openerText] = [at, id, text];
    }
    if (anchor > 0) {
      let before = 0;
      for (let at = prev.text.indexOf(openerText); at >= 0 && at < anchor; at = prev.text.indexOf(openerText, at + 1))
        before++;
      const idAt = nthIndex(prev.ids, opener, before);
      if (idAt >= 0) {
        cut = anchor;
        reuse = idAt;
      }
    }
  }
  const reused = prev && reuse > 0 ? reuse : 0;
  const tail =
    maxTokens === undefined
      ? await profile.tokenizer.encode(text.slice(cut))
      : maxTokens < reused
        ? undefined
        : await profile.tokenizer.encodeUpTo(text.slice(cut), maxTokens - reused);
  if (!tail) return { text, ids: undefined, tokenizedChars: text.length - cut };
  const ids = reused > 0 ? [...prev!.ids.slice(0, reused), ...tail] : tail;
  return { text, ids, tokenizedChars: text.length - cut };
}

/** Ids with each image's placeholder expanded by the model's family; undefined when an image's count is unknown. */
export async function expandPads(
  profile: ModelProfile,
  tokens: TextTokens,
  padCounts: readonly (number | undefined)[],
): Promise<number[] | undefined> {
  if (padCounts.some((n) => n === undefined)) return undefined;
  return profile.modelFamily.expandMedia(
    tokens,
    padCountExpansions(padCounts),
    { images: 0, videos: 0 },
    profile.ids,
    profile.tokenizer,
  );
}

export interface Continuation {
  ids: number[];
  /** The boundary and the rendered new messages, as ids. */
  suffixIds: number[];
  /** Characters tokenized for it (the new messages' text, nothing of the history). */
  suffixChars: number;
}

export interface ContinuationInput {
  last: { promptIds: readonly number[]; generatedIds: readonly number[] };
  /** The previous request's messages. */
  history: readonly Message[];
  /** The messages after the previous answer. */
  observation: readonly Message[];
  tools: unknown[] | undefined;
  /** `chat_template_kwargs` (and vLLM's `documents`) as the engine passes them to the template. */
  templateArgs: Readonly<Record<string, unknown>>;
  closeIds: readonly number[];
  /** Every image of the conversation, in order. */
  padCounts: readonly (number | undefined)[];
  /** Images in the history and the previous answer. */
  imagesBefore: number;
  as: RenderSemantics;
}

/**
 * The canonical next prompt: `promptIds ⧺ generatedIds ⧺ boundary ⧺ suffix(observation)`, the
 * suffix rendered after the real `history` (the previous request's messages) with the request's
 * template arguments and tokenized alone. Why not, when the template rewrites the history (its
 * longer render does not extend the shorter) or refuses it, or an image's size is unknown.
 */
export async function continuationIds(
  profile: ModelProfile,
  input: ContinuationInput,
): Promise<Continuation | { unknown: string; reason: 'template' | 'image_size' }> {
  let parts: ReturnType<typeof observationSuffixText>;
  try {
    parts = observationSuffixText(profile, input.history, input.observation, {
      tools: input.tools,
      as: input.as,
      templateArgs: input.templateArgs,
    });
  } catch (e) {
    return { unknown: `the profile's template refuses the conversation (${(e as Error).message})`, reason: 'template' };
  }
  if (!parts)
    return {
      unknown: 'the template rewrites the history, so the conversation has no canonical suffix',
      reason: 'template',
    };
  const { last, padCounts, imagesBefore } = input;
  const boundary = boundaryIds(last.generatedIds, input.closeIds, turnStopIds(profile));
  const rendered = await tokenizeExpanded(profile, parts.delta, padCountExpansions(padCounts), {
    images: imagesBefore,
  });
  if (padCounts.slice(imagesBefore).some((n) => n === undefined) && rendered.imageCount > 0)
    return { unknown: "an image's size is unknown, so its pad run cannot be built", reason: 'image_size' };
  const suffixIds = [...boundary, ...rendered.expanded];
  return { ids: [...last.promptIds, ...last.generatedIds, ...suffixIds], suffixIds, suffixChars: parts.delta.length };
}
