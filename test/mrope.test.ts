// Tests for server/analysis/mrope.ts: the worked example of docs/reference/mrope.md, hand-computed cases, and an
// exact comparison with a torch-free Python port of transformers' Qwen2-VL get_rope_index (same
// control flow: vision_start counting, list.index search, "previous block max + 1").
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { mropePositionIds, verlPositionIds, type MropeOptions } from '../server/families/qwen/mrope.ts';

const VS = 151652; // <|vision_start|>
const VE = 151653; // <|vision_end|>
const IMG = 151655; // <|image_pad|>
const VID = 151656; // <|video_pad|>
const IM_START = 151644;
const IM_END = 151645;
const OPTS: MropeOptions = { imagePadId: IMG, videoPadId: VID, visionStartId: VS, mergeSize: 2 };

const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
const hasPython = spawnSync('python3', ['--version']).status === 0;

describe('mropePositionIds', () => {
  it('docs/reference/mrope.md worked example: grid [1,4,6] → 6 pads, delta −3', () => {
    const USER = 872;
    const NL = 198;
    const HI = 13048;
    const tokens = [IM_START, USER, NL, VS, IMG, IMG, IMG, IMG, IMG, IMG, VE, HI, IM_END];
    const { rows, delta } = mropePositionIds(tokens, [[1, 4, 6]], OPTS);
    expect(rows[0]).toEqual([0, 1, 2, 3, 4, 4, 4, 4, 4, 4, 7, 8, 9]);
    expect(rows[1]).toEqual([0, 1, 2, 3, 4, 4, 4, 5, 5, 5, 7, 8, 9]);
    expect(rows[2]).toEqual([0, 1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 9]);
    expect(delta).toBe(-3);

    const verl = verlPositionIds(tokens, [[1, 4, 6]], OPTS);
    expect(verl.rows[0]).toEqual(range(0, 13));
    expect(verl.rows.slice(1)).toEqual(rows);
    expect(verl.delta).toBe(-3);
  });

  it('pure text: all three rows are 0..L−1, delta 0', () => {
    const tokens = [IM_START, 872, 198, 9707, 11, 1879, IM_END, 198];
    const { rows, delta } = mropePositionIds(tokens, [], OPTS);
    for (const r of rows) expect(r).toEqual(range(0, tokens.length));
    expect(delta).toBe(0);
    const verl = verlPositionIds(tokens, [], OPTS);
    for (const r of verl.rows) expect(r).toEqual(range(0, tokens.length));
  });

  it('empty sequence', () => {
    expect(mropePositionIds([], [], OPTS)).toEqual({ rows: [[], [], []], delta: 0 });
  });

  it('two images in one sequence (hand-computed)', () => {
    // text×2, VS, 1 pad ([1,2,2]), VE, text, VS, 8 pads ([1,4,8] → 2×4), VE, text×2
    const tokens = [1, 2, VS, IMG, VE, 3, VS, ...Array<number>(8).fill(IMG), VE, 4, 5];
    const { rows, delta } = mropePositionIds(
      tokens,
      [
        [1, 2, 2],
        [1, 4, 8],
      ],
      OPTS,
    );
    // first image at 3 (next=3, max(1,1,1) → next 4); second block starts at 7, max(1,2,4) → next 11
    expect(rows[0]).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7, 7, 7, 7, 11, 12, 13]);
    expect(rows[1]).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 8, 8, 8, 8, 11, 12, 13]);
    expect(rows[2]).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 8, 9, 10, 11, 12, 13]);
    expect(delta).toBe(14 - 18);
  });

  it('tall image: the block advances by its larger side (lh)', () => {
    const tokens = [VS, ...Array<number>(6).fill(IMG), VE];
    const { rows, delta } = mropePositionIds(tokens, [[1, 6, 4]], OPTS); // 3 rows × 2 cols
    expect(rows[1]).toEqual([0, 1, 1, 2, 2, 3, 3, 4]);
    expect(rows[2]).toEqual([0, 1, 2, 1, 2, 1, 2, 4]);
    expect(delta).toBe(5 - 8);
  });

  it('Qwen2-VL video run: temporal index advances per slice', () => {
    const tokens = [VS, ...Array<number>(4).fill(VID), VE];
    const { rows } = mropePositionIds(tokens, [[2, 2, 4]], OPTS); // 2 slices × 1 × 2
    expect(rows[0]).toEqual([0, 1, 1, 2, 2, 3]);
    expect(rows[1]).toEqual([0, 1, 1, 1, 1, 3]);
    expect(rows[2]).toEqual([0, 1, 2, 1, 2, 3]);
  });

  it('throws when there are fewer grids than vision spans', () => {
    const tokens = [VS, IMG, VE, VS, IMG, VE];
    expect(() => mropePositionIds(tokens, [[1, 2, 2]], OPTS)).toThrow(/2 vision spans.*only 1 grid_thw entry/);
    expect(() => mropePositionIds(tokens, [], OPTS)).toThrow(/2 vision spans.*only 0 grid_thw entries/);
  });

  it('ignores extra grids (like transformers), e.g. an image truncated away', () => {
    const tokens = [1, VS, IMG, VE, 2];
    const a = mropePositionIds(tokens, [[1, 2, 2]], OPTS);
    const b = mropePositionIds(
      tokens,
      [
        [1, 2, 2],
        [1, 8, 8],
      ],
      OPTS,
    );
    expect(b).toEqual(a);
  });

  it('throws when a pad run disagrees with its grid', () => {
    const short = [VS, IMG, IMG, IMG, VE];
    expect(() => mropePositionIds(short, [[1, 4, 4]], OPTS)).toThrow(/implies 4 pad tokens from index 1.*has 3/);
    const truncated = [VS, IMG, IMG];
    expect(() => mropePositionIds(truncated, [[1, 4, 4]], OPTS)).toThrow(/truncated/);
    const long = [VS, IMG, IMG, VE];
    expect(() => mropePositionIds(long, [[1, 2, 2]], OPTS)).toThrow(/implies 1 pad tokens.*has 2/);
    expect(() => mropePositionIds([VS, IMG, VE], [[1, 3, 2]], OPTS)).toThrow(/merge_size/);
  });

  it('<|vision_start|> not followed by a pad is plain text', () => {
    const tokens = [VS, 5, 6, VS];
    const { rows } = mropePositionIds(tokens, [], OPTS);
    for (const r of rows) expect(r).toEqual([0, 1, 2, 3]);
  });

  it('is linear: 1M tokens with 500 images', () => {
    const tokens: number[] = [];
    const grids: [number, number, number][] = [];
    for (let i = 0; i < 500; i++) {
      for (let j = 0; j < 1000; j++) tokens.push(100 + j);
      tokens.push(VS, ...Array<number>(1000).fill(IMG), VE); // [1, 40, 100] → 20×50 = 1000 pads
      grids.push([1, 40, 100]);
    }
    const { rows, delta } = mropePositionIds(tokens, grids, OPTS);
    expect(rows[0]).toHaveLength(tokens.length);
    // Each image occupies 1000 slots but advances positions by 50.
    expect(delta).toBe(500 * (50 - 1000));
  });
});

