// Kimi (server/families/kimi/): the NaViT resize of K2.5 and Kimi-VL's count against a Python port
// of the upstream code (test/support/kimi_reference.py) over thousands of sizes and the settings the
// released configs use; the two token spaces of a media item and a sequence that mixes them.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { IMAGE_ITEM_TEXT, mediaSpace, sequenceSpace, turnOpener } from '../server/families/kimi/tokens.ts';
import {
  KIMI_K25_MEDIA_DEFAULTS,
  type KimiMediaConfig,
  kimiVlImageTokens,
  navitResizeImage,
} from '../server/families/kimi/vision.ts';
import { mulberry32 } from '../server/util/random.ts';

const REFERENCE = fileURLToPath(new URL('./support/kimi_reference.py', import.meta.url));

const SETTINGS: [string, KimiMediaConfig][] = [
  ['K2.5 released media_proc_cfg', KIMI_K25_MEDIA_DEFAULTS],
  ['K2.5 video frame (in_patch_limit_each_frame 4096)', { ...KIMI_K25_MEDIA_DEFAULTS, inPatchLimit: 4096 }],
  ['side limit 256', { ...KIMI_K25_MEDIA_DEFAULTS, patchLimitOnOneSide: 256 }],
  ['K3-sized budget 65536', { ...KIMI_K25_MEDIA_DEFAULTS, inPatchLimit: 65536 }],
  ['fixed_output_tokens 64', { ...KIMI_K25_MEDIA_DEFAULTS, fixedOutputTokens: 64 }],
];
const VL_LIMITS = [4096, 16384, 1024];

function sizes(): [number, number][] {
  const out: [number, number][] = [
    [640, 480],
    [1920, 1080],
    [4032, 3024],
    [3000, 3000],
    [1, 1],
    [13, 13],
    [14, 14],
    [28, 28],
    [20000, 10],
    [10, 20000],
    [7200, 100],
  ];
  const rnd = mulberry32(0x4b1);
  for (let i = 0; i < 3000; i++) {
    const side = () => 1 + Math.floor(rnd.next() * [100, 2000, 12000][Math.floor(rnd.next() * 3)]!);
    out.push([side(), side()]);
  }
  return out;
}

describe('image tokens against the Python port', () => {
  const all = sizes();
  const r = spawnSync('python3', [REFERENCE], {
    input: JSON.stringify({
      sizes: all,
      navit: SETTINGS.map(([, s]) => ({
        patch: s.patchSize,
        merge: s.mergeKernelSize,
        in_patch_limit: s.inPatchLimit,
        side: s.patchLimitOnOneSide,
        fixed: s.fixedOutputTokens,
      })),
      vl: VL_LIMITS,
    }),
    encoding: 'utf8',
    maxBuffer: 256 << 20,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  const got = JSON.parse(r.stdout) as { navit: (number[] | null)[][]; vl: number[][] };

  SETTINGS.forEach(([name, s], si) => {
    it(`navit_resize_image, ${name}: ${all.length} sizes`, () => {
      const bad: string[] = [];
      all.forEach(([w, h], i) => {
        let have: number[] | null;
        try {
          const n = navitResizeImage(w, h, s);
          have = [n.newWidth, n.newHeight, n.padWidth, n.padHeight, n.numTokens];
        } catch {
          have = null;
        }
        if (JSON.stringify(have) !== JSON.stringify(got.navit[si]![i]))
          bad.push(`${w}×${h}: ${have} vs ${got.navit[si]![i]}`);
      });
      expect(bad.slice(0, 10)).toEqual([]);
    });
  });

  VL_LIMITS.forEach((limit, li) => {
    it(`Kimi-VL get_image_tokens, in_token_limit ${limit}`, () => {
      const bad = all.filter(([w, h], i) => kimiVlImageTokens(w, h, limit) !== got.vl[li]![i]);
      expect(bad.slice(0, 10)).toEqual([]);
    });
  });

  it('worked examples of docs/reference/models/kimi.md', () => {
    const n = (w: number, h: number) => navitResizeImage(w, h, KIMI_K25_MEDIA_DEFAULTS).numTokens;
    expect(n(640, 480)).toBe(23 * 18); // padded to 644×504, never enlarged
    expect(n(1920, 1080)).toBe(69 * 39);
    // 288·216 = 62208 patches over 16384: shrunk by sqrt(16384/62208), sides truncated, then padded.
    expect(navitResizeImage(4032, 3024, KIMI_K25_MEDIA_DEFAULTS)).toEqual({
      newWidth: 2069,
      newHeight: 1551,
      padWidth: 3,
      padHeight: 17,
      numTokens: 74 * 56,
    });
    // A 7200 px side is cut to the 512-patch limit (7168 px).
    expect(navitResizeImage(7200, 100, KIMI_K25_MEDIA_DEFAULTS).newWidth).toBe(7168);
    expect(n(13, 13)).toBe(1);
  });
});

describe('two token spaces', () => {
  it('a run is expanded (N pads), collapsed (one) or wrong', () => {
    expect(mediaSpace(414, 414)).toBe('expanded');
    expect(mediaSpace(1, 414)).toBe('collapsed');
    expect(mediaSpace(413, 414)).toBe('wrong');
  });

  it('a sequence is in one space; mixing them is a finding, a one-token image decides nothing', () => {
    expect(
      sequenceSpace([
        { pads: 414, expected: 414 },
        { pads: 30, expected: 30 },
      ]),
    ).toEqual({ space: 'expanded', wrong: [] });
    expect(
      sequenceSpace([
        { pads: 1, expected: 414 },
        { pads: 1, expected: 30 },
      ]),
    ).toEqual({ space: 'collapsed', wrong: [] });
    expect(sequenceSpace([{ pads: 1, expected: 1 }])).toEqual({ space: 'either', wrong: [] });
    expect(
      sequenceSpace([
        { pads: 414, expected: 414 },
        { pads: 1, expected: 30 },
      ]),
    ).toEqual({
      mixed: { collapsed: [1], expanded: [0] },
    });
    expect(
      sequenceSpace([
        { pads: 1, expected: 414 },
        { pads: 29, expected: 30 },
      ]),
    ).toEqual({ space: 'collapsed', wrong: [1] });
  });

  it('the template texts', () => {
    expect(turnOpener('assistant')).toBe('<|im_assistant|>assistant<|im_middle|>');
    expect(IMAGE_ITEM_TEXT).toBe('<|media_begin|>image<|media_content|><|media_pad|><|media_end|>');
  });
});
