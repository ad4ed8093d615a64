// `rollscope merge` of export manifests: the manifests of the shards of one export folded into one
// account of every part (report/merge.ts folds check reports). Pure functions over parsed
// documents; the command reads and writes the files.
import path from 'node:path';
import { z } from 'zod';
import { emptyCounts, Manifest } from '../export/manifest.ts';
import { EXPORT_SCHEMA_VERSION } from '../export/row-schema.ts';
import { checkShardSet, MergeError, zodMessage } from '../report/merge.ts';

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