// Torch-free port of transformers Qwen2VLModel.get_rope_index (one unpadded sequence).
const PY_ROPE = `
import sys, json

def get_rope_index(input_tokens, image_grid_thw, video_grid_thw, image_token_id, video_token_id,
                   vision_start_token_id, spatial_merge_size):
    vision_start_indices = [i for i, t in enumerate(input_tokens) if t == vision_start_token_id]
    vision_tokens = [input_tokens[i + 1] for i in vision_start_indices if i + 1 < len(input_tokens)]
    image_nums = sum(1 for t in vision_tokens if t == image_token_id)
    video_nums = sum(1 for t in vision_tokens if t == video_token_id)
    llm_pos_ids_list = []
    st = 0
    image_index, video_index = 0, 0
    remain_images, remain_videos = image_nums, video_nums
    for _ in range(image_nums + video_nums):
        if image_token_id in input_tokens and remain_images > 0:
            ed_image = input_tokens.index(image_token_id, st)
        else:
            ed_image = len(input_tokens) + 1
        if video_token_id in input_tokens and remain_videos > 0:
            ed_video = input_tokens.index(video_token_id, st)
        else:
            ed_video = len(input_tokens) + 1
        if ed_image < ed_video:
            t, h, w = image_grid_thw[image_index]
            image_index += 1
            remain_images -= 1
            ed = ed_image
        else:
            t, h, w = video_grid_thw[video_index]
            video_index += 1
            remain_videos -= 1
            ed = ed_video
        llm_grid_t, llm_grid_h, llm_grid_w = t, h // spatial_merge_size, w // spatial_merge_size
        text_len = ed - st
        st_idx = max(max(r) for r in llm_pos_ids_list[-1]) + 1 if len(llm_pos_ids_list) > 0 else 0
        llm_pos_ids_list.append([[st_idx + i for i in range(text_len)] for _ in range(3)])
        t_index = [ti for ti in range(llm_grid_t) for _ in range(llm_grid_h * llm_grid_w)]
        h_index = [hi for _ in range(llm_grid_t) for hi in range(llm_grid_h) for _ in range(llm_grid_w)]
        w_index = [wi for _ in range(llm_grid_t) for _ in range(llm_grid_h) for wi in range(llm_grid_w)]
        llm_pos_ids_list.append([[x + text_len + st_idx for x in idx] for idx in (t_index, h_index, w_index)])
        st = ed + llm_grid_t * llm_grid_h * llm_grid_w
    if st < len(input_tokens):
        st_idx = max(max(r) for r in llm_pos_ids_list[-1]) + 1 if len(llm_pos_ids_list) > 0 else 0
        text_len = len(input_tokens) - st
        llm_pos_ids_list.append([[st_idx + i for i in range(text_len)] for _ in range(3)])
    rows = [[x for block in llm_pos_ids_list for x in block[r]] for r in range(3)]
    delta = (max(rows[0] + rows[1] + rows[2]) + 1 - len(input_tokens)) if input_tokens else 0
    return rows, delta

req = json.load(sys.stdin)
out = []
for c in req["cases"]:
    rows, delta = get_rope_index(c["tokens"], c["images"], c["videos"], req["img"], req["vid"], req["vs"], 2)
    out.append({"rows": rows, "delta": delta})
print(json.dumps(out))
`;

