// Shared by the trainer-sample importers (slime/vime, verl agent loop, AReaL): a stored training
// sample is one token stream prompt ⧺ response plus a loss mask, and its turns are the mask's
// runs. 1 = tokens the model sampled, 0 = tokens the framework appended (tool results, user
// follow-ups, the template's turn headers): slime `Sample.append_response_tokens(..., trainable)`
// (THUDM/slime: slime/utils/types.py), verl's tool agent loop appends tool responses with mask 0
// (volcengine/verl: verl/experimental/agent_loop/tool_agent_loop.py), AReaL's `concat` export
// zero-fills the gap between a parent interaction and its child (inclusionAI/AReaL:
// areal/experimental/openai/types.py). Also here: the pieces those records share (image entries,
// image_grid_thw lists, ids), so the three importers read them the same way.
import path from 'node:path';
import { z } from 'zod';
import { GridThw, type ImageRef, type TrajectoryInput, type VideoRef } from '../model/trajectory.ts';
import { isObject } from './importer.ts';
import { uniqueIds } from '../model/trajectory-key.ts';

export type TurnInput = TrajectoryInput['turns'][number];

export interface MaskedStream {
  /** prompt ⧺ response token ids. */
  tokens: readonly number[];
  /** `response`: `mask`/`logprobs` cover the last `responseLength` tokens (slime, verl); `full`: every token (AReaL). */
  scope: 'response' | 'full';
  responseLength?: number;
  /** Loss mask in `scope`; absent = every response token is generated (slime's default when `loss_mask` is None). */
  mask?: readonly number[];
  logprobs?: readonly (number | null)[];
}

/**
 * Turns from the mask's runs. Everything before a turn's first generated token is its prompt
 * (turn 0's prompt is the stored prompt plus any leading unmasked response tokens); each run of
 * 1s is a turn's `generatedIds` (with the logprobs at the same positions); the run of 0s that
 * follows is that turn's `observationIds`.
 *
 * A mask shorter than its scope (a fault the checks report as `length_mismatch`) is read as if
 * its last value went on to the end, so the turns still cover every token; entries past the end
 * of the tokens are ignored. The stored sample keeps the mask as written.
 */
export function turnsFromMask(s: MaskedStream): TurnInput[] {
  const n = s.tokens.length;
  const offset = s.scope === 'full' ? 0 : Math.max(0, n - Math.min(n, s.responseLength ?? 0));
  const fallback = s.mask && s.mask.length > 0 ? s.mask[s.mask.length - 1]! : 1;
  const masked = (i: number): boolean => (s.mask![i - offset] ?? fallback) !== 0;
  let firstTrained = offset;
  if (s.mask) while (firstTrained < n && !masked(firstTrained)) firstTrained++;
  // Frameworks write logprob 0.0 for the tokens they append (observations, turn closes): a token
  // after the first trained one whose mask is 0 but whose logprob is the sampler's (finite, not
  // 0) was generated, and its 0 is a mask fault (a generated end of turn left out of training).
  // The checks report the stored mask against the canonical one, which trains it.
  const sampled = (i: number): boolean => {
    const lp = s.logprobs?.[i - offset];
    return typeof lp === 'number' && Number.isFinite(lp) && lp !== 0;
  };
  const generated = (i: number): boolean => {
    if (i < offset) return false;
    if (!s.mask) return true;
    return masked(i) || (i > firstTrained && sampled(i));
  };
  const turns: TurnInput[] = [];
  let i = offset;
  while (i < n && !generated(i)) i++;
  if (i >= n) return [{ promptIds: s.tokens.slice(), generatedIds: [] }];
  while (i < n) {
    const start = i;
    while (i < n && generated(i)) i++;
    const end = i;
    while (i < n && !generated(i)) i++;
    const turn: TurnInput = { promptIds: s.tokens.slice(0, start), generatedIds: s.tokens.slice(start, end) };
    if (s.logprobs) turn.generatedLogprobs = s.logprobs.slice(start - offset, end - offset);
    if (i > end) turn.observationIds = s.tokens.slice(end, i);
    turns.push(turn);
  }
  return turns;
}

// ---------------------------------------------------------------------------------------------
// Fields the trainer formats share.

// Per-token values are read leniently: a record with one bad value must still load, so the checks
// can report `invalid_value` at its index (server/analysis/checks.ts checkValues). Only the shape
// (a list) is a schema rule; each entry is kept as the number it is, or NaN when it is none.

/** Every entry a number already (the common case: no copy). */
function allNumbers(values: readonly unknown[]): values is number[] {
  for (let i = 0; i < values.length; i++) if (typeof values[i] !== 'number') return false;
  return true;
}

