// The summary index of a served run: one entry per trajectory in the order it was read (its
// summary row, its token set, its model), its GRPO group's running checks and members, and what
// the run page and the header count over them. Fed one checked trajectory at a time by the
// store's reads; answers the list query, the header, the groups and the steps.
import type { Finding } from '../../model/finding.ts';
import type { Trajectory } from '../../model/trajectory.ts';
import { TrajectoryKeys } from '../../model/trajectory-key.ts';
import type { CheckedTrajectory } from '../../pipeline.ts';
import { GroupChecks, type GroupMember, type GroupSummary } from '../../analysis/groups.ts';
import { uncoveredLimitation } from '../../profiles/profile.ts';
import type { FilterSubject } from '../../report/filter.ts';
import type { FindingCounts, GroupInfo, GroupList, GroupQuery, RunInfo, RunSteps, TrajectorySummary } from '../api.ts';
import { runSteps } from '../steps.ts';
import { type Health, summarize, withGroupCounts } from './summary.ts';

export interface Entry {
  summary: TrajectorySummary;
  /** Id as the file states it (the key, the store's id, gets `#N` when an earlier trajectory has it). */
  originalId: string;
  /** Distinct token ids of the trajectory's streams, sorted: a token-id query without holding the streams. */
  tokenSet: Uint8Array;
  /** The profile it was checked with and the model name its record states. */
  model: { profile: string; name: string | null };
  /** The trajectory's own findings (its summary's counts add its group's). */
  own: { findings: FindingCounts; health: Health };
  groupKey?: string;
  /** What the trajectory held when read (`extentOf`): a call log's trajectory grows as its session takes turns. */
  extent: string;
}

/** A trajectory's turns and the lines they came from: more of either means it was read again grown. */
export function extentOf(t: Pick<Trajectory, 'turns' | 'source'>): string {
  return `${t.turns.length}:${t.source.lines?.join(',') ?? t.source.line}`;
}

/** What a run says once per profile: the model it does not cover, what its loader defaulted. */
interface ProfileNotes {
  limitation: string | null;
  notes: string[];
}

export class RunIndex {
  readonly entries = new Map<string, Entry>();
  /** Ids in the order they were read. */
  readonly order: string[] = [];
  readonly keys = new TrajectoryKeys();
  readonly groupChecks = new GroupChecks();
  /** Member ids of each group, by group key, in the order they were read. */
  readonly groupMembers = new Map<string, string[]>();
  private readonly groupSignatures = new Map<string, string>();
  private readonly profileNotes = new Map<string, ProfileNotes>();
  /** Bumped whenever a trajectory is added or grows, so answers computed from the index go stale. */
  version = 0;
  private lastSteps: { version: number; steps: RunSteps } | undefined;

  /** Whether `t` was read before with exactly what it holds now (a file read again skips it). */
  known(t: Trajectory): boolean {
    const key = this.keys.peek(t);
    return key !== undefined && this.entries.get(key)?.extent === extentOf(t);
  }

  /**
   * Add a checked trajectory (its key is its id from now on); one read before is replaced in place
   * when it grew. Returns what it was: `new`, `grown` (its earlier analysis is stale), or `known`.
   */
  add(checked: CheckedTrajectory): 'new' | 'grown' | 'known' {
    const traj = checked.trajectory;
    const known = this.keys.peek(traj);
    if (known !== undefined) {
      // A trajectory read again: replaced in place when it grew, else known (a rewritten file).
      const entry = this.entries.get(known);
      if (!entry || entry.extent === extentOf(traj)) return 'known';
      this.regrown(known, entry, checked);
      return 'grown';
    }
    const originalId = traj.id;
    const id = this.keys.keyOf(traj);
    traj.id = id;
    const { summary, tokenSet, member } = summarize(id, checked);
    const entry: Entry = {
      summary,
      originalId,
      tokenSet,
      model: { profile: checked.profile.name, name: traj.model ?? null },
      own: { findings: summary.findings, health: summary.health },
      extent: extentOf(traj),
    };
    this.entries.set(id, entry);
    if (!this.profileNotes.has(checked.profile.name)) {
      const uncovered = checked.profile.uncoveredModel;
      this.profileNotes.set(checked.profile.name, {
        limitation: uncovered !== undefined ? uncoveredLimitation(uncovered) : null,
        notes: uncovered !== undefined ? [] : checked.profile.notes,
      });
    }
    this.order.push(id);
    if (member) this.addToGroup(entry, member);
    this.version++;
    return 'new';
  }

  /** A trajectory that grew keeps its key and its place; its summary and streams are the new ones. */
  private regrown(id: string, entry: Entry, checked: CheckedTrajectory): void {
    checked.trajectory.id = id;
    const { summary, tokenSet } = summarize(id, checked);
    entry.own = { findings: summary.findings, health: summary.health };
    entry.tokenSet = tokenSet;
    entry.extent = extentOf(checked.trajectory);
    const groupFindings = entry.groupKey ? (this.groupChecks.summary(entry.groupKey)?.findings ?? []) : [];
    entry.summary = {
      ...summary,
      sample: entry.summary.sample,
      ...(groupFindings.length > 0 ? withGroupCounts(entry.own, groupFindings) : {}),
    };
    this.version++;
  }

