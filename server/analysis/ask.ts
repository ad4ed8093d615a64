// Ask the engine directly: render a conversation, tokenize text, decode ids, and compute an image's
// token layout, with the same answers transformers and vLLM give. Shared by the CLI commands
// (render, tokenize, decode, image-tokens) and the server's playground; no printing and no file
// reading here: callers pass the text they read and an `ImageSizer` that reads what they allow.
//
// Conversations are parsed as Python's json.loads parses them (`parsePythonJson`: floats stay
// floats, key order and big integers survive), with `--as vllm` / `--as sglang` prepared the way
// that server's chat endpoint prepares a request (chat-request.ts, the same normalization check
// uses), then the profile's template renders them as transformers' `apply_chat_template` does,
// the tokenizer encodes the text, and the model family expands each image placeholder to the
// image's run (docs/reference/image-math.md#pad-count).
import { z } from 'zod';
import { Message, type ProcessorSettings } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import { parsePythonJson, PyFloat } from '../profiles/python-literal.ts';
import type { VisionConfig } from '../model/vision.ts';
import { visionConfigFor } from './context.ts';

import { requestForTemplate, type RenderSemantics, type RequestRejection } from './render.ts';

// ---------------------------------------------------------------------------------------------
// Errors

export interface InputLocation {
  /** File name, `-` for stdin, or a label such as `--tools`. */
  source?: string;
  /** 1-based. */
  line?: number;
  /** 1-based, in characters (code points), as Python's JSONDecodeError counts. */
  column?: number;
  /** Path of the offending value, e.g. `messages[2].content[0]`. */
  field?: string;
}

/** Input rollscope cannot answer for: bad JSON, a wrong field, an unreadable image, a bad id. */
export class AskInputError extends Error {
  override name = 'AskInputError';
  constructor(
    readonly reason: string,
    readonly where: InputLocation = {},
  ) {
    const at = [
      where.source,
      where.line !== undefined
        ? `line ${where.line}${where.column !== undefined ? `, column ${where.column}` : ''}`
        : undefined,
      where.field,
    ].filter((s): s is string => s !== undefined && s !== '');
    super(at.length > 0 ? `${at.join(': ')}: ${reason}` : reason);
  }
}

function lineColumn(text: string, index: number): { line: number; column: number } {
  const before = text.slice(0, index);
  const lineStart = before.lastIndexOf('\n') + 1;
  let line = 1;
  for (let i = 0; i < lineStart; i++) if (text.charCodeAt(i) === 0x0a) line++;
  return { line, column: Array.from(before.slice(lineStart)).length + 1 };
}

/** `parsePythonJson` with its `char N` turned into a 1-based line and column. */
function parseJsonText(text: string, source: string): unknown {
  try {
    return parsePythonJson(text);
  } catch (e) {
    if (!(e instanceof SyntaxError)) throw e;
    const m = /^(.*): char (\d+)$/s.exec(e.message);
    if (!m) throw new AskInputError(`not valid JSON: ${e.message}`, { source });
    throw new AskInputError(`not valid JSON: ${m[1]}`, { source, ...lineColumn(text, Number(m[2])) });
  }
}

// ---------------------------------------------------------------------------------------------
// Conversation documents

/** A Python json value as `parsePythonJson` returns it. */
type PyValue = unknown;
type PyDict = Map<string, PyValue>;

const isDict = (v: unknown): v is PyDict => v instanceof Map;

/** Plain JavaScript view of a Python json value, for schema validation only (rendering uses the original). */
function toPlain(v: PyValue): unknown {
  if (v instanceof Map) return Object.fromEntries(Array.from(v, ([k, x]) => [k, toPlain(x)]));
  if (Array.isArray(v)) return v.map(toPlain);
  if (v instanceof PyFloat) return v.value;
  if (typeof v === 'bigint') return Number(v);
  return v;
}

/** A message as OpenAI-style clients send it; content parts may also be bare strings (vLLM accepts them). */
const ConversationMessage = Message.extend({
  content: z
    .union([z.string(), z.array(z.union([z.string(), z.record(z.string(), z.unknown())])), z.null()])
    .optional(),
  tool_calls: z.array(z.unknown()).nullish(),
});

