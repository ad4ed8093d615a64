// The exported row's schema (docs/export-format.md) and the trajectory a row stands for: what
// writing a batch (export/row.ts) and reading one back (import/export-rows.ts) share. Nothing
// here runs the checks or decodes images, so the importer registry can load it cheaply.
import { z } from 'zod';
import { FormatName, GridThw, PixelValues, PlaceholderRange, Trajectory, type Turn } from '../model/trajectory.ts';
import { imageMime } from '../images/mime.ts';

export const EXPORT_SCHEMA_VERSION = 1;

/** slime's `Sample.Status` values (THUDM/slime slime/utils/types.py). */
export const SAMPLE_STATUSES = ['pending', 'completed', 'truncated', 'aborted', 'failed'] as const;
export const SampleStatus = z.enum(SAMPLE_STATUSES);
export type SampleStatus = z.infer<typeof SampleStatus>;

export const ExportImage = z.object({
  /** SHA-256 of the image file's bytes (hex). */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** Size of the original image, in pixels, as read from its bytes. */
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  /** The processor bounds this image was tokenized with (qwen-vl-utils image-dict keys). */
  min_pixels: z.number().int().positive(),
  max_pixels: z.number().int().positive(),
  /** The image file's bytes: base64 in JSONL, BYTE_ARRAY in Parquet (`--images embed`). */
  bytes: z.string().nullable(),
  /** Path relative to the batch file's folder (`--images path`). */
  path: z.string().nullable(),
  /**
   * `--images ref`: the image in the batch's content-addressed store, `images/<sha256>.<ext>`,
   * as a URI reference relative to the batch file's folder. Absent in the other modes.
   */
  uri: z.string().nullable().optional(),
});
export type ExportImage = z.infer<typeof ExportImage>;

export const ExportRow = z.object({
  schema_version: z.literal(EXPORT_SCHEMA_VERSION),
  id: z.string(),
  /** Where the trajectory was read from. */
  source: z.object({ file: z.string(), line: z.number().int().positive(), format: FormatName }),
  /** Model name (selects the tokenizer/template profile when the batch is read back). */
  model: z.string(),
  /** GRPO group (samples that share one prompt), when the data states it. */
  group: z.string().nullable(),
  /** Prompt ⧺ response, image pads expanded: every id a vocabulary index (a row never carries a bad value). */
  tokens: z.array(z.number().int().nonnegative()),
  /** Number of trailing response tokens; the prompt is `tokens[:len(tokens) - response_length]`. */
  response_length: z.number().int().nonnegative(),
  /** Per response token: 1 = sampled by the model, 0 = observation / turn boundary. */
  loss_mask: z.array(z.number().int().min(0).max(1)),
  /** Per response token: the sampler's logprob, 0.0 where loss_mask is 0; null when the data had none. */
  rollout_log_probs: z.array(z.number()).nullable(),
  reward: z.number().nullable(),
  status: SampleStatus,
  images: z.array(ExportImage),
  /** Per image, in ViT patches before the merge: [t, h, w]. */
  image_grid_thw: z.array(GridThw),
  /** Per image, the run of its pad tokens in `tokens`. */
  placeholder_ranges: z.array(PlaceholderRange),
  /** Per token: 0 text, 1 image pad, 2 video pad. */
  mm_token_type_ids: z.array(z.number().int().min(0).max(2)),
  /** mRoPE positions: 3 rows (t, h, w), or verl's 4 rows (text, t, h, w); each of len(tokens). */
  position_ids: z.array(z.array(z.number().int())),
  /** Processor outputs carried instead of images (`images` is then empty): every image's patches, float32 (below). */
  pixel_values: PixelValues.nullable().default(null),
});
export type ExportRow = z.infer<typeof ExportRow>;

/**
 * A row as read back (import/export-rows.ts validates it): the written contract, except that
 * per-token values may be bad (a batch edited or written by another tool), so the row still loads
 * and the checks report the value at its index instead of the whole row being unreadable.
 */
export type ExportRowRead = Omit<ExportRow, 'tokens' | 'loss_mask' | 'rollout_log_probs'> & {
  tokens: number[];
  loss_mask: number[];
  rollout_log_probs: (number | null)[] | null;
};

/**
 * The trajectory an exported row stands for: the prompt, then one turn per run of trained
 * tokens (its ids and logprobs), each later turn's prompt being everything before its
 * generation. Used to re-check a row before it is written and to read a batch back.
 */