  /** Join `entry` to its group and give every member the group's findings when they change. */
  private addToGroup(entry: Entry, member: GroupMember): void {
    const key = this.groupChecks.add(member);
    entry.groupKey = key;
    const members = this.groupMembers.get(key) ?? [];
    if (members.length === 0) this.groupMembers.set(key, members);
    // Its place among its group's members in the order they were read, as check counts it.
    entry.summary.sample = members.length;
    members.push(entry.summary.id);
    const findings = this.groupChecks.summary(key)!.findings;
    const signature = findings.map((f) => `${f.field}:${f.message}`).join('\n');
    // Members are touched only when the group's verdict changes: a large group costs one pass per change.
    const changed = this.groupSignatures.get(key) !== signature;
    this.groupSignatures.set(key, signature);
    for (const id of changed ? members : [entry.summary.id]) {
      const e = this.entries.get(id)!;
      Object.assign(e.summary, withGroupCounts(e.own, findings));
    }
  }

  summary(id: string): TrajectorySummary | undefined {
    return this.entries.get(id)?.summary;
  }

  /** The summaries in the order they were read. */
  summaries(): TrajectorySummary[] {
    return this.order.map((id) => this.entries.get(id)!.summary);
  }

  group(e: Entry): GroupSummary | undefined {
    return e.groupKey === undefined ? undefined : this.groupChecks.summary(e.groupKey);
  }

  /** The group findings of a trajectory's group (empty when it names none, or its group is fine). */
  groupFindings(id: string): Finding[] {
    const e = this.entries.get(id);
    return (e && this.group(e)?.findings) ?? [];
  }

  /** What `--where` reads of an entry (docs/filter.md): its summary's fields and findings, and its group. */
  filterSubject(e: Entry): FilterSubject {
    const s = e.summary;
    return {
      entry: {
        id: s.id,
        source: s.source,
        format: s.format,
        model: e.model.name,
        group: s.group,
        step: s.step,
        sample: s.sample,
        reward: s.reward,
        advantage: s.advantage,
        turns: s.turns,
        response_tokens: s.responseTokens,
        images: s.images,
        status: s.status,
        // Its counts (its group's findings included) as findings of one facet each: what kind:, cause: and severity: test.
        findings: (['kind', 'cause', 'severity'] as const).flatMap((facet) =>
          Object.entries(s.findings[facet])
            .filter(([, n]) => n > 0)
            .map(([value]) => ({ [facet]: value })),
        ),
      },
      group: this.group(e) ?? null,
    };
  }

  /** The header's counts: trajectories with a finding of each kind, cause, severity; per health. */
  counts(): Pick<RunInfo, 'counts' | 'health' | 'models' | 'stated'> {
    const counts: FindingCounts = { kind: {}, cause: {}, severity: {} };
    const health = { ok: 0, warning: 0, error: 0 };
    const stated = { step: 0, group: 0, advantage: 0, reward: 0, status: 0 };
    for (const e of this.entries.values()) {
      const s = e.summary;
      addCounts(counts, health, s);
      if (s.step !== null) stated.step++;
      if (s.group !== null) stated.group++;
      if (s.advantage !== null) stated.advantage++;
      if (s.reward !== null) stated.reward++;
      if (s.status !== null || s.finishReason !== null) stated.status++;
    }
    return { counts, health, models: this.models(), stated };
  }

  /** Trajectories per model profile, most first, with the model names their records state. */
  private models(): RunInfo['models'] {
    const byProfile = new Map<string, { trajectories: number; names: Set<string> }>();
    for (const e of this.entries.values()) {
      const m = byProfile.get(e.model.profile) ?? { trajectories: 0, names: new Set<string>() };
      m.trajectories++;
      if (e.model.name) m.names.add(e.model.name);
      byProfile.set(e.model.profile, m);
    }
    return [...byProfile.entries()]
      .map(([profile, m]) => ({
        profile,
        trajectories: m.trajectories,
        names: [...m.names].sort(),
        ...(this.profileNotes.get(profile) ?? { limitation: null, notes: [] }),
      }))
      .sort((a, b) => b.trajectories - a.trajectories || a.profile.localeCompare(b.profile));
  }

  /** Per rollout step: counts, findings, reward and length distributions. */
  steps(): RunSteps {
    if (this.lastSteps?.version === this.version) return this.lastSteps.steps;
    const steps = runSteps(this.summaries(), this.groupChecks.summaries());
    this.lastSteps = { version: this.version, steps };
    return steps;
  }

  /** GRPO groups in the order their first sample was read, with their members. */
  groups(query: GroupQuery): GroupList {
    const wanted = query.degenerate === undefined ? undefined : query.degenerate === 'true';
    const matches: { key: string; ids: string[]; g: GroupSummary }[] = [];
    for (const [key, ids] of this.groupMembers) {
      const g = this.groupChecks.summary(key)!;
      if (query.step !== undefined && g.step !== query.step) continue;
      if (wanted !== undefined && g.degenerate !== wanted) continue;
      matches.push({ key, ids, g });
    }
    const page = matches.slice(query.offset, query.offset + query.limit).map(
      ({ key, ids, g }): GroupInfo => ({
        key,
        ...g,
        members: (query.members === 'false' ? [] : ids).map((id) => {
          const s = this.entries.get(id)!.summary;
          return {
            id,
            reward: s.reward,
            advantage: s.advantage,
            health: s.health,
            responseTokens: s.responseTokens,
          };
        }),
      }),
    );
    let grouped = 0;
    for (const ids of this.groupMembers.values()) grouped += ids.length;
    return { total: matches.length, offset: query.offset, ungrouped: this.entries.size - grouped, items: page };
  }
}

/** Add one summary to header-style counts (trajectories per kind, cause, severity; per health). */
export function addCounts(counts: FindingCounts, health: Record<Health, number>, s: TrajectorySummary): void {
  health[s.health]++;
  for (const dim of ['kind', 'cause', 'severity'] as const)
    for (const k of Object.keys(s.findings[dim])) counts[dim][k] = (counts[dim][k] ?? 0) + 1;
}
