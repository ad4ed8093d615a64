// Qwen video → token runs (docs/reference/image-math.md#video, docs/reference/models/qwen.md#video).
//
// Qwen2-VL / Qwen2.5-VL (huggingface/transformers models/qwen2_vl/video_processing_qwen2_vl.py):
// every frame is resized with the image `smart_resize` under the video bounds; frames are padded
// to a multiple of temporal_patch_size by repeating the last; grid = [frames / tps, h / patch,
// w / patch]; one run of grid_t·grid_h·grid_w / merge² `<|video_pad|>`. Qwen2.5-VL also passes
// `second_per_grid_ts = temporal_patch_size / fps` (fps 2 when unstated) to its mRoPE positions
// (processing_qwen2_5_vl.py).
//
// Qwen3-VL and Qwen3.5 (models/qwen3_vl/video_processing_qwen3_vl.py and processing_qwen3_vl.py):
// the resize budget counts every frame (a 3-D `smart_resize(num_frames, h, w, temporal_factor)`),
// and the processor writes, per temporal slice, `<{t:.1f} seconds>` + `<|vision_start|>` +
// grid_h·grid_w / merge² pads + `<|vision_end|>`, t the mean of the slice's first and last frame
// timestamps (`_calculate_timestamps`, frame indices padded with the last to a multiple of tps,
// timestamp = index / fps; fps 24 when the video states none).
//
// vLLM's Efficient Video Sampling (`--video-pruning-rate q`, vllm/multimodal/evs.py
// `compute_retained_tokens_count`, vllm/model_executor/models/qwen3_vl.py) keeps
// max(per frame, int(per frame · slices · (1 − q))) pads: all of the first slice's, the rest spread
// evenly over the others (the first ones one more).
import { pythonFormatFixed } from '../../profiles/python-literal.ts';
import type { VideoTokens, VisionConfig } from '../../model/vision.ts';
import type { VideoInput } from '../family.ts';
import { MAX_ASPECT_RATIO, smartResize } from './image-math.ts';
import { roundHalfEven } from '../../util/python-round.ts';

/** transformers' Qwen3-VL default when a video states no fps ("Defaulting to `fps=24`"). */
export const DEFAULT_TIMESTAMP_FPS = 24;
/** processing_qwen2_5_vl.py: `fps = videos_kwargs.get("fps", 2.0)`. */
export const DEFAULT_QWEN25_FPS = 2;

/** Whether a generation's processor writes timestamps between per-slice runs (Qwen3-VL and later). */
export const timestamped = (vision: VisionConfig): boolean => vision.extra?.videoTimestamps === true;

