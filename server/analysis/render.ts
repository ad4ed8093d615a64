// Rendering conversations to token ids the way a serving stack does: chat template ->
// tokenizer -> each media placeholder the template wrote expanded to the item's run by the model's
// family (docs/reference/chat-templates.md, image-math.md).
import { FORMAT_RENDER_SEMANTICS, type Message, type RenderSemantics, type Trajectory } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import type { MediaOffsets, MediaRuns } from '../families/family.ts';
import { inStep, inStepAsync } from './analysis-failed.ts';
import {
  normalizeChatLikeSglang,
  normalizeChatLikeVllm,
  normalizeToolsLikeVllm,
  type NormalizeOptions,
} from './chat-request.ts';

export type { NormalizeOptions, RequestRejection } from './chat-request.ts';

export type { RenderSemantics } from '../model/trajectory.ts';

export interface RenderOptions {
  addGenerationPrompt?: boolean;
  tools?: unknown[];
  addVisionId?: boolean;
  /** Default `transformers`. */
  as?: RenderSemantics;
  /** Told what the server of `as` would refuse in the request (it is rendered as written). */
  onRejected?: NormalizeOptions['onRejected'];
  /**
   * More template variables: a request's `chat_template_kwargs` (`enable_thinking`, …) and vLLM's
   * `documents`, as the engine passes them to the template; they override `add_vision_id`.
   */
  templateArgs?: Readonly<Record<string, unknown>>;
}

/**
 * The semantics of the server that rendered a trajectory's prompts: the record's own
 * (`renderedWith`), else its format's (FORMAT_RENDER_SEMANTICS: vLLM's for vLLM call logs and
 * Agent Lightning, SGLang's for SGLang's OpenAI-compatible logs, transformers' for the trainers).
 */
export function renderSemanticsFor(traj: Pick<Trajectory, 'source' | 'renderedWith'>): RenderSemantics {
  return traj.renderedWith ?? FORMAT_RENDER_SEMANTICS[traj.source.format];
}

/**
 * The messages of a chat request as vLLM's chat endpoint hands them to the chat template
 * (chat-request.ts `normalizeChatLikeVllm`): `content: null` an empty parts list, string content a
 * one-part list, image parts `{"type": "image"}`, text-only tool results one string, string
 * tool-call arguments decoded (`{}` when they are not a JSON object), an empty `tool_calls` dropped,
 * `reasoning_content` passed as `reasoning` and `reasoning_content`, keys vLLM does not pass on
 * left out. Give `contentFormat: profile.template.contentFormat` for a template that takes string
 * content. What vLLM would refuse is kept as written and reported to `onRejected`. The input is not
 * modified.
 */
export function normalizeMessagesLikeVllm(messages: readonly Message[], opts: NormalizeOptions = {}): Message[] {
  return normalizeChatLikeVllm(messages, opts) as Message[];
}

/** Messages and tools as the server of `as` hands them to `profile`'s template. */
export function requestForTemplate(
  profile: ModelProfile,
  messages: readonly unknown[],
  tools: readonly unknown[] | undefined,
  as: RenderSemantics,
  onRejected?: NormalizeOptions['onRejected'],
): { messages: unknown[]; tools?: unknown[] } {
  const opts: NormalizeOptions = { contentFormat: profile.template.contentFormat, onRejected };
  switch (as) {
    case 'transformers':
      return { messages: [...messages], ...(tools ? { tools: [...tools] } : {}) };
    case 'vllm':
      return {
        messages: normalizeChatLikeVllm(messages, opts),
        ...(tools ? { tools: normalizeToolsLikeVllm(tools, opts) } : {}),
      };
    case 'sglang':
      return { messages: normalizeChatLikeSglang(messages, opts), ...(tools ? { tools: [...tools] } : {}) };
  }
}

/** The chat template's text for `messages`; a template error is raised as the `render` step's. */
export function renderText(profile: ModelProfile, messages: readonly Message[], opts: RenderOptions = {}): string {
  return inStep('render', () => {
    const request = requestForTemplate(profile, messages, opts.tools, opts.as ?? 'transformers', opts.onRejected);
    return profile.template.render({
      messages: request.messages,
      ...(request.tools && request.tools.length > 0 ? { tools: request.tools } : {}),
      add_vision_id: opts.addVisionId ?? false,
      ...opts.templateArgs,
      add_generation_prompt: opts.addGenerationPrompt ?? false,
    });
  });
}

export interface RenderedTokens {
  text: string;
  /** As tokenized, one placeholder per media item. */
  ids: number[];
  /** With each item's run expanded (items counted from `first`). */
  expanded: number[];
  imageCount: number;
}

/** Media runs from images' pad counts alone (no video). */
export function padCountExpansions(counts: readonly (number | undefined)[]): MediaRuns {
  return { images: counts.map((n) => (n === undefined ? undefined : { pads: n })), videos: [] };
}

