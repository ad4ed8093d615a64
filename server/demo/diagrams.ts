// Geo3K-like geometry diagrams, drawn as SVG and rendered to PNG with sharp (librsvg), so the
// demo needs no downloads. Labels are SVG <text> in DejaVu Sans (fonts-dejavu-core). Coordinates
// are rounded to 0.1 px when written, so the SVG text, and with it the PNG bytes, is the same on
// every run.
import sharp from 'sharp';

type Point = readonly [number, number];

const num = (n: number): string => String(Math.round(n * 10) / 10);
const pt = (p: Point): string => `${num(p[0])},${num(p[1])}`;
const FONT = 'DejaVu Sans, sans-serif';
const INK = '#1a1a1a';

/** Point at `deg` degrees (counter-clockwise, y up as in a textbook) and distance `r` from `c`, in SVG coordinates. */
function polar(c: Point, r: number, deg: number): Point {
  const a = (deg * Math.PI) / 180;
  return [c[0] + r * Math.cos(a), c[1] - r * Math.sin(a)];
}

/** Direction of the ray from `a` through `b`, in degrees (counter-clockwise, y up). */
function direction(a: Point, b: Point): number {
  const deg = (Math.atan2(-(b[1] - a[1]), b[0] - a[0]) * 180) / Math.PI;
  return deg < 0 ? deg + 360 : deg;
}

class Figure {
  private readonly parts: string[] = [];
  constructor(
    readonly width: number,
    readonly height: number,
  ) {}

  line(a: Point, b: Point, opts: { width?: number; dashed?: boolean } = {}): this {
    this.parts.push(
      `<line x1="${num(a[0])}" y1="${num(a[1])}" x2="${num(b[0])}" y2="${num(b[1])}" stroke="${INK}" stroke-width="${opts.width ?? 3}"${opts.dashed ? ' stroke-dasharray="8 6"' : ''}/>`,
    );
    return this;
  }

  polygon(points: readonly Point[]): this {
    this.parts.push(
      `<polygon points="${points.map(pt).join(' ')}" fill="none" stroke="${INK}" stroke-width="3" stroke-linejoin="round"/>`,
    );
    return this;
  }

  circle(c: Point, r: number): this {
    this.parts.push(
      `<circle cx="${num(c[0])}" cy="${num(c[1])}" r="${num(r)}" fill="none" stroke="${INK}" stroke-width="3"/>`,
    );
    return this;
  }

  dot(c: Point): this {
    this.parts.push(`<circle cx="${num(c[0])}" cy="${num(c[1])}" r="4" fill="${INK}"/>`);
    return this;
  }

  text(
    p: Point,
    s: string,
    opts: { size?: number; italic?: boolean; anchor?: 'start' | 'middle' | 'end'; colour?: string } = {},
  ): this {
    const esc = s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
    this.parts.push(
      `<text x="${num(p[0])}" y="${num(p[1])}" font-family="${FONT}" font-size="${opts.size ?? 26}"${opts.italic ? ' font-style="italic"' : ''} text-anchor="${opts.anchor ?? 'middle'}" dominant-baseline="middle" fill="${opts.colour ?? INK}">${esc}</text>`,
    );
    return this;
  }

  /** Angle mark: an arc of radius `r` around `c` from `fromDeg` to `toDeg` (counter-clockwise). */
  arc(c: Point, r: number, fromDeg: number, toDeg: number): this {
    const a = polar(c, r, fromDeg);
    const b = polar(c, r, toDeg);
    const large = toDeg - fromDeg > 180 ? 1 : 0;
    this.parts.push(
      `<path d="M ${pt(a)} A ${num(r)} ${num(r)} 0 ${large} 0 ${pt(b)}" fill="none" stroke="${INK}" stroke-width="2"/>`,
    );
    return this;
  }

  /** Right-angle square at `corner` between the directions (in degrees) of its two sides. */
  rightAngle(corner: Point, deg1: number, deg2: number, size = 22): this {
    const a = polar(corner, size, deg1);
    const b = polar(corner, size, deg2);
    const d: Point = [a[0] + b[0] - corner[0], a[1] + b[1] - corner[1]];
    this.parts.push(`<polyline points="${pt(a)} ${pt(d)} ${pt(b)}" fill="none" stroke="${INK}" stroke-width="2"/>`);
    return this;
  }

