// `rollscope merge`: fold the reports of the shards of one run (`check --shard K/N --json`) into
// the report an unsharded `check --json` gives (same entries in the same order, same summary,
// same exit status), or the manifests of the shards of one export into one account of every
// part. Pure functions over parsed documents; the command reads and writes the files.
import path from 'node:path';
import { z } from 'zod';
import { runMismatch } from '../analysis/logprob-mismatch.ts';
import { CheckReport, newSummary, RunModels, type RunPosition, type ShardPart } from './check.ts';
import { GroupChecks } from '../analysis/groups.ts';
import { publicFinding } from '../model/public-finding.ts';
import { uniqueIds } from '../model/trajectory-key.ts';
import { uncoveredModelOf } from '../profiles/profile.ts';
import { runLogprobs } from './mismatch-json.ts';
import { emptyCounts, Manifest } from '../export/manifest.ts';
import { EXPORT_SCHEMA_VERSION } from '../export/row-schema.ts';

export class MergeError extends Error {}

/** What a document given to merge is. */
export type MergeInputKind = 'check-report' | 'export-manifest';

export function inputKind(doc: unknown, name: string): MergeInputKind {
  if (doc && typeof doc === 'object') {
    const o = doc as Record<string, unknown>;
    if ('trajectories' in o && 'summary' in o && 'errors' in o) return 'check-report';
    if ('schema_version' in o && 'output' in o && 'counts' in o) return 'export-manifest';
  }
  throw new MergeError(`${name}: neither a check report (check --json) nor an export manifest (FILE.manifest.json)`);
}

function zodMessage(e: z.ZodError): string {
  const i = e.issues[0]!;
  return `${i.path.join('.') || '(top)'}: ${i.message}`;
}

/** Refuse shards that are not exactly the N shards of one N-way split. */
function checkShardSet(shards: { name: string; index: number; count: number }[]): void {
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

/** The exit status `check` gives for this report: 2 a path unreadable, 1 an error finding or unreadable record, else 0. */
export function checkExitStatus(r: CheckReport): number {
  if (r.errors.some((e) => e.line === 0)) return 2;
  return r.summary.withErrors > 0 || r.summary.unreadableRecords > 0 ? 1 : 0;
}

// --- export manifests --------------------------------------------------------------------------

export const MergedPart = z.object({
  /** The Parquet or JSONL file, relative to the merged manifest's folder (forward slashes). */
  file: z.string(),
  format: z.enum(['jsonl', 'parquet']),
  rows: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  sha256: z.string(),
  /** Hive partition values of the part's folder (`{step: '12', rank: '3'}`), empty when not partitioned. */
  partition: z.record(z.string(), z.string()),
  /** The shard manifest that lists it. */
  manifest: z.string(),
});

export const MergedManifest = z.object({
  schema_version: z.literal(EXPORT_SCHEMA_VERSION),
  kind: z.literal('merged'),
  rollscope_version: z.string(),
  parts: z.array(MergedPart),
  rejects: z.array(z.object({ file: z.string(), lines: z.number().int().nonnegative() })),
  profiles: Manifest.shape.profiles,
  inputs: Manifest.shape.inputs,
  counts: Manifest.shape.counts,
  settings: Manifest.shape.settings,
});
export type MergedManifest = z.infer<typeof MergedManifest>;

/** `relativeTo`: the folder paths in the merged manifest are written relative to. */
export function mergeManifests(docs: { name: string; doc: unknown }[], relativeTo: string): MergedManifest {
  const manifests = docs.map(({ name, doc }) => {
    const r = Manifest.safeParse(doc);
    if (!r.success) throw new MergeError(`${name}: not a valid export manifest: ${zodMessage(r.error)}`);
    return { name, m: r.data };
  });
  const sharded = manifests.filter((x) => x.m.shard);
  if (sharded.length > 0 && sharded.length < manifests.length)
    throw new MergeError(
      `${manifests.find((x) => !x.m.shard)!.name} is the manifest of a whole export, ${sharded[0]!.name} of a shard`,
    );
  if (sharded.length > 0)
    checkShardSet(manifests.map(({ name, m }) => ({ name, index: m.shard!.index, count: m.shard!.count })));
  const settings = manifests[0]!.m.settings;
  for (const { name, m } of manifests) {
    const a = JSON.stringify(m.settings);
    if (a !== JSON.stringify(settings))
      throw new MergeError(`${name} was exported with other settings than ${manifests[0]!.name}: ${a}`);
  }
  const rel = (file: string) => path.relative(relativeTo, file).split(path.sep).join('/') || '.';
  const parts: MergedManifest['parts'] = [];
  const rejects: MergedManifest['rejects'] = [];
  const counts = emptyCounts();
  const profiles = new Map<string, MergedManifest['profiles'][number]>();
  const inputs = new Map<string, MergedManifest['inputs'][number]>();
  for (const { name, m } of manifests) {
    const dir = path.dirname(path.resolve(name));
    const partsOf = m.parts ?? [
      { file: m.output.file, rows: m.output.rows, bytes: m.output.bytes, sha256: m.output.sha256, partition: {} },
    ];
    for (const p of partsOf)
      parts.push({
        ...p,
        file: rel(path.join(dir, p.file)),
        format: m.output.format,
        manifest: rel(path.resolve(name)),
      });
    rejects.push({ file: rel(path.join(dir, m.rejects.file)), lines: m.rejects.lines });
    for (const k of ['read', 'exported', 'rejected', 'unreadable'] as const) counts[k] += m.counts[k];
    for (const k of ['byReason', 'byFindingKind', 'repairedByFindingKind', 'exportedWithWarnings'] as const)
      for (const [key, n] of Object.entries(m.counts[k])) counts[k][key] = (counts[k][key] ?? 0) + n;
    for (const p of m.profiles) {
      const have = profiles.get(p.name);
      if (have) have.trajectories += p.trajectories;
      else profiles.set(p.name, { ...p });
    }
    for (const i of m.inputs) {
      const have = inputs.get(i.file);
      if (!have) inputs.set(i.file, { ...i });
      else if (have.sha256 !== i.sha256)
        throw new MergeError(`${name}: input ${i.file} has other bytes than in another shard's manifest`);
      else have.trajectories += i.trajectories;
    }
  }
  if (counts.read !== counts.exported + counts.rejected)
    throw new MergeError(
      `the manifests do not add up: read ${counts.read} ≠ exported ${counts.exported} + rejected ${counts.rejected}`,
    );
  return MergedManifest.parse({
    schema_version: EXPORT_SCHEMA_VERSION,
    kind: 'merged',
    rollscope_version: manifests[0]!.m.rollscope_version,
    parts,
    rejects,
    profiles: [...profiles.values()],
    inputs: [...inputs.values()],
    counts,
    settings,
  });
}