/** `text` tokenized, each media placeholder expanded by the model's family to the item's run. */
export async function tokenizeExpanded(
  profile: ModelProfile,
  text: string,
  media: MediaRuns,
  first: Partial<MediaOffsets> = {},
): Promise<RenderedTokens> {
  const ids = await inStepAsync('tokenize', () => profile.tokenizer.encode(text));
  const from = { images: first.images ?? 0, videos: first.videos ?? 0 };
  const family = profile.modelFamily;
  const imageCount = family.countPlaceholders(ids, profile.ids).images;
  const expanded = await inStepAsync('tokenize', async () =>
    family.expandMedia({ text, ids }, media, from, profile.ids, profile.tokenizer),
  );
  return { text, ids, expanded, imageCount };
}

export async function renderTokens(
  profile: ModelProfile,
  messages: readonly Message[],
  opts: RenderOptions,
  media: MediaRuns,
  first: Partial<MediaOffsets> = {},
): Promise<RenderedTokens> {
  return tokenizeExpanded(profile, renderText(profile, messages, opts), media, first);
}

const SENTINEL = '\u0000rollscope-assistant-content\u0000';

/**
 * The text a template adds after an assistant turn when the conversation continues with
 * `observation` messages, split into the turn's own closing (end of turn and newline for Qwen) and the
 * rendered observation with the next generation prompt. Computed from the real template by
 * rendering with a sentinel as the assistant content, so the history's other turns render
 * exactly as they would (image numbering, system prompt injection) without touching the
 * generated text. What a template writes before the content of the turn may depend on what
 * follows it (Qwen3 opens an empty think block in a conversation's last assistant turn only;
 * docs/reference/chat-templates.md#qwen3-text-and-qwen3-2507): the turn's closing and the history
 * before it must render alike. Returns undefined when the template rewrites history (the longer
 * render does not extend the history, or closes the turn otherwise).
 */
export function observationSuffixText(
  profile: ModelProfile,
  history: readonly Message[],
  observation: readonly Message[],
  opts: RenderOptions = {},
): { close: string; delta: string } | undefined {
  const assistant: Message = { role: 'assistant', content: SENTINEL };
  const head = history.length > 0 ? renderText(profile, history, { ...opts, addGenerationPrompt: false }) : '';
  const closed = renderText(profile, [...history, assistant], { ...opts, addGenerationPrompt: false });
  const continued = renderText(profile, [...history, assistant, ...observation], {
    ...opts,
    addGenerationPrompt: true,
  });
  const at = closed.lastIndexOf(SENTINEL);
  const atContinued = continued.lastIndexOf(SENTINEL);
  if (at < 0 || atContinued < 0 || !closed.startsWith(head) || !continued.startsWith(head)) return undefined;
  const close = closed.slice(at + SENTINEL.length);
  const after = continued.slice(atContinued + SENTINEL.length);
  if (!after.startsWith(close)) return undefined;
  return { close, delta: after.slice(close.length) };
}

/**
 * The token ids that close an assistant turn, as the template writes them (Qwen: the end of turn
 * and a newline); the family's grammar (end of turn, then what follows it) when the template
 * renders no clean close.
 */
const closeIdsByProfile = new WeakMap<ModelProfile, Promise<number[]>>();
export function turnCloseIds(profile: ModelProfile): Promise<number[]> {
  let ids = closeIdsByProfile.get(profile);
  if (!ids) {
    const parts = observationSuffixText(profile, [{ role: 'user', content: 'q' }], []);
    const { endOfTurn, afterEnd } = profile.ids.grammar;
    ids =
      parts !== undefined
        ? profile.tokenizer.encode(parts.close)
        : Promise.resolve([...(endOfTurn !== undefined ? [endOfTurn] : []), ...afterEnd]);
    closeIdsByProfile.set(profile, ids);
  }
  return ids;
}

/**
 * The ids that end a generation the way the model stops (the family's grammar): the chat EOS
 * first, then the secondary EOS of the generation config (Qwen's end of text), which vLLM also
 * stops at.
 */
export function turnStopIds(profile: Pick<ModelProfile, 'ids'>): number[] {
  return [...profile.ids.grammar.stops];
}

/**
 * EOS-aware boundary: what must follow generated ids before the next turn's text. A generation
 * that ended with a stop id (`stop`: the chat EOS, or `turnStopIds`) was closed by the model, so
 * the template's own close loses its leading EOS; one that did not was cut by length.
 */
export function boundaryIds(
  generated: readonly number[],
  closeIds: readonly number[],
  stop: number | readonly number[],
): number[] {
  const stops = typeof stop === 'number' ? [stop] : stop;
  const last = generated[generated.length - 1];
  const endsWithStop = last !== undefined && stops.includes(last);
  if (endsWithStop && closeIds[0] === stops[0]) return closeIds.slice(1);
  return closeIds.slice();
}
