// Rendering conversations to token ids the way a serving stack does: chat template ->
// tokenizer -> each `<|image_pad|>` expanded to the image's pad count (docs/reference/chat-templates.md, image-math.md).
import type { Message, Trajectory } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import { expandImagePads, countToken } from './vision-spans.ts';

/**
 * Whose request handling the render follows: `transformers` renders the messages as given
 * (`apply_chat_template`); `vllm` first normalizes them as vLLM's chat endpoint does.
 */
export type RenderSemantics = 'transformers' | 'vllm';

export interface RenderOptions {
  addGenerationPrompt?: boolean;
  tools?: unknown[];
  addVisionId?: boolean;
  /** Default `transformers`. */
  as?: RenderSemantics;
}

/** The semantics of the server that rendered a trajectory's prompts (vLLM's for vLLM call logs). */
export function renderSemanticsFor(traj: Pick<Trajectory, 'source'>): RenderSemantics {
  return traj.source.format === 'vllm' ? 'vllm' : 'transformers';
}

/**
 * Assistant tool calls as vLLM hands them to the template (vllm-project/vllm
 * vllm/entrypoints/chat_utils.py `_postprocess_messages`): an empty `tool_calls` list is dropped,
 * string `arguments` are decoded with json.loads (the template's `tojson` then re-serializes
 * them), a missing or empty value becomes `{}`. A call without the `function` wrapper is kept
 * as written: vLLM's request model rejects it before rendering (`ask.ts` reports that for
 * `rollscope render --as vllm`). Arguments that are not JSON are left verbatim.
 */
export function normalizeMessagesLikeVllm(messages: readonly Message[]): Message[] {
  return messages.map((m) => {
    if (m.role !== 'assistant' || !Array.isArray(m.tool_calls)) return m;
    if (m.tool_calls.length === 0) {
      const { tool_calls: _, ...rest } = m;
      return rest as Message;
    }
    const calls = m.tool_calls.map((call) => {
      if (typeof call !== 'object' || call === null) return call;
      const fn = (call as { function?: unknown }).function;
      if (typeof fn !== 'object' || fn === null) return call;
      const args = (fn as { arguments?: unknown }).arguments;
      let decoded: unknown = args;
      if (args === undefined || args === null || args === '') decoded = {};
      else if (typeof args === 'string') {
        try {
          decoded = JSON.parse(args) ?? {};
        } catch {
          return call;
        }
      }
      return decoded === args ? call : { ...call, function: { ...fn, arguments: decoded } };
    });
    return { ...m, tool_calls: calls };
  });
}

export function renderText(profile: ModelProfile, messages: readonly Message[], opts: RenderOptions = {}): string {
  return profile.template.render({
    messages: (opts.as === 'vllm' ? normalizeMessagesLikeVllm(messages) : messages) as unknown[],
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
  return {
    text,
    ids,
    expanded: expandImagePads(ids, profile.special.imagePad, padCounts, firstImage, profile.special.visionStart),
    imageCount,
  };
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

/**
 * The ids that end a generation the way the model stops: the chat EOS first, then the secondary
 * EOS of the generation config (`<|endoftext|>` for Qwen), which vLLM also stops at.
 */
export function turnStopIds(special: ModelProfile['special']): number[] {
  return [special.eos, special.endOfText];
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
