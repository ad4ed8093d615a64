// The vision-encoder settings a model profile states and the token layout of one image or video
// (docs/reference/image-math.md): shared by families, profiles, analysis and the app (pad-cell
// overlays), so it lives below all of them. Each family fills the fields its processor has.

export interface VisionConfig {
  /** ViT patch side in px: 14 for Qwen2/2.5-VL, 16 for Qwen3-VL. */
  patchSize: number;
  /** Spatial merge (m×m patches → one LLM token); 2 for all three generations. */
  mergeSize: number;
  /** Frames per temporal patch (2); a still image is repeated, so grid_t stays 1. */
  temporalPatchSize: number;
  minPixels: number;
  maxPixels: number;
  /**
   * The video processor's bounds when it has its own (Qwen2-VL and 2.5-VL: per frame; Qwen3-VL and
   * later: over all frames, `video_preprocessor_config.json` `size`); absent: the image bounds.
   */
  video?: { minPixels: number; maxPixels: number };
  /** Qwen2.5-VL `vision_config.tokens_per_second`: mRoPE temporal positions per second of video. */
  tokensPerSecond?: number;
  /** Settings only one family's processor reads (Gemma 4 `max_soft_tokens`, Kimi `in_patch_limit`), by their config name. */
  extra?: Readonly<Record<string, number | boolean>>;
}

/** The token run one still image becomes, and the geometry of its pads (pad-cell overlays). */
export interface ImageTokens {
  resizedWidth: number;
  resizedHeight: number;
  /** [grid_t, grid_h, grid_w] in ViT patches (pre-merge), as stored in `image_grid_thw`. */
  gridThw: [number, number, number];
  /** Number of pad tokens in the image's run. */
  padCount: number;
  /** Side in resized px of the square one pad token covers (patch·merge). */
  cellSize: number;
  /** Merged cells per row / column (= grid_w/merge, grid_h/merge). */
  cellsWide: number;
  cellsHigh: number;
}

/** The token runs one video becomes. */
export interface VideoTokens extends ImageTokens {
  /** Frames the processor reads after padding (a multiple of temporal_patch_size). */
  frames: number;
  /**
   * Each run in order, with the text the processor writes before its begin token: one run for
   * Qwen2/2.5-VL; one per temporal slice for Qwen3-VL, each after `<t seconds>`.
   */
  runs: { pads: number; textBefore: string }[];
  /** Qwen2.5-VL `second_per_grid_ts` (temporal_patch_size / fps), what its mRoPE positions scale by. */
  secondsPerGrid?: number;
}
