// Words for the finding kinds and causes, so a chip reads as what went wrong. One entry per kind
// and cause of server/model/finding.ts: the compiler asks for a label when one is added. (The
// CLI and the JSON report print the names themselves, which `--kind` and the API filter take.)
import type { DivergenceCause, FindingKind } from '../../server/model/finding.ts';

export const KIND_LABEL: Readonly<Record<FindingKind, string>> = {
  prefix_break: 'prefix break',
  rerender_mismatch: 're-render mismatch',
  sample_mismatch: 'sample mismatch',
  placeholder_count: 'pad count',
  video_timestamps: 'video timestamps',
  image_count: 'image count',
  image_truncated: 'image truncated',
  placeholder_range: 'placeholder range',
  length_mismatch: 'length mismatch',
  mask_mismatch: 'mask mismatch',
  invalid_value: 'invalid value',
  logprob_mismatch: 'logprob mismatch',
  logprob_shift: 'logprobs shifted',
  trained_mismatch: 'trained ≠ rollout',
  grouping_ambiguous: 'ambiguous grouping',
  prompt_tokens_mismatch: 'prompt tokens ≠ usage',
  chain_split: 'chain split',
  chat_format_unrecognized: 'no chat format',
  non_canonical_split: 'non-canonical BPE split',
  group: 'group',
  analysis_failed: 'analysis failed',
  session_lost: 'session state lost',
};

export const CAUSE_LABEL: Readonly<Record<DivergenceCause, string>> = {
  duplicated_eos: 'duplicated end of turn',
  missing_eos: 'missing end of turn',
  missing_newline: 'missing \\n after end of turn',
  retokenized: 're-tokenized',
  template_changed: 'template changed history',
  image_tokens_changed: 'image pads changed',
  other: 'other',
  reasoning_stripped: 'reasoning stripped',
  tool_call_reserialized: 'tool call re-serialized',
  secondary_eos: 'ended by secondary EOS',
  vision_token_generated: 'model wrote vision tokens',
  placeholder_in_text: 'placeholder typed as text',
  zero_filled_logprobs: 'logprobs zero-filled',
  video_pruned: 'video pruned (EVS)',
};

/** The label of a kind; a name the app does not know (counts are keyed by plain strings) reads as itself. */
export const kindLabel = (k: string): string => (Object.hasOwn(KIND_LABEL, k) ? KIND_LABEL[k as FindingKind] : k);
export const causeLabel = (c: string): string =>
  Object.hasOwn(CAUSE_LABEL, c) ? CAUSE_LABEL[c as DivergenceCause] : c;
