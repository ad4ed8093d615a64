// prime-rl training batches as its filesystem transport writes them:
// `<output_dir>/rollouts/step_<n>/rank_<r>.bin` = msgpack of `list[MicroBatch]` (one file per data
// rank, written to `rank_<r>.bin.tmp` and renamed), read back with msgspec
// (PrimeIntellect-ai/prime-rl: src/prime_rl/transports/batch/filesystem.py, src/prime_rl/utils/pathing.py
// `get_rollout_dir`/`get_step_path`). A plain `list[TrainingSample]` is accepted too.
//
// Every struct is `msgspec.Struct, array_like=True`: a msgpack ARRAY with the fields by position,
// unset optional fields written as nil (msgspec does not apply `omit_defaults` to array-like
// structs; docs/reference/frameworks.md). Newer versions append fields, older ones stop earlier: extra trailing
// fields are ignored and missing trailing fields are unset. Field order
// (src/prime_rl/transports/rollouts/types.py and transports/batch/types.py):
//   MicroBatch     = [input_ids, loss_mask, advantages, inference_logprobs, position_ids, sequence_lengths,
//                     temperatures, env_names, seq_lens, ref_logprobs, routed_experts, mm_kwargs | mm_refs,
//                     mm_token_type_ids, rl_weights, ce_weights, ref_kl_weights]
//   TrainingSample = [token_ids, mask, logprobs, temperatures, env_name, ref_logprobs, mm_kwargs | mm_refs,
//                     routed_experts, mm_token_type_ids, rl_weights, ce_weights, ref_kl_weights, advantages]
//   EncodedTensor  = [dtype, shape, data]   MMRefs = [images]   MMImageRef = [url, offset, length]
// `mm_kwargs` (main) is a msgpack MAP of flat processor kwargs, images concatenated along dim 0 in
// token order (orchestrator/trajectories.py `_encode_mm_kwargs`); the `feat/v1-inline-mm-vllm` branch
// puts `mm_refs` (an ARRAY) in the same position, its image refs paired in order with the runs of
// `mm_token_type_ids == 1` (`_build_mm_refs`), offsets in micro-batch positions once packed.
//
// A MicroBatch packs several samples; `sequence_lengths` cuts it back into them. Each sample
// becomes one Trajectory whose `sample` holds the tokens with a per-token mask and logprobs
// (maskScope 'full'); prime-rl keeps no prompt/completion split and no messages, so turns are read
// off the loss mask (1 = sampled by the model, 0 = context/observation).
//
// Bad bytes: msgpack that is cut short or invalid is reported with the micro-batch (or sample)
// index and the field it broke in, and everything decoded before it still loads. A field of the
// wrong type costs only its own micro-batch.
import path from 'node:path';
import { z } from 'zod';
import type { Finding } from '../model/finding.ts';
import type { GridThw, ImageRef, PlaceholderRange, ReadError, TrajectoryInput } from '../model/trajectory.ts';
import type { FileContext, Importer, ImportResult } from './importer.ts';
import { arrayHeader, decodeElements, isIntegerType, msgpackTypeName, msgpackValueEnd } from './read/msgpack.ts';
import { zodErrors } from './read/validate.ts';
import { LogprobValues, MaskValues, TokenIdValues, turnsFromMask } from './turns-from-mask.ts';

// ---------------------------------------------------------------------------------------------
// The structs, field by field (nil → null → unset).

const Int = z.number().int();
const IntList = z.array(Int);
/** Floats are float64 on the wire, where Python's NaN and ±inf travel as they are (a reference
 * logprob of -inf, a NaN advantage): they load, and never cost the micro-batch its other samples. */
const FloatList = z.array(
  z.union([z.number(), z.nan(), z.custom<number>((v) => v === Infinity || v === -Infinity, 'an infinite number')]),
);
const EncodedTensor = z.tuple([z.string(), z.array(Int.nonnegative()), z.instanceof(Uint8Array)]).rest(z.unknown());
type EncodedTensor = z.infer<typeof EncodedTensor>;
const MMImageRef = z.tuple([z.string(), Int.nonnegative(), Int.nonnegative()]).rest(z.unknown());
const MMRefs = z.tuple([z.array(MMImageRef)]).rest(z.unknown());
type MMRefs = z.infer<typeof MMRefs>;
const MmKwargs = z.record(z.string(), EncodedTensor);
type MmKwargs = z.infer<typeof MmKwargs>;

/** Position 6 (TrainingSample) / 11 (MicroBatch): a map is `mm_kwargs` (main), an array is `mm_refs` (inline-mm branch). */
const Multimodal = z.union([MmKwargs, MMRefs]);

const opt = <T extends z.ZodType>(schema: T) => schema.nullish();

const MICRO_BATCH_FIELDS = [
  'input_ids',
  'loss_mask',
  'advantages',
  'inference_logprobs',
  'position_ids',
  'sequence_lengths',
  'temperatures',
  'env_names',
  'seq_lens',
  'ref_logprobs',
  'routed_experts',
  'mm_kwargs',
  'mm_token_type_ids',
  'rl_weights',
  'ce_weights',
  'ref_kl_weights',
] as const;

