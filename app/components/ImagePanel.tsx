// Each image at its real aspect ratio with the merged-patch grid of the image math on top.
// Hovering a cell lights its pad token in the stream and vice versa (through the hover store).
// A wrong pad count or a truncated image is drawn on the picture: cells with no pad token are
// hatched red, pads with no cell are counted in red.
import { useState } from 'react';
import type { Finding } from '../../server/model/finding.ts';
import type { ImageInfo, TrajectoryDetail } from '../../server/http/api.ts';
// The same pure pad↔cell mapping the server's checks use, not a re-implementation.
import { cellToPad, padCell, type ImageTokens } from '../../server/analysis/image-math.ts';
import { useLitPad, useSetHover } from '../stores/hover.ts';
import { useParam } from '../stores/route.ts';
import { api } from '../api.ts';
import { formatCount } from '../format.ts';

const PREVIEW_WIDTH = 720;
const MAX_HEIGHT = 440;

function Overlay({ info, trajectoryId, findings }: { info: ImageInfo; trajectoryId: string; findings: Finding[] }) {
  const layout = info.layout as ImageTokens | null;
  const hover = useSetHover();
  const litPad = useLitPad(info.index);
  const [failed, setFailed] = useState(false);
  const W = info.width ?? layout?.resizedWidth ?? 1;
  const H = info.height ?? layout?.resizedHeight ?? 1;
  const cells = layout ? layout.cellsWide * layout.cellsHigh : 0;
  const actual = info.actualPads;
  const truncated = findings.some((f) => f.kind === 'image_truncated' && f.image === info.index);
  const countWrong = findings.some((f) => f.kind === 'placeholder_count' && f.image === info.index);
  // Cells whose pad never reached the stream (cut, too few pads, or no span at all: a dropped image).
  const dropped = actual === null && findings.some((f) => f.kind === 'image_count');
  const missingFrom = !layout ? 0 : dropped ? 0 : actual !== null && actual < cells ? actual : cells;
  const extra = actual !== null && layout ? actual - cells : 0;

  const onMove = (e: React.MouseEvent<SVGSVGElement>) => {
    if (!layout) return;
    const box = e.currentTarget.getBoundingClientRect();
    const x = ((e.clientX - box.left) / box.width) * layout.resizedWidth;
    const y = ((e.clientY - box.top) / box.height) * layout.resizedHeight;
    const col = Math.min(layout.cellsWide - 1, Math.max(0, Math.floor(x / layout.cellSize)));
    const row = Math.min(layout.cellsHigh - 1, Math.max(0, Math.floor(y / layout.cellSize)));
    const k = cellToPad(row, col, layout);
    if (k !== litPad) hover(info.index, k, 'image');
  };

  const lit = layout && litPad >= 0 && litPad < cells ? padCell(litPad, layout, W, H) : null;
  const lines: string[] = [];
  if (layout) {
    for (let c = 1; c < layout.cellsWide; c++) {
      const x = (c * layout.cellSize * W) / layout.resizedWidth;
      lines.push(`M${x} 0V${H}`);
    }
    for (let r = 1; r < layout.cellsHigh; r++) {
      const y = (r * layout.cellSize * H) / layout.resizedHeight;
      lines.push(`M0 ${y}H${W}`);
    }
  }
  const missingRects = [];
  if (layout && missingFrom < cells) {
    // Whole rows where possible: a cut image loses its bottom rows.
    for (let k = missingFrom; k < cells; ) {
      const cell = padCell(k, layout, W, H);
      const rowEnd = Math.min(cells, (cell.row + 1) * layout.cellsWide);
      const last = padCell(rowEnd - 1, layout, W, H);
      missingRects.push(
        <rect
          key={k}
          className="missing"
          x={cell.original.x}
          y={cell.original.y}
          width={last.original.x + last.original.w - cell.original.x}
          height={cell.original.h}
        />,
      );
      k = rowEnd;
    }
  }
  return (
    <figure className="overlay" data-image={info.index}>
      {/* Real aspect ratio; tall images are bounded by height so the whole grid stays in view. */}
      <div
        className="imgbox"
        style={{ aspectRatio: `${W} / ${H}`, width: `min(100%, ${Math.round((MAX_HEIGHT * W) / H)}px)` }}
      >
        {info.hasPreview && !failed ? (
          <img
            src={api.previewUrl(trajectoryId, info.index, PREVIEW_WIDTH)}
            // Below the fold, a preview waits until scrolled to: 16 resizes at once slow the first screen.
            loading="lazy"
            alt={`input ${info.index} of the trajectory, ${W}×${H}`}
            onError={() => setFailed(true)}
          />
        ) : (
          <div className="noimg">{info.unavailable ?? 'image bytes not available'}</div>
        )}
        {layout && (
          <svg
            viewBox={`0 0 ${W} ${H}`}
            preserveAspectRatio="none"
            onMouseMove={onMove}
            onMouseLeave={() => hover(null, null, null)}
            data-testid={`grid-${info.index}`}
          >
            <title>{`merged-cell grid of input ${info.index}: point at a cell to light its pad token`}</title>
            <path d={lines.join('')} className="gridlines" vectorEffect="non-scaling-stroke" />
            {missingRects}
            {lit && (
              <rect
                className="litcell"
                data-lit-cell={`${lit.row},${lit.col}`}
                x={lit.original.x}
                y={lit.original.y}
                width={lit.original.w}
                height={lit.original.h}
                vectorEffect="non-scaling-stroke"
              />
            )}
          </svg>
        )}
      </div>
      <figcaption>
        <div className="caption-title">
          <b>image {info.index}</b> {info.width && info.height ? `${info.width}×${info.height}` : ''}
          {layout && ` → ${layout.resizedWidth}×${layout.resizedHeight}`}
        </div>
        {layout && (
          <table className="facts">
            <tbody>
              <tr>
                <th>image_grid_thw</th>
                <td>
                  [{layout.gridThw.join(', ')}] · {layout.cellsWide}×{layout.cellsHigh} merged cells of{' '}
                  {layout.cellSize}px
                </td>
              </tr>
              <tr>
                <th>pads expected / actual</th>
                <td className={countWrong || truncated || dropped ? 'bad' : ''} data-testid={`pads-${info.index}`}>
                  {info.expectedPads ?? '?'} / {actual ?? 'none'}
                  {extra > 0 && <b className="badnote"> · {extra} extra pads have no cell</b>}
                  {dropped && <b className="badnote"> · this image has no pad tokens in the stream: it was dropped</b>}
                  {!dropped && missingFrom < cells && (
                    <b className="badnote"> · {cells - missingFrom} cells have no pad (hatched)</b>
                  )}
                </td>
              </tr>
              {info.storedGrid && (
                <tr>
                  <th>stored grid</th>
                  <td>[{info.storedGrid.join(', ')}]</td>
                </tr>
              )}
              <tr>
                <th>processor</th>
                <td>
                  min_pixels {formatCount(info.settings.minPixels)} · max_pixels {formatCount(info.settings.maxPixels)}{' '}
                  · patch {info.settings.patchSize} · merge {info.settings.mergeSize}
                </td>
              </tr>
              {lit && (
                <tr className="hoverinfo">
                  <th>pad {litPad}</th>
                  <td>
                    row {lit.row}, col {lit.col} · x {Math.round(lit.original.x)}–
                    {Math.round(lit.original.x + lit.original.w)}, y {Math.round(lit.original.y)}–
                    {Math.round(lit.original.y + lit.original.h)} px
                  </td>
                </tr>
              )}
            </tbody>
          </table>
        )}
        {info.problem && <div className="badnote small">{info.problem}</div>}
      </figcaption>
    </figure>
  );
}

export function ImagePanel({ detail, findings }: { detail: TrajectoryDetail; findings: Finding[] }) {
  const focus = useParam('image');
  if (detail.images.length === 0) return null;
  const order = detail.images
    .slice()
    .sort((a, b) => Number(b.index === Number(focus)) - Number(a.index === Number(focus)));
  return (
    <section className="panel images" aria-label="images">
      <h2>
        Images <span className="muted">({detail.images.length}) · hover a cell or a pad token</span>
      </h2>
      {order.map((info) => (
        <Overlay key={info.index} info={info} trajectoryId={detail.summary.id} findings={findings} />
      ))}
    </section>
  );
}
