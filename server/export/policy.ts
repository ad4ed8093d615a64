// Which trajectories may become training rows (docs/export-format.md, "Export policy").
// The canonical re-alignment rebuilds the stream from what the engine really saw and sampled,
// so findings about how a framework *assembled* the stream (duplicated EOS, re-rendered history,
// a shifted mask in the stored sample) are repaired by it. Findings about the data itself (an
// image whose pads do not match it, a cut image, ids outside the vocabulary, NaN logprobs,
// logprobs that do not line up with the generated ids) are not: nothing in the data says what
// the right value was, so the trajectory is rejected.
import { z } from 'zod';
import type { Finding, FindingKind } from '../model/finding.ts';
import type { CheckedTrajectory } from '../analysis/checked.ts';

export const REJECT_REASONS = [
  /** An error finding the re-alignment cannot repair. */
  'unfixable_finding',
  /** A warning, and the export was not asked to include warnings. */
  'warning',
  /** A turn without generated ids (or no turn at all): there is nothing verbatim to train on. */
  'no_generated_ids',
  /** Neither prompt ids, messages nor a stored sample give the prompt. */
  'no_prompt',
  /** A turn is followed by another, but nothing records what came between them. */
  'observation_unknown',
  /** Some generated tokens have logprobs and others do not. */
  'incomplete_logprobs',
  /** A pad run has no image_grid_thw that agrees with it. */
  'grid_unknown',
  /** The stream holds video pads: the row schema has image fields only. */
  'video_unsupported',
  /** mRoPE positions could not be computed. */
  'position_ids',
  /** An image's bytes could not be read (or exist only as a remote URL / a size), or a pad run has no image. */
  'image_unavailable',
  /** The re-aligned row failed the checks. */
  'recheck_failed',
  /** A record that could not be read or analyzed at all. */
  'unreadable',
] as const;
export const RejectReason = z.enum(REJECT_REASONS);
export type RejectReason = z.infer<typeof RejectReason>;

/**
 * Whether the canonical re-alignment repairs an error of each kind: true for kinds that describe
 * how a stored stream was assembled. Every kind must say (the compiler asks when one is added).
 */
const REPAIRED_BY_REALIGNMENT: Readonly<Record<FindingKind, boolean>> = {
  prefix_break: true,
  rerender_mismatch: true,
  sample_mismatch: true,
  mask_mismatch: true,
  placeholder_range: true,
  length_mismatch: true,
  placeholder_count: false,
  image_count: false,
  image_truncated: false,
  invalid_value: false,
  // The trainer's side is not what an export writes; a shifted or drifting trainer is not repaired here.
  logprob_mismatch: false,
  logprob_shift: false,
  trained_mismatch: false,
  grouping_ambiguous: false,
  prompt_tokens_mismatch: false,
  chain_split: false,
  chat_format_unrecognized: false,
  // The stored split is what the model sampled, and the re-alignment keeps it verbatim.
  non_canonical_split: false,
  // A group finding is a warning about the batch (zero advantage), never an error on a sample.
  group: false,
  // The gateway lost a session's earlier turns: what it captured after is still exact.
  session_lost: false,
};

/** True when the re-alignment repairs `f`. */
export function repairedByRealignment(f: Finding): boolean {
  if (!REPAIRED_BY_REALIGNMENT[f.kind]) return false;
  // Only the stored sample is rebuilt. Logprobs that do not match a turn's generated ids, or
  // placeholder ranges the engine declared for its own prompt, are what the engine recorded of
  // the generation itself: nothing says what the model really saw.
  return f.stream === 'sample' || (f.kind !== 'length_mismatch' && f.kind !== 'placeholder_range');
}

export interface OriginalVerdict {
  reasons: RejectReason[];
  messages: string[];
  /** The findings that caused a rejection. */
  causes: Finding[];
}

/** Reasons to reject a trajectory found before re-aligning it: its findings and its structure. */
export function originalRejections(checked: CheckedTrajectory, includeWarnings: boolean): OriginalVerdict {
  const { trajectory: traj, findings, alignment } = checked;
  const out: OriginalVerdict = { reasons: [], messages: [], causes: [] };
  const unfixable = findings.filter((f) => f.severity === 'error' && !repairedByRealignment(f));
  if (unfixable.length > 0) {
    out.reasons.push('unfixable_finding');
    out.causes.push(...unfixable);
    out.messages.push(...unfixable.map((f) => `${f.kind}: ${f.message}`));
  }
  const warnings = findings.filter((f) => f.severity === 'warning');
  if (warnings.length > 0 && !includeWarnings) {
    out.reasons.push('warning');
    out.causes.push(...warnings);
    out.messages.push(...warnings.map((f) => `${f.kind} (warning; pass --include-warnings to export): ${f.message}`));
  }
  const missing = traj.turns.findIndex((t) => t.generatedIds === undefined);
  if (traj.turns.length === 0 || missing >= 0) {
    out.reasons.push('no_generated_ids');
    out.messages.push(
      traj.turns.length === 0 ? 'the data holds no turn with generated ids' : `turn ${missing} has no generated ids`,
    );
  }
  if (alignment.promptFrom === 'none') {
    out.reasons.push('no_prompt');
    out.messages.push('no prompt ids, messages or stored sample give the prompt');
  }
  const gap = alignment.turns.findIndex((s, k) => k + 1 < alignment.turns.length && s.observationFrom === undefined);
  if (gap >= 0) {
    out.reasons.push('observation_unknown');
    out.messages.push(`nothing records what followed turn ${gap}`);
  }
  return out;
}
