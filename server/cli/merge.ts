// `rollscope merge`: fold the reports of the shards of one run (`check --shard K/N --json`) into
// the report an unsharded `check --json` gives (same entries in the same order, same summary,
// same exit status), or the manifests of the shards of one export into one account of every
// part. Pure functions over parsed documents; the command reads and writes the files.
import path from 'node:path';
import { z } from 'zod';
import { runMismatch } from '../analysis/logprob-mismatch.ts';
import { CheckReport, newSummary, RunModels } from './check.ts';
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
