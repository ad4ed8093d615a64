// One uPlot chart as a React component: created once per `options`, fed new data with setData,
// sized to its container. uPlot draws on canvas (docs/plots.md: why this library): a trend of
// 1,000 steps or a series of 10^5 points draws in tens of ms and hovers without a long task.
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export type PlotData = uPlot.AlignedData;
export type PlotOptions = Omit<uPlot.Options, 'width'>;

/** The x range a zoom shows (null: the whole data). */
export type XRange = { min: number; max: number } | null;

export interface UPlotChartProps {
  options: PlotOptions;
  data: PlotData;
  /** Shared by the charts of a page: a drag on one zooms all of them; a double click shows all again. */
  zoom?: XRange;
  onZoom?: (range: XRange) => void;
  /** A click (not a drag) on the plot area: the x value under the cursor. */
  onPick?: (x: number) => void;
  /** A drag on a chart whose drag does not zoom (`drag.setScale: false`): the x range selected. */
  onSelect?: (lo: number, hi: number) => void;
  /** Series (by index) left out of the legend. */
  legendHidden?: readonly number[];
  label: string;
  testId?: string;
}

export function UPlotChart({
  options,
  data,
  zoom,
  onZoom,
  onPick,
  onSelect,
  legendHidden,
  label,
  testId,
}: UPlotChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const handlers = useRef({ onZoom, onPick, onSelect });
  handlers.current = { onZoom, onPick, onSelect };
  const applying = useRef(false);
  const dataRef = useRef(data);
  dataRef.current = data;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    // Charts with one sync key mirror each other's selection: a chart answers only its own drag.
    let ownDrag = false;
    const full = (u: uPlot) => {
      const xs = u.data[0];
      return xs.length === 0 || (u.scales.x!.min! <= xs[0]! && u.scales.x!.max! >= xs[xs.length - 1]!);
    };
    const u = new uPlot(
      {
        ...options,
        width: Math.max(200, el.clientWidth),
        hooks: {
          ...options.hooks,
          setScale: [
            ...(options.hooks?.setScale ?? []),
            (self, key) => {
              if (key !== 'x' || applying.current) return;
              const { min, max } = self.scales.x!;
              if (min === undefined || max === undefined) return;
              handlers.current.onZoom?.(full(self) ? null : { min, max });
            },
          ],
          setSelect: [
            ...(options.hooks?.setSelect ?? []),
            (self) => {
              const { left, width } = self.select;
              if (!ownDrag || width <= 0 || !handlers.current.onSelect) return;
              handlers.current.onSelect(self.posToVal(left, 'x'), self.posToVal(left + width, 'x'));
            },
          ],
        },
      },
      dataRef.current,
      el,
    );
    chart.current = u;
    const rows = u.root.querySelectorAll<HTMLElement>('.u-legend .u-series');
    for (const i of legendHidden ?? []) if (rows[i]) rows[i].style.display = 'none';
    // A click picks; the click that ends a drag (a zoom, a brush) does not.
    let downAt = Number.NaN;
    const down = (e: MouseEvent) => {
      downAt = e.clientX;
      ownDrag = true;
      // uPlot ends the drag (setSelect) in its own mouseup handler; after that the drag is over.
      document.addEventListener('mouseup', () => setTimeout(() => (ownDrag = false)), { once: true });
    };
    const pick = (e: MouseEvent) => {
      if (!(Math.abs(e.clientX - downAt) <= 3)) return;
      const idx = u.cursor.idx;
      if (idx !== null && idx !== undefined) {
        const x = u.data[0][idx];
        if (x !== undefined) handlers.current.onPick?.(x);
      }
    };
    u.over.addEventListener('mousedown', down);
    u.over.addEventListener('click', pick);
    const resize = new ResizeObserver(() => {
      const width = Math.max(200, el.clientWidth);
      if (width !== u.width) u.setSize({ width, height: u.height });
    });
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.over.removeEventListener('mousedown', down);
      u.over.removeEventListener('click', pick);
      u.destroy();
      chart.current = null;
    };
  }, [options, legendHidden]);

  useEffect(() => {
    const u = chart.current;
    if (!u || u.data === data) return;
    applying.current = true;
    u.setData(data, zoom === null || zoom === undefined);
    applying.current = false;
    if (zoom) u.setScale('x', zoom);
  }, [data, zoom]);

  useEffect(() => {
    const u = chart.current;
    if (!u || zoom === undefined) return;
    const { min, max } = u.scales.x!;
    const xs = u.data[0];
    const want = zoom ?? (xs.length > 0 ? { min: xs[0]!, max: xs[xs.length - 1]! } : null);
    if (!want || (want.min === min && want.max === max)) return;
    applying.current = true;
    if (zoom) u.setScale('x', want);
    else u.setData(u.data, true);
    applying.current = false;
  }, [zoom]);

  return <div className="uplot-box" ref={box} role="img" aria-label={label} data-testid={testId} />;
}