const MicroBatch = z.object({
  input_ids: TokenIdValues,
  loss_mask: MaskValues,
  advantages: opt(FloatList),
  inference_logprobs: LogprobValues,
  position_ids: opt(IntList),
  sequence_lengths: opt(IntList),
  temperatures: opt(FloatList),
  env_names: opt(z.array(z.string())),
  seq_lens: opt(IntList),
  ref_logprobs: opt(FloatList),
  routed_experts: z.unknown().optional(),
  mm_kwargs: opt(Multimodal),
  mm_token_type_ids: opt(IntList),
  rl_weights: opt(FloatList),
  ce_weights: opt(FloatList),
  ref_kl_weights: opt(FloatList),
});
type MicroBatch = z.infer<typeof MicroBatch>;

const TRAINING_SAMPLE_FIELDS = [
  'token_ids',
  'mask',
  'logprobs',
  'temperatures',
  'env_name',
  'ref_logprobs',
  'mm_kwargs',
  'routed_experts',
  'mm_token_type_ids',
  'rl_weights',
  'ce_weights',
  'ref_kl_weights',
  'advantages',
] as const;

const TrainingSampleStruct = z.object({
  token_ids: TokenIdValues,
  mask: MaskValues,
  logprobs: LogprobValues,
  temperatures: opt(FloatList),
  env_name: opt(z.string()),
  ref_logprobs: opt(FloatList),
  mm_kwargs: opt(Multimodal),
  routed_experts: z.unknown().optional(),
  mm_token_type_ids: opt(IntList),
  rl_weights: opt(FloatList),
  ce_weights: opt(FloatList),
  ref_kl_weights: opt(FloatList),
  advantages: opt(FloatList),
});
type TrainingSampleStruct = z.infer<typeof TrainingSampleStruct>;

type StructKind = 'micro_batch' | 'sample';

// ---------------------------------------------------------------------------------------------
// Tensors and the multimodal fields.

const DTYPE_BYTES: Record<string, number> = {
  int64: 8,
  uint64: 8,
  int32: 4,
  uint32: 4,
  int16: 2,
  uint16: 2,
  int8: 1,
  uint8: 1,
  float64: 8,
  float32: 4,
  float16: 2,
  bfloat16: 2,
  bool: 1,
};

/** Numbers of an integer or float tensor (little-endian, as numpy's `tobytes()` on x86/ARM), or why not. */
function decodeTensorNumbers(tensor: EncodedTensor): number[] | string {
  const [dtype, shape, data] = tensor;
  const itemSize = DTYPE_BYTES[dtype];
  if (itemSize === undefined) return `unsupported dtype "${dtype}"`;
  const count = shape.reduce((a, b) => a * b, 1);
  if (data.length !== count * itemSize)
    return `shape [${shape.join(', ')}] of ${dtype} needs ${count * itemSize} bytes, data has ${data.length}`;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++) {
    const at = i * itemSize;
    switch (dtype) {
      case 'int64':
        out[i] = Number(view.getBigInt64(at, true));
        break;
      case 'uint64':
        out[i] = Number(view.getBigUint64(at, true));
        break;
      case 'int32':
        out[i] = view.getInt32(at, true);
        break;
      case 'uint32':
        out[i] = view.getUint32(at, true);
        break;
      case 'int16':
        out[i] = view.getInt16(at, true);
        break;
      case 'uint16':
        out[i] = view.getUint16(at, true);
        break;
      case 'int8':
        out[i] = view.getInt8(at);
        break;
      case 'uint8':
      case 'bool':
        out[i] = view.getUint8(at);
        break;
      case 'float64':
        out[i] = view.getFloat64(at, true);
        break;
      case 'float32':
        out[i] = view.getFloat32(at, true);
        break;
      default:
        return `dtype "${dtype}" is not decoded here`;
    }
  }
  return out;
}

/** `image_grid_thw` of an `mm_kwargs` map as [t, h, w] rows, or why it cannot be read. */
function gridsFromMmKwargs(kwargs: MmKwargs): GridThw[] | string | undefined {
  const tensor = kwargs.image_grid_thw;
  if (!tensor) return undefined;
  const shape = tensor[1];
  if (shape.length !== 2 || shape[1] !== 3) return `shape [${shape.join(', ')}] is not [images, 3]`;
  const values = decodeTensorNumbers(tensor);
  if (typeof values === 'string') return values;
  const grids: GridThw[] = [];
  for (let i = 0; i < values.length; i += 3) grids.push([values[i]!, values[i + 1]!, values[i + 2]!]);
  return grids;
}

function runsOf(
  values: readonly number[],
  wanted: number,
  from = 0,
  to = values.length,
): { offset: number; length: number }[] {
  const runs: { offset: number; length: number }[] = [];
  for (let i = from; i < to; i++) {
    if (values[i] !== wanted) continue;
    let j = i;
    while (j < to && values[j] === wanted) j++;
    runs.push({ offset: i - from, length: j - i });
    i = j - 1;
  }
  return runs;
}

