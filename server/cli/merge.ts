// `rollscope merge` of export manifests: the manifests of the shards of one export folded into one
// account of every part (report/merge.ts folds check reports). Pure functions over parsed
// documents; the command reads and writes the files.
import path from 'node:path';
import { z } from 'zod';
import { emptyCounts, Manifest } from '../export/manifest.ts';
import { EXPORT_SCHEMA_VERSION } from '../export/row-schema.ts';
import { checkShardSet, MergeError, zodMessage } from '../report/merge.ts';
import { assignRunKeys } from './merge-keys.ts';

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
  filter: Manifest.shape.filter,
  profiles: Manifest.shape.profiles,
  inputs: Manifest.shape.inputs,
  counts: Manifest.shape.counts,
  settings: Manifest.shape.settings,
});
export type MergedManifest = z.infer<typeof MergedManifest>;

/**
 * The merged manifest of a sharded export, once its rows have their run-wide keys: a shard that
 * read only its input splits wrote the ids its data states, and merge gives the keys
 * (cli/merge-keys.ts), rewriting the parts that hold a renamed row before it lists their hashes.
 */
export async function mergeExport(docs: { name: string; doc: unknown }[], relativeTo: string): Promise<MergedManifest> {
  const manifests = parseManifests(docs);
  const keys = await assignRunKeys(manifests);
  return foldManifests(manifests, relativeTo, keys.parts);
}

/** `relativeTo`: the folder paths in the merged manifest are written relative to. */
export function mergeManifests(docs: { name: string; doc: unknown }[], relativeTo: string): MergedManifest {
  return foldManifests(parseManifests(docs), relativeTo);
}

/** The manifests, validated as the shards of one export (all N, the same settings and filter) before anything is rewritten. */
function parseManifests(docs: { name: string; doc: unknown }[]): { name: string; m: Manifest }[] {
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
  // Shards of one export have one filter (or none): their filtered_out add up like the rest.
  const where = manifests[0]!.m.filter?.where;
  for (const { name, m } of manifests)
    if (m.filter?.where !== where) {
      const said = (w: string | undefined) =>
        w === undefined ? 'without --where' : `with --where ${JSON.stringify(w)}`;
      throw new MergeError(`${name} was exported ${said(m.filter?.where)}, ${manifests[0]!.name} ${said(where)}`);
    }
  return manifests;
}

/** `current`: the size and hash of parts merge rewrote (absolute path), which their shard's manifest lists as written. */
function foldManifests(
  manifests: readonly { name: string; m: Manifest }[],
  relativeTo: string,
  current: ReadonlyMap<string, { bytes: number; sha256: string }> = new Map(),
): MergedManifest {
  const settings = manifests[0]!.m.settings;
  const where = manifests[0]!.m.filter?.where;
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
    for (const p of partsOf) {
      const abs = path.join(dir, p.file);
      parts.push({
        ...p,
        ...current.get(abs),
        file: rel(abs),
        format: m.output.format,
        manifest: rel(path.resolve(name)),
      });
    }
    rejects.push({ file: rel(path.join(dir, m.rejects.file)), lines: m.rejects.lines });
    for (const k of ['read', 'exported', 'rejected', 'unreadable', 'filtered_out'] as const) counts[k] += m.counts[k];
    for (const k of ['byReason', 'byFindingKind', 'repairedByFindingKind', 'exportedWithWarnings'] as const)
      for (const [key, n] of Object.entries(m.counts[k])) counts[k][key] = (counts[k][key] ?? 0) + n;
    for (const p of m.profiles) {
      const have = profiles.get(p.name);
      if (have) have.trajectories += p.trajectories;
      else profiles.set(p.name, { ...p });
    }
    for (const i of m.inputs) {
      // Part of a file (a shard's input split): one entry per range, checked below to tile the file.
      const key = i.range ? `${i.file}\u0000${i.range.start}` : i.file;
      const have = inputs.get(key);
      if (!have) inputs.set(key, { ...i });
      else if (have.sha256 !== i.sha256)
        throw new MergeError(`${name}: input ${i.file} has other bytes than in another shard's manifest`);
      else have.trajectories += i.trajectories;
    }
  }
  checkRangesTile([...inputs.values()]);
  if (counts.read !== counts.exported + counts.rejected + counts.filtered_out)
    throw new MergeError(
      `the manifests do not add up: read ${counts.read} ≠ exported ${counts.exported} + rejected ${counts.rejected} + filtered out ${counts.filtered_out}`,
    );
  return MergedManifest.parse({
    schema_version: EXPORT_SCHEMA_VERSION,
    kind: 'merged',
    rollscope_version: manifests[0]!.m.rollscope_version,
    parts,
    rejects,
    ...(where !== undefined ? { filter: { where, filtered_out: counts.filtered_out } } : {}),
    profiles: [...profiles.values()],
    inputs: inRunOrder([...inputs.values()]),
    counts,
    settings,
  });
}

type Input = Manifest['inputs'][number];

/** The inputs in the order the first shard listed each file, a file's ranges by their start. */
function inRunOrder(inputs: Input[]): Input[] {
  const first = new Map<string, number>();
  inputs.forEach((i, n) => {
    if (!first.has(i.file)) first.set(i.file, n);
  });
  return inputs
    .map((i, n) => ({ i, n }))
    .sort(
      (a, b) =>
        first.get(a.i.file)! - first.get(b.i.file)! || (a.i.range?.start ?? 0) - (b.i.range?.start ?? 0) || a.n - b.n,
    )
    .map(({ i }) => i);
}

/** The ranges the shards read of a file cover it exactly once (names the file and bytes when not). */
function checkRangesTile(inputs: readonly Input[]): void {
  const byFile = new Map<string, Input[]>();
  for (const i of inputs) byFile.set(i.file, [...(byFile.get(i.file) ?? []), i]);
  for (const [file, list] of byFile) {
    const ranged = list.filter((i) => i.range).sort((a, b) => a.range!.start - b.range!.start);
    if (ranged.length === 0) continue;
    if (ranged.length < list.length)
      throw new MergeError(`input ${file} was read whole by one shard and in part by another: not shards of one run`);
    let at = 0;
    for (const i of ranged) {
      if (i.bytes !== ranged[0]!.bytes)
        throw new MergeError(`the shards saw input ${file} at different sizes: was it still written?`);
      if (i.range!.start !== at)
        throw new MergeError(
          `the shards do not fit together: bytes ${Math.min(at, i.range!.start)}–${Math.max(at, i.range!.start)} of ${file} were read ${i.range!.start > at ? 'by no shard' : 'twice'}`,
        );
      at = i.range!.end;
    }
    if (at !== ranged[0]!.bytes)
      throw new MergeError(
        `the shards do not fit together: bytes ${at}–${ranged[0]!.bytes} of ${file} were read by no shard`,
      );
  }
}
