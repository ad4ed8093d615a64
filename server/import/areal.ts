// AReaL trajectories as JSON or JSONL: the tensor dict a rollout workflow returns, tensors written
// as nested lists with the batch dimension first (inclusionAI/AReaL: areal/workflow/vision_rlvr.py
// ::arun_episode, checked by areal/infra/workflow_executor.py::check_trajectory_format; docs/reference/frameworks.md):
//   input_ids          [B, L] prompt ⧺ output ids (prompt from the HF processor, pads expanded)
//   loss_mask          [B, L] 0 prompt (and, with the `concat` export, observations), 1 output
//   logprobs           [B, L] 0.0 prompt, sampled logprobs for output
//   versions           [B, L] -1 prompt, policy version per output token
//   attention_mask     [B, L] rows are right-padded to its sum (the rollout dump reads `seqlen` so)
//   mm_token_type_ids  [B, L] 1 = image pad, 0 otherwise
//   rewards            [B]
//   multi_modal_input  [{"pixel_values", "image_grid_thw"}] — processor outputs, not the images
//   images, messages   what wrappers around the trajectory dict add (the rollout's images as paths,
//                      data: URLs or image dicts, and the chat messages): read as the other trainer
//                      formats read them, so the pads are checked against the real images
//   mm_processor_kwargs  a wrapper's statement of the processor settings the rollout used (AReaL's
//                      processor is the model's, `AutoProcessor.from_pretrained`, and its dict carries
//                      none): one dict for the record or one per row, read by processor-kwargs.ts
// Masks and logprobs cover every token (`maskScope: 'full'`); the prompt/response split is not
// stored, so turn 0's prompt is everything before the first masked-in token.
import { z } from 'zod';
import {
  Message,
  type GridThw,
  type ImageRef,
  type PixelValues,
  type ProcessorSettings,
  Reward,
  type ReadError,
  type TrajectoryInput,
} from '../model/trajectory.ts';
import { readProcessorKwargs } from './processor-kwargs.ts';
import { imagesInMessages } from '../model/message-images.ts';
import type { Importer, ImportResult } from './importer.ts';
import { isObject } from './importer.ts';
import { zodErrors } from './read/validate.ts';
import {
  GridList,
  ImageEntry,
  LogprobValues,
  MaskValues,
  TokenIdValues,
  fileStem,
  idAllocator,
  imageRefOf,
  statedModel,
  turnsFromMask,
} from './turns-from-mask.ts';

const Rows = <T extends z.ZodType>(row: T) => z.array(row).min(1);

export const ArealTrajectory = z
  .object({
    input_ids: Rows(TokenIdValues),
    loss_mask: Rows(MaskValues),
    logprobs: Rows(LogprobValues).nullish(),
    versions: Rows(z.array(z.number().int())).nullish(),
    attention_mask: Rows(MaskValues).nullish(),
    mm_token_type_ids: Rows(z.array(z.number().int())).nullish(),
    rewards: z.union([Reward, z.array(Reward), z.array(z.array(Reward))]).nullish(),
    multi_modal_input: z
      .array(
        z
          .object({
            image_grid_thw: GridList.nullish(),
            // [patches, channels·temporal_patch·patch²] as nested lists (a tensor's .tolist()).
            pixel_values: z.array(z.array(z.number())).nullish(),
          })
          .passthrough(),
      )
      .nullish(),
    task_id: z.union([z.number(), z.string()]).nullish(),
    // One list for the record (a batch of one), or one list per row.
    images: z.union([z.array(ImageEntry), z.array(z.array(ImageEntry))]).nullish(),
    messages: z.union([z.array(Message), z.array(z.array(Message))]).nullish(),
    mm_processor_kwargs: z.unknown().optional(),
  })
  .passthrough()
  .superRefine((t, ctx) => {
    const rows = t.input_ids.length;
    for (const key of ['loss_mask', 'logprobs', 'versions', 'attention_mask', 'mm_token_type_ids'] as const) {
      const v = t[key];
      if (v && v.length !== rows)
        ctx.addIssue({ code: 'custom', path: [key], message: `${v.length} rows but input_ids has ${rows}` });
    }
  });
export type ArealTrajectory = z.infer<typeof ArealTrajectory>;

function isNestedList(x: unknown): boolean {
  return Array.isArray(x) && x.length > 0 && Array.isArray(x[0]);
}

