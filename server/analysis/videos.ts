// Video checks: each video's runs in the stream the data holds against what its frames give under
// the model family's video math (docs/reference/models/qwen.md#video): how many runs (one per
// temporal slice on Qwen3-VL and Qwen3.5, one for Qwen2/2.5-VL), the pads of each, the text the
// processor writes before each run (Qwen3-VL's `<t seconds>`), and the stored `video_grid_thw`.
// A run count or pad count off is `placeholder_count` (another frame count or frame size); runs
// shortened the way vLLM's Efficient Video Sampling shortens them are `placeholder_count` with cause
// `video_pruned` (the trainer's processor gives every slice its full run); timestamps off are
// `video_timestamps` (the processor was told another fps, or other frame times).
import type { Finding, StreamName } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import type { AnalysisContext } from './context.ts';
import { imageSpans } from './stray-vision.ts';
import type { VisionSpan } from './vision-spans.ts';

/** Whether `actual` run lengths are `expected`'s the way vLLM's EVS prunes: the first slice whole, the others evened out. */
export function looksPruned(expected: readonly number[], actual: readonly number[]): boolean {
  if (expected.length !== actual.length || expected.length < 2 || actual[0] !== expected[0]) return false;
  const rest = actual.slice(1);
  const total = rest.reduce((n, x) => n + x, 0);
  const even = Math.floor(total / rest.length);
  const extra = total % rest.length;
  const fewer = actual.some((n, i) => n < expected[i]!);
  return fewer && rest.every((n, i) => n === even + (i < extra ? 1 : 0));
}

/**
 * The video findings of `tokens` (the stream the data holds: `stream`, turn `turn`). Videos are
 * matched to their spans in order, each taking as many runs as it is expected to have; checking
 * stops at the first video whose runs do not line up (those after it cannot be told apart).
 */
