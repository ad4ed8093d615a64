// A report narrowed by `--where` (docs/filter.md): the entries the filter selects, and the summary
// over them alone, built as `check` writes its spooled entries out (group fields are known only
// then). The groups, models and read errors stay the run's.
import { type MismatchThresholds, runMismatch, type TrajectoryMismatch } from '../analysis/logprob-mismatch.ts';
import type { Finding } from '../model/finding.ts';
import {
  addToSummary,
  type CheckReport,
  type ReportEntry,
  type ReportSummary,
  newSummary,
  type RunModel,
  RunModels,
} from './check-report.ts';
import { uncoveredModelOf } from '../profiles/profile.ts';
import { type FilterNode, matchesFilter } from './filter.ts';
import { runLogprobs } from './logprobs.ts';

/** `filter` in a report written with `--where`: the expression, and how many entries it kept and left out. */
export type ReportFilter = NonNullable<CheckReport['filter']>;

/** A report entry's logprob metrics as the run totals read them (what merge sums too). */
export function entryMismatch(entry: Pick<ReportEntry, 'logprobs'>): TrajectoryMismatch | undefined {
  const m = entry.logprobs;
  return m ? { ...m, turns: [], shift: undefined, minRatio: 0, firstPastThreshold: undefined } : undefined;
}

export class FilteredReport {
  private readonly summary = newSummary();
  private readonly mismatches: TrajectoryMismatch[] = [];
  /** Groups with a member kept: their findings count once in the summary, as the whole run counts them. */
  private readonly groupsKept = new Set<number>();
  private readonly models = new RunModels();
  private matched = 0;
  private filteredOut = 0;

  private readonly notesOf: Map<string, string[]>;

  /** `run`: the whole run's groups (what group fields read) and models (their profiles' notes). */
  constructor(
    private readonly where: { expression: string; node: FilterNode },
    private readonly run: Pick<CheckReport, 'groups' | 'models'>,
    private readonly mismatch?: MismatchThresholds,
  ) {
    this.notesOf = new Map(run.models.map((m) => [m.profile, m.notes]));
  }

  /**
   * Whether `entry` (its own findings, then its group's, as written) is kept; a kept entry counts in
   * the summary. `checkable`: it holds token ids for the checks to run on (report/build.ts hasTokens).
   */
  keep(entry: ReportEntry, group: number, checkable: boolean): boolean {
    const g = group >= 0 ? this.run.groups[group] : undefined;
    if (!matchesFilter(this.where.node, { entry, group: g ?? null })) {
      this.filteredOut++;
      return false;
    }
    this.matched++;
    const own = entry.findings.slice(0, entry.findings.length - (g?.findings.length ?? 0)) as Finding[];
    addToSummary(this.summary, own, checkable);
    if (g) this.groupsKept.add(group);
    addModel(this.models, entry, this.notesOf);
    const m = entryMismatch(entry);
    if (m) this.mismatches.push(m);
    return true;
  }

  /**
   * The summary and the models over the kept entries (`run`: the whole run's summary, for the
   * unreadable records the filter does not narrow), and the filter.
   */
  finish(run: ReportSummary): { summary: ReportSummary; models: RunModel[]; filter: ReportFilter } {
    const summary = this.summary;
    summary.unreadableRecords = run.unreadableRecords;
    for (const g of this.groupsKept) summary.findingsByKind.group! += this.run.groups[g]!.findings.length;
    const totals = runMismatch(this.mismatches);
    if (totals) summary.logprobs = runLogprobs(totals, this.mismatch ?? run.logprobs?.thresholds);
    return {
      summary,
      models: this.models.list(),
      filter: { where: this.where.expression, matched: this.matched, filtered_out: this.filteredOut },
    };
  }
}

/** Count `entry`'s model, its profile named as the report names it (what merge recounts the models from). */
export function addModel(
  models: RunModels,
  entry: Pick<ReportEntry, 'model' | 'profile'>,
  notesOf: ReadonlyMap<string, string[]>,
): void {
  const uncoveredModel = uncoveredModelOf(entry.profile);
  models.add(entry.model, {
    name: entry.profile,
    notes: notesOf.get(entry.profile) ?? [],
    ...(uncoveredModel !== undefined ? { uncoveredModel } : {}),
  });
}
