// Gemma 4's image token count (docs/reference/models/gemma4.md#images): the image is resized,
// keeping its aspect ratio, to the largest size whose sides are multiples of
// pooling_kernel_size · patch_size (3 · 16 = 48 px) within a budget of max_soft_tokens · 3² patches;
// each 3×3 block of 16 px patches is pooled into one soft token. Pure functions; transformers'
// processor and vLLM's estimate are both here because they are different code and a run is made
// by one of them.

/** `max_soft_tokens` values the image processor accepts (transformers `_SUPPORTED_SOFT_TOKENS`). */
export const SUPPORTED_SOFT_TOKENS = [70, 140, 280, 560, 1120] as const;

export interface Gemma4Vision {
  /** `patch_size` (16). */
  patchSize: number;
  /** `pooling_kernel_size` (3): k×k patches pool into one soft token. */
  poolingKernelSize: number;
  /** `max_soft_tokens` (280 for images by default; 70 per video frame). */
  maxSoftTokens: number;
}

export const GEMMA4_IMAGE_DEFAULTS: Gemma4Vision = { patchSize: 16, poolingKernelSize: 3, maxSoftTokens: 280 };
export const GEMMA4_VIDEO_FRAME_DEFAULTS: Gemma4Vision = { patchSize: 16, poolingKernelSize: 3, maxSoftTokens: 70 };

export interface Gemma4Resize {
  height: number;
  width: number;
  /** Soft tokens: (height/patch)·(width/patch)/k². */
  softTokens: number;
}

/**
 * transformers `get_aspect_ratio_preserving_size` (image_processing_gemma4.py), then the count
 * `Gemma4ImageProcessor._preprocess` takes from the patches. Throws as it does: a 0×0 target, or a
 * target over the patch budget.
 */
export function aspectRatioPreservingSize(height: number, width: number, v: Gemma4Vision): Gemma4Resize {
  const { patchSize: p, poolingKernelSize: k, maxSoftTokens } = v;
  const maxPatches = maxSoftTokens * k * k;
  const targetPx = maxPatches * p * p;
  const factor = Math.sqrt(targetPx / (height * width));
  const side = k * p;
  let h = Math.floor((factor * height) / side) * side;
  let w = Math.floor((factor * width) / side) * side;
  if (h === 0 && w === 0) throw new Error(`${width}×${height}: Gemma 4 would resize it to 0×0`);
  const maxSide = Math.floor(maxPatches / (k * k)) * side;
  if (h === 0) {
    h = side;
    w = Math.min(Math.floor(width / height) * side, maxSide);
  } else if (w === 0) {
    w = side;
    h = Math.min(Math.floor(height / width) * side, maxSide);
  }
  if (h * w > targetPx)
    throw new Error(`${width}×${height}: Gemma 4 would resize it to ${w}×${h}, over ${maxPatches} patches`);
  return { height: h, width: w, softTokens: Math.floor(((h / p) * (w / p)) / (k * k)) };
}

/**
 * vLLM `Gemma4ProcessingInfo._compute_num_soft_tokens` (gemma4_mm.py): the same resize with each
 * side at least one unit and no special case for a side rounded to zero, the count clamped to
 * `max_soft_tokens` (vLLM's fix for 3×900-like images, where it had estimated 289 against the
 * processor's 280).
 */
export function vllmSoftTokens(width: number, height: number, v: Gemma4Vision): number {
  const { patchSize: p, poolingKernelSize: k, maxSoftTokens } = v;
  const unit = p * k;
  const maxPatches = maxSoftTokens * k * k;
  const scale = Math.sqrt(maxPatches / ((height / p) * (width / p)));
  const h = Math.max(unit, Math.floor((height * scale) / unit) * unit);
  const w = Math.max(unit, Math.floor((width * scale) / unit) * unit);
  const patches = Math.floor(h / p) * Math.floor(w / p);
  return Math.min(Math.floor(patches / (k * k)), maxSoftTokens);
}