// ---------------------------------------------------------------------------------------------
// From structs to trajectories.

const LIMITATION =
  'prime-rl training batches keep tokens, loss mask and logprobs only: no messages, no model name, no prompt/completion split; turns are read off the loss mask';

interface SampleParts {
  tokens: number[];
  mask: number[];
  logprobs: (number | null)[];
  /** The reference model's logprobs of the same tokens (`ref_logprobs`), when the batch carries them. */
  refLogprobs?: number[];
  mmTokenTypeIds?: number[];
  grids?: GridThw[];
  images: ImageRef[];
  placeholderRanges?: PlaceholderRange[];
  envName?: string;
  advantage?: number;
  temperature?: number;
  limitations: string[];
  meta: Record<string, unknown>;
  /** What reading the batch showed about this sample (an MMRef offset the data does not settle). */
  sourceFindings?: Finding[];
}

/** Booleans are read as 0/1 by MaskValues; any other value is kept for the checks to report. */
function toMask(values: readonly number[]): number[] {
  return values.slice();
}

/** Where the file sits in a prime-rl output folder (`[<run>/rollouts/]step_<n>/rank_<r>.bin`), for ids and
 * metadata. The run folder's name keeps ids of two runs apart: every run has a step_0/rank_0.bin. */
function fileIdentity(file: string): { prefix: string; step?: number; rank?: number } {
  const norm = file.split(path.sep).join('/');
  const m = /(?:^|\/)(?:([^/]+)\/rollouts\/)?step_(\d+)\/rank_(\d+)\.bin$/.exec(norm);
  if (m)
    return { prefix: `${m[1] ? `${m[1]}/` : ''}step_${m[2]}/rank_${m[3]}`, step: Number(m[2]), rank: Number(m[3]) };
  const r = /rank_(\d+)\.bin$/.exec(norm);
  return { prefix: path.basename(file).replace(/\.[^.]+$/, ''), ...(r ? { rank: Number(r[1]) } : {}) };
}

export const NO_TRAINABLE_TOKEN =
  'no trainable token: prime-rl trains nothing of this sample (a zero-loss dummy micro-batch evening out the ranks, or an errored trace older versions masked whole); its mask is not judged';

/** The sample's advantage (its first trained token's). A NaN or infinite one (float64 carries them)
 * is no advantage the trajectory can hold: reported at its index, not applied, and the sample loads. */
function finiteAdvantage(
  values: readonly number[],
  index: number,
  at: { file: string; line: number; field: string },
  errors: ReadError[],
): number | undefined {
  const v = values[index];
  if (v === undefined || Number.isFinite(v)) return v;
  const field = `${at.field}.${index}`;
  errors.push({
    file: at.file,
    line: at.line,
    field,
    message: `${field}: advantage ${v} is not a finite number; not applied`,
  });
  return undefined;
}

/** `line` is the sample's 1-based ordinal in the file: a binary file has no lines, and the ordinal
 * is what lets `check` output, errors and the server point at one packed sample. */
function trajectoryFrom(parts: SampleParts, id: string, file: string, line: number): TrajectoryInput {
  const turns = turnsFromMask({ tokens: parts.tokens, scope: 'full', mask: parts.mask, logprobs: parts.logprobs });
  const limitations = [LIMITATION, ...parts.limitations];
  // A sample prime-rl trains nothing of is its own zero-loss filler, not a mask gone wrong: the
  // trainer copies a micro-batch with every loss_mask False to even out the ranks
  // (trainer/batch.py `_make_dummy_batch`), and older versions masked a whole errored trace. Its
  // response is empty (responseLength 0), so its assistant turns are context, not judged by the mask check.
  const untrained = !parts.mask.includes(1);
  if (untrained) limitations.push(NO_TRAINABLE_TOKEN);
  return {
    id,
    source: { file, line, format: 'prime-rl' },
    turns,
    images: parts.images,
    sample: {
      tokens: parts.tokens,
      lossMask: parts.mask,
      logprobs: parts.logprobs,
      ...(parts.refLogprobs ? { refLogprobs: parts.refLogprobs } : {}),
      maskScope: 'full',
      ...(untrained ? { responseLength: 0 } : {}),
      ...(parts.grids ? { imageGridThw: parts.grids } : {}),
      ...(parts.placeholderRanges ? { placeholderRanges: parts.placeholderRanges } : {}),
      ...(parts.mmTokenTypeIds ? { mmTokenTypeIds: parts.mmTokenTypeIds } : {}),
    },
    limitations,
    advantage: parts.advantage,
    ...(parts.sourceFindings?.length ? { sourceFindings: parts.sourceFindings } : {}),
    meta: {
      ...parts.meta,
      ...(parts.envName !== undefined ? { envName: parts.envName } : {}),
      ...(parts.advantage !== undefined ? { advantage: parts.advantage } : {}),
      ...(parts.temperature !== undefined ? { temperature: parts.temperature } : {}),
    },
  };
}

