// The one internal trajectory model. Every importer turns its foreign records into
// `Trajectory`; nothing downstream (checks, alignment, export, server, app) knows
// which framework wrote the data.
import { z } from 'zod';
import { Finding } from './finding.ts';

export const FORMAT_NAMES = [
  'native',
  'vllm',
  'slime',
  'verl',
  'verl-dump',
  'areal',
  'areal-dump',
  'prime-rl',
  'agent-lightning',
  'export',
  'slime-train',
  'sglang',
  'sglang-openai',
] as const;
export const FormatName = z.enum(FORMAT_NAMES);
export type FormatName = z.infer<typeof FormatName>;

/**
 * Whose request handling prepared a conversation for the chat template (docs/reference/chat-templates.md):
 * `transformers` renders the messages as given (`apply_chat_template`); `vllm` and `sglang`, as that
 * server's chat endpoint prepares a request first.
 */
export const RenderSemantics = z.enum(['transformers', 'vllm', 'sglang']);
export type RenderSemantics = z.infer<typeof RenderSemantics>;

/**
 * The handling each format's prompts were rendered with: the server a call log is of (Agent
 * Lightning's agents call vLLM through its LLM proxy); the trainers render with transformers.
 */
export const FORMAT_RENDER_SEMANTICS: Readonly<Record<FormatName, RenderSemantics>> = {
  native: 'transformers',
  vllm: 'vllm',
  slime: 'transformers',
  verl: 'transformers',
  'verl-dump': 'transformers',
  areal: 'transformers',
  'areal-dump': 'transformers',
  'prime-rl': 'transformers',
  'agent-lightning': 'vllm',
  export: 'transformers',
  'slime-train': 'transformers',
  sglang: 'transformers',
  'sglang-openai': 'sglang',
};

/**
 * A token id as the data states it. Any number is held, NaN included (an id of -100, a float, an
 * id past the vocabulary, a value an importer could not read as a number): type and range are a
 * check (`invalid_value` at that index), not a schema rule, so the trajectory still loads.
 */
export const TokenId = z.union([z.number(), z.nan()]);
export const TokenIds = z.array(TokenId);
/**
 * Logprobs may legitimately be any finite number <= 0; NaN, infinite and positive values, and
 * `null` (a value the data left out), are findings, not schema errors.
 */
export const Logprob = z.union([
  z.number(),
  z.nan(),
  z.null(),
  z.custom<number>((v) => v === Infinity || v === -Infinity, 'an infinite number'),
]);
export const Logprobs = z.array(Logprob);
/** A reward as written: NaN and ±Infinity (json.dumps of a float reward that failed) load, and are an `invalid_value` finding. */
export const Reward = z.union([
  z.number(),
  z.nan(),
  z.custom<number>((v) => v === Infinity || v === -Infinity, 'an infinite number'),
]);
/** Loss-mask values as stored: 0/1 are valid; any other number (NaN for an unreadable entry) is an `invalid_value` finding. */
export const MaskValue = z.union([z.number(), z.nan()]);

export const Source = z.object({
  file: z.string(),
  /** 1-based line of the trajectory's first record (1 for whole-file JSON). */
  line: z.number().int().positive(),
  format: FormatName,
  /** Further 1-based lines that contributed (multi-record trajectories such as vLLM call logs). */
  lines: z.array(z.number().int().positive()).optional(),
});
export type Source = z.infer<typeof Source>;

/** An image as the rollout referenced it. Sizes are filled from the real bytes when they can be read. */
export const ImageRef = z.object({
  /** `data:` URL, `http(s)` URL or a path relative to the data file's folder. */
  url: z.string().optional(),
  /** Stated size (from the record) or real size (read with sharp). */
  width: z.number().int().positive().optional(),
  height: z.number().int().positive().optional(),
  /** Where the size came from: the record itself, or the decoded image header. */
  sizeFrom: z.enum(['record', 'bytes']).optional(),
  sha256: z.string().optional(),
  /** Why the image could not be read (remote and not allowed, missing file, decode error...). */
  unavailable: z.string().optional(),
  /** Processor settings stated for this image (`min_pixels`/`max_pixels` on a qwen-vl-utils image dict). */
  minPixels: z.number().int().positive().optional(),
  maxPixels: z.number().int().positive().optional(),
});
export type ImageRef = z.infer<typeof ImageRef>;

