// What the analysis needs besides the trajectory: the model profile and the image-processor
// settings in force for each image. Record-stated settings win over run overrides, which win
// over the model's defaults (RL recipes routinely change max_pixels per run).
import type { ImageRef, ProcessorSettings, Trajectory } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import type { MismatchThresholds } from './logprob-mismatch.ts';
import { imageTokens, type ImageTokens, type VisionConfig } from './image-math.ts';

export interface ImageExpectation {
  /** Token math for the image, when its size is known and valid. */
  tokens?: ImageTokens;
  vision: VisionConfig;
  /** Why no expectation could be computed (unknown size, aspect ratio > 200, ...). */
  problem?: string;
}

export interface AnalysisContext {
  profile: ModelProfile;
  /** One entry per trajectory image, in order of appearance. */
  images: ImageExpectation[];
  /** Thresholds for rollout-vs-trainer logprobs (`--max-logprob-delta`, `--is-cap`, …); defaults when absent. */
  mismatch?: MismatchThresholds;
}

export function visionConfigFor(
  profile: ModelProfile,
  image: ImageRef | undefined,
  record: ProcessorSettings | undefined,
  overrides: ProcessorSettings | undefined,
): VisionConfig {
  return {
    ...profile.vision,
    minPixels: image?.minPixels ?? record?.minPixels ?? overrides?.minPixels ?? profile.vision.minPixels,
    maxPixels: image?.maxPixels ?? record?.maxPixels ?? overrides?.maxPixels ?? profile.vision.maxPixels,
  };
}

export function analysisContext(
  traj: Trajectory,
  profile: ModelProfile,
  overrides?: ProcessorSettings,
): AnalysisContext {
  const record = traj.processor ?? traj.turns.find((t) => t.processor)?.processor;
  const images = traj.images.map((img): ImageExpectation => {
    const vision = visionConfigFor(profile, img, record, overrides);
    if (!img.width || !img.height) return { vision, problem: img.unavailable ?? 'image size unknown' };
    try {
      return { vision, tokens: imageTokens(img.width, img.height, vision) };
    } catch (e) {
      return { vision, problem: (e as Error).message };
    }
  });
  return { profile, images };
}

export function expectedPadCounts(ctx: AnalysisContext): (number | undefined)[] {
  return ctx.images.map((i) => i.tokens?.padCount);
}
