// The report of a checked run: the stable `check --json` contract (docs/check-json.md), built once
// here and read by every command that speaks about a run (check, merge, serve, the filters,
// diff-runs, the JUnit writer). Pure: no files, no terminal.
import { z } from 'zod';
import type { Finding } from '../model/finding.ts';
import { FINDING_KINDS } from '../model/finding.ts';
import { uncoveredLimitation, type ModelProfile } from '../profiles/profile.ts';
import { RunLogprobs, TrajectoryLogprobs } from './logprobs.ts';

/** One model of a run: the name the data states and the profile its trajectories were checked with (docs/check-json.md#models). */
export const RunModel = z.object({
  /** As the data states it; null for trajectories that name none. */
  model: z.string().nullable(),
  profile: z.string(),
  trajectories: z.number().int(),
  /** For a model no profile covers, the one sentence that says so; else null. */
  limitation: z.string().nullable(),
  /** What the profile's loader could not read and defaulted (a model folder without some file). */
  notes: z.array(z.string()),
});
export type RunModel = z.infer<typeof RunModel>;

/** The models of a run in the order their first trajectory came, counted. */
export class RunModels {
  private readonly byKey = new Map<string, RunModel>();

  add(model: string | null, profile: Pick<ModelProfile, 'name' | 'notes' | 'uncoveredModel'>): void {
    const key = JSON.stringify([model, profile.name]);
    const known = this.byKey.get(key);
    if (known) {
      known.trajectories++;
      return;
    }
    const uncovered = profile.uncoveredModel;
    this.byKey.set(key, {
      model,
      profile: profile.name,
      trajectories: 1,
      limitation: uncovered !== undefined ? uncoveredLimitation(uncovered) : null,
      // A stand-in's note is its limitation.
      notes: uncovered !== undefined ? [] : [...profile.notes],
    });
  }

  list(): RunModel[] {
    return [...this.byKey.values()];
  }
}

/** One trajectory of the report. Fields added after the first version read as null from older reports. */
export const ReportEntry = z.object({
  id: z.string(),
  source: z.object({ file: z.string(), line: z.number().int() }),
  format: z.string(),
  model: z.string().nullable(),
  profile: z.string(),
  /** Its own findings, then its group's (docs/check-json.md#groups). */
  findings: z.array(z.unknown()),
  limitations: z.array(z.string()),
  /** The GRPO group and rollout step the trajectory belongs to (null when its format states none). */
  group: z.string().nullable().default(null),
  step: z.number().int().nullable().default(null),
  /** Its index among the samples of its group, as the data states it. */
  sample: z.number().int().nullable().default(null),
  reward: z.number().nullable().default(null),
  /** The sample's advantage where the trainer stored one (per-token advantages: the first trained token's). */
  advantage: z.number().nullable().default(null),
  /** Model calls (turns) of the trajectory; null only in reports written before the field existed. */
  turns: z.number().int().nullable().default(null),
  images: z.number().int().nullable().default(null),
  /** Generated tokens (analysis/trajectory-facts.ts `responseTokens`); null when the data has none. */
  response_tokens: z.number().int().nullable().default(null),
  /** The status the data states (slime `status`, a finish reason of the whole sample). */
  status: z.string().nullable().default(null),
  /** What its group's samples share (analysis/groups.ts `promptHash`): diff-runs pairs by it when ids differ. */
  prompt_hash: z.string().nullable().default(null),
  /** Rollout against trainer logprobs, when the trajectory has both (keys in the order `check` writes them). */
  logprobs: TrajectoryLogprobs.optional(),
});
export type ReportEntry = z.infer<typeof ReportEntry>;

export const ReportGroup = z.object({
  id: z.string(),
  step: z.number().int().nullable(),
  size: z.number().int(),
  reward_mean: z.number().nullable(),
  reward_std: z.number().nullable(),
  degenerate: z.boolean(),
  findings: z.array(z.unknown()),
});
export type ReportGroup = z.infer<typeof ReportGroup>;

export const ReportError = z.object({
  file: z.string(),
  line: z.number().int(),
  field: z.string().optional(),
  message: z.string(),
});
export type ReportError = z.infer<typeof ReportError>;

export const ReportSummary = z.object({
  trajectories: z.number().int(),
  clean: z.number().int(),
  withErrors: z.number().int(),
  withWarningsOnly: z.number().int(),
  /** No findings, but the format keeps too little for the checks to run (text-only dumps). */
  notCheckable: z.number().int(),
  unreadableRecords: z.number().int(),
  findingsByKind: z.record(z.string(), z.number().int()),
  /** Run totals of the logprob metrics, when any trajectory has trainer logprobs. */
  logprobs: RunLogprobs.optional(),
});
export type ReportSummary = z.infer<typeof ReportSummary>;

