// Qwen video (docs/reference/models/qwen.md#video): the video math and mRoPE video positions against a
// Python port of the transformers and vLLM code (test/support/qwen_video.py) over thousands of sizes,
// frame counts and fps; then Qwen2.5-VL, Qwen3-VL and Qwen3.5 runs whose videos are frame lists, built
// with the real tokenizer from the Python reference's expansion, checked clean, and with a wrong fps,
// a wrong frame count and vLLM's EVS pruning planted and found at their tokens.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VisionConfig } from '../server/model/vision.ts';
import type { Message, TrajectoryInput } from '../server/model/trajectory.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { nativeJsonl } from '../server/model/native-jsonl.ts';
import { evsRunLengths, qwenVideoTokens } from '../server/families/qwen/video.ts';
import { qwenPositionIds } from '../server/families/qwen/mrope.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { renderText } from '../server/analysis/render.ts';
import { checkPaths } from '../server/pipeline.ts';
import type { CheckedTrajectory } from '../server/analysis/checked.ts';
import { mulberry32 } from '../server/util/random.ts';
import { writeMovedFolder } from './support/moved-ids.ts';

const SUPPORT = fileURLToPath(new URL('./support/qwen_video.py', import.meta.url));

function python<T>(request: unknown): T {
  const r = spawnSync('python3', [SUPPORT], { input: JSON.stringify(request), encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`qwen_video.py failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

interface PyTokens {
  resized: [number, number];
  grid: [number, number, number];
  runs: [number, string][];
  second_per_grid: number | null;
}

/** The Python reference's case for a video under `vision`. */
function pyCase(
  vision: VisionConfig,
  v: { width: number; height: number; frames: number; fps?: number },
  pruning = 0,
): Record<string, unknown> {
  const bounds = vision.video ?? { minPixels: vision.minPixels, maxPixels: vision.maxPixels };
  return {
    style: vision.extra?.videoTimestamps ? 'qwen3' : 'qwen2',
    width: v.width,
    height: v.height,
    frames: v.frames,
    fps: v.fps ?? null,
    patch: vision.patchSize,
    merge: vision.mergeSize,
    tps: vision.temporalPatchSize,
    min_pixels: bounds.minPixels,
    max_pixels: bounds.maxPixels,
    tokens_per_second: vision.tokensPerSecond ?? null,
    pruning,
  };
}

const GENERATIONS = ['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl'] as const;

describe('video tokens: rollscope against the Python port of transformers and vLLM', () => {
  for (const generation of GENERATIONS) {
    it(`${generation}: resized size, grid, runs, timestamps and second_per_grid_ts over 3000 videos`, () => {
      const vision = loadProfile(generation).vision;
      const random = mulberry32(generation.length * 7919);
      const int = (lo: number, hi: number) => lo + Math.floor(random.next() * (hi - lo + 1));
      const fpsChoices = [undefined, 1, 2, 2.5, 3, 4, 24, 29.97, 0.5];
      const videos = Array.from({ length: 3000 }, () => ({
        width: int(8, 2400),
        height: int(8, 1600),
        frames: int(2, 96),
        fps: fpsChoices[int(0, fpsChoices.length - 1)],
      }));
      const pruning = (i: number) =>
        vision.extra?.videoTimestamps && i % 5 === 0 ? [0.25, 0.5, 0.75, 0.9][i % 4]! : 0;
      const want = python<(PyTokens | { error: string })[]>({
        op: 'tokens',
        cases: videos.map((v, i) => pyCase(vision, v, pruning(i))),
      });
      let compared = 0;
      videos.forEach((v, i) => {
        const w = want[i]!;
        if ('error' in w) {
          expect(() => qwenVideoTokens(v, vision, pruning(i)), JSON.stringify(v)).toThrow();
          return;
        }
        const got = qwenVideoTokens(v, vision, pruning(i));
        expect(
          {
            resized: [got.resizedHeight, got.resizedWidth],
            grid: got.gridThw,
            runs: got.runs.map((r) => [r.pads, r.textBefore]),
            second_per_grid: got.secondsPerGrid ?? null,
          },
          JSON.stringify(v),
        ).toEqual(w);
        compared++;
      });
      expect(compared).toBeGreaterThan(2500);
    });
  }

  it('the timestamps are the processor\'s: mean of each slice, one decimal rounded as Python rounds (0.25 → "0.2")', () => {
    const vision = loadProfile('qwen3-vl').vision;
    const t = qwenVideoTokens({ width: 320, height: 240, frames: 5, fps: 2 }, vision);
    // Frames 0..4 at 2 fps, padded to 6 with the last: (0 + 0.5)/2, (1 + 1.5)/2, (2 + 2)/2.
    expect(t.runs.map((r) => r.textBefore)).toEqual(['<0.2 seconds>', '<1.2 seconds>', '<2.0 seconds>']);
    expect(t.gridThw[0]).toBe(3);
  });

  it('EVS keeps the first slice whole and evens out the rest, as vLLM does', () => {
    expect(evsRunLengths(100, 4, 0.5)).toEqual([100, 34, 33, 33]);
    expect(evsRunLengths(100, 4, 0)).toEqual([100, 100, 100, 100]);
    expect(evsRunLengths(10, 3, 0.99)).toEqual([10, 0, 0]);
  });
});

describe('mRoPE video positions against the Python port of get_rope_index', () => {
  const cases: [string, number][] = [
    ['qwen2-vl', 2],
    ['qwen2.5-vl', 1],
    ['qwen2.5-vl', 2],
    ['qwen2.5-vl', 0.5],
    ['qwen2.5-vl', 3],
    ['qwen3-vl', 2],
  ];
  it.each(cases)('%s at %s fps: a video between an image and text', (generation, fps) => {
    const profile = loadProfile(generation);
    const t = qwenNamed(profile.ids);
    const vision = profile.vision;
    const video = qwenVideoTokens({ width: 200, height: 120, frames: 8, fps }, vision);
    const image = profile.modelFamily.imageTokens(84, 56, vision);
    const ids: number[] = [t.imStart, 5, 6, t.visionStart, ...Array(image.padCount).fill(t.imagePad), t.visionEnd, 7];
    for (const run of video.runs) {
      if (run.textBefore !== '') ids.push(11, 12, 13);
      ids.push(t.visionStart, ...Array(run.pads).fill(t.videoPad), t.visionEnd);
    }
    ids.push(8, 9, t.imEnd);
    const media = [
      { kind: 'image' as const, grid: image.gridThw },
      { kind: 'video' as const, grid: video.gridThw, secondsPerGrid: video.secondsPerGrid },
    ];
    const got = qwenPositionIds(ids, media, t, vision).rows;
    const want = python<number[][]>({
      op: 'rope',
      ids,
      image_pad: t.imagePad,
      video_pad: t.videoPad,
      vision_start: t.visionStart,
      merge: vision.mergeSize,
      media: media.map((m) => ({ kind: m.kind, grid: m.grid, second_per_grid: m.secondsPerGrid ?? null })),
      tokens_per_second: vision.tokensPerSecond ?? null,
      per_slice: vision.extra?.videoTimestamps === true,
    });
    expect(got).toEqual(want);
    if (generation === 'qwen2.5-vl' && fps !== 2) {
      // Qwen2.5-VL's temporal index follows the seconds (second_per_grid_ts = 2 / fps, 2 positions a second).
      const plain = qwenPositionIds(ids, [media[0]!, { ...media[1]!, secondsPerGrid: undefined }], t, vision).rows;
      expect(got[0]).not.toEqual(plain[0]);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Runs with videos

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-video-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const FRAME = { width: 320, height: 240 };
const STATED_FRAMES = 8;
const STATED_FPS = 2;

/** Frame files of one size, written once. */
function frames(dir: string, n: number): Promise<string[]> {
  fs.mkdirSync(dir, { recursive: true });
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const name = `frame${i}.png`;
      await sharp({ create: { ...FRAME, channels: 3, background: { r: 20 * i, g: 40, b: 90 } } })
        .png()
        .toFile(path.join(dir, name));
      return `frames/${name}`;
    }),
  );
}

interface Planted {
  /** Frames the processor was really given. */
  frames?: number;
  /** fps the processor was really told. */
  fps?: number;
  /** vLLM's --video-pruning-rate. */
  pruning?: number;
}

/**
 * One trajectory whose user turn holds the video as a list of frames with its fps: the prompt ids
 * are the template's text expanded by the Python reference (with what was really processed,
 * `planted`) and tokenized with the model's tokenizer; the model answers one sentence.
 */
async function videoTrajectory(profile: ModelProfile, id: string, files: string[], planted: Planted) {
  const messages: Message[] = [
    {
      role: 'user',
      content: [
        { type: 'video', video: files, fps: STATED_FPS },
        { type: 'text', text: 'What happens in the video?' },
      ],
    },
  ];
  const text = renderText(profile, messages, { addGenerationPrompt: true });
  const t = qwenNamed(profile.ids);
  const runs = python<PyTokens[]>({
    op: 'tokens',
    cases: [
      pyCase(
        profile.vision,
        { ...FRAME, frames: planted.frames ?? STATED_FRAMES, fps: planted.fps ?? STATED_FPS },
        planted.pruning ?? 0,
      ),
    ],
  });
  const expanded = python<string>({
    op: 'expand',
    text,
    videos: runs,
    vision_start: profile.tokenizer.piece(t.visionStart),
    video_pad: profile.tokenizer.piece(t.videoPad),
    vision_end: profile.tokenizer.piece(t.visionEnd),
  });
  const promptIds = await profile.tokenizer.encode(expanded);
  const answer = [...(await profile.tokenizer.encode('A red ball rolls across the table.')), t.eos];
  const traj: TrajectoryInput = {
    id,
    source: { file: 'built', line: 1, format: 'native' },
    turns: [
      { messages, promptIds, generatedIds: answer, generatedLogprobs: answer.map(() => -0.05), finishReason: 'stop' },
    ],
    videos: [{ frames: files.map((url) => ({ url })), fps: STATED_FPS }],
  };
  return { trajectory: Trajectory.parse(traj), promptIds, runs: runs[0]! };
}

async function checked(file: string, model: string): Promise<CheckedTrajectory[]> {
  const out: CheckedTrajectory[] = [];
  for await (const ev of checkPaths([file], { workers: 0, model })) if (ev.type === 'trajectory') out.push(ev.checked);
  return out;
}

const QWEN35_IDS = new Map(Array.from({ length: 26 }, (_, k) => [151643 + k, 248044 + k] as const));

const MODELS: [string, () => string][] = [
  ['Qwen2.5-VL', () => 'qwen2.5-vl'],
  ['Qwen3-VL', () => 'qwen3-vl'],
  [
    'Qwen3.5 (a model folder with its own ids)',
    () => {
      const folder = path.join(tmp, 'Qwen3.5-9B');
      if (!fs.existsSync(folder))
        writeMovedFolder(folder, loadProfile('qwen3-vl'), QWEN35_IDS, { template: 'jinja', modelType: 'qwen3_5' });
      return folder;
    },
  ],
];

describe.each(MODELS)('%s runs with a video given as frames', (name, modelOf) => {
  let results: Map<string, CheckedTrajectory>;
  let built: Map<string, Awaited<ReturnType<typeof videoTrajectory>>>;
  let profile: ModelProfile;
  const timestamped = () => profile.vision.extra?.videoTimestamps === true;

  beforeAll(async () => {
    const model = modelOf();
    profile = loadProfile(model);
    const dir = path.join(tmp, name.replace(/\W+/g, '-'));
    const files = await frames(path.join(dir, 'frames'), STATED_FRAMES);
    built = new Map();
    const plants: [string, Planted][] = [
      ['clean', {}],
      ['wrong-fps', { fps: 1 }],
      ['wrong-frames', { frames: 12 }],
      ...(profile.vision.extra?.videoTimestamps ? ([['pruned', { pruning: 0.5 }]] as [string, Planted][]) : []),
    ];
    for (const [id, planted] of plants) built.set(id, await videoTrajectory(profile, id, files, planted));
    const file = path.join(dir, 'videos.rollscope.jsonl');
    fs.writeFileSync(file, nativeJsonl([...built.values()].map((b) => b.trajectory)));
    results = new Map((await checked(file, model)).map((c) => [c.trajectory.id, c]));
  }, 120_000);

  const findingsOf = (id: string) => results.get(id)!.findings;

  it('reads the frames: the video is 8 frames of 320×240 at 2 fps', () => {
    const v = results.get('clean')!.trajectory.videos![0]!;
    expect(v).toMatchObject({ width: 320, height: 240, frameCount: 8, fps: 2 });
    expect(v.unavailable).toBeUndefined();
  });

  it('a clean run has no finding: pad runs, timestamps and the re-render agree', () => {
    expect(findingsOf('clean')).toEqual([]);
    const b = built.get('clean')!;
    expect(b.runs.runs).toHaveLength(timestamped() ? 4 : 1);
    // The re-rendered conversation (rollscope's own video expansion) is the Python reference's stream.
    expect(results.get('clean')!.alignment.tokens.slice(0, b.promptIds.length)).toEqual(b.promptIds);
  });

  it('a wrong fps is found: Qwen3-VL and Qwen3.5 at the first timestamp that differs; Qwen2.5-VL writes none', () => {
    const f = findingsOf('wrong-fps').filter((x) => x.kind === 'video_timestamps');
    if (!timestamped()) {
      // Qwen2.5-VL's fps only scales mRoPE positions (second_per_grid_ts): the ids are the same.
      expect(findingsOf('wrong-fps')).toEqual([]);
      return;
    }
    expect(f).toHaveLength(1);
    const b = built.get('wrong-fps')!;
    // Slice 0 is <0.2 seconds> at 2 fps and <0.5 seconds> at 1 fps: the first run's text differs.
    const firstStart = b.promptIds.indexOf(qwenNamed(profile.ids).visionStart);
    expect(f[0]).toMatchObject({ expected: '<0.2 seconds>', actual: '<0.5 seconds>', field: 'videos.0', turn: 0 });
    expect(f[0]!.index).toBeLessThan(firstStart);
    expect(f[0]!.index).toBeGreaterThan(firstStart - 8);
  });

  it('a wrong frame count is found at the video: more runs (Qwen3) or a longer run (Qwen2.5)', () => {
    const f = findingsOf('wrong-frames').filter((x) => x.kind === 'placeholder_count');
    expect(f).toHaveLength(1);
    expect(f[0]!.field).toBe('videos.0');
    if (timestamped()) expect(f[0]).toMatchObject({ expected: 4, actual: 6 });
    else
      expect(f[0]).toMatchObject({
        expected: [built.get('clean')!.runs.runs[0]![0]],
        actual: [built.get('wrong-frames')!.runs.runs[0]![0]],
      });
  });

  it.runIf(name !== 'Qwen2.5-VL')('EVS-pruned runs are a finding with their cause', () => {
    const f = findingsOf('pruned').filter((x) => x.kind === 'placeholder_count');
    expect(f).toHaveLength(1);
    expect(f[0]).toMatchObject({ cause: 'video_pruned', field: 'videos.0' });
    expect(f[0]!.message).toMatch(/Efficient Video Sampling/);
  });
});

describe('videos in trainer records: verl and slime, frames with their fps and the stored video_grid_thw', () => {
  let found: Map<string, CheckedTrajectory>;
  let clean: Awaited<ReturnType<typeof videoTrajectory>>;
  let wrong: Awaited<ReturnType<typeof videoTrajectory>>;

  beforeAll(async () => {
    const profile = loadProfile('qwen3-vl');
    const dir = path.join(tmp, 'trainers');
    const files = await frames(path.join(dir, 'frames'), STATED_FRAMES);
    clean = await videoTrajectory(profile, 'clean', files, {});
    wrong = await videoTrajectory(profile, 'wrong', files, { frames: 12 });
    const record = (b: typeof clean, format: 'verl' | 'slime') => {
      const answer = b.trajectory.turns[0]!.generatedIds!;
      const video = { video: files, fps: STATED_FPS };
      const grid = [[b.runs.grid[0], b.runs.grid[1], b.runs.grid[2]]];
      return format === 'verl'
        ? {
            prompt_ids: b.promptIds,
            response_ids: answer,
            response_mask: answer.map(() => 1),
            multi_modal_data: { videos: [video] },
            multi_modal_inputs: { video_grid_thw: grid },
          }
        : {
            tokens: [...b.promptIds, ...answer],
            response_length: answer.length,
            loss_mask: answer.map(() => 1),
            multimodal_inputs: { videos: [video] },
            multimodal_train_inputs: { video_grid_thw: grid },
          };
    };
    const lines = (format: 'verl' | 'slime') =>
      `${[clean, wrong].map((b) => JSON.stringify(record(b, format))).join('\n')}\n`;
    fs.writeFileSync(path.join(dir, 'verl.jsonl'), lines('verl'));
    fs.writeFileSync(path.join(dir, 'slime.jsonl'), lines('slime'));
    found = new Map();
    for (const f of ['verl.jsonl', 'slime.jsonl'])
      for (const c of await checked(path.join(dir, f), 'qwen3-vl')) found.set(`${f}:${c.trajectory.source.line}`, c);
  }, 120_000);

  it.each(['verl.jsonl', 'slime.jsonl'])(
    '%s: the video is read from the record, clean is clean, 12 frames for 8 found',
    (f) => {
      const ok = found.get(`${f}:1`)!;
      expect(ok.trajectory.source.format).toBe(f.replace('.jsonl', ''));
      expect(ok.trajectory.videos?.[0]).toMatchObject({ width: 320, height: 240, frameCount: 8, fps: 2 });
      expect(ok.trajectory.sample?.videoGridThw).toEqual([clean.runs.grid]);
      expect(ok.findings.filter((x) => x.field?.startsWith('videos'))).toEqual([]);
      const bad = found.get(`${f}:2`)!.findings.filter((x) => x.field === 'videos.0');
      // The stored grid says 12 frames' worth of pads (6 slices) where the record's 8 frames give 4.
      expect(bad.map((x) => x.kind)).toEqual(['placeholder_count']);
    },
  );
});
