// Words for the finding kinds and causes, so a chip reads as what went wrong.
export const KIND_LABEL: Record<string, string> = {
  prefix_break: 'prefix break',
  rerender_mismatch: 're-render mismatch',
  sample_mismatch: 'sample mismatch',
  placeholder_count: 'pad count',
  image_count: 'image count',
  image_truncated: 'image truncated',
  placeholder_range: 'placeholder range',
  length_mismatch: 'length mismatch',
  mask_mismatch: 'mask mismatch',
  invalid_value: 'invalid value',
};

export const CAUSE_LABEL: Record<string, string> = {
  duplicated_eos: 'duplicated <|im_end|>',
  missing_eos: 'missing <|im_end|>',
  missing_newline: 'missing \\n after <|im_end|>',
  retokenized: 're-tokenized',
  template_changed: 'template changed history',
  image_tokens_changed: 'image pads changed',
  other: 'other',
};

export const kindLabel = (k: string) => KIND_LABEL[k] ?? k;
export const causeLabel = (c: string) => CAUSE_LABEL[c] ?? c;
