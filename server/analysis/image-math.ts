// Pad-token ↔ pixel-rectangle geometry of an image's token run, used by the overlays (the app
// imports this module: it imports nothing at run time). Patches are flattened (t, h/m, w/m, m, m)
// and merged per m×m block (docs/reference/image-math.md#pad-to-pixel-cell); the run itself comes
// from the model family's image math (server/families/<family>/).
//
// `padCell` takes (width, height) because that is how image sizes are written (W×H).

import type { ImageTokens } from '../model/vision.ts';

export type { ImageTokens };

function assertPositiveInteger(name: string, v: number): void {
  if (!Number.isInteger(v) || v <= 0) {
    throw new Error(`${name} must be a positive integer, got ${String(v)}`);
  }
}

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface PadCellInfo {
  row: number;
  col: number;
  /** Temporal slice (always 0 for still images). */
  t: number;
  /** The cell in resized-image px: [col·F, (col+1)·F) × [row·F, (row+1)·F). */
  resized: Rect;
  /** The same cell scaled back to the original image (fractional px). */
  original: Rect;
}

/**
 * Which part of the image the k-th pad token (0-based, within this image's pad run) covers.
 * Patches are flattened (t, h/m, w/m, m, m) and merged per m×m block (docs/reference/image-math.md), so
 * row = k // cellsWide, col = k % cellsWide within each temporal slice.
 */
export function padCell(k: number, tokens: ImageTokens, originalWidth: number, originalHeight: number): PadCellInfo {
  if (!Number.isInteger(k) || k < 0 || k >= tokens.padCount) {
    throw new RangeError(`pad index ${String(k)} out of range 0..${tokens.padCount - 1}`);
  }
  assertPositiveInteger('originalWidth', originalWidth);
  assertPositiveInteger('originalHeight', originalHeight);
  const perSlice = tokens.cellsWide * tokens.cellsHigh;
  const t = Math.floor(k / perSlice);
  const kk = k % perSlice;
  const row = Math.floor(kk / tokens.cellsWide);
  const col = kk % tokens.cellsWide;
  const F = tokens.cellSize;
  const resized: Rect = { x: col * F, y: row * F, w: F, h: F };
  // Multiply before dividing so integer-aligned edges stay exact where possible.
  const sx = (v: number): number => (v * originalWidth) / tokens.resizedWidth;
  const sy = (v: number): number => (v * originalHeight) / tokens.resizedHeight;
  const x0 = sx(resized.x);
  const y0 = sy(resized.y);
  const original: Rect = { x: x0, y: y0, w: sx(resized.x + F) - x0, h: sy(resized.y + F) - y0 };
  return { row, col, t, resized, original };
}

/** Inverse of `padCell`: the pad index (within the image's run) of merged cell (row, col) in slice `t`. */
export function cellToPad(row: number, col: number, tokens: ImageTokens, t = 0): number {
  const slices = tokens.padCount / (tokens.cellsWide * tokens.cellsHigh);
  if (!Number.isInteger(row) || row < 0 || row >= tokens.cellsHigh) {
    throw new RangeError(`row ${String(row)} out of range 0..${tokens.cellsHigh - 1}`);
  }
  if (!Number.isInteger(col) || col < 0 || col >= tokens.cellsWide) {
    throw new RangeError(`col ${String(col)} out of range 0..${tokens.cellsWide - 1}`);
  }
  if (!Number.isInteger(t) || t < 0 || t >= slices) {
    throw new RangeError(`temporal slice ${String(t)} out of range 0..${slices - 1}`);
  }
  return t * tokens.cellsWide * tokens.cellsHigh + row * tokens.cellsWide + col;
}
