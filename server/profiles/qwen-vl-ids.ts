// Vision placeholder ids that every Qwen-VL generation shares: Qwen2-VL, Qwen2.5-VL and Qwen3-VL
// have one vocabulary and the same vision tokens (docs/reference/tokens.md). For code that has no
// tokenizer at hand (an importer cutting packed samples apart, the prefix chainer); where a
// profile is loaded, `profile.special` holds the ids its tokenizer gives, and a test keeps the two
// in agreement.

/** `<|vision_start|>`: opens each image's (and video's) span. */
export const QWEN_VL_VISION_START = 151652;
/** `<|image_pad|>`: one per merged image patch. */
export const QWEN_VL_IMAGE_PAD = 151655;
/** `<|video_pad|>`: one per merged video patch. */
export const QWEN_VL_VIDEO_PAD = 151656;