describe.skipIf(!hasPython && !process.env.CI)(
  'mropePositionIds vs a Python port of transformers get_rope_index',
  () => {
    // Seeded random sequences mixing text, images and (Qwen2-VL style) videos.
    let seed = 12345;
    const rnd = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 4294967296;
    };
    const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));

    interface Case {
      tokens: number[];
      images: [number, number, number][];
      videos: [number, number, number][];
      grids: [number, number, number][];
    }
    const cases: Case[] = [];
    for (let c = 0; c < 300; c++) {
      const cs: Case = { tokens: [], images: [], videos: [], grids: [] };
      const items = int(0, 5);
      for (let i = 0; i <= items; i++) {
        const textLen = int(0, 12);
        for (let j = 0; j < textLen; j++) cs.tokens.push(int(0, 150000));
        if (i === items) break;
        const video = rnd() < 0.25;
        const grid: [number, number, number] = [video ? int(1, 3) : 1, 2 * int(1, 9), 2 * int(1, 9)];
        const pads = (grid[0] * grid[1] * grid[2]) / 4;
        cs.tokens.push(VS, ...Array<number>(pads).fill(video ? VID : IMG), VE);
        (video ? cs.videos : cs.images).push(grid);
        cs.grids.push(grid);
      }
      cases.push(cs);
    }

    const r = spawnSync('python3', ['-c', PY_ROPE], {
      input: JSON.stringify({ cases, img: IMG, vid: VID, vs: VS }),
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    if (r.status !== 0) throw new Error(`python3 failed: ${r.stderr}`);
    const py = JSON.parse(r.stdout) as { rows: [number[], number[], number[]]; delta: number }[];

    it(`${cases.length} random sequences match exactly`, () => {
      expect(py).toHaveLength(cases.length);
      let withVision = 0;
      cases.forEach((cs, i) => {
        const ours = mropePositionIds(cs.tokens, cs.grids, OPTS);
        expect(ours, `case ${i}`).toEqual(py[i]);
        if (cs.grids.length > 0) withVision++;
      });
      expect(withVision).toBeGreaterThan(200);
    });
  },
);
