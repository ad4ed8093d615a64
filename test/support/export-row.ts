// A text-only export row (docs/export-format.md) built from a canonical sample, for tests that read
// a batch back after planting a fault in one of its fields.
import type { BuiltSample } from '../fixtures/generate-prime-rl.ts';

/** The row of `s` whose response starts at token `promptLength`. */
export function textExportRow(s: Pick<BuiltSample, 'tokens' | 'mask' | 'logprobs'>, promptLength: number) {
  return {
    schema_version: 1,
    id: 'row',
    source: { file: 'x.jsonl', line: 1, format: 'native' },
    model: 'qwen2.5-vl',
    group: null,
    tokens: s.tokens,
    response_length: s.tokens.length - promptLength,
    loss_mask: s.mask.slice(promptLength),
    rollout_log_probs: s.logprobs.slice(promptLength),
    reward: null,
    status: 'completed',
    images: [],
    image_grid_thw: [],
    placeholder_ranges: [],
    mm_token_type_ids: s.tokens.map(() => 0),
    position_ids: [0, 1, 2].map(() => s.tokens.map((_, i) => i)),
  };
}
