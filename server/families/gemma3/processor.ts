// Gemma 3's processor settings as a VisionConfig (docs/reference/models/gemma3.md#images): every
// image is resized to 896×896 (SigLIP, 14 px patches, 64×64 of them), pooled 4×4 into 256 soft
// tokens; pan-and-scan adds one more run of 256 per crop when a run turns it on.
import { z } from 'zod';
import type { ImageTokens, ModelFiles, VisionConfig } from '../family.ts';
import { IMAGE_SEQ_LENGTH, PAN_AND_SCAN_DEFAULTS, type PanAndScan, panAndScanCrops } from './vision.ts';

const SIDE = 896;
const PATCH = 14;
/** 64×64 patches pooled to 16×16 soft tokens (256 = image_seq_length): a pooling kernel of 4. */
const POOL = 4;

export const GEMMA3_VISION: VisionConfig = {
  patchSize: PATCH,
  mergeSize: POOL,
  temporalPatchSize: 1,
  minPixels: SIDE * SIDE,
  maxPixels: SIDE * SIDE,
  extra: {
    imageSeqLength: IMAGE_SEQ_LENGTH,
    doPanAndScan: PAN_AND_SCAN_DEFAULTS.enabled,
    panAndScanMinCropSize: PAN_AND_SCAN_DEFAULTS.minCropSize,
    panAndScanMaxNumCrops: PAN_AND_SCAN_DEFAULTS.maxNumCrops,
    panAndScanMinRatioToActivate: PAN_AND_SCAN_DEFAULTS.minRatioToActivate,
  },
};

const Preprocessor = z
  .object({
    size: z.object({ height: z.number().int().positive(), width: z.number().int().positive() }).partial().optional(),
    image_seq_length: z.number().int().positive().optional(),
    do_pan_and_scan: z.boolean().nullable().optional(),
    pan_and_scan_min_crop_size: z.number().int().positive().nullable().optional(),
    pan_and_scan_max_num_crops: z.number().int().positive().nullable().optional(),
    pan_and_scan_min_ratio_to_activate: z.number().positive().nullable().optional(),
  })
  .passthrough();
const ProcessorConfig = z.object({ image_seq_length: z.number().int().positive().optional() }).passthrough();

function read<T>(schema: z.ZodType<T>, value: unknown, file: string): T | undefined {
  if (value === undefined) return undefined;
  const r = schema.safeParse(value);
  if (!r.success)
    throw new Error(`${file}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

/** The settings a folder states (preprocessor_config.json, processor_config.json), the defaults elsewhere. */
export function gemma3Processor(files: ModelFiles, _generation: string, notes: string[]): VisionConfig {
  const where = (name: string) => (files.dir ? `${files.dir}/${name}` : name);
  const pre = read(Preprocessor, files.preprocessorConfig, where('preprocessor_config.json'));
  const proc = read(ProcessorConfig, files.processorConfig, where('processor_config.json'));
  if (files.dir && !files.preprocessorConfig)
    notes.push('preprocessor_config.json absent: Gemma 3 defaults (896×896, no pan-and-scan)');
  if (pre?.size && (pre.size.height ?? SIDE) !== SIDE)
    notes.push(`preprocessor_config.json size ${pre.size.height}×${pre.size.width}: Gemma 3's is ${SIDE}×${SIDE}`);
  const d = GEMMA3_VISION.extra!;
  return {
    ...GEMMA3_VISION,
    extra: {
      imageSeqLength: proc?.image_seq_length ?? pre?.image_seq_length ?? (d.imageSeqLength as number),
      doPanAndScan: pre?.do_pan_and_scan ?? (d.doPanAndScan as boolean),
      panAndScanMinCropSize: pre?.pan_and_scan_min_crop_size ?? (d.panAndScanMinCropSize as number),
      panAndScanMaxNumCrops: pre?.pan_and_scan_max_num_crops ?? (d.panAndScanMaxNumCrops as number),
      panAndScanMinRatioToActivate:
        pre?.pan_and_scan_min_ratio_to_activate ?? (d.panAndScanMinRatioToActivate as number),
    },
  };
}

/** The pan-and-scan settings a VisionConfig carries. */
export function panAndScanOf(vision: VisionConfig): PanAndScan {
  const e = vision.extra ?? {};
  const num = (k: string, d: number) => (typeof e[k] === 'number' ? (e[k] as number) : d);
  return {
    enabled: e.doPanAndScan === true,
    minCropSize: num('panAndScanMinCropSize', PAN_AND_SCAN_DEFAULTS.minCropSize),
    maxNumCrops: num('panAndScanMaxNumCrops', PAN_AND_SCAN_DEFAULTS.maxNumCrops),
    minRatioToActivate: num('panAndScanMinRatioToActivate', PAN_AND_SCAN_DEFAULTS.minRatioToActivate),
  };
}

export function seqLengthOf(vision: VisionConfig): number {
  const n = vision.extra?.imageSeqLength;
  return typeof n === 'number' ? n : IMAGE_SEQ_LENGTH;
}

/**
 * One image: 256 soft tokens, and 256 more per pan-and-scan crop (each its own run); the geometry
 * is the whole image's 16×16 cells of 56 px over its 896×896 resize (a crop's cells are not drawn).
 */
export function gemma3ImageTokens(width: number, height: number, vision: VisionConfig): ImageTokens {
  if (!(width > 0 && height > 0)) throw new Error(`${width}×${height}: not an image size`);
  const seq = seqLengthOf(vision);
  const cells = Math.round(Math.sqrt(seq));
  const crops = panAndScanCrops(width, height, panAndScanOf(vision)).count;
  const grid = vision.minPixels > 0 ? Math.round(Math.sqrt(vision.minPixels)) / vision.patchSize : SIDE / PATCH;
  return {
    resizedWidth: SIDE,
    resizedHeight: SIDE,
    gridThw: [1 + crops, grid, grid],
    padCount: seq * (1 + crops),
    cellSize: SIDE / cells,
    cellsWide: cells,
    cellsHigh: cells,
  };
}