/** Token ids as written; any number is kept (-100, floats, ids past the vocabulary), anything else is NaN. */
export const TokenIdValues = z
  .array(z.unknown(), { error: 'expected a list of token ids' })
  // An id of ±Infinity (Python's json reads 1e999 so) is held as NaN: the model's ids are numbers or NaN.
  .transform((ids): number[] =>
    allNumbers(ids) && ids.every(Number.isFinite)
      ? ids
      : ids.map((v) => (typeof v === 'number' && Number.isFinite(v) ? v : NaN)),
  );

/** Python's spellings of the non-finite floats, as `str(float)` and numpy/torch write them. */
const NON_FINITE: Record<string, number> = { nan: NaN, inf: Infinity, infinity: Infinity };

function logprobValue(v: unknown): number | null {
  if (typeof v === 'number' || v === null) return v;
  if (typeof v === 'string') {
    const m = /^\s*([+-]?)(nan|inf|infinity)\s*$/i.exec(v);
    if (m) return m[1] === '-' ? -NON_FINITE[m[2]!.toLowerCase()]! : NON_FINITE[m[2]!.toLowerCase()]!;
  }
  return NaN;
}

/** Logprobs as written: numbers (NaN/infinite/positive included), null kept as null, `"NaN"`/`"-inf"` strings read as the float they name, anything else NaN. */
export const LogprobValues = z
  .array(z.unknown(), { error: 'expected a list of logprobs' })
  .transform((lps): (number | null)[] => (allNumbers(lps) ? lps : lps.map(logprobValue)));

/** Loss masks are written as ints, floats or booleans (prime-rl/msgspec and some converters write bools); anything else is NaN. */
export const MaskValues = z
  .array(z.unknown(), { error: 'expected a list of loss mask values' })
  .transform((m): number[] =>
    allNumbers(m) ? m : m.map((v) => (v === true ? 1 : v === false ? 0 : typeof v === 'number' ? v : NaN)),
  );

/** `image_grid_thw` as nested lists, `[n_images, 3]`; a single `[t, h, w]` is taken as one image. */
export const GridList = z.union([z.array(GridThw), GridThw.transform((g) => [g])], {
  error: 'expected image_grid_thw as [[t, h, w], ...] with positive integers',
});

const GridFields = z.object({ image_grid_thw: GridList.nullish(), video_grid_thw: GridList.nullish() }).passthrough();

/** Processor outputs: one dict, or one per turn (concatenated in order). Only the grids are read. */
export const ProcessorOutputs = z.union([GridFields, z.array(GridFields)], {
  error:
    'expected processor outputs {"image_grid_thw": [[t, h, w], ...]} or a list of them, image_grid_thw rows being 3 positive integers',
});

/** The grids of processor outputs stated as one dict or a list of them (`video_grid_thw` for `which: 'video'`). */
export function gridsOf(
  outputs: z.infer<typeof ProcessorOutputs> | null | undefined,
  which: 'image' | 'video' = 'image',
): GridThw[] | undefined {
  const list = outputs ? (Array.isArray(outputs) ? outputs : [outputs]) : [];
  const grids = list.flatMap((o) => (which === 'image' ? o.image_grid_thw : o.video_grid_thw) ?? []);
  return grids.length > 0 ? grids : undefined;
}

// Hugging Face datasets' Image feature writes the side it does not use as None
// (`{"bytes": ..., "path": None}`), so every key may be null.
const ImageDictInner = z.object({ bytes: z.string().nullish(), path: z.string().nullish() }).passthrough();

/**
 * One image as trainer records name it: a `data:`/`http(s)` URL or a path, or a qwen-vl-utils
 * dict `{"image": path | {bytes, path}, "min_pixels", "max_pixels"}`, or Hugging Face datasets'
 * `{"bytes": base64, "path"}` (verl: verl/utils/dataset/vision_utils.py::process_image opens
 * `bytes` when present, else hands the dict to qwen_vl_utils.fetch_image with its min/max pixels).
 */
export const ImageEntry = z.union([
  z.string().min(1),
  z
    .object({
      image: z.union([z.string().min(1), ImageDictInner]).nullish(),
      bytes: z.string().min(1).nullish(),
      path: z.string().min(1).nullish(),
      url: z.string().min(1).nullish(),
      image_url: z.union([z.string().min(1), z.object({ url: z.string().min(1) })]).nullish(),
      min_pixels: z.number().int().positive().nullish(),
      max_pixels: z.number().int().positive().nullish(),
    })
    .passthrough()
    .refine(
      (d) =>
        (d.image !== undefined && d.image !== null) ||
        !!d.bytes ||
        !!d.path ||
        !!d.url ||
        (d.image_url !== undefined && d.image_url !== null),
      {
        message: 'image entry has none of "image", "bytes", "path", "url", "image_url"',
      },
    ),
]);
export type ImageEntry = z.infer<typeof ImageEntry>;

