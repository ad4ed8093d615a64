// Fold the reports of the shards of one run (`check --shard K/N --json`) into the report an
// unsharded `check --json` gives: the same entries in the same order, the same summary, the same
// exit status. Pure, over parsed documents; `rollscope merge` reads and writes the files.
import type { z } from 'zod';
import { GroupChecks, groupKey } from '../analysis/groups.ts';
import { publicFinding } from '../model/public-finding.ts';
import { uniqueIds } from '../model/trajectory-key.ts';
import { runMismatch } from '../analysis/logprob-mismatch.ts';
import { uncoveredModelOf } from '../profiles/profile.ts';
import { CheckReport, newSummary, RunModels, type RunPosition, type ShardPart } from './check-report.ts';
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

/** Positions in run order: file, then split, then the place in the split. */
function compareRunPositions(a: RunPosition, b: RunPosition): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/**
 * Refuse shards whose splits do not tile the run: every file of it read once, byte 0 to its
 * size, by exactly one shard's splits, none outside it (names the file order and the bytes).
 */
function checkSplitsTile(reports: { name: string; report: CheckReport }[]): void {
  const files = reports[0]!.report.shard!.files;
  const other = reports.find((r) => r.report.shard!.files !== files);
  if (other) throw new MergeError(`${other.name} and ${reports[0]!.name} list different files: not shards of one run`);
  const byFile = new Map<number, { name: string; start: number; end: number; bytes: number }[]>();
  for (const { name, report } of reports)
    for (const s of report.shard!.splits) {
      if (s.order >= files || s.end < s.start || s.end > s.bytes)
        throw new MergeError(
          `${name}: split of file ${s.order} (bytes ${s.start}–${s.end} of ${s.bytes}) is not in the run`,
        );
      const list = byFile.get(s.order) ?? [];
      list.push({ name, ...s });
      byFile.set(s.order, list);
    }
  for (let order = 0; order < files; order++) {
    const list = (byFile.get(order) ?? []).sort((x, y) => x.start - y.start);
    if (list.length === 0)
      throw new MergeError(`file ${order} of the run was read by no shard: were they run over the same inputs?`);
    let at = 0;
    for (const s of list) {
      if (s.bytes !== list[0]!.bytes)
        throw new MergeError(
          `${s.name} and ${list[0]!.name} saw file ${order} at different sizes: was it still written?`,
        );
      if (s.start > at)
        throw new MergeError(
          `the shards do not fit together: bytes ${at}–${s.start} of file ${order} were read by no shard`,
        );
      if (s.start < at)
        throw new MergeError(
          `the shards do not fit together: bytes ${s.start}–${Math.min(at, s.end)} of file ${order} were read twice (${s.name})`,
        );
      at = s.end;
    }
    if (at !== list[0]!.bytes)
      throw new MergeError(
        `the shards do not fit together: bytes ${at}–${list[0]!.bytes} of file ${order} were read by no shard`,
      );
  }
}

/** Items in run order, refusing two read at the same place (shards that overlap). */
function inRunOrder<T>(items: { position: RunPosition; item: T }[], what: string): T[] {
  items.sort((a, b) => compareRunPositions(a.position, b.position));
  for (let i = 1; i < items.length; i++)
    if (compareRunPositions(items[i - 1]!.position, items[i]!.position) === 0)
      throw new MergeError(
        `the shards do not fit together (two ${what} read at ${JSON.stringify(items[i]!.position)}): were they run over the same inputs with the same options?`,
      );
  return items.map((x) => x.item);
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
  checkSplitsTile(reports);

  type Entry = CheckReport['trajectories'][number];
  const trajectories: { position: RunPosition; item: { entry: Entry; member: ShardPart['members'][number] } }[] = [];
  const errors: { position: RunPosition; item: CheckReport['errors'][number] }[] = [];
  const summary = newSummary();
  for (const { name, report } of reports) {
    const { positions, members } = report.shard!;
    if (
      positions.trajectories.length !== report.trajectories.length ||
      members.length !== report.trajectories.length ||
      positions.errors.length !== report.errors.length
    )
      throw new MergeError(`${name}: its positions do not match its entries`);
    report.trajectories.forEach((entry, i) => {
      trajectories.push({ position: positions.trajectories[i]!, item: { entry, member: members[i]! } });
    });
    report.errors.forEach((item, i) => {
      errors.push({ position: positions.errors[i]!, item });
    });
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
  const ordered = inRunOrder(trajectories, 'trajectories');
  // The run-wide keys (model/trajectory-key.ts): the stated id, `ID#2` for the second to state it, in run order.
  const keyOf = uniqueIds();
  for (const { entry } of ordered) entry.id = keyOf(entry.id);
  // A sample's place in its group counts the group's members in run order, whichever shard read them.
  const places = new Map<string, number>();
  for (const { entry, member } of ordered) {
    if (!member) continue;
    const key = groupKey(member);
    const n = places.get(key) ?? 0;
    places.set(key, n + 1);
    entry.sample = n;
  }
  // The group checks over the run's members in run order, as check runs them; each member lists
  // its group's findings after its own (docs/check-json.md#groups).
  const groupChecks = new GroupChecks();
  const keys = ordered.map(({ member }) => (member ? groupChecks.add(member) : undefined));
  const groups = groupChecks.summaries().map((g) => ({ ...g, findings: g.findings.map(publicFinding) }));
  const groupFindings = new Map<string, unknown[]>();
  for (const key of new Set(keys))
    if (key !== undefined) groupFindings.set(key, groupChecks.summary(key)!.findings.map(publicFinding));
  ordered.forEach(({ entry }, i) => {
    const key = keys[i];
    if (key !== undefined) entry.findings.push(...groupFindings.get(key)!);
  });
  for (const g of groups) summary.findingsByKind.group! += g.findings.length;
  const entries = ordered.map(({ entry }) => entry);
  // Run totals of the logprob metrics, recomputed over the run's trajectories in run order (as check sums them).
  const thresholds = reports.map((r) => r.report.summary.logprobs?.thresholds).find((t) => t !== undefined);
  const totals = runMismatch(
    entries.flatMap((t) =>
      t.logprobs ? [{ ...t.logprobs, turns: [], shift: undefined, minRatio: 0, firstPastThreshold: undefined }] : [],
    ),
  );
  if (totals) summary.logprobs = runLogprobs(totals, thresholds);
  // The models in the order their first trajectory came in the run, as check counts them.
  const notesOf = new Map<string, string[]>();
  for (const { report } of reports) for (const m of report.models) notesOf.set(m.profile, m.notes);
  const models = new RunModels();
  for (const t of entries) {
    const uncoveredModel = uncoveredModelOf(t.profile);
    models.add(t.model, {
      name: t.profile,
      notes: notesOf.get(t.profile) ?? [],
      ...(uncoveredModel !== undefined ? { uncoveredModel } : {}),
    });
  }
  return {
    version: 1,
    trajectories: entries,
    groups,
    models: models.list(),
    errors: inRunOrder(errors, 'errors'),
    summary,
  };
}
