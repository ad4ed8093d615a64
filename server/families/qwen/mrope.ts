// mRoPE (3-D rotary) position ids for Qwen-VL sequences, as computed by `get_rope_index`.
//
// Pure, O(n). Sources (summarized in docs/reference/mrope.md):
// - huggingface/transformers models/qwen2_vl/modeling_qwen2_vl.py `Qwen2VLModel.get_rope_index`
//   (copied as QwenLM/Qwen3-VL qwen-vl-finetune/qwenvl/data/rope2d.py `get_rope_index_2`;
//   verl verl/models/transformers/qwen3_vl.py `get_rope_index`).
// - verl 0.8 (batch, 4, seq) layout: verl/experimental/agent_loop/agent_loop.py `_compute_position_ids`.
//
// Images: Qwen2-VL, Qwen2.5-VL and Qwen3-VL agree. Videos: Qwen2-VL's temporal index is
// 0..grid_t−1; Qwen2.5-VL scales it by second_per_grid_t·tokens_per_second
// (modeling_qwen2_5_vl.py `get_rope_index`, vLLM's mrope `_vl_get_input_positions_tensor`:
// `(arange(t) · second_per_grid_t · tokens_per_second).long()`); Qwen3-VL splits videos per
// temporal slice, each a [1, h, w] block after its timestamp text (docs/reference/mrope.md#qwen3-vl).

import type { VisionConfig } from '../../model/vision.ts';
import type { PositionIds, PositionMedia } from '../family.ts';
import type { QwenTokens } from './ids.ts';
import { padCountFromGrid } from './image-math.ts';
import { timestamped } from './video.ts';

export interface MropeOptions {
  imagePadId: number;
  videoPadId: number;
  visionStartId: number;
  mergeSize: number;
  /**
   * Per vision item (as `grids`), the factor its temporal index is scaled by before flooring
   * (Qwen2.5-VL: second_per_grid_t · tokens_per_second); absent or undefined: none.
   */
  temporalScale?: readonly (number | undefined)[];
}

export type Grid = readonly [number, number, number];

export interface MropePositions {
  /** [temporal, height, width] rows, each of the sequence's length. */
  rows: [number[], number[], number[]];
  /** mrope_position_delta = max(position) + 1 − length (what decoding adds to the text position). */
  delta: number;
}

export interface VerlPositions {
  /** Row 0 = plain text positions 0..n−1; rows 1–3 = the mRoPE rows. */
  rows: [number[], number[], number[], number[]];
  delta: number;
}

/**
 * mRoPE position ids of one unpadded sequence.
 *
 * `grids` are the `[t, h, w]` of the vision items in order of appearance (images and videos
 * interleaved as they occur in `tokens`). A vision item is a `<|vision_start|>` immediately followed by
 * an image or video pad, as in transformers; its pads are then located from the cursor onwards.
 * Extra trailing grids are ignored (as transformers does, e.g. for a sequence truncated before its
 * last image); too few grids, or a pad run whose length disagrees with its grid, throw.
 */