function rowReward(rewards: ArealTrajectory['rewards'], row: number): number | undefined {
  if (rewards === undefined || rewards === null) return undefined;
  if (typeof rewards === 'number') return row === 0 ? rewards : undefined;
  const flat = rewards.flat();
  return flat[row];
}

/** min/max policy version over the trained tokens (prompt and observations are -1). */
function versionRange(
  versions: readonly number[] | undefined,
  mask: readonly number[],
): { min: number; max: number } | undefined {
  if (!versions) return undefined;
  let min = Infinity;
  let max = -Infinity;
  versions.forEach((v, i) => {
    if (mask[i] === 0 || v < 0) return;
    min = Math.min(min, v);
    max = Math.max(max, v);
  });
  return Number.isFinite(min) ? { min, max } : undefined;
}

/** The processor outputs' pixel_values of one row, all images in order, as float32 bytes; undefined when absent or ragged. */
function pixelValuesOf(dicts: readonly { pixel_values?: number[][] | null }[]): PixelValues | undefined {
  const rows = dicts.flatMap((d) => d.pixel_values ?? []);
  const width = rows[0]?.length ?? 0;
  if (rows.length === 0 || width === 0 || rows.some((r) => r.length !== width)) return undefined;
  const flat = new Float32Array(rows.length * width);
  for (let i = 0; i < rows.length; i++) flat.set(rows[i]!, i * width);
  const bytes = Buffer.from(flat.buffer, flat.byteOffset, flat.byteLength);
  return { dtype: 'float32', shape: [rows.length, width], data: bytes.toString('base64') };
}

/** A wrapper's list for one row: the whole list for a batch of one, else the row's own list. */
function perRow<T>(lists: T[] | T[][] | null | undefined, row: number): T[] | undefined {
  if (!lists || lists.length === 0) return undefined;
  const nested = Array.isArray(lists[0]);
  if (!nested) return row === 0 ? (lists as T[]).slice() : undefined;
  return (lists as T[][])[row]?.slice();
}

/** A wrapper's `mm_processor_kwargs` per row (one dict for every row, or a list with one per row), and what could not be applied. */
function statedSettingsByRow(t: ArealTrajectory, file: string, line: number) {
  const stated = t.mm_processor_kwargs;
  const rows = t.input_ids.length;
  const errors: ReadError[] = [];
  const byRow: (ProcessorSettings | undefined)[] = [];
  for (let row = 0; row < rows; row++) {
    const perRowList = Array.isArray(stated);
    const { settings, problems } = readProcessorKwargs(
      perRowList ? stated[row] : stated,
      perRowList ? `mm_processor_kwargs.${row}` : 'mm_processor_kwargs',
    );
    byRow.push(settings);
    if (perRowList || row === 0)
      errors.push(...problems.map((p) => ({ file, line, field: p.field, message: p.message })));
  }
  return { byRow, errors };
}

