// Which trajectories may become training rows (docs/export-format.md, "Export policy").
// The canonical re-alignment rebuilds the stream from what the engine really saw and sampled,
// so findings about how a framework *assembled* the stream (duplicated EOS, re-rendered history,
// a shifted mask in the stored sample) are repaired by it. Findings about the data itself (an
// image whose pads do not match it, a cut image, ids outside the vocabulary, NaN logprobs,
// logprobs that do not line up with the generated ids) are not: nothing in the data says what
// the right value was, so the trajectory is rejected. A warning rejects only when it doubts the
// row (WARNING_ROLE); one that describes a correct row (a split the model sampled, a raw-text
// prompt) leaves it in the batch, counted in the manifest.
import { z } from 'zod';
import type { DivergenceCause, Finding, FindingKind, Severity } from '../model/finding.ts';
import type { CheckedTrajectory } from '../analysis/checked.ts';

export const REJECT_REASONS = [
  /** An error finding the re-alignment cannot repair. */
  'unfixable_finding',
  /** A warning that doubts the row (WARNING_ROLE), and the export was not asked to include warnings. */
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
  /** A record that could not be read at all. */
  'unreadable',
  /** A step of the analysis, or of building the row, raised (the `analysis_failed` finding says which). */
  'analysis_failed',
  /** No profile covers the model the data names (`--model FOLDER` gives one): nothing can be re-aligned. */
  'no_profile',
] as const;
export const RejectReason = z.enum(REJECT_REASONS);
export type RejectReason = z.infer<typeof RejectReason>;

/**
 * Whether the canonical re-alignment repairs an error of each kind: true for kinds that describe
 * how a stored stream was assembled; `sample` when only an error on the stored sample is (the
 * stored sample is rebuilt; what the engine recorded of its own prompt and generation is not).
 * Every kind must say (the compiler asks when one is added).
 */
export const REPAIRED_BY_REALIGNMENT: Readonly<Record<FindingKind, boolean | 'sample'>> = {
  prefix_break: true,
  rerender_mismatch: true,
  sample_mismatch: true,
  mask_mismatch: true,
  // Logprobs that do not match a turn's generated ids, or placeholder ranges the engine declared
  // for its own prompt, are what the engine recorded: nothing says what the model really saw.
  placeholder_range: 'sample',
  length_mismatch: 'sample',
  placeholder_count: false,
  video_timestamps: false,
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
  // A step that failed checked nothing: nothing says the row would be right.
  analysis_failed: false,
  // The gateway lost a session's earlier turns: what it captured after is still exact.
  session_lost: false,
};

/** True when the re-alignment repairs `f`. */
export function repairedByRealignment(f: Finding): boolean {
  const repaired = REPAIRED_BY_REALIGNMENT[f.kind];
  return repaired === 'sample' ? f.stream === 'sample' : repaired;
}

/**
 * What a warning says about the row: `doubts`, the data may be wrong (the export rejects it unless
 * `--include-warnings`); `describes`, a fact about a row that is right as it is (exported, and
 * counted in the manifest's `exportedWithWarnings`). Per kind, refined by cause or field where one
 * kind says both; kinds only ever reported as errors say `doubts`, the safe side (SEVERITIES).
 */
export type WarningRole = 'doubts' | 'describes';
export interface RefinedRole {
  role: WarningRole;
  /** Where the finding's `cause` (else its `field`) decides otherwise. */
  byCause?: Readonly<Partial<Record<DivergenceCause, WarningRole>>>;
  byField?: Readonly<Record<string, WarningRole>>;
}

