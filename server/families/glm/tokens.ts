// GLM-4.xV's special tokens and turn grammar, as text (docs/reference/models/glm.md#tokens).
// Ids are looked up in the model's tokenizer; config.json states the vision ones.

export const GLM_TOKENS = {
  gmask: '[gMASK]',
  sop: '<sop>',
  endOfText: '<|endoftext|>',
  system: '<|system|>',
  user: '<|user|>',
  assistant: '<|assistant|>',
  observation: '<|observation|>',
  beginOfImage: '<|begin_of_image|>',
  endOfImage: '<|end_of_image|>',
  beginOfVideo: '<|begin_of_video|>',
  endOfVideo: '<|end_of_video|>',
  image: '<|image|>',
  video: '<|video|>',
} as const;

/**
 * The role tokens that open a turn. There is no end-of-turn token: generation stops at the next
 * role token (`generation_config.json` `eos_token_id`: `<|endoftext|>`, `<|user|>`,
 * `<|observation|>`), and the template writes that same token to open the next turn.
 */
export const GLM_ROLE_TOKENS = [
  GLM_TOKENS.system,
  GLM_TOKENS.user,
  GLM_TOKENS.assistant,
  GLM_TOKENS.observation,
] as const;

/** The stop tokens a GLM chat model ends its turn with, the chat EOS first. */
export const GLM_STOPS = [GLM_TOKENS.user, GLM_TOKENS.observation, GLM_TOKENS.endOfText] as const;

/**
 * Where a rollout that appended the template's next turn after the model's own stop token holds
 * that role token twice in a row: the duplicated-end break of GLM (the stop token kept in the
 * response, then written again as the next turn's opener). Returns the index of the second one.
 */
export function duplicatedStop(ids: readonly number[], stops: ReadonlySet<number>): number | undefined {
  for (let i = 1; i < ids.length; i++) if (stops.has(ids[i]!) && ids[i] === ids[i - 1]) return i;
  return undefined;
}

/** The text the template writes for one image item (the processor then repeats `<|image|>`). */
export const IMAGE_ITEM_TEXT = `${GLM_TOKENS.beginOfImage}${GLM_TOKENS.image}${GLM_TOKENS.endOfImage}`;
/** The text the template writes for one video item. */
export const VIDEO_ITEM_TEXT = `${GLM_TOKENS.beginOfVideo}${GLM_TOKENS.video}${GLM_TOKENS.endOfVideo}`;

/**
 * A video's placeholder as each stack writes it: `<|begin_of_video|>`, then per temporal patch
 * `<|begin_of_image|>` + `perFrame` pads + `<|end_of_image|>` + the frame's whole second, then
 * `<|end_of_video|>`. transformers (`Glm4vProcessor.replace_frame_token_id`) repeats `<|image|>`;
 * vLLM (`Glm4vProcessingInfo._construct_video_placeholder`) writes `<|video|>` there instead, so the
 * two token streams of one video differ in every pad (docs/reference/models/glm.md#video).
 */
export function videoPlaceholder(seconds: readonly number[], perFrame: number, stack: 'transformers' | 'vllm'): string {
  const pad = stack === 'vllm' ? GLM_TOKENS.video : GLM_TOKENS.image;
  const frames = seconds.map(
    (t) => `${GLM_TOKENS.beginOfImage}${pad.repeat(perFrame)}${GLM_TOKENS.endOfImage}${Math.trunc(t)}`,
  );
  return `${GLM_TOKENS.beginOfVideo}${frames.join('')}${GLM_TOKENS.endOfVideo}`;
}
