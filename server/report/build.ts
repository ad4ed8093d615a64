// The report of a run, built as the run's events come: one entry per trajectory (as soon as it is
// checked), and at the end what only the whole run knows: its groups and their findings, its
// models, the summary and the logprob totals. `check` streams the entries out through a spool
// (cli/report-spool.ts); `buildCheckReport` keeps them, for runs that fit in memory.
import type { CheckedTrajectory, ReportFacts } from '../analysis/checked.ts';
import { GroupChecks, groupKey, type GroupMember, type GroupSummary } from '../analysis/groups.ts';
import { type MismatchThresholds, runMismatch, type TrajectoryMismatch } from '../analysis/logprob-mismatch.ts';
import { reportFacts } from '../analysis/report-facts.ts';
import { publicFinding } from '../model/public-finding.ts';
import type { ReadError, Trajectory } from '../model/trajectory.ts';
import { visionIdsOf } from '../profiles/profile.ts';
import {
  addToSummary,
  type CheckReport,
  newSummary,
  type ReportEntry,
  type ReportGroup,
  RunModels,
} from './check-report.ts';
import { runLogprobs, trajectoryLogprobs } from './logprobs.ts';

/** Whether the record holds any token ids at all; text-only dumps do not, so no check can run on them. */
export function hasTokens(t: Trajectory): boolean {
  return (
    t.sample !== undefined || t.turns.some((turn) => turn.promptIds !== undefined || turn.generatedIds !== undefined)
  );
}

/** The report's facts of `c`: computed where it was analyzed for a report-only run, else now. */
export function factsOf(c: CheckedTrajectory, mismatch: MismatchThresholds | undefined): ReportFacts {
  return c.report ?? reportFacts(c.trajectory, { mismatch }, visionIdsOf(c.profile));
}

/** One trajectory's entry, with its own findings only (`sample`: its place in its group, or null). */
export function reportEntry(c: CheckedTrajectory, facts: ReportFacts, sample: number | null): ReportEntry {
  const t = c.trajectory;
  const entry: ReportEntry = {
    id: t.id,
    source: { file: t.source.file, line: t.source.line },
    format: t.source.format,
    model: t.model ?? null,
    profile: c.profile.name,
    findings: c.findings.map(publicFinding),
    limitations: t.limitations,
    group: t.group ?? null,
    step: t.step ?? null,
    sample,
    reward: t.reward ?? null,
    advantage: t.advantage ?? null,
    turns: t.turns.length,
    images: t.images.length,
    response_tokens: facts.responseTokens,
    status: t.status ?? null,
    prompt_hash: facts.promptHash,
  };
  if (facts.logprobs) entry.logprobs = trajectoryLogprobs(facts.logprobs);
  return entry;
}

/** What the whole run states besides its entries. */
export type RunPart = Pick<CheckReport, 'groups' | 'models' | 'errors' | 'summary'>;

export class CheckReportBuilder {
  private readonly summary = newSummary();
  private readonly groupChecks = new GroupChecks();
  /** Each group's number in `groupChecks.summaries()` order (the order their first sample came), and its size so far. */
  private readonly groups = new Map<string, { number: number; members: number }>();
  private readonly models = new RunModels();
  private readonly errors: ReadError[] = [];
  private readonly mismatches: TrajectoryMismatch[] = [];

  /**
   * `shard`: the builder of one shard's report, which sees only some of a group's samples: the
   * group checks and each sample's place in its group are left to `merge` (report/merge.ts), which
   * is given each trajectory's `member`.
   */
  constructor(
    private readonly mismatch?: MismatchThresholds,
    private readonly shard = false,
  ) {}

  /** The trajectory's entry (its own findings), the number of its group (-1: none) and its group member. */
  addTrajectory(c: CheckedTrajectory): { entry: ReportEntry; group: number; member: GroupMember | null } {
    const t = c.trajectory;
    const facts = factsOf(c, this.mismatch);
    addToSummary(this.summary, c.findings, hasTokens(t));
    this.models.add(t.model ?? null, c.profile);
    let group = -1;
    let sample: number | null = null;
    if (facts.member && !this.shard) {
      const key = this.groupChecks.add(facts.member);
      const known = this.groups.get(key) ?? { number: this.groups.size, members: 0 };
      this.groups.set(key, known);
      group = known.number;
      sample = known.members++;
    }
    if (facts.logprobs) this.mismatches.push(facts.logprobs);
    return { entry: reportEntry(c, facts, sample), group, member: facts.member };
  }

  addError(e: ReadError): void {
    this.errors.push(e);
  }

  /** The groups as the analysis states them (model findings), once `finish` ran. */
  groupSummaries: GroupSummary[] = [];

  /** The rest of the report, once every event is in (call once). */
  finish(): RunPart {
    const summary = this.summary;
    summary.unreadableRecords = this.errors.filter((e) => e.line > 0).length;
    const totals = runMismatch(this.mismatches);
    if (totals) summary.logprobs = runLogprobs(totals, this.mismatch);
    this.groupSummaries = this.groupChecks.summaries();
    const groups: ReportGroup[] = this.groupSummaries.map((g) => ({ ...g, findings: g.findings.map(publicFinding) }));
    for (const g of groups) summary.findingsByKind.group! += g.findings.length;
    return {
      groups,
      models: this.models.list(),
      errors: this.errors.map(({ file, line, field, message }) => ({
        file,
        line,
        ...(field ? { field } : {}),
        message,
      })),
      summary,
    };
  }
}

/** `entry` with its group's findings after its own (docs/check-json.md#groups). */
export function withGroupFindings(entry: ReportEntry, group: ReportGroup | undefined): ReportEntry {
  return group && group.findings.length > 0 ? { ...entry, findings: [...entry.findings, ...group.findings] } : entry;
}

/** The groups of a report by the key their members name them with (`groupOf`). */
export function groupsByKey(groups: readonly ReportGroup[]): Map<string, ReportGroup> {
  return new Map(groups.map((g) => [groupKey({ group: g.id, step: g.step ?? undefined }), g]));
}

/** The entry's group in `byKey` (groupsByKey), if it has one. */
export function groupOf(
  entry: Pick<ReportEntry, 'group' | 'step'>,
  byKey: Map<string, ReportGroup>,
): ReportGroup | undefined {
  return entry.group === null ? undefined : byKey.get(groupKey({ group: entry.group, step: entry.step ?? undefined }));
}

/** The whole report of checked trajectories and read errors, kept in memory (tests, serve, diff-runs). */
export function buildCheckReport(
  events: Iterable<{ type: 'trajectory'; checked: CheckedTrajectory } | { type: 'error'; error: ReadError }>,
  mismatch?: MismatchThresholds,
): CheckReport {
  const builder = new CheckReportBuilder(mismatch);
  const entries: { entry: ReportEntry; group: number }[] = [];
  for (const ev of events) {
    if (ev.type === 'error') builder.addError(ev.error);
    else entries.push(builder.addTrajectory(ev.checked));
  }
  const run = builder.finish();
  return {
    version: 1,
    trajectories: entries.map((e) => withGroupFindings(e.entry, run.groups[e.group])),
    ...run,
  };
}