/** Image counts per sample, from `mm_token_type_ids` image runs, else (when they do not account for
 * every grid row) from image pad runs (the pad id of the profile the run is checked with). */
function imagesPerSample(
  bounds: readonly [number, number][],
  tokens: readonly number[],
  types: readonly number[] | undefined,
  total: number,
  imagePad: number | undefined,
): number[] {
  if (types) {
    const byTypes = bounds.map(([s, e]) => runsOf(types, 1, s, Math.min(e, types.length)).length);
    if (byTypes.reduce((a, b) => a + b, 0) === total) return byTypes;
  }
  return bounds.map(([s, e]) => (imagePad === undefined ? 0 : runsOf(tokens, imagePad, s, e).length));
}

// ---------------------------------------------------------------------------------------------
// MMRef offsets: from the micro-batch's start or from the sample's (docs/reference/frameworks.md#prime-rl).
// prime-rl builds a sample's refs from its own image runs and rebases them when it packs
// (`trainer/batch.py::_materialize_bin`, both inline-mm branches), but the trainer reads only the
// lengths (`trainer/multimodal.py::materialize_mm_refs`), so nothing downstream catches a packer that
// leaves them sample-relative. Which reading holds is decided per ref by the data: the one that puts
// the range on its image run.

type RefReading = 'micro-batch' | 'sample';

interface ImageRun {
  sample: number;
  /** Micro-batch position of the run's first token. */
  start: number;
  length: number;
}

/** A ref read one way, on one run. */
interface RefPlacement {
  reading: RefReading;
  run: number;
  /** Micro-batch position the reading puts the range at. */
  position: number;
  /** How well the range fits the run: 3 exactly, 2 from its first or to its last token, 1 overlapping it. */
  fit: 1 | 2 | 3;
}

export interface RefAttribution {
  url: string;
  sample: number;
  /** The range in the sample's own positions. */
  range: PlaceholderRange;
  /** The reading the range was taken in; undefined when the sample starts the micro-batch (both agree). */
  reading?: RefReading;
  /** Why the data does not settle the reading (reported as a warning on the sample). */
  doubt?: string;
}

/**
 * Image runs in micro-batch order with their samples: the runs of `mm_token_type_ids == 1`, which
 * prime-rl pairs with the refs in order (`orchestrator/trajectories.py::_build_mm_refs`), else the
 * image pad runs.
 */
function imageRunsOf(
  bounds: readonly [number, number][],
  tokens: readonly number[],
  types: readonly number[] | undefined,
  imagePad: number | undefined,
): ImageRun[] {
  const useTypes = types !== undefined && types.length === tokens.length;
  if (!useTypes && imagePad === undefined) return [];
  return bounds.flatMap(([s, e], k) =>
    (useTypes ? runsOf(types, 1, s, e) : runsOf(tokens, imagePad!, s, e)).map((r) => ({
      sample: k,
      start: s + r.offset,
      length: r.length,
    })),
  );
}

function placementsOn(
  ref: { offset: number; length: number },
  candidates: readonly number[],
  runs: readonly ImageRun[],
  bounds: readonly [number, number][],
): RefPlacement[] {
  const out: RefPlacement[] = [];
  for (const r of candidates) {
    const run = runs[r]!;
    for (const reading of ['micro-batch', 'sample'] as const) {
      const position = reading === 'micro-batch' ? ref.offset : bounds[run.sample]![0] + ref.offset;
      const end = position + Math.max(ref.length, 1);
      if (position >= run.start + run.length || end <= run.start) continue;
      const starts = position === run.start;
      const ends = position + ref.length === run.start + run.length;
      out.push({ reading, run: r, position, fit: starts && ends ? 3 : starts || ends ? 2 : 1 });
    }
  }
  return out;
}

const describePlacement = (p: RefPlacement, runs: readonly ImageRun[], bounds: readonly [number, number][]) => {
  const run = runs[p.run]!;
  return `read from the ${p.reading === 'micro-batch' ? "micro-batch's" : "sample's"} start it ${p.fit === 3 ? 'is' : p.fit === 2 ? 'shares an end with' : 'overlaps'} the image run at ${run.start - bounds[run.sample]![0]} of sample ${run.sample}`;
};

/**
 * Each ref's sample and range. With as many refs as image runs, ref j is run j's (prime-rl's
 * order), so a ref never moves to another sample; the reading is the one that puts the range on
 * that run, an exact fit over one that shares the run's first or last token over an overlap. With a count that differs, each ref takes the first later
 * run a reading puts it on. Both readings fitting equally at different places, or neither fitting,
 * is a doubt; a ref that lies in no sample either way is an error.
 */