export function mropePositionIds(
  tokens: readonly number[],
  grids: readonly Grid[],
  opts: MropeOptions,
): MropePositions {
  const { imagePadId, videoPadId, visionStartId, mergeSize } = opts;
  const n = tokens.length;
  const isPad = (tok: number | undefined): boolean => tok === imagePadId || tok === videoPadId;

  // transformers counts items as the tokens right after each <|vision_start|> that are pads.
  let items = 0;
  for (let i = 0; i + 1 < n; i++) {
    if (tokens[i] === visionStartId && isPad(tokens[i + 1])) items++;
  }
  if (grids.length < items) {
    throw new Error(
      `sequence has ${items} vision spans (<|vision_start|> followed by a pad token) but only ${grids.length} ` +
        `grid_thw entr${grids.length === 1 ? 'y' : 'ies'} were given`,
    );
  }

  const tRow = new Array<number>(n).fill(0);
  const hRow = new Array<number>(n).fill(0);
  const wRow = new Array<number>(n).fill(0);
  let next = 0; // next free position = max position so far + 1
  let st = 0; // cursor into tokens; only moves forward, hence O(n)

  for (let item = 0; item < items; item++) {
    // Text up to the next pad gets ordinary 1-D positions on all three rows.
    let ed = st;
    while (ed < n && !isPad(tokens[ed])) {
      tRow[ed] = hRow[ed] = wRow[ed] = next++;
      ed++;
    }
    if (ed >= n) {
      // Unreachable for counted items (each has a pad after its vision_start); guards malformed input.
      throw new Error(`vision item ${item}: no image/video pad token found at or after index ${st}`);
    }
    const grid = grids[item] as Grid; // length checked above
    const padCount = padCountFromGrid(grid, mergeSize);
    const padId = tokens[ed];
    const kind = padId === imagePadId ? 'image' : 'video';
    const end = ed + padCount;
    let run = 0;
    while (ed + run < n && run < padCount && tokens[ed + run] === padId) run++;
    if (run < padCount || tokens[end] === padId) {
      let actual = run;
      while (ed + actual < n && tokens[ed + actual] === padId) actual++;
      throw new Error(
        `vision item ${item} (${kind}): grid_thw [${grid.join(', ')}] implies ${padCount} pad tokens ` +
          `from index ${ed}, but the run of ${kind} pads there has ${actual}` +
          (ed + actual >= n ? ' and reaches the end of the sequence (truncated?)' : ''),
      );
    }

    const lt = grid[0];
    const lh = grid[1] / mergeSize;
    const lw = grid[2] / mergeSize;
    const scale = opts.temporalScale?.[item];
    const tAt = (ti: number) => (scale === undefined ? ti : Math.trunc(ti * scale));
    let k = ed;
    // Order t, then h, then w — the same flattening the processor and merger use.
    for (let ti = 0; ti < lt; ti++) {
      const tp = tAt(ti);
      for (let hi = 0; hi < lh; hi++) {
        for (let wi = 0; wi < lw; wi++) {
          tRow[k] = next + tp;
          hRow[k] = next + hi;
          wRow[k] = next + wi;
          k++;
        }
      }
    }
    // transformers: st_idx = previous block's max + 1.
    next += Math.max(tAt(lt - 1) + 1, lh, lw);
    st = end;
  }

  for (let i = st; i < n; i++) {
    tRow[i] = hRow[i] = wRow[i] = next++;
  }

  // `next` is always max position + 1 (0 for an empty sequence).
  return { rows: [tRow, hRow, wRow], delta: next - n };
}

/**
 * verl 0.8's per-sample `(4, seq_len)` position ids: row 0 = text positions 0..n−1 (unpadded
 * sequence), rows 1–3 = `mropePositionIds` (docs/reference/mrope.md#verls-4-row-layout).
 */
export function verlPositionIds(tokens: readonly number[], grids: readonly Grid[], opts: MropeOptions): VerlPositions {
  const m = mropePositionIds(tokens, grids, opts);
  const text = Array.from({ length: tokens.length }, (_, i) => i);
  return { rows: [text, m.rows[0], m.rows[1], m.rows[2]], delta: m.delta };
}

/**
 * A Qwen sequence's mRoPE rows from its media in order: a Qwen3-VL video is split into one
 * [1, h, w] block per temporal slice (its runs sit between timestamp texts); a Qwen2.5-VL video's
 * temporal index is scaled by its second_per_grid_t and the model's tokens_per_second.
 */
export function qwenPositionIds(
  tokens: readonly number[],
  media: readonly PositionMedia[],
  t: QwenTokens,
  vision: VisionConfig,
): PositionIds {
  const grids: Grid[] = [];
  const temporalScale: (number | undefined)[] = [];
  for (const m of media) {
    if (m.kind === 'video' && timestamped(vision)) {
      for (let s = 0; s < m.grid[0]; s++) {
        grids.push([1, m.grid[1], m.grid[2]]);
        temporalScale.push(undefined);
      }
      continue;
    }
    grids.push(m.grid);
    temporalScale.push(
      m.kind === 'video' && vision.tokensPerSecond !== undefined
        ? (m.secondsPerGrid ?? 1) * vision.tokensPerSecond
        : undefined,
    );
  }
  const r = mropePositionIds(tokens, grids, {
    imagePadId: t.imagePad,
    videoPadId: t.videoPad,
    visionStartId: t.visionStart,
    mergeSize: vision.mergeSize,
    temporalScale,
  });
  return { rows: r.rows, delta: r.delta };
}