export const WARNING_ROLE: Readonly<Record<FindingKind, WarningRole | RefinedRole>> = {
  prefix_break: 'doubts',
  // A warning only when the stored data kept the generated ids: they are right, a re-render would not
  // be. Unless the re-render differs in image pads: then the image and the stored pad run disagree.
  rerender_mismatch: { role: 'describes', byCause: { image_tokens_changed: 'doubts' } },
  sample_mismatch: 'doubts',
  // A warning when the pads agree with the stored grid but not with the processor settings in force:
  // the row is right only if the run used other settings, which nothing here states.
  placeholder_count: 'doubts',
  // A video's timestamp text is not what its frames and fps give: the model saw other times.
  video_timestamps: 'doubts',
  // A warning only for a lone vision begin/end token the model generated: its own text, kept verbatim.
  image_count: { role: 'doubts', byCause: { vision_token_generated: 'describes' } },
  image_truncated: 'doubts',
  // A warning when the data does not settle which sample an image's range belongs to (prime-rl MMRef offsets).
  placeholder_range: 'doubts',
  length_mismatch: 'doubts',
  mask_mismatch: 'doubts',
  invalid_value: 'doubts',
  // Rollout and trainer disagree on logprobs: the row holds what was sampled, with the sampler's
  // logprobs; the drift is the trainer's to correct (importance sampling), not a fault of the row.
  logprob_mismatch: 'describes',
  logprob_shift: 'doubts',
  trained_mismatch: 'doubts',
  // Which conversation a call belongs to is a guess: the row may splice two.
  grouping_ambiguous: 'doubts',
  // The engine's prompt length disagrees with the rendered prompt the row would be built from.
  prompt_tokens_mismatch: 'doubts',
  // Each chain of a split rollout is a sequence whose calls extend each other, trained as its own sample.
  chain_split: 'describes',
  // Ids outside the chat format (a raw-text prompt: base-model, R1-Zero runs) are kept as they are.
  chat_format_unrecognized: 'describes',
  // The model sampled a split the tokenizer would not write; the row keeps the ids verbatim.
  non_canonical_split: 'describes',
  // No learning signal (equal rewards, identical samples) describes the group; samples asked
  // different prompts doubt it (the advantages compare answers to different questions).
  group: { role: 'describes', byField: { prompt: 'doubts' } },
  analysis_failed: 'doubts',
  // The turns a gateway captured after it lost a session's state are exact; only the history before is not its capture.
  session_lost: 'describes',
};

/**
 * The severities each kind is reported with. For the export-policy table (docs/export-format.md,
 * test/export-policy.test.ts) and checked against every finding the fixtures and the demo produce.
 */
export const SEVERITIES: Readonly<Record<FindingKind, readonly Severity[]>> = {
  prefix_break: ['error'],
  rerender_mismatch: ['error', 'warning'],
  sample_mismatch: ['error'],
  placeholder_count: ['error', 'warning'],
  video_timestamps: ['error'],
  image_count: ['error', 'warning'],
  image_truncated: ['error'],
  placeholder_range: ['error', 'warning'],
  length_mismatch: ['error'],
  mask_mismatch: ['error'],
  invalid_value: ['error'],
  logprob_mismatch: ['warning'],
  logprob_shift: ['error'],
  trained_mismatch: ['error'],
  grouping_ambiguous: ['error'],
  prompt_tokens_mismatch: ['error', 'warning'],
  chain_split: ['warning'],
  chat_format_unrecognized: ['warning'],
  non_canonical_split: ['warning'],
  group: ['warning'],
  analysis_failed: ['error'],
  session_lost: ['warning'],
};

/** The role of warning `f` (its cause, else its field, where the kind is refined). */
export function warningRole(f: Finding): WarningRole {
  const r = WARNING_ROLE[f.kind];
  if (typeof r === 'string') return r;
  return (f.cause && r.byCause?.[f.cause]) || (f.field !== undefined && r.byField?.[f.field]) || r.role;
}

/** True for a warning that doubts the row (rejected unless warnings are included). */
export function warningDoubtsRow(f: Finding): boolean {
  return f.severity === 'warning' && warningRole(f) === 'doubts';
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
  const failed = findings.filter((f) => f.kind === 'analysis_failed');
  if (failed.length > 0) {
    out.reasons.push('analysis_failed');
    out.causes.push(...failed);
    out.messages.push(...failed.map((f) => `analysis_failed: ${f.message}`));
  }
  const unfixable = findings.filter(
    (f) => f.severity === 'error' && f.kind !== 'analysis_failed' && !repairedByRealignment(f),
  );
  if (unfixable.length > 0) {
    out.reasons.push('unfixable_finding');
    out.causes.push(...unfixable);
    out.messages.push(...unfixable.map((f) => `${f.kind}: ${f.message}`));
  }
  const doubting = findings.filter(warningDoubtsRow);
  if (doubting.length > 0 && !includeWarnings) {
    out.reasons.push('warning');
    out.causes.push(...doubting);
    out.messages.push(
      ...doubting.map(
        (f) => `${f.kind} (a warning that doubts the row; pass --include-warnings to export): ${f.message}`,
      ),
    );
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