export function attributeRefs(
  refs: readonly (readonly [string, number, number, ...unknown[]])[],
  runs: readonly ImageRun[],
  bounds: readonly [number, number][],
  total: number,
): (RefAttribution | { error: string })[] {
  const strict = refs.length === runs.length;
  let nextRun = 0;
  const attributed = refs.map(([url, offset, length], j): RefAttribution | { error: string } => {
    const ref = { offset, length };
    const what = `mm_refs image ${j} (offset ${offset}, length ${length})`;
    const candidates = strict ? [j] : runs.map((_, r) => r).filter((r) => r >= nextRun);
    const all = placementsOn(ref, candidates, runs, bounds);
    const top = Math.max(0, ...all.map((p) => p.fit));
    const best = all.filter((p) => p.fit === top);
    if (best.length > 0) {
      const chosen = best.reduce((a, p) =>
        p.run < a.run || (p.run === a.run && p.reading === 'micro-batch' && a.reading !== 'micro-batch') ? p : a,
      );
      nextRun = chosen.run + 1;
      const run = runs[chosen.run]!;
      const start = bounds[run.sample]![0];
      const others = best.filter((p) => p.position !== chosen.position);
      return {
        url,
        sample: run.sample,
        range: { offset: chosen.position - start, length },
        ...(start > 0 ? { reading: chosen.reading } : {}),
        ...(others.length > 0
          ? {
              doubt: `${what}: ${describePlacement(chosen, runs, bounds)}, and ${describePlacement(others[0]!, runs, bounds)}; the data does not say which, so the image is kept on sample ${run.sample} (the first)`,
            }
          : {}),
      };
    }
    // On no image run read either way: kept where the order of refs puts it.
    const k = strict ? runs[j]!.sample : bounds.findIndex(([s, e]) => offset >= s && offset < e);
    if (k < 0)
      return {
        error: `image ref at micro-batch position ${offset} lies in no packed sample (the micro-batch has ${total} tokens)`,
      };
    const [s, e] = bounds[k]!;
    const reading: RefReading | undefined =
      offset >= s && offset < e ? 'micro-batch' : offset < e - s ? 'sample' : undefined;
    if (!reading)
      return {
        error: `image ref at offset ${offset} lies in sample ${k} (${e - s} tokens) neither from the micro-batch's start nor from the sample's`,
      };
    return {
      url,
      sample: k,
      range: { offset: reading === 'micro-batch' ? offset - s : offset, length },
      ...(s > 0 ? { reading } : {}),
      doubt: `${what} is on no image run of sample ${k} read from the micro-batch's start (position ${offset}) or from the sample's (position ${s + offset}); kept on sample ${k}, its range read from the ${reading === 'micro-batch' ? "micro-batch's" : "sample's"} start`,
    };
  });
  return attributed;
}

interface StructContext {
  file: string;
  /** 0-based index of the struct in the file's list. */
  index: number;
  /** `micro_batches[3]` / `samples[3]`: the prefix of every field this struct reports. */
  where: string;
  /** 1-based ordinal of the struct's first sample in the file. */
  firstLine: number;
  identity: ReturnType<typeof fileIdentity>;
  /** The image pad id of the profile the run is checked with (prime-rl's records name no model). */
  imagePad: number | undefined;
}

/** Where `pad_micro_batch`'s padding starts in the sample [s, e): the last restart of position_ids
 * at 0 after which they count up by one and nothing is trained; `e` when there is none. */
function padStart(positions: readonly number[], mask: readonly number[], s: number, e: number): number {
  let p = e - 1;
  while (p > s && positions[p] !== 0) p--;
  if (p <= s) return e;
  for (let i = p; i < e; i++) if (positions[i] !== i - p || mask[i] !== 0) return e;
  return p;
}