/**
 * A video as the rollout referenced it: a list of frames (images, as qwen-vl-utils, verl and slime
 * take pre-sampled videos), or a video file / `data:` URL rollscope does not decode (its frame
 * size and count then come from the record). The frame size is filled from the first frame's bytes.
 */
export const VideoRef = z.object({
  frames: z.array(ImageRef).optional(),
  url: z.string().optional(),
  /** Frame size in px (every frame of a video has one). */
  width: z.number().int().positive().optional(),
  height: z.number().int().positive().optional(),
  /** Frames the processor received (the frames list's length when there is one). */
  frameCount: z.number().int().positive().optional(),
  /** Frames per second the frames were sampled at: what the processor was told (`fps`). */
  fps: z.number().positive().optional(),
  /** Seconds of each frame in its source video, when the record states them. */
  timestamps: z.array(z.number().nonnegative()).optional(),
  /** Why the video's size or frames could not be read. */
  unavailable: z.string().optional(),
});
export type VideoRef = z.infer<typeof VideoRef>;

/**
 * OpenAI-style chat message; content parts are kept as written so the chat template sees what the
 * framework saw. A part may be a bare string (vLLM reads it as a text part).
 */
export const ContentPart = z.record(z.string(), z.unknown());
export const Message = z
  .object({
    role: z.string(),
    content: z.union([z.string(), z.array(z.union([z.string(), ContentPart])), z.null()]).optional(),
    tool_calls: z.array(z.unknown()).optional(),
  })
  .passthrough();
export type Message = z.infer<typeof Message>;

export const PlaceholderRange = z.object({
  offset: z.number().int().nonnegative(),
  length: z.number().int().nonnegative(),
});
export type PlaceholderRange = z.infer<typeof PlaceholderRange>;

export const GridThw = z.tuple([z.number().int().positive(), z.number().int().positive(), z.number().int().positive()]);
export type GridThw = z.infer<typeof GridThw>;

export const ProcessorSettings = z.object({
  minPixels: z.number().int().positive().optional(),
  maxPixels: z.number().int().positive().optional(),
});
export type ProcessorSettings = z.infer<typeof ProcessorSettings>;

export const Turn = z.object({
  /** The whole conversation that produced this turn's prompt, as the client sent it. */
  messages: z.array(Message).optional(),
  /** Prompt token ids the engine really saw (image pads expanded). */
  promptIds: TokenIds.optional(),
  /** Placeholder ranges the engine declared for `promptIds` (vLLM render `features.mm_placeholders`). */
  placeholders: z.array(PlaceholderRange).optional(),
  generatedIds: TokenIds.optional(),
  generatedLogprobs: Logprobs.optional(),
  /** The assistant text as the framework kept it (may differ from decode(generatedIds)). */
  generatedText: z.string().optional(),
  finishReason: z.string().optional(),
  /** What followed the generation, as token ids (from a stored sample) and/or as messages. */
  observationIds: TokenIds.optional(),
  observationMessages: z.array(Message).optional(),
  /** Processor settings this call used (vLLM `mm_processor_kwargs`). */
  processor: ProcessorSettings.optional(),
  /** Tool definitions the request carried (they change what the chat template renders). */
  tools: z.array(z.unknown()).optional(),
  /** Prompt length the engine reported (vLLM `usage.prompt_tokens`, SGLang `meta_info.prompt_tokens`). */
  statedPromptTokens: z.number().int().nonnegative().optional(),
});
export type Turn = z.infer<typeof Turn>;

/**
 * Processor outputs a record carries instead of images (AReaL's `multi_modal_input[].pixel_values`):
 * the patches of every image in order, `[Σ t·h·w, channels·temporal_patch·patch²]`, as little-endian
 * float32 bytes in base64. Carried through to export as they are; rollscope does not interpret them.
 */
