// Why `export` leaves a trajectory out, in words (one per reason of server/export/policy.ts: the
// compiler asks for one when a reason is added). The export dialog, the rejected view and the
// drawer say them.
import type { RejectReason } from '../../server/http/api.ts';

export const REASON_WORDS: Readonly<Record<RejectReason, string>> = {
  unfixable_finding: 'an error re-alignment cannot repair',
  warning: 'a warning that doubts the row (not included)',
  no_generated_ids: 'no generated ids',
  no_prompt: 'prompt unknown',
  observation_unknown: 'observation unknown',
  incomplete_logprobs: 'incomplete logprobs',
  grid_unknown: 'image grid unknown',
  video_unsupported: 'video',
  position_ids: 'position ids',
  image_unavailable: 'image unavailable',
  recheck_failed: 'failed the re-check',
  unreadable: 'unreadable',
  analysis_failed: 'analysis failed',
  no_profile: 'no profile for its model',
};

export const reasonWords = (r: string): string =>
  Object.hasOwn(REASON_WORDS, r) ? REASON_WORDS[r as RejectReason] : r.replace(/_/g, ' ');
