// What the analysis needs besides the trajectory: the model profile and the image-processor
// settings in force for each image. Precedence, field by field (docs/reference/image-math.md#which-settings-apply):
// the image's own (a qwen-vl-utils image dict) > the call's (`mm_processor_kwargs` of the call whose
// prompt the images are checked in) > the record's > the run's (`--min-pixels`/`--max-pixels`) >
// the model's defaults. RL recipes routinely change max_pixels per run, and per request.
import type { ImageRef, ProcessorSettings, Trajectory } from '../model/trajectory.ts';
import type { ModelProfile } from '../profiles/profile.ts';
import type { MismatchThresholds } from './logprob-mismatch.ts';
import type { ImageTokens, VideoTokens, VisionConfig } from '../model/vision.ts';
import type { MediaRuns } from '../families/family.ts';

export interface ImageExpectation {
  /** Token math for the image, when its size is known and valid. */
  tokens?: ImageTokens;
  vision: VisionConfig;
  /** Why no expectation could be computed (unknown size, aspect ratio > 200, ...). */
  problem?: string;
}

/** A video's expected token runs (the family's video math), or why none could be computed. */
export interface VideoExpectation {
  tokens?: VideoTokens;
  vision: VisionConfig;
  problem?: string;
}

export interface AnalysisContext {
  profile: ModelProfile;
  /** One entry per trajectory image, in order of appearance. */
  images: ImageExpectation[];
  /** One entry per trajectory video, in order of appearance (absent: none). */
  videos?: VideoExpectation[];
  /** Thresholds for rollout-vs-trainer logprobs (`--max-logprob-delta`, `--is-cap`, …); defaults when absent. */
  mismatch?: MismatchThresholds;
}

/** Settings stated in several places, field by field: the first place that states a field wins. */
export function mergeProcessorSettings(...places: (ProcessorSettings | undefined)[]): ProcessorSettings | undefined {
  const minPixels = places.find((p) => p?.minPixels !== undefined)?.minPixels;
  const maxPixels = places.find((p) => p?.maxPixels !== undefined)?.maxPixels;
  if (minPixels === undefined && maxPixels === undefined) return undefined;
  return { ...(minPixels !== undefined ? { minPixels } : {}), ...(maxPixels !== undefined ? { maxPixels } : {}) };
}

/**
 * The settings of the call whose stream the images are checked in. Each call re-processes every
 * image of its prompt with its own kwargs (vLLM applies a request's `mm_processor_kwargs` to all
 * of its images), so the checked stream is the last call's: the last turn with prompt ids, or for
 * a stored sample the last turn. A call that states none takes the latest earlier call's (a log
 * that states them once), and failing that any call's.
 */
export function callSettings(traj: Trajectory): ProcessorSettings | undefined {
  const turns = traj.turns;
  let checked = turns.length - 1;
  if (!traj.sample) while (checked > 0 && !turns[checked]!.promptIds) checked--;
  for (let k = checked; k >= 0; k--) if (turns[k]!.processor) return turns[k]!.processor;
  return turns.find((t) => t.processor)?.processor;
}

/** What a trajectory states for all of its images: its call's settings over its record's, field by field. */
export function statedProcessor(traj: Trajectory): ProcessorSettings | undefined {
  return mergeProcessorSettings(callSettings(traj), traj.processor);
}

export function visionConfigFor(
  profile: ModelProfile,
  image: ImageRef | undefined,
  stated: ProcessorSettings | undefined,
  overrides: ProcessorSettings | undefined,
): VisionConfig {
  // Min/max pixels bound the resize only where the family's processor has them (ModelFamily.pixelBounds).
  if (!profile.modelFamily.pixelBounds) return { ...profile.vision };
  return {
    ...profile.vision,
    minPixels: image?.minPixels ?? stated?.minPixels ?? overrides?.minPixels ?? profile.vision.minPixels,
    maxPixels: image?.maxPixels ?? stated?.maxPixels ?? overrides?.maxPixels ?? profile.vision.maxPixels,
  };
}

export function analysisContext(
  traj: Trajectory,
  profile: ModelProfile,
  overrides?: ProcessorSettings,
): AnalysisContext {
  const stated = statedProcessor(traj);
  const images = traj.images.map((img): ImageExpectation => {
    const vision = visionConfigFor(profile, img, stated, overrides);
    if (!img.width || !img.height) return { vision, problem: img.unavailable ?? 'image size unknown' };
    try {
      return { vision, tokens: profile.modelFamily.imageTokens(img.width, img.height, vision) };
    } catch (e) {
      return { vision, problem: (e as Error).message };
    }
  });
  const family = profile.modelFamily;
  const videos = (traj.videos ?? []).map((v): VideoExpectation => {
    const vision = visionConfigFor(profile, undefined, stated, overrides);
    if (!family.videoTokens) return { vision, problem: `${family.label} models take no video` };
    const frames = v.frameCount ?? v.frames?.length;
    if (v.unavailable || !v.width || !v.height || !frames)
      return { vision, problem: v.unavailable ?? 'video frame size or count unknown' };
    try {
      const input = {
        width: v.width,
        height: v.height,
        frames,
        ...(v.fps !== undefined ? { fps: v.fps } : {}),
        ...(v.timestamps ? { timestamps: v.timestamps } : {}),
      };
      return { vision, tokens: family.videoTokens(input, vision) };
    } catch (e) {
      return { vision, problem: (e as Error).message };
    }
  });
  return { profile, images, ...(videos.length > 0 ? { videos } : {}) };
}

export function expectedPadCounts(ctx: AnalysisContext): (number | undefined)[] {
  return ctx.images.map((i) => i.tokens?.padCount);
}

/** What each media item's placeholder expands to, where its size is known (the family's run). */
export function expectedMedia(ctx: AnalysisContext): MediaRuns {
  return {
    images: ctx.images.map((i) => (i.tokens ? { pads: i.tokens.padCount, tokens: i.tokens } : undefined)),
    videos: (ctx.videos ?? []).map((v) => v.tokens),
  };
}
