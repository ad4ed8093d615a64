// Kimi K2.5 and Kimi-VL image token counts (docs/reference/models/kimi.md#images): a NaViT resize
// that only ever shrinks (a patch budget over the whole image and a limit per side), then padding
// up to multiples of patch·merge (28 px); N = (H'/28)·(W'/28). Pure functions.

/** `media_proc_cfg` of Kimi K2.5's `preprocessor_config.json` (the fields the count reads). */
export interface KimiMediaConfig {
  /** `patch_size` (14). */
  patchSize: number;
  /** `merge_kernel_size` (2; some configs write [2, 2]). */
  mergeKernelSize: number;
  /** `in_patch_limit`: most 14 px patches an image keeps (16384). */
  inPatchLimit: number;
  /** `patch_limit_on_one_side`: most patches along either side (512). */
  patchLimitOnOneSide: number;
  /** `fixed_output_tokens`: when set, every image is this many tokens (null in the released config). */
  fixedOutputTokens: number | null;
}

/** Kimi K2.5's defaults (`DEFAULT_MEDIA_PROC_CFG` in the engines that read it; the released `media_proc_cfg`). */
export const KIMI_K25_MEDIA_DEFAULTS: KimiMediaConfig = {
  patchSize: 14,
  mergeKernelSize: 2,
  inPatchLimit: 16384,
  patchLimitOnOneSide: 512,
  fixedOutputTokens: null,
};

export interface NavitResize {
  /** Size after the shrink, before padding. */
  newWidth: number;
  newHeight: number;
  /** Padding (right, bottom) up to a multiple of patch·merge. */
  padWidth: number;
  padHeight: number;
  /** `<|media_pad|>` tokens the image is worth. */
  numTokens: number;
}

/**
 * `navit_resize_image` of Kimi K2.5's media processing (vLLM `kimi_k25` processors and the
 * checkpoint's own code agree line for line): scale = min(1, sqrt(in_patch_limit / (⌊w/14⌋·⌊h/14⌋)),
 * side limits), sides truncated, clamped to the side limit, padded to multiples of 28.
 * Throws where it asserts (a padded side over the limit).
 */
export function navitResizeImage(width: number, height: number, c: KimiMediaConfig): NavitResize {
  const p = c.patchSize;
  const s1 = Math.sqrt(c.inPatchLimit / (Math.max(1, Math.floor(width / p)) * Math.max(1, Math.floor(height / p))));
  const s2 = (c.patchLimitOnOneSide * p) / width;
  const s3 = (c.patchLimitOnOneSide * p) / height;
  const scale = Math.min(1, s1, s2, s3);
  const maxSide = c.patchLimitOnOneSide * p;
  const newWidth = Math.min(Math.max(1, Math.trunc(width * scale)), maxSide);
  const newHeight = Math.min(Math.max(1, Math.trunc(height * scale)), maxSide);
  const factor = c.mergeKernelSize * p;
  const padHeight = (factor - (newHeight % factor)) % factor;
  const padWidth = (factor - (newWidth % factor)) % factor;
  let numTokens: number;
  if (c.fixedOutputTokens !== null) numTokens = c.fixedOutputTokens;
  else {
    const th = (newHeight + padHeight) / factor;
    const tw = (newWidth + padWidth) / factor;
    if (th * c.mergeKernelSize > c.patchLimitOnOneSide || tw * c.mergeKernelSize > c.patchLimitOnOneSide)
      throw new Error(`${width}×${height}: a padded side passes patch_limit_on_one_side ${c.patchLimitOnOneSide}`);
    numTokens = th * tw;
  }
  return { newWidth, newHeight, padWidth, padHeight, numTokens };
}

/**
 * Kimi-VL (`KimiVLProcessor.get_image_tokens`, its `in_token_limit` on 14 px patches and no side
 * limit): shrink when ⌊w/14⌋·⌊h/14⌋ passes the limit, pad to multiples of 28, count the cells.
 */
export function kimiVlImageTokens(
  width: number,
  height: number,
  inTokenLimit: number,
  patchSize = 14,
  merge = 2,
): number {
  let w = width;
  let h = height;
  if (Math.floor(w / patchSize) * Math.floor(h / patchSize) > inTokenLimit) {
    const scale = Math.sqrt(inTokenLimit / (Math.floor(w / patchSize) * Math.floor(h / patchSize)));
    w = Math.trunc(w * scale);
    h = Math.trunc(h * scale);
  }
  const f = merge * patchSize;
  const ph = (f - (h % f)) % f;
  const pw = (f - (w % f)) % f;
  return ((h + ph) / f) * ((w + pw) / f);
}
