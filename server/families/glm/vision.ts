// GLM-4.1V / 4.5V / 4.6V image and video token counts (docs/reference/models/glm.md#images):
// Qwen2-VL's smart_resize with a temporal factor, under which a still image counts as
// temporal_patch_size (2) frames against the pixel bounds; then N = (h/14)·(w/14)/2². Pure functions.

import { roundHalfEven } from '../../util/python-round.ts';

export interface GlmVision {
  /** `patch_size` (14). */
  patchSize: number;
  /** `merge_size` (2). */
  mergeSize: number;
  /** `temporal_patch_size` (2): frames per temporal patch; a still image is repeated to it. */
  temporalPatchSize: number;
  /** `size.shortest_edge`: the least pixels (h·w·t) the resize keeps (a pixel count, despite the name). */
  minPixels: number;
  /** `size.longest_edge`: the most pixels (h·w·t). */
  maxPixels: number;
}

/** transformers `Glm4vImageProcessor` class defaults (shortest 112·112, longest 28·28·15000). */
export const GLM4V_CLASS_DEFAULTS: GlmVision = {
  patchSize: 14,
  mergeSize: 2,
  temporalPatchSize: 2,
  minPixels: 112 * 112,
  maxPixels: 28 * 28 * 15000,
};

/** The GLM-4.xV checkpoints' `preprocessor_config.json` (`size` 12544 … 9633792). */
export const GLM4V_MODEL_DEFAULTS: GlmVision = { ...GLM4V_CLASS_DEFAULTS, maxPixels: 9633792 };

/**
 * transformers `smart_resize` of models/glm4v/image_processing_glm4v.py: sides raised to the factor
 * first when one is smaller, then rounded (half to even) to multiples of it, and scaled into the
 * bounds counting `frames` (rounded to the temporal factor) times the area. Throws as it does on
 * fewer frames than the temporal factor or an aspect ratio over 200.
 */
export function glmSmartResize(
  frames: number,
  height: number,
  width: number,
  v: GlmVision,
): { height: number; width: number } {
  const factor = v.patchSize * v.mergeSize;
  const tf = v.temporalPatchSize;
  if (frames < tf) throw new Error(`${frames} frames: GLM needs at least ${tf}`);
  let h = height;
  let w = width;
  if (h < factor || w < factor) {
    const scale = Math.max(factor / h, factor / w);
    h = Math.trunc(h * scale);
    w = Math.trunc(w * scale);
  }
  if (Math.max(h, w) / Math.min(h, w) > 200) throw new Error(`${width}×${height}: aspect ratio over 200`);
  let hBar = roundHalfEven(h / factor) * factor;
  let wBar = roundHalfEven(w / factor) * factor;
  const tBar = roundHalfEven(frames / tf) * tf;
  if (tBar * hBar * wBar > v.maxPixels) {
    const beta = Math.sqrt((frames * h * w) / v.maxPixels);
    hBar = Math.max(factor, Math.floor(h / beta / factor) * factor);
    wBar = Math.max(factor, Math.floor(w / beta / factor) * factor);
  } else if (tBar * hBar * wBar < v.minPixels) {
    const beta = Math.sqrt(v.minPixels / (frames * h * w));
    hBar = Math.ceil((h * beta) / factor) * factor;
    wBar = Math.ceil((w * beta) / factor) * factor;
  }
  return { height: hBar, width: wBar };
}

export interface GlmImageTokens {
  resizedHeight: number;
  resizedWidth: number;
  /** `image_grid_thw`: [1, h/14, w/14] (a still image is one temporal patch). */
  gridThw: [number, number, number];
  /** `<|image|>` tokens: grid_h·grid_w / merge². */
  padCount: number;
}

/** One still image (transformers `Glm4vImageProcessor.resize`: `num_frames = temporal_patch_size`). */
export function glmImageTokens(width: number, height: number, v: GlmVision): GlmImageTokens {
  const r = glmSmartResize(v.temporalPatchSize, height, width, v);
  const gh = r.height / v.patchSize;
  const gw = r.width / v.patchSize;
  return {
    resizedHeight: r.height,
    resizedWidth: r.width,
    gridThw: [1, gh, gw],
    padCount: (gh * gw) / (v.mergeSize * v.mergeSize),
  };
}
