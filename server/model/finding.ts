// Findings: what the checks report. The JSON shape is part of `rollscope check --json`'s
// stable contract (docs/check-json.md); add fields, never rename them.
import { z } from 'zod';

export const FINDING_KINDS = [
  'prefix_break',
  'rerender_mismatch',
  'sample_mismatch',
  'placeholder_count',
  'image_count',
  'image_truncated',
  'placeholder_range',
  'length_mismatch',
  'mask_mismatch',
  'invalid_value',
  'logprob_mismatch',
  'logprob_shift',
  'trained_mismatch',
  'grouping_ambiguous',
  'prompt_tokens_mismatch',
  'chain_split',
  'chat_format_unrecognized',
  'non_canonical_split',
  'group',
  'analysis_failed',
  'session_lost',
  'video_timestamps',
] as const;
export const FindingKind = z.enum(FINDING_KINDS);
export type FindingKind = z.infer<typeof FindingKind>;

export const DIVERGENCE_CAUSES = [
  'duplicated_eos',
  'missing_eos',
  'missing_newline',
  'retokenized',
  'template_changed',
  'image_tokens_changed',
  'other',
  'reasoning_stripped',
  'tool_call_reserialized',
  'secondary_eos',
  'vision_token_generated',
  'placeholder_in_text',
  'zero_filled_logprobs',
  'video_pruned',
] as const;
export const DivergenceCause = z.enum(DIVERGENCE_CAUSES);
export type DivergenceCause = z.infer<typeof DivergenceCause>;

/**
 * Which token stream `index` points into:
 * - `sample`: the stored training sample's tokens;
 * - `prompt`: the prompt ids of turn `turn` (as the engine saw them);
 * - `canonical`: the canonical re-alignment (prompt once, generated ids verbatim, EOS-aware suffixes);
 * - `rerender`: the re-rendered conversation.
 */
export const StreamName = z.enum(['sample', 'prompt', 'canonical', 'rerender']);
export type StreamName = z.infer<typeof StreamName>;

export const Severity = z.enum(['error', 'warning']);
export type Severity = z.infer<typeof Severity>;

export const Finding = z.object({
  kind: FindingKind,
  cause: DivergenceCause.optional(),
  severity: Severity,
  /** 0-based turn the finding belongs to (-1 when it concerns the whole trajectory). */
  turn: z.number().int(),
  /** Absolute 0-based token index in `stream` (-1 when no single token is at fault). */
  index: z.number().int(),
  stream: StreamName.optional(),
  expected: z.unknown().optional(),
  actual: z.unknown().optional(),
  /**
   * The field at fault: for `invalid_value`, the model field holding the value (`sample.logprobs`,
   * `turns.1.generatedIds`); for `trained_mismatch`, what differs on the trained side (`tokens`,
   * `images`, `placeholders`, `loss_mask`, `logprobs`, `position_ids`).
   */
  field: z.string().optional(),
  /** Image the finding concerns (0-based, order of appearance). */
  image: z.number().int().optional(),
  message: z.string(),
});
export type Finding = z.infer<typeof Finding>;