/** `{"messages": [...], "tools"?: [...], "chat_template_kwargs"?: {...}}`; other request fields are ignored. */
export const ConversationDocument = z
  .object({
    messages: z.array(ConversationMessage),
    tools: z.array(z.record(z.string(), z.unknown())).nullish(),
    /** vLLM's request field: extra variables for the template (e.g. `add_vision_id`). */
    chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
    /** An OpenAI request's model name, used when no --model is given. */
    model: z.string().optional(),
  })
  .passthrough();
export type ConversationDocument = z.infer<typeof ConversationDocument>;

/** A conversation holding Python-json values (`Map`, `PyFloat`, `bigint`), ready to render. */
export interface Conversation {
  messages: PyValue[];
  tools?: PyValue[];
  templateKwargs?: PyDict;
  model?: string;
  /** Where it was read from, for error messages. */
  source?: string;
}

function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i > 0 ? '.' : ''}${String(p)}`)).join('');
}

function schemaError(error: z.ZodError, source: string, prefix = ''): AskInputError {
  const issue = error.issues[0];
  const field = `${prefix}${issue ? fieldPath(issue.path) : ''}`;
  const more =
    error.issues.length > 1
      ? ` (and ${error.issues.length - 1} more problem${error.issues.length > 2 ? 's' : ''})`
      : '';
  return new AskInputError(`${issue?.message ?? 'invalid'}${more}`, { source, field: field || undefined });
}

/**
 * Parse a conversation document (or a bare list of messages) from JSON text, as Python's
 * json.loads would, and check its shape. Throws AskInputError naming line/column or field.
 */
export function parseConversation(text: string, source: string): Conversation {
  const value = parseJsonText(text, source);
  const doc = Array.isArray(value) ? new Map<string, PyValue>([['messages', value]]) : value;
  const checked = ConversationDocument.safeParse(toPlain(doc));
  if (!checked.success) throw schemaError(checked.error, source);
  if (!isDict(doc)) throw new AskInputError('expected an object with "messages"', { source });
  const messages = doc.get('messages') as PyValue[];
  const tools = doc.get('tools');
  const kwargs = doc.get('chat_template_kwargs');
  return {
    messages,
    tools: Array.isArray(tools) ? tools : undefined,
    templateKwargs: isDict(kwargs) ? kwargs : undefined,
    model: checked.data.model,
    source,
  };
}

/** The tools of `--tools FILE`: a JSON list of tool definitions, or an object with a "tools" list. */
export function parseTools(text: string, source: string): PyValue[] {
  const value = parseJsonText(text, source);
  const list = isDict(value) ? value.get('tools') : value;
  const checked = z.array(z.record(z.string(), z.unknown())).safeParse(toPlain(list));
  if (!checked.success) throw schemaError(checked.error, source, isDict(value) ? 'tools' : '');
  return list as PyValue[];
}

// ---------------------------------------------------------------------------------------------
// Images

/** How a conversation's image got its size. */
export type ImageSource = { kind: 'size'; width: number; height: number } | { kind: 'url'; url: string };

export interface ImagePart {
  /** Where it is, e.g. `messages[0].content[1]`. */
  field: string;
  source?: ImageSource;
}

/**
 * Image parts in message order: what the chat templates render as an image placeholder
 * (`type == 'image'`, or an `image` / `image_url` key) and what the processor pairs with the pads
 * in order. `width`/`height` on the part give the size without reading anything; otherwise the
 * source is `image_url` (a string or `{url}`), `image`, or transformers' `url` / `path`.
 */
function findImageParts(messages: readonly PyValue[]): ImagePart[] {
  const out: ImagePart[] = [];
  messages.forEach((message, m) => {
    const content = isDict(message) ? message.get('content') : undefined;
    if (!Array.isArray(content)) return;
    content.forEach((part, p) => {
      if (!isDict(part)) return;
      if (part.get('type') !== 'image' && !part.has('image') && !part.has('image_url')) return;
      out.push({ field: `messages[${m}].content[${p}]`, source: imageSourceOf(part) });
    });
  });
  return out;
}

const positiveInt = (v: PyValue): number | undefined =>
  typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;

function imageSourceOf(part: PyDict): ImageSource | undefined {
  const width = positiveInt(part.get('width'));
  const height = positiveInt(part.get('height'));
  if (width !== undefined && height !== undefined) return { kind: 'size', width, height };
  const imageUrl = part.get('image_url');
  const candidates = [
    isDict(imageUrl) ? imageUrl.get('url') : imageUrl,
    part.get('image'),
    part.get('url'),
    part.get('path'),
  ];
  const url = candidates.find((c): c is string => typeof c === 'string' && c !== '');
  return url === undefined ? undefined : { kind: 'url', url };
}

/**
 * Reads an image's size from its reference (a data: URL or a path). The caller decides what may be
 * read (server/images/sizers.ts); a rejection's message is shown as the reason the image cannot be used.
 */
export type ImageSizer = (url: string) => Promise<{ width: number; height: number }>;

/** Without a sizer nothing is read: images need `width` and `height` on their part. */
const readNothing: ImageSizer = async () => {
  throw new Error('only width/height are accepted here (no image reader was given)');
};

// ---------------------------------------------------------------------------------------------
// Image token math

const ProcessorUsed = z.object({
  patch_size: z.number().int(),
  merge_size: z.number().int(),
  temporal_patch_size: z.number().int(),
  min_pixels: z.number().int(),
  max_pixels: z.number().int(),
});

const Grid = z.tuple([z.number().int(), z.number().int(), z.number().int()]);

const ResizeResult = z.object({
  resized_width: z.number().int(),
  resized_height: z.number().int(),
  image_grid_thw: Grid,
  pad_count: z.number().int(),
});

/** One image's answer (`image-tokens --json`, and each image of `render --json`). */
export const ImageTokensReport = z.object({
  width: z.number().int(),
  height: z.number().int(),
  ...ResizeResult.shape,
  processor: ProcessorUsed,
  /**
   * Set only when the family's pre-resize helper answers otherwise with the same settings (Qwen:
   * qwen-vl-utils' smart_resize, docs/reference/image-math.md).
   */
  qwen_vl_utils: z.union([ResizeResult, z.object({ error: z.string() })]).optional(),
});
export type ImageTokensReport = z.infer<typeof ImageTokensReport>;

function visionFor(profile: ModelProfile, processor?: ProcessorSettings): VisionConfig {
  return visionConfigFor(profile, undefined, undefined, processor);
}

/**
 * Token layout of a W×H still image under the profile's processor (min/max pixels overridable):
 * the transformers/vLLM smart_resize (variant A), plus variant B when it differs. Throws when the
 * processor would reject the image (aspect ratio over 200).
 */
export function imageTokensFor(
  profile: ModelProfile,
  size: { width: number; height: number },
  processor?: ProcessorSettings,
): ImageTokensReport {
  const vision = visionFor(profile, processor);
  const family = profile.modelFamily;
  const a = family.imageTokens(size.width, size.height, vision);
  const report: ImageTokensReport = {
    width: size.width,
    height: size.height,
    resized_width: a.resizedWidth,
    resized_height: a.resizedHeight,
    image_grid_thw: a.gridThw,
    pad_count: a.padCount,
    processor: {
      patch_size: vision.patchSize,
      merge_size: vision.mergeSize,
      temporal_patch_size: vision.temporalPatchSize,
      min_pixels: vision.minPixels,
      max_pixels: vision.maxPixels,
    },
  };
  try {
    const b = family.preResizedImageTokens?.(size.width, size.height, vision);
    if (b && (b.resizedWidth !== a.resizedWidth || b.resizedHeight !== a.resizedHeight)) {
      report.qwen_vl_utils = {
        resized_width: b.resizedWidth,
        resized_height: b.resizedHeight,
        image_grid_thw: b.gridThw,
        pad_count: b.padCount,
      };
    }
  } catch (e) {
    report.qwen_vl_utils = { error: (e as Error).message };
  }
  return report;
}

/** `640x480` / `640×480` → {width, height}; undefined when the text is not a size. */
export function parseSizeSpec(text: string): { width: number; height: number } | undefined {
  const m = /^\s*(\d+)\s*[x×X]\s*(\d+)\s*$/.exec(text);
  if (!m) return undefined;
  const width = Number(m[1]);
  const height = Number(m[2]);
  if (!(width > 0 && height > 0)) throw new AskInputError(`image size ${text}: both sides must be positive`);
  return { width, height };
}

// ---------------------------------------------------------------------------------------------
// Render

export const RenderedImage = ImageTokensReport.extend({
  field: z.string(),
  /** `width/height`, `data: URL`, or the path as written. */
  source: z.string(),
});
export type RenderedImage = z.infer<typeof RenderedImage>;

/** `render --json`. */
export const RenderResult = z.object({
  text: z.string(),
  /** The rendered text tokenized: one placeholder per image, as the template writes it. */
  token_ids: z.array(z.number().int()),
  /** What the model sees: each image's pad expanded to its pad count. */
  token_ids_expanded: z.array(z.number().int()),
  images: z.array(RenderedImage),
  /** Things the answer does not model (e.g. videos are left unexpanded). */
  notes: z.array(z.string()),
});
export type RenderResult = z.infer<typeof RenderResult>;

const SERVER_NAME: Readonly<Record<RenderSemantics, string>> = {
  transformers: 'transformers',
  vllm: 'vLLM',
  sglang: 'SGLang',
};

export interface RenderConversationOptions {
  addGenerationPrompt?: boolean;
  /** Replaces the document's tools (`--tools FILE`). */
  tools?: PyValue[];
  /** min/max pixels for this run; the profile's preprocessor defaults otherwise. */
  processor?: ProcessorSettings;
  /**
   * Whose request handling to follow (default `transformers`: the messages as given). With `vllm`
   * or `sglang` the request is first prepared as that server's chat endpoint prepares it
   * (render.ts `requestForTemplate`), and what the server would refuse is an error here, as the
   * server answers such a request with an error.
   */
  as?: RenderSemantics;
  /** How image references become sizes (default: none; only parts with `width`/`height` are sized). */
  sizeImage?: ImageSizer;
}

/**
 * Render a conversation with the profile's chat template, tokenize it, and expand each image's
 * pad. Throws AskInputError for an image without a readable size, an image the processor rejects,
 * a template error, or a placeholder count that does not match the images (the processor would
 * fail the same way).
 */
export async function renderConversation(
  profile: ModelProfile,
  input: Conversation,
  opts: RenderConversationOptions = {},
): Promise<RenderResult> {
  const source = input.source;
  const as = opts.as ?? 'transformers';
  const rejected: RequestRejection[] = [];
  const request = requestForTemplate(profile, input.messages, opts.tools ?? input.tools, as, (r) => rejected.push(r));
  const refusal = rejected[0];
  if (refusal) {
    const more = rejected.length > 1 ? ` (and ${rejected.length - 1} more)` : '';
    throw new AskInputError(`${refusal.reason} (${SERVER_NAME[as]} rejects the request)${more}`, {
      source,
      field: refusal.field,
    });
  }
  const variables: Record<string, unknown> = {};
  for (const [k, v] of input.templateKwargs ?? []) variables[k] = v;
  let text: string;
  try {
    text = profile.template.render({
      ...variables,
      messages: request.messages,
      ...(request.tools !== undefined ? { tools: request.tools } : {}),
      add_generation_prompt: opts.addGenerationPrompt ?? false,
    });
  } catch (e) {
    throw new AskInputError(`the chat template failed: ${(e as Error).message}`, { source });
  }

  // Found in the messages as given: the normalized parts no longer say where the image is.
  const images = await sizeImages(profile, findImageParts(input.messages), opts, source);
  const tokenIds = await profile.tokenizer.encode(text);
  const placeholders = profile.modelFamily.countPlaceholders(tokenIds, profile.ids);
  const pads = placeholders.images;
  const padText = profile.tokenizer.piece(profile.ids.media.image.pad);
  if (pads !== images.length) {
    throw new AskInputError(
      `the template wrote ${pads} ${padText} placeholder${pads === 1 ? '' : 's'} but the conversation has ${images.length} image${images.length === 1 ? '' : 's'}; ` +
        `the processor pairs them in order and would fail (images in messages the template skips, or the literal text ${padText})`,
      { source },
    );
  }
  const notes: string[] = [];
  const videos = placeholders.videos;
  if (videos > 0)
    notes.push(`${videos} video placeholder${videos === 1 ? '' : 's'} left unexpanded: frame sampling is not modelled`);
  return {
    text,
    token_ids: tokenIds,
    token_ids_expanded: await profile.modelFamily.expandMedia(
      { text, ids: tokenIds },
      { images: images.map((i) => ({ pads: i.pad_count })), videos: [] },
      { images: 0, videos: 0 },
      profile.ids,
      profile.tokenizer,
    ),
    images,
    notes,
  };
}

async function sizeImages(
  profile: ModelProfile,
  parts: readonly ImagePart[],
  opts: RenderConversationOptions,
  source?: string,
): Promise<RenderedImage[]> {
  const sizer = opts.sizeImage ?? readNothing;
  // Indexed by image so the messages come out in conversation order whatever finishes first.
  const problems: string[] = [];
  const images = await Promise.all(
    parts.map(async (part, i): Promise<RenderedImage | undefined> => {
      const src = part.source;
      if (!src) {
        problems[i] =
          `${part.field}: image has no source; give image_url / image (a data: URL or a file path) or width and height`;
        return undefined;
      }
      let size: { width: number; height: number };
      let label: string;
      if (src.kind === 'size') {
        size = src;
        label = 'width/height';
      } else {
        label = src.url.startsWith('data:') ? 'data: URL' : src.url;
        try {
          size = await sizer(src.url);
        } catch (e) {
          problems[i] = `${part.field}: ${(e as Error).message}`;
          return undefined;
        }
      }
      try {
        return { field: part.field, source: label, ...imageTokensFor(profile, size, opts.processor) };
      } catch (e) {
        problems[i] = `${part.field}: ${(e as Error).message}`;
        return undefined;
      }
    }),
  );
  const listed = problems.filter((p): p is string => p !== undefined);
  if (listed.length > 0)
    throw new AskInputError(
      listed.length === 1 ? (listed[0] ?? '') : `${listed.length} images cannot be used:\n${listed.join('\n')}`,
      { source },
    );
  return images.filter((i): i is RenderedImage => i !== undefined);
}

// ---------------------------------------------------------------------------------------------
// Tokenize / decode

export const TokenInfo = z.object({
  id: z.number().int(),
  /** The token's text; bytes that are not UTF-8 on their own show as `\xNN`. */
  piece: z.string(),
  /** A special added token (a turn opener, a pad…); skipped by decode with skip_special_tokens. */
  special: z.boolean(),
});
export type TokenInfo = z.infer<typeof TokenInfo>;

/** `tokenize --json`. */
export const TokenizeResult = z.object({
  text: z.string(),
  token_ids: z.array(z.number().int()),
  tokens: z.array(TokenInfo),
});
export type TokenizeResult = z.infer<typeof TokenizeResult>;

/** `decode --json`. */
export const DecodeResult = z.object({
  token_ids: z.array(z.number().int()),
  skip_special_tokens: z.boolean(),
  text: z.string(),
  tokens: z.array(TokenInfo),
});
export type DecodeResult = z.infer<typeof DecodeResult>;

function tokenInfo(profile: ModelProfile, id: number): TokenInfo {
  return { id, piece: profile.tokenizer.piece(id), special: profile.tokenizer.isSpecial(id) };
}

/** Encode `text` exactly as the model's tokenizer does (no special tokens added, no normalisation beyond its own). */
export async function tokenizeText(profile: ModelProfile, text: string): Promise<TokenizeResult> {
  const ids = await profile.tokenizer.encode(text);
  return { text, token_ids: ids, tokens: ids.map((id) => tokenInfo(profile, id)) };
}

/** Decode ids as the tokenizer's decode does (transformers `decode(ids, skip_special_tokens=…)`). */
export async function decodeIds(
  profile: ModelProfile,
  ids: readonly number[],
  opts: { skipSpecialTokens?: boolean } = {},
): Promise<DecodeResult> {
  for (const id of ids) {
    if (!profile.tokenizer.isValid(id)) throw new AskInputError(outOfVocabulary(profile, id));
  }
  const skip = opts.skipSpecialTokens ?? false;
  return {
    token_ids: [...ids],
    skip_special_tokens: skip,
    text: await profile.tokenizer.decode(ids, skip),
    tokens: ids.map((id) => tokenInfo(profile, id)),
  };
}

function outOfVocabulary(profile: ModelProfile, id: number): string {
  return `token id ${id} is outside the ${profile.name} vocabulary (0–${profile.tokenizer.vocabSize - 1})`;
}

/**
 * Token ids from words such as `9707 11`, `9707,11` or `[9707, 11]`. Throws
 * AskInputError for anything that is not a whole number, or an id outside the vocabulary.
 */
export function parseTokenIds(words: readonly string[], profile: ModelProfile): number[] {
  const ids: number[] = [];
  for (const word of words) {
    for (const item of word.split(/[\s,[\]]+/)) {
      if (item === '') continue;
      if (!/^\d+$/.test(item)) throw new AskInputError(`"${item}" is not a token id (a whole number ≥ 0)`);
      const id = Number(item);
      if (!profile.tokenizer.isValid(id)) throw new AskInputError(outOfVocabulary(profile, id));
      ids.push(id);
    }
  }
  return ids;
}