export function rowToTrajectory(row: ExportRowRead, where: { file: string; line: number }): Trajectory {
  const promptLength = Math.max(0, row.tokens.length - row.response_length);
  const turns: Turn[] = [];
  let i = promptLength;
  const n = row.tokens.length;
  // As the trainer importers split a mask (import/turns-from-mask.ts): 0 is context, any other value
  // a trained token (a value other than 1 is an invalid_value finding, not the end of a call), a
  // mask shorter than the response goes on with its last value.
  const last = row.loss_mask.length > 0 ? row.loss_mask[row.loss_mask.length - 1]! : 1;
  const trained = (at: number) => (row.loss_mask[at - promptLength] ?? last) !== 0;
  while (i < n) {
    while (i < n && !trained(i)) i++;
    if (i >= n) break;
    const start = i;
    while (i < n && trained(i)) i++;
    const lps = row.rollout_log_probs?.slice(start - promptLength, i - promptLength);
    turns.push({
      promptIds: row.tokens.slice(0, start),
      generatedIds: row.tokens.slice(start, i),
      ...(lps ? { generatedLogprobs: lps } : {}),
    });
  }
  const lastEnd =
    turns.length > 0
      ? turns[turns.length - 1]!.promptIds!.length + turns[turns.length - 1]!.generatedIds!.length
      : promptLength;
  if (turns.length === 0) turns.push({ promptIds: row.tokens.slice(0, promptLength), generatedIds: [] });
  // Tokens after the last generation (a final observation) are that turn's observation.
  if (lastEnd < n) turns[turns.length - 1]!.observationIds = row.tokens.slice(lastEnd);
  return parseWithBulkArrays({
    id: row.id,
    source: { file: where.file, line: where.line, format: 'export' },
    model: row.model,
    turns,
    images: row.images.map((img) => ({
      url:
        img.bytes !== null
          ? `data:${imageMime(Buffer.from(img.bytes.slice(0, 24), 'base64'))};base64,${img.bytes}`
          : (img.path ?? img.uri ?? undefined),
      width: img.width,
      height: img.height,
      sizeFrom: 'record',
      sha256: img.sha256,
      minPixels: img.min_pixels,
      maxPixels: img.max_pixels,
    })),
    sample: {
      // Copies: the trajectory's arrays are its own, not the row's.
      tokens: row.tokens.slice(),
      responseLength: row.response_length,
      lossMask: row.loss_mask.slice(),
      ...(row.rollout_log_probs ? { logprobs: row.rollout_log_probs.slice() } : {}),
      maskScope: 'response',
      imageGridThw: row.image_grid_thw,
      placeholderRanges: row.placeholder_ranges,
      mmTokenTypeIds: row.mm_token_type_ids.slice(),
      positionIds: row.position_ids.map((r) => r.slice()),
      ...(row.pixel_values ? { pixelValues: row.pixel_values } : {}),
    },
    reward: row.reward,
    status: row.status,
    ...(row.group !== null ? { group: row.group } : {}),
    meta: { exported_from: row.source },
  });
}

// --- per-token arrays without per-element zod ---------------------------------------------------
// zod validates an array element by element through its generic machinery, which for rows of
// 10k-token arrays costs more than the checks themselves. The element rules are simple, so they
// are checked in plain loops and zod sees the rest of the object with those arrays emptied: the
// result is the one zod gives for the whole object, and on any doubt the whole object goes
// through zod (which then reports the issue as it always did).

/**
 * What the elements of a per-token array must be. `token`: `TokenId`/`MaskValue`
 * (model/trajectory.ts), a finite number or NaN; `logprob`: `Logprob`, any number or null; `int`:
 * `z.number().int()`, a safe integer; the rest are the row contract's (`nonNegativeInt`, `bit`
 * 0/1, `tokenType` 0/1/2, `finite`). One loop per kind, so each stays monomorphic.
 */
type ElementKind = 'token' | 'logprob' | 'int' | 'nonNegativeInt' | 'bit' | 'tokenType' | 'finite';

