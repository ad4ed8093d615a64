// Fold the reports of the shards of one run (`check --shard K/N --json`) into the report an
// unsharded `check --json` gives: the same entries in the same order, the same summary, the same
// exit status. Pure, over parsed documents; `rollscope merge` reads and writes the files.
import type { z } from 'zod';
import { groupKey } from '../analysis/groups.ts';
import { runMismatch } from '../analysis/logprob-mismatch.ts';
import { uncoveredModelOf } from '../profiles/profile.ts';
import { CheckReport, newSummary, RunModels } from './check-report.ts';
import { runLogprobs } from './logprobs.ts';

export class MergeError extends Error {}

export function zodMessage(e: z.ZodError): string {
  const i = e.issues[0]!;
  return `${i.path.join('.') || '(top)'}: ${i.message}`;
}

/** Refuse shards that are not exactly the N shards of one N-way split. */
export function checkShardSet(shards: { name: string; index: number; count: number }[]): void {
  const count = shards[0]!.count;
  const odd = shards.find((s) => s.count !== count);
  if (odd) throw new MergeError(`${odd.name} is shard ${odd.index}/${odd.count}, ${shards[0]!.name} is of ${count}`);
  const seen = new Map<number, string>();
  for (const s of shards) {
    const other = seen.get(s.index);
    if (other !== undefined) throw new MergeError(`${s.name} and ${other} are both shard ${s.index}/${count}`);
    seen.set(s.index, s.name);
  }
  const missing = Array.from({ length: count }, (_, i) => i).filter((i) => !seen.has(i));
  if (missing.length > 0)
    throw new MergeError(`shard(s) ${missing.map((i) => `${i}/${count}`).join(', ')} missing: give all ${count}`);
}

/**
 * The entries of every shard in run order. The positions of all of them, trajectories and errors
 * together, must be 0 … n−1 each exactly once, or the reports are not of one run.
 */
function inRunOrder<T, E>(
  trajectories: { position: number; item: T }[],
  errors: { position: number; item: E }[],
): { trajectories: T[]; errors: E[] } {
  const all = [...trajectories, ...errors].map((x) => x.position).sort((a, b) => a - b);
  all.forEach((p, i) => {
    if (p !== i)
      throw new MergeError(
        `the shards do not fit together (position ${i} is ${p < i ? 'repeated' : 'missing'}): were they run over the same inputs with the same options?`,
      );
  });
  const byPosition = <X>(xs: { position: number; item: X }[]) =>
    xs.sort((a, b) => a.position - b.position).map((x) => x.item);
  return { trajectories: byPosition(trajectories), errors: byPosition(errors) };
}

/** The report of the whole run, from the reports of its shards (each validated as `CheckReport`). */
export function mergeCheckReports(docs: { name: string; doc: unknown }[]): CheckReport {
  const reports = docs.map(({ name, doc }) => {
    const r = CheckReport.safeParse(doc);
    if (!r.success) throw new MergeError(`${name}: not a valid check report: ${zodMessage(r.error)}`);
    return { name, report: r.data };
  });
  const unsharded = reports.filter((r) => !r.report.shard);
  if (unsharded.length > 0) {
    if (reports.length === 1) {
      const { shard: _, ...whole } = reports[0]!.report;
      return whole;
    }
    throw new MergeError(`${unsharded[0]!.name} is the report of a whole run (written without --shard)`);
  }
  checkShardSet(reports.map((r) => ({ name: r.name, index: r.report.shard!.index, count: r.report.shard!.count })));
  const run = reports[0]!.report.shard!.run;
  const other = reports.find((r) => r.report.shard!.run !== run);
  if (other) throw new MergeError(`${other.name} and ${reports[0]!.name} read different files: not shards of one run`);

  const trajectories: { position: number; item: CheckReport['trajectories'][number] }[] = [];
  const errors: { position: number; item: CheckReport['errors'][number] }[] = [];
  // A group lives in one shard (shards split by group): it goes where its first sample was read.
  const groups: { position: number; item: CheckReport['groups'][number] }[] = [];
  const summary = newSummary();
  for (const { name, report } of reports) {
    const pos = report.shard!.positions;
    if (pos.trajectories.length !== report.trajectories.length || pos.errors.length !== report.errors.length)
      throw new MergeError(`${name}: its positions do not match its entries`);
    report.trajectories.forEach((item, i) => {
      trajectories.push({ position: pos.trajectories[i]!, item });
    });
    report.errors.forEach((item, i) => {
      errors.push({ position: pos.errors[i]!, item });
    });
    for (const item of report.groups) {
      const first = report.trajectories.findIndex((t) => t.group === item.id && t.step === item.step);
      groups.push({ position: first >= 0 ? pos.trajectories[first]! : Number.POSITIVE_INFINITY, item });
    }
    const s = report.summary;
    for (const k of [
      'trajectories',
      'clean',
      'withErrors',
      'withWarningsOnly',
      'notCheckable',
      'unreadableRecords',
    ] as const)
      summary[k] += s[k];
    for (const [k, n] of Object.entries(s.findingsByKind))
      summary.findingsByKind[k] = (summary.findingsByKind[k] ?? 0) + n;
  }
  const ordered = inRunOrder(trajectories, errors);
  // A sample's place in its group counts the group's members in run order, whichever shard read them.
  const members = new Map<string, number>();
  for (const t of ordered.trajectories) {
    if (t.group === null) continue;
    const key = groupKey({ group: t.group, step: t.step ?? undefined });
    const n = members.get(key) ?? 0;
    members.set(key, n + 1);
    if (t.sample !== null) t.sample = n;
  }
  // Run totals of the logprob metrics, recomputed over the run's trajectories in run order (as check sums them).
  const thresholds = reports.map((r) => r.report.summary.logprobs?.thresholds).find((t) => t !== undefined);
  const totals = runMismatch(
    ordered.trajectories.flatMap((t) =>
      t.logprobs ? [{ ...t.logprobs, turns: [], shift: undefined, minRatio: 0, firstPastThreshold: undefined }] : [],
    ),
  );
  if (totals) summary.logprobs = runLogprobs(totals, thresholds);
  // The models in the order their first trajectory came in the run, as check counts them.
  const notesOf = new Map<string, string[]>();
  for (const { report } of reports) for (const m of report.models) notesOf.set(m.profile, m.notes);
  const models = new RunModels();
  for (const t of ordered.trajectories) {
    const uncoveredModel = uncoveredModelOf(t.profile);
    models.add(t.model, {
      name: t.profile,
      notes: notesOf.get(t.profile) ?? [],
      ...(uncoveredModel !== undefined ? { uncoveredModel } : {}),
    });
  }
  return {
    version: 1,
    trajectories: ordered.trajectories,
    groups: groups.sort((a, b) => a.position - b.position).map((g) => g.item),
    models: models.list(),
    errors: ordered.errors,
    summary,
  };
}
