// Tests for server/analysis/image-math.ts against docs/reference/image-math.md, plus an exact comparison
// with a literal Python port of both smart_resize variants (run by python3, pure stdlib) over a
// seeded random sweep — Python's own round()/float ops are the reference, not our TS.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  imageTokens,
  padCountFromGrid,
  smartResize,
  type ImageTokens,
  type VisionConfig,
} from '../server/families/qwen/image-math.ts';
import { cellToPad, padCell } from '../server/analysis/image-math.ts';
import { mulberry32 } from '../server/util/random.ts';
import { roundHalfEven } from '../server/util/python-round.ts';

const QWEN25: VisionConfig = {
  patchSize: 14,
  mergeSize: 2,
  temporalPatchSize: 2,
  minPixels: 3136,
  maxPixels: 12845056,
};
const QWEN25_1280: VisionConfig = { ...QWEN25, maxPixels: 1280 * 28 * 28 };
const QWEN3: VisionConfig = {
  patchSize: 16,
  mergeSize: 2,
  temporalPatchSize: 2,
  minPixels: 65536,
  maxPixels: 16777216,
};

const hasPython = spawnSync('python3', ['--version']).status === 0;

function runPython(src: string, input: unknown): unknown {
  const r = spawnSync('python3', ['-c', src, fileURLToPath(new URL('./support', import.meta.url))], {
    input: JSON.stringify(input),
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`python3 failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

// Straight from the pseudocode in docs/reference/image-math.md#smart_resize; Python's round() is half-to-even.
const PY_SMART_RESIZE = `
import sys, json
sys.path.insert(0, sys.argv[1])
from smart_resize import smart_resize_a, smart_resize_b

req = json.load(sys.stdin)
out = {"resize": [], "round": [round(x) for x in req["round"]]}
for cfg in req["configs"]:
    fn = smart_resize_a if cfg["variant"] == "transformers" else smart_resize_b
    res = []
    for h, w in req["sizes"]:
        try:
            res.append(list(fn(h, w, cfg["factor"], cfg["min"], cfg["max"])))
        except ValueError:
            res.append(None)
    out["resize"].append(res)
print(json.dumps(out))
`;

describe('roundHalfEven', () => {
  it('matches Python round() on halves and non-halves', () => {
    const cases: [number, number][] = [
      [0.5, 0],
      [1.5, 2],
      [2.5, 2],
      [3.5, 4],
      [4.5, 4],
      [-0.5, 0],
      [-1.5, -2],
      [-2.5, -2],
      [0.49999999999999994, 0],
      [2.5000000000000004, 3],
      [2.4999999999999996, 2],
      [7, 7],
      [0, 0],
      [1e15 + 0.5, 1e15],
    ];
    for (const [x, want] of cases) expect(roundHalfEven(x), `round(${x})`).toBe(want);
  });
  it('differs from Math.round exactly on the half-up cases', () => {
    expect(Math.round(70 / 28)).toBe(3);
    expect(roundHalfEven(70 / 28)).toBe(2);
  });
});

describe('smartResize: the worked examples of docs/reference/image-math.md', () => {
  // [config, W, H, resized H, resized W, grid, pads]
  const table: [string, VisionConfig, number, number, number, number, [number, number, number], number][] = [
    ['qwen2.5', QWEN25, 640, 480, 476, 644, [1, 34, 46], 391],
    ['qwen2.5', QWEN25, 1920, 1080, 1092, 1932, [1, 78, 138], 2691],
    ['qwen2.5', QWEN25, 4032, 3024, 3024, 4032, [1, 216, 288], 15552],
    ['qwen2.5', QWEN25, 700, 70, 56, 700, [1, 4, 50], 50],
    ['qwen2.5', QWEN25, 28, 28, 56, 56, [1, 4, 4], 4],
    ['qwen2.5 max 1003520', QWEN25_1280, 1920, 1080, 728, 1316, [1, 52, 94], 1222],
    ['qwen2.5 max 1003520', QWEN25_1280, 4032, 3024, 840, 1148, [1, 60, 82], 1230],
    ['qwen3', QWEN3, 640, 480, 480, 640, [1, 30, 40], 300],
    ['qwen3', QWEN3, 1920, 1080, 1088, 1920, [1, 68, 120], 2040],
    ['qwen3', QWEN3, 224, 224, 256, 256, [1, 16, 16], 64],
    ['qwen3', QWEN3, 100, 50, 192, 384, [1, 12, 24], 72],
  ];
  for (const [name, vc, W, H, rh, rw, grid, pads] of table) {
    for (const variant of ['transformers', 'qwen-vl-utils'] as const) {
      it(`${name} ${W}×${H} → ${rh}×${rw} (H×W), ${pads} pads [${variant}]`, () => {
        const f = vc.patchSize * vc.mergeSize;
        expect(smartResize(H, W, f, vc.minPixels, vc.maxPixels, variant)).toEqual({ height: rh, width: rw });
        const tok = imageTokens(W, H, vc, variant);
        expect(tok.resizedHeight).toBe(rh);
        expect(tok.resizedWidth).toBe(rw);
        expect(tok.gridThw).toEqual(grid);
        expect(tok.gridThw[0] * tok.gridThw[1] * tok.gridThw[2]).toBe(pads * 4);
        expect(tok.padCount).toBe(pads);
        expect(tok.cellSize).toBe(f);
        expect(tok.cellsWide * tok.cellsHigh).toBe(pads);
        expect(tok.cellsWide).toBe(rw / f);
        expect(tok.cellsHigh).toBe(rh / f);
      });
    }
  }

  it('700×70: JS Math.round would have given 84×700 → 75 pads', () => {
    // The naive port docs/reference/image-math.md#smart_resize warns about: identical except for Math.round.
    const naive = (h: number, w: number, f: number) => [Math.round(h / f) * f, Math.round(w / f) * f] as const;
    const [nh, nw] = naive(70, 700, 28);
    expect([nh, nw]).toEqual([84, 700]);
    expect((nh * nw) / (28 * 28)).toBe(75);
    expect(imageTokens(700, 70, QWEN25).padCount).toBe(50);
  });
});

describe('smartResize: half-to-even sides (side ≡ factor/2 mod factor)', () => {
  // side → rounded side, done by hand: side/f = n + 0.5 rounds to the even neighbour.
  const cases: [VisionConfig, number, number, number][] = [
    // [config, other side (multiple of f, large enough to stay within min/max), side, expected]
    [QWEN25, 1400, 42, 56], // 1.5 → 2
    [QWEN25, 1400, 70, 56], // 2.5 → 2
    [QWEN25, 1400, 98, 112], // 3.5 → 4
    [QWEN25, 1400, 126, 112], // 4.5 → 4
    [QWEN25, 1400, 154, 168], // 5.5 → 6
    [QWEN25, 1400, 1386, 1400], // 49.5 → 50
    [QWEN25, 1400, 1414, 1400], // 50.5 → 50
    [QWEN3, 2048, 48, 64], // 1.5 → 2
    [QWEN3, 2048, 80, 64], // 2.5 → 2
    [QWEN3, 2048, 112, 128], // 3.5 → 4
    [QWEN3, 2048, 144, 128], // 4.5 → 4
  ];
  for (const [vc, other, side, want] of cases) {
    const f = vc.patchSize * vc.mergeSize;
    it(`factor ${f}: side ${side} → ${want} (height and width)`, () => {
      expect(smartResize(side, other, f, vc.minPixels, vc.maxPixels)).toEqual({ height: want, width: other });
      expect(smartResize(other, side, f, vc.minPixels, vc.maxPixels)).toEqual({ height: other, width: want });
      expect(smartResize(side, other, f, vc.minPixels, vc.maxPixels, 'qwen-vl-utils')).toEqual({
        height: want,
        width: other,
      });
    });
  }

  it('sides 14 (f=28) and 16 (f=32) round to 0 and are rescued by the min-pixels branch', () => {
    // round(0.5) = 0 → product 0 < min_pixels → scaled up.
    expect(roundHalfEven(14 / 28)).toBe(0);
    expect(roundHalfEven(16 / 32)).toBe(0);
    // beta = sqrt(3136 / (14·1400)) = 0.4; ceil(14·0.4/28)=1, ceil(1400·0.4/28)=20.
    expect(smartResize(14, 1400, 28, 3136, 12845056)).toEqual({ height: 28, width: 560 });
    // qwen-vl-utils clamps the 0 to 28 up-front, so no rescale.
    expect(smartResize(14, 1400, 28, 3136, 12845056, 'qwen-vl-utils')).toEqual({ height: 28, width: 1400 });
  });
});

describe('smartResize: variants and errors', () => {
  it('variant A vs B differ when a side rounds to 0: W×H 2000×12', () => {
    expect(smartResize(12, 2000, 28, 3136, 12845056, 'transformers')).toEqual({ height: 28, width: 728 });
    expect(smartResize(12, 2000, 28, 3136, 12845056, 'qwen-vl-utils')).toEqual({ height: 28, width: 1988 });
    expect(imageTokens(2000, 12, QWEN25, 'transformers').gridThw).toEqual([1, 2, 52]);
    expect(imageTokens(2000, 12, QWEN25, 'transformers').padCount).toBe(26);
    expect(imageTokens(2000, 12, QWEN25, 'qwen-vl-utils').gridThw).toEqual([1, 2, 142]);
    expect(imageTokens(2000, 12, QWEN25, 'qwen-vl-utils').padCount).toBe(71);
  });

  it('keeps Python evaluation order h / beta / factor (matters for rounding)', () => {
    // Exactly, 5850 / (5850/3584) / 28 = 128, but the double is 127.99999…; Python floors to 127·28.
    // Reordering to h / (beta·factor) would give 3584 here (values checked with CPython 3.11).
    expect(smartResize(5850, 5850, 28, 3136, 12845056)).toEqual({ height: 3556, width: 3556 });
    expect(smartResize(1236, 1545, 28, 3136, 1003520)).toEqual({ height: 868, width: 1120 });
  });

  it('defaults to the transformers variant', () => {
    expect(smartResize(12, 2000, 28, 3136, 12845056)).toEqual({ height: 28, width: 728 });
  });

  it('rejects aspect ratio > 200 but accepts exactly 200', () => {
    expect(() => smartResize(1, 201, 28, 3136, 12845056)).toThrow(/aspect ratio must be smaller than 200/);
    expect(() => smartResize(2010, 10, 28, 3136, 12845056, 'qwen-vl-utils')).toThrow(/aspect ratio/);
    expect(() => imageTokens(201, 1, QWEN25)).toThrow(/aspect ratio/);
    expect(() => smartResize(1, 200, 28, 3136, 12845056)).not.toThrow();
  });

  it('rejects zero, negative and non-integer sizes', () => {
    expect(() => smartResize(0, 100, 28, 3136, 12845056)).toThrow(/height must be a positive integer/);
    expect(() => smartResize(100, -5, 28, 3136, 12845056)).toThrow(/width must be a positive integer/);
    expect(() => smartResize(10.5, 100, 28, 3136, 12845056)).toThrow(/positive integer/);
    expect(() => smartResize(Number.NaN, 100, 28, 3136, 12845056)).toThrow(/positive integer/);
    expect(() => imageTokens(0, 10, QWEN25)).toThrow(/positive integer/);
  });

  it('imageTokens takes (width, height); smartResize takes (height, width)', () => {
    const t = imageTokens(640, 480, QWEN25);
    expect([t.resizedWidth, t.resizedHeight]).toEqual([644, 476]);
    expect(smartResize(480, 640, 28, 3136, 12845056)).toEqual({ height: 476, width: 644 });
  });
});

describe.skipIf(!hasPython && !process.env.CI)('smartResize vs a Python port (seeded sweep)', () => {
  const rnd = mulberry32(20240607).next;
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
  const sizes: [number, number][] = [];
  for (let i = 0; i < 2000; i++) {
    const mode = i % 5;
    if (mode === 0) sizes.push([int(1, 8192), int(1, 8192)]);
    else if (mode === 1)
      sizes.push([int(1, 300), int(1, 4000)]); // small sides, min-pixels branch, 0-rounding
    else if (mode === 2)
      sizes.push([int(0, 150) * 28 + 14, int(0, 150) * 32 + 16]); // exact halves
    else if (mode === 3)
      sizes.push([int(2000, 20000), int(2000, 20000)]); // max-pixels branch
    else {
      const s = int(1, 60); // ratios around the 200 limit
      sizes.push(rnd() < 0.5 ? [s, s * int(190, 210)] : [s * int(190, 210) + int(0, 3), s]);
    }
  }
  const configs = [
    { factor: 28, min: 3136, max: 12845056 },
    { factor: 28, min: 3136, max: 1003520 },
    { factor: 32, min: 65536, max: 16777216 },
    { factor: 32, min: 4096, max: 16777216 }, // qwen-vl-utils' own Qwen3 defaults
  ].flatMap((c) => (['transformers', 'qwen-vl-utils'] as const).map((variant) => ({ ...c, variant })));
  const roundInputs: number[] = [];
  for (let k = 0; k < 3000; k++) roundInputs.push(k / 28, k / 32, (k - 1500) / 2, rnd() * 1000 - 500);

  const py = runPython(PY_SMART_RESIZE, { sizes, configs, round: roundInputs }) as {
    resize: ([number, number] | null)[][];
    round: number[];
  };

  it('roundHalfEven agrees with Python round() on 12000 values', () => {
    const ours = roundInputs.map((x) => roundHalfEven(x) + 0); // +0 folds -0 into 0, as JSON does
    expect(ours).toEqual(py.round);
  });

  configs.forEach((cfg, ci) => {
    it(`factor ${cfg.factor} min ${cfg.min} max ${cfg.max} [${cfg.variant}]: ${sizes.length} sizes match exactly`, () => {
      const want = py.resize[ci];
      expect(want).toHaveLength(sizes.length);
      let errors = 0;
      const mismatches: string[] = [];
      sizes.forEach(([h, w], i) => {
        const expected = want?.[i];
        let got: [number, number] | null;
        try {
          const r = smartResize(h, w, cfg.factor, cfg.min, cfg.max, cfg.variant);
          got = [r.height, r.width];
        } catch {
          got = null;
          errors++;
        }
        if (JSON.stringify(got) !== JSON.stringify(expected)) {
          mismatches.push(`${h}×${w}: ts ${JSON.stringify(got)} py ${JSON.stringify(expected)}`);
        }
      });
      expect(mismatches).toEqual([]);
      // The sweep really exercises the ratio check.
      expect(errors).toBeGreaterThan(10);
    });
  });
});

describe('padCountFromGrid', () => {
  it('is t·h·w / merge²', () => {
    expect(padCountFromGrid([1, 34, 46], 2)).toBe(391);
    expect(padCountFromGrid([1, 216, 288], 2)).toBe(15552);
    expect(padCountFromGrid([2, 4, 6], 2)).toBe(12);
  });
  it('rejects grids no processor could produce', () => {
    expect(() => padCountFromGrid([1, 5, 6], 2)).toThrow(/multiples of merge_size/);
    expect(() => padCountFromGrid([0, 4, 6], 2)).toThrow(/grid_t/);
    expect(() => padCountFromGrid([1, 4, 6.5], 2)).toThrow(/grid_w/);
  });
});

describe('padCell / cellToPad', () => {
  it('k-th pad → merged cell, row-major', () => {
    const t = imageTokens(640, 480, QWEN25); // 476×644 resized, 17 rows × 23 cols
    expect([t.cellsHigh, t.cellsWide]).toEqual([17, 23]);
    const c0 = padCell(0, t, 640, 480);
    expect(c0).toMatchObject({ row: 0, col: 0, t: 0, resized: { x: 0, y: 0, w: 28, h: 28 } });
    expect(c0.original.x).toBe(0);
    expect(c0.original.w).toBeCloseTo((28 * 640) / 644, 12);
    expect(c0.original.h).toBeCloseTo((28 * 480) / 476, 12);
    const c = padCell(24, t, 640, 480);
    expect([c.row, c.col]).toEqual([1, 1]);
    expect(c.resized).toEqual({ x: 28, y: 28, w: 28, h: 28 });
  });

  for (const [W, H, vc] of [
    [640, 480, QWEN25],
    [1920, 1080, QWEN3],
    [700, 70, QWEN25],
    [2000, 12, QWEN25],
  ] as const) {
    it(`round trip over the whole grid and exact tiling: ${W}×${H}`, () => {
      const t = imageTokens(W, H, vc);
      const seen = new Set<string>();
      let area = 0;
      for (let k = 0; k < t.padCount; k++) {
        const c = padCell(k, t, W, H);
        expect(cellToPad(c.row, c.col, t)).toBe(k);
        seen.add(`${c.row},${c.col}`);
        area += c.original.w * c.original.h;
        // Cells in the last row/column end exactly on the original image's edge.
        if (c.col === t.cellsWide - 1) expect(c.original.x + c.original.w).toBeCloseTo(W, 9);
        if (c.row === t.cellsHigh - 1) expect(c.original.y + c.original.h).toBeCloseTo(H, 9);
      }
      expect(seen.size).toBe(t.padCount);
      expect(area).toBeCloseTo(W * H, 6);
      for (let row = 0; row < t.cellsHigh; row++) {
        for (let col = 0; col < t.cellsWide; col++) {
          const c = padCell(cellToPad(row, col, t), t, W, H);
          expect([c.row, c.col]).toEqual([row, col]);
        }
      }
    });
  }

  it('wraps per temporal slice when grid_t > 1', () => {
    const t: ImageTokens = {
      resizedWidth: 84,
      resizedHeight: 56,
      gridThw: [2, 4, 6],
      padCount: 12,
      cellSize: 28,
      cellsWide: 3,
      cellsHigh: 2,
    };
    const c = padCell(7, t, 84, 56);
    expect(c).toMatchObject({ t: 1, row: 0, col: 1 });
    expect(cellToPad(0, 1, t, 1)).toBe(7);
    expect(padCell(11, t, 84, 56)).toMatchObject({ t: 1, row: 1, col: 2 });
  });

  it('rejects out-of-range indices', () => {
    const t = imageTokens(640, 480, QWEN25);
    expect(() => padCell(391, t, 640, 480)).toThrow(RangeError);
    expect(() => padCell(-1, t, 640, 480)).toThrow(RangeError);
    expect(() => cellToPad(17, 0, t)).toThrow(RangeError);
    expect(() => cellToPad(0, 23, t)).toThrow(RangeError);
  });
});