function all(xs: unknown, kind: ElementKind): boolean {
  if (!Array.isArray(xs)) return false;
  const n = xs.length;
  switch (kind) {
    case 'token':
      for (let i = 0; i < n; i++) {
        const v = xs[i];
        if (typeof v !== 'number' || v === Infinity || v === -Infinity) return false;
      }
      return true;
    case 'logprob':
      for (let i = 0; i < n; i++) {
        const v = xs[i];
        if (v !== null && typeof v !== 'number') return false;
      }
      return true;
    case 'int':
      for (let i = 0; i < n; i++) if (!Number.isSafeInteger(xs[i])) return false;
      return true;
    case 'nonNegativeInt':
      for (let i = 0; i < n; i++) {
        const v = xs[i];
        if (!Number.isSafeInteger(v) || v < 0) return false;
      }
      return true;
    case 'bit':
      for (let i = 0; i < n; i++) {
        const v = xs[i];
        if (v !== 0 && v !== 1) return false;
      }
      return true;
    case 'tokenType':
      for (let i = 0; i < n; i++) {
        const v = xs[i];
        if (v !== 0 && v !== 1 && v !== 2) return false;
      }
      return true;
    case 'finite':
      for (let i = 0; i < n; i++) if (!Number.isFinite(xs[i])) return false;
      return true;
  }
}

/** `xs` is an array of arrays whose elements are all of `kind`. */
function allRows(xs: unknown, kind: ElementKind): boolean {
  return Array.isArray(xs) && xs.every((r) => all(r, kind));
}

const TURN_ARRAYS: Record<string, ElementKind> = {
  promptIds: 'token',
  generatedIds: 'token',
  generatedLogprobs: 'logprob',
  observationIds: 'token',
};
const SAMPLE_ARRAYS: Record<string, ElementKind> = {
  tokens: 'token',
  lossMask: 'token',
  logprobs: 'logprob',
  mmTokenTypeIds: 'int',
};

type Loose = Record<string, unknown>;

/**
 * `Trajectory.parse(input)` for a trajectory built from a row, its per-token arrays checked in
 * loops. The result holds `input`'s per-token arrays themselves (zod would hold copies), so they
 * must be the caller's to give.
 */
export function parseWithBulkArrays(input: Loose & { turns: Loose[]; sample?: Loose }): Trajectory {
  const sampleIn = input.sample;
  const positions = sampleIn?.positionIds;
  const turnsOk = input.turns.every((t) =>
    Object.entries(TURN_ARRAYS).every(([k, ok]) => t[k] === undefined || all(t[k], ok)),
  );
  const sampleOk =
    sampleIn !== undefined &&
    Object.entries(SAMPLE_ARRAYS).every(([k, ok]) => sampleIn[k] === undefined || all(sampleIn[k], ok)) &&
    (positions === undefined || allRows(positions, 'int'));
  if (!turnsOk || !sampleOk) return Trajectory.parse(input);
  const hollow = (o: Loose, keys: readonly string[]) => {
    const copy = { ...o };
    for (const k of keys) if (copy[k] !== undefined) copy[k] = [];
    return copy;
  };
  const rows = positions as number[][] | undefined;
  const out = Trajectory.parse({
    ...input,
    turns: input.turns.map((t) => hollow(t, Object.keys(TURN_ARRAYS))),
    sample: {
      ...hollow(sampleIn, Object.keys(SAMPLE_ARRAYS)),
      ...(rows !== undefined ? { positionIds: rows.map(() => []) } : {}),
    },
  });
  // The arrays zod would have copied: `input`'s own, taken over (the caller gives fresh ones).
  out.turns.forEach((t, k) => {
    const from = input.turns[k]!;
    for (const key of Object.keys(TURN_ARRAYS)) if (from[key] !== undefined) (t as Loose)[key] = from[key];
  });
  const sample = out.sample! as Loose;
  for (const key of Object.keys(SAMPLE_ARRAYS)) if (sampleIn[key] !== undefined) sample[key] = sampleIn[key];
  if (rows !== undefined) sample.positionIds = rows;
  return out;
}

/**
 * `ExportRow.safeParse(row).success` with the per-token arrays checked in loops: true only when
 * zod would accept the whole row (zod still decides, and says why, when this is false).
 */
export function passesRowContract(row: ExportRow): boolean {
  const ok =
    all(row.tokens, 'nonNegativeInt') &&
    all(row.loss_mask, 'bit') &&
    (row.rollout_log_probs === null || all(row.rollout_log_probs, 'finite')) &&
    all(row.mm_token_type_ids, 'tokenType') &&
    allRows(row.position_ids, 'int');
  if (!ok) return false;
  return ExportRow.safeParse({
    ...row,
    tokens: [],
    loss_mask: [],
    rollout_log_probs: row.rollout_log_probs === null ? null : [],
    mm_token_type_ids: [],
    position_ids: row.position_ids.map(() => []),
  }).success;
}
