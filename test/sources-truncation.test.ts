// A stream cut on the left inside an image's pad run, in any format that stores one: a turn's
// prompt (vLLM truncate_prompt_tokens, Agent Lightning) or a training sample (a trainer's max
// prompt length). Pure check on built trajectories; the fixture-level tests are in sources-vllm and
// sources-agent-lightning.
import { describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { analysisContext } from '../server/analysis/context.ts';
import { checkLeftTruncation } from '../server/analysis/truncation.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const { imagePad: PAD, visionStart: VS, visionEnd: VE, imStart, imEnd } = qwenNamed(profile.ids);
const text = [9707, 11, 1879];
// 280×210 with the default processor: 80 pads (test/fixtures/generate-vllm.ts IMAGE_SIZES).
const image = { url: 'x.png', width: 280, height: 210 };

const traj = (input: Partial<Trajectory> & { turns?: Trajectory['turns'] }) =>
  Trajectory.parse({ id: 't', source: { file: 'f', line: 1, format: 'native' }, turns: [], ...input });
const run = (t: Trajectory) => checkLeftTruncation(t, analysisContext(t, profile));

describe('checkLeftTruncation', () => {
  it('a sample that starts inside image 1 of 2 (image 0 cut away entirely)', () => {
    const tokens = [...Array(30).fill(PAD), VE, ...text, VS, ...Array(80).fill(PAD), VE, imEnd];
    const [f, ...rest] = run(
      traj({ images: [image, image], sample: { tokens, responseLength: 1, maskScope: 'response' } }),
    );
    expect(rest).toEqual([]);
    expect(f).toMatchObject({
      kind: 'image_truncated',
      stream: 'sample',
      turn: -1,
      index: 0,
      image: 0,
      expected: 80,
      actual: 30,
    });
    // Two images, one whole span after the cut: the cut one is image 0.
    expect(f!.message).toMatch(/inside image 0.*50 of its 80/);
  });

  it('a prompt whose cut left only the <|vision_end|>: every pad missing', () => {
    const promptIds = [VE, ...text, imStart];
    const [f] = run(traj({ images: [image], turns: [{ promptIds, generatedIds: [1], messages: [] }] }));
    expect(f).toMatchObject({ index: 0, stream: 'prompt', turn: 0, actual: 0 });
  });

  it('no finding for a whole span, or a cut in text', () => {
    const whole = [imStart, VS, ...Array(80).fill(PAD), VE, ...text];
    expect(run(traj({ images: [image], turns: [{ promptIds: whole, generatedIds: [1] }] }))).toEqual([]);
    expect(
      run(
        traj({ images: [image], turns: [{ promptIds: [...text, VS, ...Array(80).fill(PAD), VE], generatedIds: [1] }] }),
      ),
    ).toEqual([]);
  });
});