/** MIME type from the first bytes of a base64 payload (data: URLs need one; resolve.ts reads any). */
function mimeOf(base64: string): string {
  const head = Buffer.from(base64.slice(0, 24), 'base64');
  if (head[0] === 0x89 && head[1] === 0x50 && head[2] === 0x4e && head[3] === 0x47) return 'image/png';
  if (head[0] === 0xff && head[1] === 0xd8) return 'image/jpeg';
  if (head.subarray(0, 3).toString('latin1') === 'GIF') return 'image/gif';
  if (head.subarray(0, 4).toString('latin1') === 'RIFF' && head.subarray(8, 12).toString('latin1') === 'WEBP')
    return 'image/webp';
  return 'application/octet-stream';
}

/** A base64 payload (or a data: URL already) as a data: URL. */
export function bytesUrl(bytes: string): string {
  return bytes.startsWith('data:') ? bytes : `data:${mimeOf(bytes)};base64,${bytes}`;
}

export function imageRefOf(entry: ImageEntry): ImageRef {
  if (typeof entry === 'string') return { url: entry };
  const ref: ImageRef = {};
  const inner = entry.image;
  if (typeof inner === 'string') ref.url = inner;
  else if (inner?.bytes) ref.url = bytesUrl(inner.bytes);
  else if (inner?.path) ref.url = inner.path;
  else if (entry.bytes) ref.url = bytesUrl(entry.bytes);
  else if (entry.path) ref.url = entry.path;
  else if (entry.url) ref.url = entry.url;
  else if (entry.image_url) ref.url = typeof entry.image_url === 'string' ? entry.image_url : entry.image_url.url;
  if (entry.min_pixels !== undefined && entry.min_pixels !== null) ref.minPixels = entry.min_pixels;
  if (entry.max_pixels !== undefined && entry.max_pixels !== null) ref.maxPixels = entry.max_pixels;
  return ref;
}

/**
 * One video as trainer records name it: a list of frames (image entries, a pre-sampled video as
 * qwen-vl-utils returns it for verl and slime), a file or URL, or a qwen-vl-utils dict
 * `{"video": frames | path, "fps", "nframes"}`.
 */
export const VideoEntry = z.union([
  z.array(ImageEntry).min(1),
  z.string().min(1),
  z
    .object({
      video: z.union([z.array(ImageEntry).min(1), z.string().min(1)]),
      fps: z.number().positive().nullish(),
      sample_fps: z.number().positive().nullish(),
      nframes: z.number().int().positive().nullish(),
      width: z.number().int().positive().nullish(),
      height: z.number().int().positive().nullish(),
    })
    .passthrough(),
]);
export type VideoEntry = z.infer<typeof VideoEntry>;

/**
 * The videos a record lists, each read as a VideoEntry; one that is none (a decoded tensor dumped
 * as it was) is a video whose frames are unavailable, saying where, and the record still loads.
 */
export function videosOf(raw: unknown, field: string): VideoRef[] {
  if (raw === undefined || raw === null) return [];
  const list = Array.isArray(raw) ? raw : [raw];
  return list.map((entry, i) => {
    const parsed = VideoEntry.safeParse(entry);
    return parsed.success
      ? videoRefOf(parsed.data)
      : { unavailable: `${field}[${i}] is not a list of frames, a path or {"video": ...}: not read` };
  });
}

export function videoRefOf(entry: VideoEntry): VideoRef {
  const body = Array.isArray(entry) || typeof entry === 'string' ? entry : entry.video;
  const ref: VideoRef =
    typeof body === 'string' ? { url: body } : { frames: body.map(imageRefOf), frameCount: body.length };
  if (!Array.isArray(entry) && typeof entry !== 'string') {
    const fps = entry.fps ?? entry.sample_fps;
    if (fps !== undefined && fps !== null) ref.fps = fps;
    if (entry.nframes && ref.frameCount === undefined) ref.frameCount = entry.nframes;
    if (entry.width && entry.height) {
      ref.width = entry.width;
      ref.height = entry.height;
    }
  }
  return ref;
}

/** The model name a record states, from the first of `paths` (dotted) that holds a non-empty string. */
export function statedModel(record: Record<string, unknown>, paths: readonly string[]): string | undefined {
  for (const p of paths) {
    let v: unknown = record;
    for (const key of p.split('.')) v = isObject(v) ? v[key] : undefined;
    if (typeof v === 'string' && v.trim() !== '') return v;
  }
  return undefined;
}

/** Hands out ids unique within one file: the preferred id, else `<id>#2`, `<id>#3`... */
export const idAllocator: () => (preferred: string) => string = uniqueIds;

/** A short, stable prefix for ids: the file's base name without extension. */
export function fileStem(file: string): string {
  return path.basename(file).replace(/\.(jsonl|json)$/i, '');
}

/** Small values of a free-form dict worth keeping in `meta` (large blobs and tensors are left out). */
export function smallValues(
  dict: Record<string, unknown>,
  skip: readonly string[] = [],
  maxChars = 1000,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(dict)) {
    if (skip.includes(k) || v === undefined) continue;
    const json = JSON.stringify(v);
    if (json !== undefined && json.length <= maxChars) out[k] = v;
  }
  return out;
}