export const PixelValues = z.object({
  dtype: z.literal('float32'),
  shape: z.tuple([z.number().int().nonnegative(), z.number().int().positive()]),
  data: z.string(),
});
export type PixelValues = z.infer<typeof PixelValues>;

/** The training sample as the framework stored it, normalised to slime's layout (prompt ⧺ response). */
export const TrainingSample = z.object({
  tokens: TokenIds,
  /** Number of trailing response tokens; the rest is the prompt. */
  responseLength: z.number().int().nonnegative().optional(),
  /** Per response token (slime/verl) or per token (AReaL, prime-rl): see `maskScope`. */
  lossMask: z.array(MaskValue).optional(),
  logprobs: Logprobs.optional(),
  /**
   * The trainer's side, indexed like `logprobs`: its recomputed logprobs of the same tokens
   * (slime `log_probs`, verl `old_log_probs`), the reference model's, and per-token advantages.
   */
  trainerLogprobs: Logprobs.optional(),
  refLogprobs: Logprobs.optional(),
  advantages: z.array(z.number()).optional(),
  /** Whether `lossMask`/`logprobs` cover only the response tail or the whole `tokens`. */
  maskScope: z.enum(['response', 'full']).default('response'),
  imageGridThw: z.array(GridThw).optional(),
  /** `video_grid_thw` as the trainer's processor stored it, one row per video. */
  videoGridThw: z.array(GridThw).optional(),
  placeholderRanges: z.array(PlaceholderRange).optional(),
  mmTokenTypeIds: z.array(z.number().int()).optional(),
  /** position_ids as the batch stored them: 3 mRoPE rows, or verl's 4 (text, t, h, w), each of len(tokens). */
  positionIds: z.array(z.array(z.number().int())).optional(),
  /** True when the framework built `tokens` by re-rendering decoded text rather than keeping generated ids. */
  builtFromRerender: z.boolean().optional(),
  /** Processor outputs stated instead of images (see PixelValues). */
  pixelValues: PixelValues.optional(),
});
export type TrainingSample = z.infer<typeof TrainingSample>;

export const Trajectory = z.object({
  id: z.string(),
  source: Source,
  /** Model name as the data states it (used to infer the profile). */
  model: z.string().optional(),
  turns: z.array(Turn),
  /** All images in order of appearance in the token stream. */
  images: z.array(ImageRef).default([]),
  /** All videos in order of appearance in the token stream (absent: none). */
  videos: z.array(VideoRef).optional(),
  sample: TrainingSample.optional(),
  reward: Reward.nullable().optional(),
  status: z.string().optional(),
  /** GRPO group (samples that share one prompt). */
  group: z.string().optional(),
  /** Rollout step (policy version) the sample was generated at: slime `rollout_id`, `step_<n>/` folders, AReaL versions. */
  step: z.number().int().nonnegative().optional(),
  /** The sample's advantage where the trainer stored one (per-token advantages: the first trained token's). */
  advantage: z.number().optional(),
  /** Processor settings the record states for the whole trajectory. */
  processor: ProcessorSettings.optional(),
  /**
   * Whose request handling rendered the prompts, when it is not the format's
   * (FORMAT_RENDER_SEMANTICS): a vLLM log written as native JSONL keeps vLLM's.
   */
  renderedWith: RenderSemantics.optional(),
  /** What this format cannot tell (e.g. text-only dumps with special tokens stripped). */
  limitations: z.array(z.string()).default([]),
  /** Small free-form metadata worth showing (step, task id, ...). */
  meta: z.record(z.string(), z.unknown()).optional(),
  /** What the importer saw while reading and grouping (an ambiguous chain, a split merge): reported with the checks' findings. */
  sourceFindings: z.array(Finding).optional(),
});
export type Trajectory = z.infer<typeof Trajectory>;
export type TrajectoryInput = z.input<typeof Trajectory>;

/** A record that could not be read: names the file, the 1-based line and the field. */
export const ReadError = z.object({
  file: z.string(),
  line: z.number().int().nonnegative(),
  field: z.string().optional(),
  message: z.string(),
});
export type ReadError = z.infer<typeof ReadError>;
