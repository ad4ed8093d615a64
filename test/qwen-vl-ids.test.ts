// The placeholder ids that tokenizer-less code uses (server/profiles/qwen-vl-ids.ts) are the ones
// every built-in profile's tokenizer gives.
import { describe, expect, it } from 'vitest';
import { BUILTIN_PROFILES, loadProfile } from '../server/profiles/profile.ts';
import { QWEN_VL_IMAGE_PAD, QWEN_VL_VIDEO_PAD, QWEN_VL_VISION_START } from '../server/profiles/qwen-vl-ids.ts';

describe('shared Qwen-VL placeholder ids', () => {
  for (const name of BUILTIN_PROFILES) {
    it(`${name}: <|image_pad|> and <|video_pad|> match the tokenizer`, () => {
      const profile = loadProfile(name);
      expect(profile.special.imagePad).toBe(QWEN_VL_IMAGE_PAD);
      expect(profile.special.videoPad).toBe(QWEN_VL_VIDEO_PAD);
      expect(profile.special.visionStart).toBe(QWEN_VL_VISION_START);
      expect(profile.tokenizer.tokenToId('<|image_pad|>')).toBe(QWEN_VL_IMAGE_PAD);
      expect(profile.tokenizer.tokenToId('<|video_pad|>')).toBe(QWEN_VL_VIDEO_PAD);
    });
  }
});
