// Image → token math for Qwen2-VL / Qwen2.5-VL / Qwen3-VL: smart_resize, image_grid_thw,
// <|image_pad|> and <|video_pad|> counts (the pad-cell geometry is server/analysis/image-math.ts).
//
// Pure functions, no I/O. Sources (summarized in docs/reference/image-math.md):
// - Variant A: huggingface/transformers src/transformers/models/qwen2_vl/image_processing_qwen2_vl.py
//   `smart_resize` (v5); vLLM imports the same function (vllm/model_executor/models/qwen2_vl.py).
// - Variant B: QwenLM/Qwen2.5-VL and QwenLM/Qwen3-VL qwen-vl-utils/src/qwen_vl_utils/vision_process.py
//   `smart_resize` (used by verl's fetch_image and slime's process_vision_info).
// - grid / pad counts: transformers processing_qwen3_vl.py (`image_grid_thw.prod() // merge_size**2`),
//   vLLM `get_replacement_qwen2vl`.
//
// Argument order: `smartResize` takes (height, width) like the Python original; the friendlier
// `imageTokens` / `padCell` take (width, height) because that is how image sizes are written (W×H).

import { roundHalfEven } from '../../util/python-round.ts';
import type { ImageTokens, VisionConfig } from '../../model/vision.ts';

export type { ImageTokens, VisionConfig };

export type ResizeVariant = 'transformers' | 'qwen-vl-utils';

/** Both variants reject images whose long/short side ratio exceeds this (MAX_RATIO). */
export const MAX_ASPECT_RATIO = 200;

function assertPositiveInteger(name: string, v: number): void {
  if (!Number.isInteger(v) || v <= 0) {
    throw new Error(`${name} must be a positive integer, got ${String(v)}`);
  }
}

/**
 * Port of Qwen-VL `smart_resize(height, width, factor, min_pixels, max_pixels)` → resized (height, width),
 * both multiples of `factor` (= patch_size·merge_size: 28 for Qwen2/2.5-VL, 32 for Qwen3-VL).
 *
 * NOTE the (height, width) argument order, as in Python.
 *
 * `variant`:
 * - `'transformers'` (default; HF processor and vLLM): clamps to `factor` only in the shrink branch.
 * - `'qwen-vl-utils'`: clamps the rounded sides to `factor` up-front, no clamp when shrinking.
 * They differ only when a side rounds to 0 (side < factor/2), see docs/reference/image-math.md#smart_resize.
 *
 * The expression order (`h / beta / factor`, `h * beta / factor`) is kept from Python on purpose:
 * with the same IEEE-754 operations in the same order the results are bit-identical.
 * Like Python, the result can contain a 0 side (variant B, extreme shrink); callers that need a
 * usable size should check (see `imageTokens`).
 */
export function smartResize(
  height: number,
  width: number,
  factor: number,
  minPixels: number,
  maxPixels: number,
  variant: ResizeVariant = 'transformers',
): { height: number; width: number } {
  assertPositiveInteger('height', height);
  assertPositiveInteger('width', width);
  assertPositiveInteger('factor', factor);
  if (!Number.isFinite(minPixels) || minPixels < 0) throw new Error(`minPixels must be ≥ 0, got ${String(minPixels)}`);
  if (!Number.isFinite(maxPixels) || maxPixels <= 0) throw new Error(`maxPixels must be > 0, got ${String(maxPixels)}`);

  const ratio = Math.max(height, width) / Math.min(height, width);
  if (ratio > MAX_ASPECT_RATIO) {
    throw new Error(
      `absolute aspect ratio must be smaller than ${MAX_ASPECT_RATIO}, got ${ratio} ` +
        `(height ${height}, width ${width}); the Qwen-VL processor rejects this image`,
    );
  }

  let hBar = roundHalfEven(height / factor) * factor;
  let wBar = roundHalfEven(width / factor) * factor;
  if (variant === 'qwen-vl-utils') {
    hBar = Math.max(factor, hBar);
    wBar = Math.max(factor, wBar);
  }
  // Products stay far below 2^53 for any real image, so the comparisons are exact.
  if (hBar * wBar > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    hBar = Math.floor(height / beta / factor) * factor;
    wBar = Math.floor(width / beta / factor) * factor;
    if (variant === 'transformers') {
      hBar = Math.max(factor, hBar);
      wBar = Math.max(factor, wBar);
    }
  } else if (hBar * wBar < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    hBar = Math.ceil((height * beta) / factor) * factor;
    wBar = Math.ceil((width * beta) / factor) * factor;
  }
  return { height: hBar, width: wBar };
}

/**
 * Token layout of one still image of `width`×`height` px (NOTE: W, H order, unlike `smartResize`).
 * grid_thw = [1, rh/patch, rw/patch]: still images always have grid_t = 1 (the frame is repeated
 * to temporal_patch_size inside the patch, not in the grid).
 */
export function imageTokens(
  width: number,
  height: number,
  vision: VisionConfig,
  variant: ResizeVariant = 'transformers',
): ImageTokens {
  assertPositiveInteger('patchSize', vision.patchSize);
  assertPositiveInteger('mergeSize', vision.mergeSize);
  const cellSize = vision.patchSize * vision.mergeSize;
  const r = smartResize(height, width, cellSize, vision.minPixels, vision.maxPixels, variant);
  if (r.height === 0 || r.width === 0) {
    // Python returns this too, but the processor then fails on a zero-size resize.
    throw new Error(
      `image ${width}×${height} resizes to ${r.width}×${r.height} (${variant}); a zero side cannot be tokenized`,
    );
  }
  const gridThw: [number, number, number] = [1, r.height / vision.patchSize, r.width / vision.patchSize];
  return {
    resizedWidth: r.width,
    resizedHeight: r.height,
    gridThw,
    padCount: padCountFromGrid(gridThw, vision.mergeSize),
    cellSize,
    cellsWide: r.width / cellSize,
    cellsHigh: r.height / cellSize,
  };
}

/**
 * <|image_pad|> (or <|video_pad|>) count implied by a stored grid: t·h·w / merge².
 * Throws if h or w is not a multiple of merge: such a grid cannot come from a Qwen-VL processor
 * (Python's `//` would silently floor it).
 */
export function padCountFromGrid(grid: readonly [number, number, number], mergeSize: number): number {
  const [t, h, w] = grid;
  assertPositiveInteger('mergeSize', mergeSize);
  for (const [name, v] of [
    ['grid_t', t],
    ['grid_h', h],
    ['grid_w', w],
  ] as const) {
    if (!Number.isInteger(v) || v <= 0)
      throw new Error(`${name} must be a positive integer, got ${String(v)} in grid [${grid.join(', ')}]`);
  }
  if (h % mergeSize !== 0 || w % mergeSize !== 0) {
    throw new Error(`grid [${grid.join(', ')}]: grid_h and grid_w must be multiples of merge_size ${mergeSize}`);
  }
  return t * (h / mergeSize) * (w / mergeSize);
}
