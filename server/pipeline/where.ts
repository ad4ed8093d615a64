// `--where` over a run being read (docs/filter.md): each checked trajectory evaluated as its
// `check --json` entry with its group. `export` and `check`'s text output evaluate as they go; a
// filter that reads a group needs the group whole first (`groupsOfRun`: a first pass).
import { GroupChecks, groupKey } from '../analysis/groups.ts';
import type { CheckedTrajectory } from '../analysis/checked.ts';
import { publicFinding } from '../model/public-finding.ts';
import type { ReportGroup } from '../report/check-report.ts';
import { factsOf, reportEntry, withGroupFindings } from '../report/build.ts';
import { type FilterNode, matchesFilter } from '../report/filter.ts';
import { checkPaths } from '../pipeline.ts';
import type { RunOptions } from './analyze.ts';

/** `--where`: the filter, as `check --where` reads it (docs/filter.md). */
export interface ExportWhere {
  expression: string;
  node: FilterNode;
}

/**
 * The groups of a run as `check --json` states them, by group key: a first pass over the run that
 * keeps only each group's running summary (analysis/groups.ts), for a filter that reads group
 * fields or group findings. Groups are whole within a shard, so a shard reads only its own.
 */
export async function groupsOfRun(inputs: readonly string[], runOpts: RunOptions): Promise<Map<string, ReportGroup>> {
  const groups = new GroupChecks();
  for await (const ev of checkPaths(inputs, { ...runOpts, reportOnly: true, noStreams: true })) {
    if (ev.type !== 'trajectory') continue;
    const member = factsOf(ev.checked, undefined).member;
    if (member) groups.add(member);
  }
  return new Map(
    groups
      .summaries()
      .map((g) => [
        groupKey({ group: g.id, step: g.step ?? undefined }),
        { ...g, findings: g.findings.map(publicFinding) },
      ]),
  );
}

/**
 * Whether each checked trajectory of the export pass matches: its `check --json` entry (with its
 * place in its group counted as `check` counts it, in the order the run is read) and its group.
 */
export function whereMatcher(
  where: ExportWhere,
  groups: ReadonlyMap<string, ReportGroup>,
): (c: CheckedTrajectory) => boolean {
  const members = new Map<string, number>();
  return (c) => {
    const facts = factsOf(c, undefined);
    let sample: number | null = null;
    let group: ReportGroup | undefined;
    if (facts.member) {
      const key = groupKey(facts.member);
      sample = members.get(key) ?? 0;
      members.set(key, sample + 1);
      group = groups.get(key);
    }
    const entry = withGroupFindings(reportEntry(c, facts, sample), group);
    return matchesFilter(where.node, { entry, group: group ?? null });
  };
}