function splitMicroBatch(mb: MicroBatch, ctx: StructContext, errors: ReadError[]): TrajectoryInput[] {
  const { file, where, firstLine } = ctx;
  const total = mb.input_ids.length;
  const fail = (field: string, message: string) =>
    errors.push({ file, line: firstLine, field: `${where}.${field}`, message: `${where}.${field}: ${message}` });

  // Sample boundaries: `sequence_lengths`, else `seq_lens`, else where `position_ids` restart at 0.
  let lengths = mb.sequence_lengths ?? mb.seq_lens ?? undefined;
  if (!lengths && mb.position_ids && mb.position_ids.length === total) {
    lengths = [];
    let start = 0;
    for (let i = 1; i <= total; i++) {
      if (i === total || mb.position_ids[i] === 0) {
        lengths.push(i - start);
        start = i;
      }
    }
  }
  lengths ??= [total];
  const sum = lengths.reduce((a, b) => a + b, 0);
  const exact = sum === total;
  if (!exact)
    fail(
      'sequence_lengths',
      `the lengths add up to ${sum} but input_ids has ${total} tokens; only samples that fit are read`,
    );
  const bounds: [number, number][] = [];
  let at = 0;
  for (const len of lengths) {
    if (len < 0 || at + len > total) break;
    bounds.push([at, at + len]);
    at += len;
  }

  // `pad_micro_batch` grows the last sample by untrained pad tokens (trainer/batch.py: input_ids 1,
  // position_ids restarting at 0, loss_mask False); a sample's own position_ids never restart
  // (`prepare_sample` numbers them 0..len-1), so a restart inside the last sample is where its padding
  // starts. The padding is no part of the trajectory: it is left out, and said so.
  let padding = 0;
  const last = bounds[bounds.length - 1];
  if (exact && last && mb.position_ids?.length === total && mb.loss_mask.length === total) {
    const [s, e] = last;
    const p = padStart(mb.position_ids, mb.loss_mask, s, e);
    if (p < e) {
      padding = e - p;
      last[1] = p;
    }
  }

  // Per-token arrays are cut at the same boundaries. When their total length is off, the surplus or
  // shortfall is left on the last sample, where the length checks report it (the packer gives no
  // way to tell which packed sample brought it).
  const cut = <T>(arr: readonly T[], k: number): T[] => {
    const [s, e] = bounds[k]!;
    return arr.slice(s, exact && k === bounds.length - 1 ? arr.length - padding : e);
  };

  const multimodal = mb.mm_kwargs ?? undefined;
  const refs: MMRefs | undefined = Array.isArray(multimodal) ? (multimodal as MMRefs) : undefined;
  const kwargs: MmKwargs | undefined = multimodal && !Array.isArray(multimodal) ? (multimodal as MmKwargs) : undefined;

  const limitations: string[] = [];
  const lastSampleNotes: string[] = [];
  if (padding > 0)
    lastSampleNotes.push(
      `the ${padding} pad tokens prime-rl's pad_micro_batch appended to this sample (untrained) are left out`,
    );
  for (const [name, arr] of [
    ['loss_mask', mb.loss_mask],
    ['inference_logprobs', mb.inference_logprobs],
  ] as const) {
    if (exact && arr.length !== total)
      lastSampleNotes.push(
        `the micro-batch's ${name} has ${arr.length} entries for ${total} tokens; the difference is left on this, its last sample`,
      );
  }
  if (kwargs?.video_grid_thw) limitations.push('videos (video_grid_thw) are not inspected');

  let gridsBySample: GridThw[][] | undefined;
  if (kwargs) {
    const grids = gridsFromMmKwargs(kwargs);
    if (typeof grids === 'string') fail('mm_kwargs.image_grid_thw', grids);
    else if (grids) {
      const counts = imagesPerSample(
        bounds,
        mb.input_ids,
        mb.mm_token_type_ids ?? undefined,
        grids.length,
        ctx.imagePad,
      );
      const counted = counts.reduce((a, b) => a + b, 0);
      if (counted !== grids.length) {
        limitations.push(
          `image_grid_thw has ${grids.length} rows for ${counted} image pad runs in the micro-batch; rows were handed out in order, the rest to the last sample`,
        );
      }
      gridsBySample = [];
      let g = 0;
      counts.forEach((c, k) => {
        const last = k === counts.length - 1;
        gridsBySample!.push(grids.slice(g, last ? grids.length : g + c));
        g += c;
      });
    }
  }

  const imagesBySample: ImageRef[][] = bounds.map(() => []);
  const rangesBySample: PlaceholderRange[][] = bounds.map(() => []);
  const doubtsBySample: Finding[][] = bounds.map(() => []);
  const readingsBySample: Set<RefReading>[] = bounds.map(() => new Set());
  if (refs) {
    const runs = imageRunsOf(bounds, mb.input_ids, mb.mm_token_type_ids ?? undefined, ctx.imagePad);
    attributeRefs(refs[0], runs, bounds, total).forEach((a, j) => {
      if ('error' in a) {
        fail(`mm_refs.images.${j}.offset`, a.error);
        return;
      }
      const image = imagesBySample[a.sample]!.length;
      imagesBySample[a.sample]!.push({ url: a.url });
      rangesBySample[a.sample]!.push(a.range);
      if (a.reading) readingsBySample[a.sample]!.add(a.reading);
      if (a.doubt)
        doubtsBySample[a.sample]!.push({
          kind: 'placeholder_range',
          severity: 'warning',
          turn: -1,
          index: a.range.offset,
          stream: 'sample',
          image,
          actual: a.range,
          field: `${where}.mm_refs.images.${j}`,
          message: a.doubt,
        });
    });
  }

  const advantages = mb.advantages ?? undefined;
  const temperatures = mb.temperatures ?? undefined;
  const envNames = mb.env_names ?? undefined;
  return bounds.map(([s, e], k): TrajectoryInput => {
    const mask = toMask(cut(mb.loss_mask, k));
    const firstTrained = mask.indexOf(1);
    // `env_names` is per token in current prime-rl and was per sample before.
    const envName = envNames
      ? envNames.length === total
        ? envNames[s]
        : envNames.length === bounds.length
          ? envNames[k]
          : undefined
      : undefined;
    const parts: SampleParts = {
      tokens: mb.input_ids.slice(s, e),
      mask,
      logprobs: cut(mb.inference_logprobs, k),
      ...(mb.ref_logprobs ? { refLogprobs: cut(mb.ref_logprobs, k) } : {}),
      ...(mb.mm_token_type_ids ? { mmTokenTypeIds: cut(mb.mm_token_type_ids, k) } : {}),
      ...(gridsBySample ? { grids: gridsBySample[k] } : {}),
      images: imagesBySample[k]!,
      ...(refs ? { placeholderRanges: rangesBySample[k] } : {}),
      envName,
      advantage:
        advantages && firstTrained >= 0
          ? finiteAdvantage(
              advantages,
              s + firstTrained,
              { file, line: firstLine + k, field: `${where}.advantages` },
              errors,
            )
          : undefined,
      temperature: temperatures?.[s],
      limitations: k === bounds.length - 1 ? [...limitations, ...lastSampleNotes] : limitations,
      meta: {
        ...stepRank(ctx),
        microBatch: ctx.index,
        sampleInMicroBatch: k,
        offsetInMicroBatch: s,
        ...(readingsBySample[k]!.size > 0 ? { mmRefOffsetsFrom: [...readingsBySample[k]!].sort().join(' and ') } : {}),
      },
      sourceFindings: doubtsBySample[k]!,
    };
    return trajectoryFrom(parts, `${ctx.identity.prefix}/mb${ctx.index}/s${k}`, file, firstLine + k);
  });
}