/** Where in the run an entry was read: [file order (−1: a path that cannot be read), its split's first byte, its place in the split]. */
export const RunPosition = z.tuple([
  z.number().int().min(-1),
  z.number().int().nonnegative(),
  z.number().int().nonnegative(),
]);
export type RunPosition = z.infer<typeof RunPosition>;

/** What `merge` needs of a group member to run the group checks (analysis/groups.ts GroupMember). */
export const ShardMember = z.object({
  group: z.string(),
  step: z.number().int().optional(),
  reward: z.number().nullable().optional(),
  prompt: z.string().optional(),
  sample: z.string().optional(),
});
export type ShardMember = z.infer<typeof ShardMember>;

/** A shard's part of a report (CheckReport `shard`). */
export const ShardPart = z.object({
  index: z.number().int().nonnegative(),
  count: z.number().int().positive(),
  run: z.string(),
  /** Files in the run. */
  files: z.number().int().nonnegative(),
  /** What it read of each: bytes [start, end) of the file at `order` (before alignment to line starts), `bytes` its size. */
  splits: z.array(
    z.object({
      order: z.number().int().nonnegative(),
      start: z.number().int().nonnegative(),
      end: z.number().int().nonnegative(),
      bytes: z.number().int().nonnegative(),
    }),
  ),
  positions: z.object({ trajectories: z.array(RunPosition), errors: z.array(RunPosition) }),
  /** Each trajectory's GRPO group member, null when it names no group. */
  members: z.array(ShardMember.nullable()),
});
export type ShardPart = z.infer<typeof ShardPart>;

/** The stable `--json` contract (docs/check-json.md). */
export const CheckReport = z.object({
  version: z.literal(1),
  trajectories: z.array(ReportEntry),
  /** GRPO groups (analysis/groups.ts), in the order their first sample came; their findings are also in each member's `findings`. */
  groups: z.array(ReportGroup).default([]),
  /** The models the trajectories name, each with its profile; reports written before this field existed read as []. */
  models: z.array(RunModel).default([]),
  errors: z.array(ReportError),
  summary: ReportSummary,
  /**
   * Only in a report written with `--where` (docs/filter.md): the expression, the entries it kept
   * (those listed, and counted in `summary`) and those it left out.
   */
  filter: z
    .object({
      where: z.string(),
      matched: z.number().int().nonnegative(),
      filtered_out: z.number().int().nonnegative(),
    })
    .optional(),
  /**
   * Only in the report of one shard (`check --shard K/N`), for `rollscope merge`: which shard, a
   * fingerprint of the run's files (names and sizes), the byte ranges of them it read, where in
   * the run each of its trajectories and errors was read, and the group member each trajectory
   * is (docs/distributed.md). Its entries name trajectories by the id their data states and
   * leave out group findings and places: `merge` gives the run-wide keys and runs the group checks.
   */
  shard: ShardPart.optional(),
});
export type CheckReport = z.infer<typeof CheckReport>;

export function newSummary(): ReportSummary {
  return {
    trajectories: 0,
    clean: 0,
    withErrors: 0,
    withWarningsOnly: 0,
    notCheckable: 0,
    unreadableRecords: 0,
    findingsByKind: Object.fromEntries(FINDING_KINDS.map((k) => [k, 0])),
  };
}

/** Count one trajectory with its own `findings` (`checkable`: it holds token ids for the checks to run on). */
export function addToSummary(summary: ReportSummary, findings: readonly Finding[], checkable = true): void {
  summary.trajectories++;
  const hasError = findings.some((f) => f.severity === 'error');
  if (hasError) summary.withErrors++;
  else if (findings.length > 0) summary.withWarningsOnly++;
  else if (!checkable) summary.notCheckable++;
  else summary.clean++;
  for (const f of findings) summary.findingsByKind[f.kind] = (summary.findingsByKind[f.kind] ?? 0) + 1;
}

/** The exit status `check` gives for this report: 2 a path unreadable, 1 an error finding or unreadable record, else 0. */
export function checkExitStatus(r: Pick<CheckReport, 'errors' | 'summary'>): number {
  if (r.errors.some((e) => e.line === 0)) return 2;
  return r.summary.withErrors > 0 || r.summary.unreadableRecords > 0 ? 1 : 0;
}