export function arealTrajectories(
  t: ArealTrajectory,
  where: {
    file: string;
    line: number;
    id: (row: number) => string;
    processor?: (row: number) => ProcessorSettings | undefined;
  },
): TrajectoryInput[] {
  const rows = t.input_ids.length;
  const mmInputs = t.multi_modal_input ?? [];
  // One dict per row for a batch; for the usual batch of one, every dict belongs to it.
  const gridsFor = (row: number): GridThw[] | undefined => {
    const dicts = rows === 1 ? mmInputs : mmInputs.length === rows ? [mmInputs[row]!] : [];
    const grids = dicts.flatMap((d) => d.image_grid_thw ?? []);
    return grids.length > 0 ? grids : undefined;
  };
  const pixelsFor = (row: number): PixelValues | undefined =>
    pixelValuesOf(rows === 1 ? mmInputs : mmInputs.length === rows ? [mmInputs[row]!] : []);
  const out: TrajectoryInput[] = [];
  for (let row = 0; row < rows; row++) {
    const ids = t.input_ids[row]!;
    const seqlen = t.attention_mask ? t.attention_mask[row]!.reduce((a, b) => a + (b ? 1 : 0), 0) : ids.length;
    // Rows are right-padded to the attention mask's sum. A row whose length differs from input_ids'
    // is not padding but a fault: it is kept as written, so length_mismatch points at its end.
    const cut = <T>(a: readonly T[] | undefined): T[] | undefined =>
      a && a.length === ids.length ? a.slice(0, seqlen) : a?.slice();
    const tokens = ids.slice(0, seqlen);
    const lossMask = cut(t.loss_mask[row])!;
    const logprobs = cut(t.logprobs?.[row]);
    const turns = turnsFromMask({ tokens, scope: 'full', mask: lossMask, logprobs });
    const limitations: string[] = [];
    const imageGridThw = gridsFor(row);
    const messages = perRow<Message>(t.messages, row);
    if (messages && turns[0]) turns[0].messages = messages;
    const images: ImageRef[] =
      perRow<ImageEntry>(t.images, row)?.map(imageRefOf) ?? (messages ? imagesInMessages(messages) : []);
    if (imageGridThw && images.length === 0) {
      limitations.push(
        'AReaL stores processor outputs (image_grid_thw), not the images: pad runs are checked against image_grid_thw, not against image sizes or min/max pixels',
      );
    }
    if (rows > 1 && mmInputs.length > 0 && mmInputs.length !== rows) {
      limitations.push(
        `multi_modal_input has ${mmInputs.length} entries for ${rows} rows: image_grid_thw could not be assigned to this row`,
      );
    }
    const versions = versionRange(cut(t.versions?.[row]), lossMask);
    const meta: Record<string, unknown> = {};
    if (t.task_id !== undefined && t.task_id !== null) meta.task_id = t.task_id;
    if (rows > 1) meta.row = row;
    if (versions) meta.policy_versions = versions;
    const processor = where.processor?.(row);
    out.push({
      id: where.id(row),
      source: { file: where.file, line: where.line, format: 'areal' },
      model: statedModel(t, ['model', 'metadata.model']),
      ...(processor ? { processor } : {}),
      turns,
      images,
      sample: {
        tokens,
        lossMask,
        logprobs,
        maskScope: 'full',
        imageGridThw,
        pixelValues: images.length === 0 ? pixelsFor(row) : undefined,
        mmTokenTypeIds: cut(t.mm_token_type_ids?.[row]),
      },
      reward: rowReward(t.rewards, row),
      group: t.task_id !== undefined && t.task_id !== null ? String(t.task_id) : undefined,
      step: versions?.max,
      limitations,
      meta: Object.keys(meta).length > 0 ? meta : undefined,
    });
  }
  return out;
}

export const arealImporter: Importer = {
  format: 'areal',
  description:
    'AReaL trajectory tensors as JSON/JSONL ({"input_ids": [[...]], "loss_mask": [[...]], "logprobs", "versions", "multi_modal_input", ...})',
  container: 'json',
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (!('input_ids' in record) || !('loss_mask' in record))
      return 'no "input_ids" and "loss_mask" (AReaL trajectory)';
    if (!isNestedList(record.input_ids) || !isNestedList(record.loss_mask))
      return 'has "input_ids"/"loss_mask" but not as [batch, length] nested lists (AReaL tensors)';
    return true;
  },
  importRecords(records, { file }): ImportResult {
    const out: ImportResult = { trajectories: [], errors: [] };
    // Samples of one task are numbered as AReaL's rollout dump numbers them (`sample_idx`).
    const perTask = new Map<string, number>();
    const allocate = idAllocator();
    const stem = fileStem(file);
    for (const r of records) {
      const parsed = ArealTrajectory.safeParse(r.value);
      if (!parsed.success) {
        out.errors.push(...zodErrors(file, r.line, parsed.error));
        continue;
      }
      const t = parsed.data;
      const task = t.task_id !== undefined && t.task_id !== null ? `task-${String(t.task_id)}` : undefined;
      const rows = t.input_ids.length;
      const id = (row: number): string => {
        if (!task) return allocate(rows > 1 ? `${stem}:${r.line}/${row}` : `${stem}:${r.line}`);
        const n = perTask.get(task) ?? 0;
        perTask.set(task, n + 1);
        return allocate(`${task}/${n}`);
      };
      const stated = statedSettingsByRow(t, file, r.line);
      out.errors.push(...stated.errors);
      out.trajectories.push(...arealTrajectories(t, { file, line: r.line, id, processor: (row) => stated.byRow[row] }));
    }
    return out;
  },
};