  /** Equal-length tick across the middle of segment a–b. */
  tick(a: Point, b: Point): this {
    const m: Point = [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2];
    const deg = direction(a, b) + 90;
    return this.line(polar(m, 10, deg), polar(m, -10, deg), { width: 2 });
  }

  /** Parallel-line arrowhead at `p`, pointing along `deg`. */
  arrowhead(p: Point, deg: number): this {
    return this.line(polar(p, 14, deg + 150), p, { width: 2 }).line(polar(p, 14, deg - 150), p, { width: 2 });
  }

  svg(): string {
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${this.width}" height="${this.height}" viewBox="0 0 ${this.width} ${this.height}"><rect width="100%" height="100%" fill="#ffffff"/>${this.parts.join('')}</svg>`;
  }
}

export interface Diagram {
  width: number;
  height: number;
  svg: string;
}

/** A right triangle with legs 6 and 8 and hypotenuse x. */
function rightTriangle(): Diagram {
  const f = new Figure(640, 480);
  const A: Point = [150, 100];
  const B: Point = [150, 400];
  const C: Point = [550, 400];
  f.polygon([A, B, C]).rightAngle(B, 90, 0, 26);
  f.text([126, 88], 'A').text([124, 420], 'B').text([572, 420], 'C');
  f.text([124, 250], '6').text([350, 428], '8').text([384, 214], 'x', { italic: true });
  return { width: f.width, height: f.height, svg: f.svg() };
}

/** A circle with centre O and radius 5 cm. */
function circleRadius(): Diagram {
  const f = new Figure(448, 336);
  const O: Point = [224, 168];
  f.circle(O, 125).dot(O).line(O, [349, 168], { width: 2 });
  f.text([206, 190], 'O').text([288, 150], '5 cm', { size: 22 });
  return { width: f.width, height: f.height, svg: f.svg() };
}

const TRANSVERSAL_DEG = 65;
const P_UPPER: Point = [380, 150];
const P_LOWER: Point = polar(P_UPPER, 180 / Math.sin((TRANSVERSAL_DEG * Math.PI) / 180), TRANSVERSAL_DEG + 180);

/** Parallel lines l ∥ m cut by transversal t: one angle 65°, angle 1 (small label) to find. */
function parallelLines(): Diagram {
  const f = new Figure(640, 480);
  f.line([40, 150], [600, 150]).line([40, 330], [600, 330]);
  f.arrowhead([560, 150], 0).arrowhead([560, 330], 0);
  f.line(polar(P_LOWER, 140, TRANSVERSAL_DEG + 180), polar(P_UPPER, 130, TRANSVERSAL_DEG));
  f.arc(P_UPPER, 34, 0, TRANSVERSAL_DEG).text(polar(P_UPPER, 62, TRANSVERSAL_DEG / 2), '65°', { size: 22 });
  f.arc(P_LOWER, 24, TRANSVERSAL_DEG, 180).text(polar(P_LOWER, 40, (TRANSVERSAL_DEG + 180) / 2), '1', { size: 13 });
  f.text([616, 150], 'l', { italic: true })
    .text([616, 330], 'm', { italic: true })
    .text(polar(P_UPPER, 148, TRANSVERSAL_DEG), 't', { italic: true });
  return { width: f.width, height: f.height, svg: f.svg() };
}

/** A tall figure: a 6 × 10 rectangle on an isosceles triangle of height 8 (its label drawn small). */
function tallFigure(): Diagram {
  const f = new Figure(448, 1008);
  const [left, right, top, base] = [124, 324, 110, 443];
  const apex: Point = [224, 710];
  f.polygon([[left, top], [right, top], [right, base], apex, [left, base]]);
  f.line([left, base], [right, base], { width: 2, dashed: true }).line([224, base], apex, { width: 2, dashed: true });
  f.rightAngle([224, base], 0, 270, 16);
  f.text([224, top - 24], '6')
    .text([right + 26, (top + base) / 2], '10')
    .text([238, 560], '8', { size: 12 });
  f.text([left - 18, top - 14], 'A')
    .text([right + 18, top - 14], 'B')
    .text([right + 22, base + 4], 'C')
    .text([224, apex[1] + 28], 'D')
    .text([left - 22, base + 4], 'E');
  f.text([224, 930], 'Figure ABCDE', { size: 22, colour: '#555555' });
  return { width: f.width, height: f.height, svg: f.svg() };
}