function positiveInteger(name: string, v: number): void {
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${name} must be a positive integer, got ${String(v)}`);
}

/**
 * Qwen3-VL's video `smart_resize(num_frames, height, width, temporal_factor, factor, min_pixels,
 * max_pixels)` → (height, width): the bounds count t_bar·h_bar·w_bar pixels over all frames.
 */
export function smartResizeVideo(
  frames: number,
  height: number,
  width: number,
  temporalFactor: number,
  factor: number,
  minPixels: number,
  maxPixels: number,
): { height: number; width: number } {
  positiveInteger('frames', frames);
  positiveInteger('height', height);
  positiveInteger('width', width);
  if (frames < temporalFactor) throw new Error(`t:${frames} must be larger than temporal_factor:${temporalFactor}`);
  let h = height;
  let w = width;
  if (h < factor || w < factor) {
    const scale = Math.max(factor / h, factor / w);
    h = Math.trunc(h * scale);
    w = Math.trunc(w * scale);
  }
  const ratio = Math.max(h, w) / Math.min(h, w);
  if (ratio > MAX_ASPECT_RATIO)
    throw new Error(
      `absolute aspect ratio must be smaller than ${MAX_ASPECT_RATIO}, got ${ratio} (video ${width}×${height})`,
    );
  let hBar = roundHalfEven(h / factor) * factor;
  let wBar = roundHalfEven(w / factor) * factor;
  const tBar = roundHalfEven(frames / temporalFactor) * temporalFactor;
  if (tBar * hBar * wBar > maxPixels) {
    const beta = Math.sqrt((frames * h * w) / maxPixels);
    hBar = Math.max(factor, Math.floor(h / beta / factor) * factor);
    wBar = Math.max(factor, Math.floor(w / beta / factor) * factor);
  } else if (tBar * hBar * wBar < minPixels) {
    const beta = Math.sqrt(minPixels / (frames * h * w));
    hBar = Math.ceil((h * beta) / factor) * factor;
    wBar = Math.ceil((w * beta) / factor) * factor;
  }
  return { height: hBar, width: wBar };
}

/**
 * `_calculate_timestamps(indices, fps, temporal_patch_size)`, from the frames' seconds (index / fps):
 * padded with the last to a multiple of tps, then the mean of each slice's first and last.
 */
export function sliceTimestamps(seconds: readonly number[], temporalPatchSize: number): number[] {
  const padded = [...seconds];
  if (padded.length % temporalPatchSize !== 0) {
    const last = padded[padded.length - 1]!;
    while (padded.length % temporalPatchSize !== 0) padded.push(last);
  }
  const out: number[] = [];
  for (let i = 0; i < padded.length; i += temporalPatchSize)
    out.push((padded[i]! + padded[i + temporalPatchSize - 1]!) / 2);
  return out;
}

/** The text Qwen3-VL writes before a slice's run. */
export const timestampText = (seconds: number): string => `<${pythonFormatFixed(seconds, 1)} seconds>`;

/** vLLM EVS: the pads each slice keeps under `video_pruning_rate` q (q = 0: all). */
export function evsRunLengths(perSlice: number, slices: number, q: number): number[] {
  if (!(q > 0)) return Array.from({ length: slices }, () => perSlice);
  if (slices <= 1) return slices === 1 ? [perSlice] : [];
  const retained = Math.max(perSlice, Math.trunc(perSlice * slices * (1 - q)));
  const remaining = Math.max(retained - perSlice, 0);
  const base = Math.floor(remaining / (slices - 1));
  const extra = remaining % (slices - 1);
  return [perSlice, ...Array.from({ length: slices - 1 }, (_, i) => base + (i < extra ? 1 : 0))];
}

/** The token runs of one video on a Qwen model. */
export function qwenVideoTokens(video: VideoInput, vision: VisionConfig, pruningRate = 0): VideoTokens {
  positiveInteger('patchSize', vision.patchSize);
  positiveInteger('mergeSize', vision.mergeSize);
  positiveInteger('frames', video.frames);
  const tps = vision.temporalPatchSize;
  const cellSize = vision.patchSize * vision.mergeSize;
  const bounds = vision.video ?? { minPixels: vision.minPixels, maxPixels: vision.maxPixels };
  const stamped = timestamped(vision);
  const r = stamped
    ? smartResizeVideo(video.frames, video.height, video.width, tps, cellSize, bounds.minPixels, bounds.maxPixels)
    : smartResize(video.height, video.width, cellSize, bounds.minPixels, bounds.maxPixels);
  if (r.height === 0 || r.width === 0)
    throw new Error(
      `video ${video.width}×${video.height} resizes to ${r.width}×${r.height}; a zero side cannot be tokenized`,
    );
  const frames = Math.ceil(video.frames / tps) * tps;
  const gridThw: [number, number, number] = [frames / tps, r.height / vision.patchSize, r.width / vision.patchSize];
  const cellsWide = r.width / cellSize;
  const cellsHigh = r.height / cellSize;
  const perSlice = cellsWide * cellsHigh;
  let runs: VideoTokens['runs'];
  let secondsPerGrid: number | undefined;
  if (stamped) {
    const fps = video.fps ?? DEFAULT_TIMESTAMP_FPS;
    const seconds =
      video.timestamps && video.timestamps.length === video.frames
        ? video.timestamps
        : Array.from({ length: video.frames }, (_, i) => i / fps);
    const stamps = sliceTimestamps(seconds, tps);
    const lengths = evsRunLengths(perSlice, gridThw[0], pruningRate);
    runs = stamps.map((s, i) => ({ pads: lengths[i]!, textBefore: timestampText(s) }));
  } else {
    runs = [{ pads: gridThw[0] * perSlice, textBefore: '' }];
    if (vision.tokensPerSecond !== undefined) secondsPerGrid = tps / (video.fps ?? DEFAULT_QWEN25_FPS);
  }
  return {
    resizedWidth: r.width,
    resizedHeight: r.height,
    gridThw,
    padCount: runs.reduce((n, run) => n + run.pads, 0),
    cellSize,
    cellsWide,
    cellsHigh,
    frames,
    runs,
    ...(secondsPerGrid !== undefined ? { secondsPerGrid } : {}),
  };
}
