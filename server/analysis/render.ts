// Rendering conversations to token ids the way a serving stack does: chat template ->
// tokenizer -> each `<|image_pad|>` expanded to its pad count (docs/reference/chat-templates.md, image-math.md).
import type { Message } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import { expandImagePads, countToken } from './vision-spans.ts';

export interface RenderOptions {
  addGenerationPrompt?: boolean;
  tools?: unknown[];
  addVisionId?: boolean;
}

export function renderText(profile: ModelProfile, messages: readonly Message[], opts: RenderOptions = {}): string {
  return profile.template.render({
    messages: messages as unknown[],
    ...(opts.tools && opts.tools.length > 0 ? { tools: opts.tools } : {}),
    add_generation_prompt: opts.addGenerationPrompt ?? false,
    add_vision_id: opts.addVisionId ?? false,
  });
}

export interface RenderedTokens {
  text: string;
  /** As tokenized, one pad per image. */
  ids: number[];
  /** With each image's pads expanded (images counted from `firstImage`). */
  expanded: number[];
  imageCount: number;
}

export async function tokenizeExpanded(
  profile: ModelProfile,
  text: string,
  padCounts: readonly (number | undefined)[],
  firstImage = 0,
): Promise<RenderedTokens> {
  const ids = await profile.tokenizer.encode(text);
  const imageCount = countToken(ids, profile.special.imagePad);
  return { text, ids, expanded: expandImagePads(ids, profile.special.imagePad, padCounts, firstImage), imageCount };
}

export async function renderTokens(
  profile: ModelProfile,
  messages: readonly Message[],
  opts: RenderOptions,
  padCounts: readonly (number | undefined)[],
  firstImage = 0,
): Promise<RenderedTokens> {
  return tokenizeExpanded(profile, renderText(profile, messages, opts), padCounts, firstImage);
}

const SENTINEL = '\u0000rollscope-assistant-content\u0000';

/**
 * The text a template adds after an assistant turn when the conversation continues with
 * `observation` messages, split into the turn's own closing (`<|im_end|>\n` for Qwen) and the
 * rendered observation with the next generation prompt. Computed from the real template by
 * rendering with a sentinel as the assistant content, so the history's other turns render
 * exactly as they would (image numbering, system prompt injection) without touching the
 * generated text. Returns undefined when the template rewrites history (the longer render does
 * not extend the shorter one).
 */
export function observationSuffixText(
  profile: ModelProfile,
  history: readonly Message[],
  observation: readonly Message[],
  opts: RenderOptions = {},
): { close: string; delta: string } | undefined {
  const assistant: Message = { role: 'assistant', content: SENTINEL };
  const closed = renderText(profile, [...history, assistant], { ...opts, addGenerationPrompt: false });
  const continued = renderText(profile, [...history, assistant, ...observation], {
    ...opts,
    addGenerationPrompt: true,
  });
  const at = closed.lastIndexOf(SENTINEL);
  if (at < 0 || !continued.startsWith(closed)) return undefined;
  return { close: closed.slice(at + SENTINEL.length), delta: continued.slice(closed.length) };
}

/** The token ids that close an assistant turn (`<|im_end|>\n` for Qwen templates). */
const closeIdsByProfile = new WeakMap<ModelProfile, Promise<number[]>>();
export function turnCloseIds(profile: ModelProfile): Promise<number[]> {
  let ids = closeIdsByProfile.get(profile);
  if (!ids) {
    const parts = observationSuffixText(profile, [{ role: 'user', content: 'q' }], []);
    ids = profile.tokenizer.encode(parts?.close ?? '<|im_end|>\n');
    closeIdsByProfile.set(profile, ids);
  }
  return ids;
}

/** EOS-aware boundary: what must follow generated ids before the next turn's text. */
export function boundaryIds(generated: readonly number[], closeIds: readonly number[], eos: number): number[] {
  const endsWithEos = generated.length > 0 && generated[generated.length - 1] === eos;
  if (endsWithEos && closeIds[0] === eos) return closeIds.slice(1);
  return closeIds.slice();
}