export async function checkVideos(
  traj: Trajectory,
  ctx: AnalysisContext,
  observed: { tokens: readonly number[]; stream: StreamName; turn: number },
): Promise<Finding[]> {
  const out: Finding[] = [];
  const { profile } = ctx;
  const { tokenizer } = profile;
  const videos = ctx.videos ?? [];
  const spans = imageSpans(traj, observed.tokens, profile).filter((s) => s.kind === 'video');
  const stored = traj.sample?.videoGridThw;
  if (videos.length === 0 && spans.length === 0) return out;
  const { stream, turn } = observed;
  const piece = (id: number) => tokenizer.piece(id);
  const video = profile.ids.media.video;
  const padName = video ? piece(video.pad) : 'video pad';
  const known = (traj.videos?.length ?? 0) > 0 || (stored?.length ?? 0) > 0;
  const expectedVideos = (traj.videos?.length ?? 0) > 0 ? (traj.videos?.length ?? 0) : (stored?.length ?? 0);
  if (known && spans.length === 0) {
    out.push({
      kind: 'image_count',
      severity: 'error',
      turn,
      index: -1,
      stream,
      field: 'videos',
      expected: expectedVideos,
      actual: 0,
      message: `${expectedVideos} video${expectedVideos === 1 ? '' : 's'} in the ${(traj.videos?.length ?? 0) > 0 ? 'messages' : 'stored video_grid_thw'} but no video span in the tokens: the video was dropped before the model saw it`,
    });
    return out;
  }

  let at = 0;
  for (let i = 0; i < Math.max(videos.length, stored?.length ?? 0); i++) {
    const e = videos[i]?.tokens;
    const grid = stored?.[i];
    const count = e?.runs.length ?? 1;
    const mine: VisionSpan[] = spans.slice(at, at + count);
    at += count;
    if (mine.length === 0) break;
    const first = mine[0]!;
    const cut = mine.find((s) => s.end < 0);
    if (cut) {
      out.push({
        kind: 'image_truncated',
        severity: 'error',
        turn,
        index: cut.padStart,
        stream,
        field: `videos.${i}`,
        ...(e ? { expected: e.padCount } : {}),
        actual: mine.reduce((n, s) => n + s.padLength, 0),
        message: `the sequence is cut inside video ${i}: the trainer gets pixels for the whole video and ${padName} tokens for part of it`,
      });
      break;
    }
    const actualPads = mine.map((s) => s.padLength);
    const total = actualPads.reduce((n, x) => n + x, 0);
    if (grid) {
      let fromGrid: number | undefined;
      try {
        fromGrid = profile.modelFamily.padCountFromGrid(grid, videos[i]?.vision ?? profile.vision);
      } catch {
        fromGrid = undefined;
      }
      // Runs pruned by EVS are reported below, with their cause.
      const pruned =
        e !== undefined &&
        looksPruned(
          e.runs.map((r) => r.pads),
          actualPads,
        );
      if (fromGrid !== undefined && fromGrid !== total && !pruned) {
        out.push({
          kind: 'placeholder_count',
          severity: 'error',
          turn,
          index: first.padStart,
          stream,
          field: `videos.${i}`,
          expected: fromGrid,
          actual: total,
          message: `video ${i} has ${total} ${padName} tokens but its video_grid_thw [${grid.join(', ')}] gives ${fromGrid}`,
        });
        continue;
      }
    }
    if (!e) continue;
    const v = traj.videos?.[i];
    const described = `video ${i} (${v?.frameCount ?? v?.frames?.length ?? '?'} frames of ${e.resizedWidth}×${e.resizedHeight} after resizing${v?.fps !== undefined ? `, ${v.fps} fps` : ''})`;
    const expectedPads = e.runs.map((r) => r.pads);
    // Another number of runs: the next span belongs to this video too, or this video has fewer.
    const next = spans[at];
    const gapBefore = next ? next.start - (mine[mine.length - 1]!.end + 1) : Infinity;
    const moreRuns = e.runs.length > 1 && next && gapBefore >= 0 && gapBefore <= 16;
    if (mine.length < e.runs.length || moreRuns) {
      let actualRuns = mine.length;
      if (moreRuns) {
        let prevEnd = mine[mine.length - 1]!.end;
        for (let j = at; j < spans.length && spans[j]!.start - (prevEnd + 1) <= 16; j++) {
          actualRuns++;
          prevEnd = spans[j]!.end;
        }
      }
      out.push({
        kind: 'placeholder_count',
        severity: 'error',
        turn,
        index: first.start >= 0 ? first.start : first.padStart,
        stream,
        field: `videos.${i}`,
        expected: e.runs.length,
        actual: actualRuns,
        message: `${described} gives ${e.runs.length} runs of ${e.runs[0]!.pads} ${padName} tokens (one per ${profile.vision.temporalPatchSize} frames) but the sequence holds ${actualRuns}: the processor was given another number of frames`,
      });
      break;
    }
    if (actualPads.some((n, k) => n !== expectedPads[k])) {
      const pruned = looksPruned(expectedPads, actualPads);
      const k = actualPads.findIndex((n, j) => n !== expectedPads[j]);
      out.push({
        kind: 'placeholder_count',
        ...(pruned ? { cause: 'video_pruned' as const } : {}),
        severity: 'error',
        turn,
        index: mine[k]!.padStart,
        stream,
        field: `videos.${i}`,
        expected: expectedPads,
        actual: actualPads,
        message: pruned
          ? `${described}: its first run keeps all ${expectedPads[0]} ${padName} tokens and the other ${actualPads.length - 1} are evened out to ${total - actualPads[0]!} of ${e.padCount - expectedPads[0]!}, as vLLM's Efficient Video Sampling (--video-pruning-rate) prunes them; the trainer's processor gives every slice its full run, so training sees other tokens than the rollout`
          : `${described}: run ${k} has ${actualPads[k]} ${padName} tokens, its frames give ${expectedPads[k]} (another frame size or other processor bounds)`,
      });
      break;
    }
    // The text before each run (Qwen3-VL's timestamps).
    for (let k = 0; k < mine.length; k++) {
      const text = e.runs[k]!.textBefore;
      if (text === '') continue;
      const want = await tokenizer.encode(text);
      const span = mine[k]!;
      const from = span.start - want.length;
      const got = observed.tokens.slice(Math.max(0, from), span.start);
      if (from >= 0 && got.every((id, j) => id === want[j])) continue;
      // As many tokens as the expected text has (within this video's runs): what the stream says there.
      const prevEnd = k > 0 ? mine[k - 1]!.end + 1 : 0;
      const gotText = tokenizer.decodeSync(observed.tokens.slice(Math.max(prevEnd, from), span.start));
      out.push({
        kind: 'video_timestamps',
        severity: 'error',
        turn,
        index: Math.max(0, from),
        stream,
        field: `videos.${i}`,
        expected: text,
        actual: gotText,
        message: `${described}: slice ${k} is written ${JSON.stringify(gotText)} but its frames give ${JSON.stringify(text)}: the processor was told another fps or other frame times, so the model saw other times than the video's`,
      });
      break;
    }
  }
  return out;
}
