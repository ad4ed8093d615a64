// Qwen's image and video processor settings: what a model folder's preprocessor_config.json,
// video_preprocessor_config.json and config.json `vision_config` state, and the shipped
// defaults of each generation where they state nothing (docs/reference/image-math.md#processor-parameters).
import { z } from 'zod';
import type { VisionConfig } from '../../model/vision.ts';
import type { ModelFiles } from '../family.ts';

/** Shipped preprocessor configs' model defaults, not transformers' class defaults (docs/reference/image-math.md). */
export const QWEN2_VISION: VisionConfig = {
  patchSize: 14,
  mergeSize: 2,
  temporalPatchSize: 2,
  minPixels: 3136,
  maxPixels: 12845056,
};
/** Qwen2.5-VL: Qwen2-VL's processor; its config.json `vision_config.tokens_per_second` scales video positions. */
export const QWEN25_VISION: VisionConfig = { ...QWEN2_VISION, tokensPerSecond: 2 };
export const QWEN3_VISION: VisionConfig = {
  patchSize: 16,
  mergeSize: 2,
  temporalPatchSize: 2,
  minPixels: 65536,
  maxPixels: 16777216,
  // Qwen3-VL's video_preprocessor_config.json `size` (pixels over all frames; docs/reference/image-math.md#video).
  video: { minPixels: 4096, maxPixels: 25165824 },
  // Its processor writes `<t seconds>` before each temporal slice's run (processing_qwen3_vl.py).
  extra: { videoTimestamps: true },
};

const positive = z.number().int().positive();
const Size = z.object({ shortest_edge: positive.optional(), longest_edge: positive.optional() }).partial();
const PreprocessorConfig = z
  .object({
    patch_size: positive.optional(),
    merge_size: positive.optional(),
    temporal_patch_size: positive.optional(),
    min_pixels: positive.optional(),
    max_pixels: positive.optional(),
    size: Size.optional(),
  })
  .passthrough();
const VisionFields = z
  .object({
    vision_config: z
      .object({
        patch_size: positive.optional(),
        spatial_merge_size: positive.optional(),
        temporal_patch_size: positive.optional(),
        tokens_per_second: z.number().positive().optional(),
      })
      .passthrough()
      .optional(),
  })
  .passthrough();

function parsed<T>(schema: z.ZodType<T>, value: unknown, file: string): T | undefined {
  if (value === undefined) return undefined;
  const r = schema.safeParse(value);
  if (!r.success)
    throw new Error(`${file}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

/** Each generation's defaults, by the built-in profile name. */
export const GENERATION_VISION: Readonly<Record<string, VisionConfig>> = {
  'qwen2-vl': QWEN2_VISION,
  'qwen2.5-vl': QWEN25_VISION,
  'qwen3-vl': QWEN3_VISION,
  // Text models have the vision tokens but no image processor: their VL sibling's settings stand in.
  'qwen2.5': QWEN2_VISION,
  'qwen2.5-math': QWEN2_VISION,
  qwen3: QWEN3_VISION,
  'qwen3-instruct-2507': QWEN3_VISION,
  'qwen3-thinking-2507': QWEN3_VISION,
};

/** The patch size a folder states (preprocessor_config.json, else config.json vision_config). */
export function statedPatchSize(files: ModelFiles): number | undefined {
  const where = files.dir ?? 'model';
  const pp = parsed(PreprocessorConfig, files.preprocessorConfig, `${where}/preprocessor_config.json`);
  const vc = parsed(VisionFields, files.config, `${where}/config.json`)?.vision_config;
  return pp?.patch_size ?? vc?.patch_size;
}

/**
 * The settings a folder states over its generation's defaults, with a note for each default used.
 * Qwen2/2.5-VL state `min_pixels`/`max_pixels`; Qwen3-VL and Qwen3.5 `size.shortest_edge`/`longest_edge`
 * (pixel counts, not edges). Videos: video_preprocessor_config.json when the folder has one (the
 * file transformers' video processor reads first), else the image bounds of preprocessor_config.json
 * (which it falls back to), else the generation's.
 */
export function qwenProcessor(files: ModelFiles, generation: string, notes: string[]): VisionConfig {
  const where = files.dir ?? 'model';
  const defaults = GENERATION_VISION[generation] ?? QWEN2_VISION;
  const pp = parsed(PreprocessorConfig, files.preprocessorConfig, `${where}/preprocessor_config.json`);
  const vpp = parsed(PreprocessorConfig, files.videoPreprocessorConfig, `${where}/video_preprocessor_config.json`);
  const vc = parsed(VisionFields, files.config, `${where}/config.json`)?.vision_config;
  const minPixels = pp?.min_pixels ?? pp?.size?.shortest_edge;
  const maxPixels = pp?.max_pixels ?? pp?.size?.longest_edge;
  const vision: VisionConfig = {
    ...(defaults.extra ? { extra: defaults.extra } : {}),
    patchSize: pp?.patch_size ?? vc?.patch_size ?? defaults.patchSize,
    mergeSize: pp?.merge_size ?? vc?.spatial_merge_size ?? defaults.mergeSize,
    temporalPatchSize: pp?.temporal_patch_size ?? vc?.temporal_patch_size ?? defaults.temporalPatchSize,
    minPixels: minPixels ?? defaults.minPixels,
    maxPixels: maxPixels ?? defaults.maxPixels,
  };
  const videoMin = vpp?.min_pixels ?? vpp?.size?.shortest_edge;
  const videoMax = vpp?.max_pixels ?? vpp?.size?.longest_edge;
  if (videoMin !== undefined || videoMax !== undefined)
    vision.video = {
      minPixels: videoMin ?? defaults.video?.minPixels ?? vision.minPixels,
      maxPixels: videoMax ?? defaults.video?.maxPixels ?? vision.maxPixels,
    };
  else if (!pp && defaults.video) vision.video = defaults.video;
  const tps = vc?.tokens_per_second ?? defaults.tokensPerSecond;
  if (tps !== undefined) vision.tokensPerSecond = tps;
  if (files.dir) {
    if (!pp)
      notes.push(
        `preprocessor_config.json absent: image processor of ${generation} (patch ${vision.patchSize}, merge ${vision.mergeSize}, min_pixels ${vision.minPixels}, max_pixels ${vision.maxPixels})`,
      );
    else if (minPixels === undefined || maxPixels === undefined)
      notes.push(
        `preprocessor_config.json states no min/max pixels: ${generation}'s (${vision.minPixels}, ${vision.maxPixels})`,
      );
  }
  return vision;
}
