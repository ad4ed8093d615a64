// A prompt cut on the left: vLLM's `truncate_prompt_tokens` keeps the last N prompt tokens, and
// frameworks cap the prompt the same way (a max prompt length, left truncation). When the cut
// falls inside an image's pad run, the engine (or the trainer) gets the image's pixels but only
// part of its placeholder: the first token of the stream is a pad (or the span's end token with
// every pad gone) without its begin token.
import type { Finding, StreamName } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import { imagesInMessages } from '../model/message-images.ts';
import type { AnalysisContext } from './context.ts';
import { findVisionSpans } from './vision-spans.ts';

/** `image_truncated` at token 0 of every stream that starts inside an image's pad run. */
export function checkLeftTruncation(traj: Trajectory, ctx: AnalysisContext): Finding[] {
  const out: Finding[] = [];
  const last = traj.turns.length - 1;
  traj.turns.forEach((t, k) => {
    if (!t.promptIds) return;
    // Images the prompt held before the cut: its own messages', else (the last or only call) the trajectory's.
    const imageCount = t.messages
      ? imagesInMessages(t.messages).length
      : k === last
        ? traj.images.length || undefined
        : undefined;
    const f = leftCut(t.promptIds, 'prompt', k, imageCount, traj, ctx);
    if (f) out.push(f);
  });
  const s = traj.sample;
  if (s) {
    const imageCount = traj.images.length || s.imageGridThw?.length || undefined;
    const f = leftCut(s.tokens, 'sample', -1, imageCount, traj, ctx);
    if (f) out.push(f);
  }
  return out;
}

function leftCut(
  tokens: readonly number[],
  stream: StreamName,
  turn: number,
  imageCount: number | undefined,
  traj: Trajectory,
  ctx: AnalysisContext,
): Finding | undefined {
  const { ids, vision, tokenizer } = ctx.profile;
  const media = ids.media;
  const first = tokens[0];
  const startsInPads = first === media.image.pad || first === media.video?.pad;
  if (!startsInPads && first !== media.image.end && first !== media.video?.end) return undefined;
  const spans = findVisionSpans(tokens, ctx.profile);
  // The cut span is the first one when the stream starts with pads; with only the end token left, it kept none.
  const kept = startsInPads ? spans[0]!.padLength : 0;
  const whole = startsInPads ? spans.length - 1 : spans.length;
  const image = imageCount !== undefined && imageCount > whole ? imageCount - whole - 1 : undefined;
  const grid = image !== undefined ? traj.sample?.imageGridThw?.[image] : undefined;
  const expected =
    (grid ? ctx.profile.modelFamily.padCountFromGrid(grid, vision) : undefined) ??
    (image !== undefined ? ctx.images[image]?.tokens?.padCount : undefined);
  const kind =
    media.video && first === media.video.pad && media.video.pad !== media.image.pad ? media.video : media.image;
  const pad = tokenizer.piece(kind.pad);
  const begin = tokenizer.piece(kind.begin);
  const which = image !== undefined ? `image ${image}` : 'an image';
  const missing =
    expected !== undefined ? `${expected - kept} of its ${expected} ${pad} tokens` : `its first ${pad} tokens`;
  return {
    kind: 'image_truncated',
    severity: 'error',
    turn,
    index: 0,
    stream,
    ...(image !== undefined ? { image } : {}),
    ...(expected !== undefined ? { expected } : {}),
    actual: kept,
    message: `the ${stream === 'sample' ? 'sample' : `prompt of turn ${turn}`} is cut on the left inside ${which}: it starts with ${kept} ${pad} and no ${begin}, so ${begin} and ${missing} are missing (truncate_prompt_tokens or a max prompt length kept the last tokens); the engine gets pixels for the whole image and placeholders for part of it`,
  };
}