/** An isosceles triangle with base angles 70° and apex angle x°. */
function isosceles(): Diagram {
  const f = new Figure(448, 336);
  const A: Point = [224, 46];
  const B: Point = [70, 296];
  const C: Point = [378, 296];
  f.polygon([A, B, C]).tick(A, B).tick(A, C);
  f.arc(B, 34, 0, direction(B, A)).arc(C, 34, direction(C, A), 180);
  f.text([132, 278], '70°', { size: 20 })
    .text([316, 278], '70°', { size: 20 })
    .text([224, 112], 'x°', { size: 22, italic: true });
  f.text([224, 22], 'A').text([50, 314], 'B').text([398, 314], 'C');
  return { width: f.width, height: f.height, svg: f.svg() };
}

/** Circle O with central angle AOB = 110° and inscribed angle ACB = x. */
function inscribedAngle(): Diagram {
  const f = new Figure(640, 480);
  const O: Point = [320, 230];
  const r = 180;
  const A = polar(O, r, 215);
  const B = polar(O, r, 325);
  const C = polar(O, r, 90);
  f.circle(O, r).dot(O).line(O, A, { width: 2 }).line(O, B, { width: 2 }).line(C, A).line(C, B);
  f.arc(O, 30, 215, 325).text(polar(O, 56, 270), '110°', { size: 20 });
  f.arc(C, 40, direction(C, A), direction(C, B)).text(polar(C, 66, 270), 'x', { italic: true });
  f.text(polar(O, 22, 150), 'O', { size: 22 })
    .text(polar(O, r + 24, 215), 'A')
    .text(polar(O, r + 24, 325), 'B')
    .text(polar(O, r + 22, 90), 'C');
  return { width: f.width, height: f.height, svg: f.svg() };
}

/** A trapezoid with bases 7 cm and 13 cm and height 6 cm. */
function trapezoid(): Diagram {
  const f = new Figure(640, 480);
  const [bl, br, bottom] = [90, 550, 380];
  const unit = (br - bl) / 13;
  const tl = (bl + br) / 2 - 3.5 * unit;
  const tr = (bl + br) / 2 + 3.5 * unit;
  const top = bottom - 6 * unit;
  f.polygon([
    [bl, bottom],
    [br, bottom],
    [tr, top],
    [tl, top],
  ]);
  f.line([tl, top], [tl, bottom], { width: 2, dashed: true }).rightAngle([tl, bottom], 90, 0, 18);
  f.text([(tl + tr) / 2, top - 24], '7 cm')
    .text([(bl + br) / 2, bottom + 30], '13 cm')
    .text([tl + 40, (top + bottom) / 2], '6 cm', { size: 22 });
  return { width: f.width, height: f.height, svg: f.svg() };
}

export const DIAGRAMS = {
  'right-triangle': rightTriangle(),
  'circle-radius': circleRadius(),
  'parallel-lines': parallelLines(),
  'tall-figure': tallFigure(),
  isosceles: isosceles(),
  'inscribed-angle': inscribedAngle(),
  trapezoid: trapezoid(),
} satisfies Record<string, Diagram>;
export type DiagramName = keyof typeof DIAGRAMS;

/** A `zoom` tool result: a region of a diagram, enlarged. */
export interface Zoom {
  of: DiagramName;
  box: { left: number; top: number; width: number; height: number };
  width: number;
  height: number;
}

export const ZOOMS = {
  'parallel-lines-angle-1': {
    of: 'parallel-lines',
    box: { left: Math.round(P_LOWER[0]) - 120, top: 240, width: 200, height: 150 },
    width: 336,
    height: 252,
  },
  'tall-figure-height': {
    of: 'tall-figure',
    box: { left: 164, top: 500, width: 120, height: 90 },
    width: 336,
    height: 252,
  },
} satisfies Record<string, Zoom>;
export type ZoomName = keyof typeof ZOOMS;

const PNG_OPTIONS = { compressionLevel: 9, adaptiveFiltering: false } as const;

export async function renderDiagram(d: Diagram): Promise<Buffer> {
  return sharp(Buffer.from(d.svg)).removeAlpha().png(PNG_OPTIONS).toBuffer();
}

export async function renderZoom(z: Zoom, diagramPng: Buffer): Promise<Buffer> {
  return sharp(diagramPng).extract(z.box).resize(z.width, z.height, { kernel: 'lanczos3' }).png(PNG_OPTIONS).toBuffer();
}
