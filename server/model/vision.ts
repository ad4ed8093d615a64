// The vision-encoder settings a model profile states and the image math reads
// (docs/reference/image-math.md): shared by profiles and analysis, so it lives below both.

export interface VisionConfig {
  /** ViT patch side in px: 14 for Qwen2/2.5-VL, 16 for Qwen3-VL. */
  patchSize: number;
  /** Spatial merge (m×m patches → one LLM token); 2 for all three generations. */
  mergeSize: number;
  /** Frames per temporal patch (2); a still image is repeated, so grid_t stays 1. */
  temporalPatchSize: number;
  minPixels: number;
  maxPixels: number;
}