function stepRank(ctx: StructContext): Record<string, number> {
  return {
    ...(ctx.identity.step !== undefined ? { step: ctx.identity.step } : {}),
    ...(ctx.identity.rank !== undefined ? { rank: ctx.identity.rank } : {}),
  };
}

function trainingSampleTrajectory(ts: TrainingSampleStruct, ctx: StructContext, errors: ReadError[]): TrajectoryInput {
  const { file, where, firstLine } = ctx;
  const multimodal = ts.mm_kwargs ?? undefined;
  let grids: GridThw[] | undefined;
  const images: ImageRef[] = [];
  let placeholderRanges: PlaceholderRange[] | undefined;
  if (Array.isArray(multimodal)) {
    // A lone sample's refs are in its own positions (`_build_mm_refs` on `mm_token_type_ids`).
    placeholderRanges = [];
    for (const [url, offset, length] of (multimodal as MMRefs)[0]) {
      images.push({ url });
      placeholderRanges.push({ offset, length });
    }
  } else if (multimodal) {
    const g = gridsFromMmKwargs(multimodal as MmKwargs);
    if (typeof g === 'string')
      errors.push({
        file,
        line: firstLine,
        field: `${where}.mm_kwargs.image_grid_thw`,
        message: `${where}.mm_kwargs.image_grid_thw: ${g}`,
      });
    else grids = g;
  }
  const mask = toMask(ts.mask);
  const firstTrained = mask.indexOf(1);
  const parts: SampleParts = {
    tokens: ts.token_ids,
    mask,
    logprobs: ts.logprobs,
    ...(ts.ref_logprobs ? { refLogprobs: ts.ref_logprobs } : {}),
    ...(ts.mm_token_type_ids ? { mmTokenTypeIds: ts.mm_token_type_ids } : {}),
    ...(grids ? { grids } : {}),
    images,
    ...(placeholderRanges ? { placeholderRanges } : {}),
    envName: ts.env_name ?? undefined,
    advantage:
      ts.advantages && firstTrained >= 0
        ? finiteAdvantage(ts.advantages, firstTrained, { file, line: firstLine, field: `${where}.advantages` }, errors)
        : undefined,
    temperature: ts.temperatures?.[0],
    limitations:
      !Array.isArray(multimodal) && multimodal?.video_grid_thw ? ['videos (video_grid_thw) are not inspected'] : [],
    meta: { ...stepRank(ctx), sample: ctx.index },
  };
  return trajectoryFrom(parts, `${ctx.identity.prefix}/s${ctx.index}`, file, firstLine);
}

// ---------------------------------------------------------------------------------------------
// The file.

/** Which struct a list element is: a TrainingSample has `env_name` (a string) at position 4 where a MicroBatch has `position_ids`. */
function structKind(fields: readonly unknown[], otherwise: StructKind): StructKind {
  if (fields.length <= 4) return otherwise;
  return typeof fields[4] === 'string' ? 'sample' : 'micro_batch';
}

function fieldNames(kind: StructKind): readonly string[] {
  return kind === 'sample' ? TRAINING_SAMPLE_FIELDS : MICRO_BATCH_FIELDS;
}

function structWhere(kind: StructKind, index: number): string {
  return `${kind === 'sample' ? 'samples' : 'micro_batches'}[${index}]`;
}

export function importPrimeRlBytes(bytes: Uint8Array, fileCtx: FileContext): ImportResult {
  const { file } = fileCtx;
  const imagePad = fileCtx.visionIds(undefined)?.imagePad;
  const out: ImportResult = { trajectories: [], errors: [] };
  const identity = fileIdentity(file);
  const fileError = (message: string, field?: string, line = 0) =>
    out.errors.push({ file, line, ...(field ? { field } : {}), message });
  if (bytes.length === 0) {
    fileError('empty file (prime-rl writes rank_<r>.bin.tmp and renames it when complete)');
    return out;
  }
  let top: { count: number; body: number } | undefined;
  try {
    top = arrayHeader(bytes, 0);
  } catch (e) {
    fileError(`not a prime-rl batch: ${(e as Error).message}`);
    return out;
  }
  if (!top) {
    fileError(
      `not a prime-rl batch: the file holds ${msgpackTypeName(bytes, 0)}, not a msgpack list of MicroBatch / TrainingSample arrays`,
    );
    return out;
  }

  // A file that is one struct rather than a list of them (its first field is a list of token ids).
  let list = top;
  try {
    const first = top.count > 0 ? arrayHeader(bytes, top.body) : undefined;
    const firstInner = first && first.count > 0 ? bytes[first.body] : undefined;
    if (firstInner !== undefined && isIntegerType(firstInner)) list = { count: 1, body: 0 };
  } catch {
    // Cut short inside the first element: the element loop below reports where.
  }

  // An empty list would otherwise read as nothing, without a word.
  if (list.count === 0) {
    fileError('the batch is an empty list: no micro-batches or samples');
    return out;
  }
  let pos = list.body;
  let line = 1;
  // Files are homogeneous: the kind of the previous element names the fields of one that breaks early.
  let fileKind: StructKind = 'micro_batch';
  for (let index = 0; index < list.count; index++) {
    let header: { count: number; body: number } | undefined;
    try {
      header = arrayHeader(bytes, pos);
    } catch (e) {
      const where = structWhere(fileKind, index);
      fileError(
        `${where}: ${(e as Error).message}; ${out.trajectories.length} sample(s) before it were read, nothing after it can be`,
        where,
        line,
      );
      return out;
    }
    if (!header) {
      const where = structWhere(fileKind, index);
      fileError(
        `${where} is ${msgpackTypeName(bytes, pos)}, not a MicroBatch / TrainingSample array; skipped`,
        where,
        line,
      );
      try {
        pos = msgpackValueEnd(bytes, pos);
        continue;
      } catch {
        return out;
      }
    }
    const read = decodeElements(bytes, header.body, header.count);
    const kind = structKind(read.elements, fileKind);
    fileKind = kind;
    const names = fieldNames(kind);
    const where = structWhere(kind, index);
    if ('failedAt' in read) {
      const field = `${where}.${names[read.failedAt] ?? `field ${read.failedAt}`}`;
      fileError(
        `${field}: ${read.error.message}; ${out.trajectories.length} sample(s) before it were read, nothing after it can be`,
        field,
        line,
      );
      return out;
    }
    pos = read.end;
    const record: Record<string, unknown> = {};
    names.forEach((name, i) => {
      if (i < read.elements.length) record[name] = read.elements[i];
    });
    const ctx: StructContext = { file, index, where, firstLine: line, identity, imagePad };
    const parsed = (kind === 'sample' ? TrainingSampleStruct : MicroBatch).safeParse(record);
    if (!parsed.success) {
      // The position-6/11 field is reported under the name it really has: an array there is `mm_refs`.
      const rename = (text: string) =>
        Array.isArray(record.mm_kwargs) ? text.replace(`${where}.mm_kwargs`, `${where}.mm_refs`) : text;
      for (const e of zodErrors(file, line, parsed.error, where)) {
        out.errors.push({
          ...e,
          field: e.field && rename(e.field),
          message: `${rename(e.message)} (this ${kind === 'sample' ? 'sample' : 'micro-batch'} is skipped)`,
        });
      }
      // Keep later ordinals where they would have been when the skipped micro-batch says how many samples it packed.
      const packed = kind === 'sample' ? undefined : IntList.safeParse(record.sequence_lengths);
      line += packed?.success ? packed.data.length : 1;
      continue;
    }
    if (kind === 'sample') {
      out.trajectories.push(trainingSampleTrajectory(parsed.data as TrainingSampleStruct, ctx, out.errors));
      line++;
    } else {
      const samples = splitMicroBatch(parsed.data as MicroBatch, ctx, out.errors);
      out.trajectories.push(...samples);
      line += samples.length;
    }
  }
  if (pos < bytes.length)
    fileError(`${bytes.length - pos} byte(s) after the end of the list were ignored`, undefined, line);
  return out;
}

export const primeRlImporter: Importer = {
  format: 'prime-rl',
  description:
    'prime-rl training batches: rollouts/step_<n>/rank_<r>.bin, msgpack list[MicroBatch] (or list[TrainingSample]) in msgspec array-like layout',
  container: 'binary',
  fileNamePattern: /^rank_\d+\.bin$/,
  sniff() {
    return 'binary msgpack format: recognised by its file name rank_<r>.bin';
  },
  importRecords(_records, { file }): ImportResult {
    return {
      trajectories: [],
      errors: [{ file, line: 0, message: 'prime-rl files are binary msgpack; they are read with importBytes' }],
    };
  },
  importBytes: importPrimeRlBytes,
};
