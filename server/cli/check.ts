// `rollscope check PATH... [--model M] [--json]`: is this rollout safe to train on?
// Exit 0: no error-level finding and every record read; 1: an error finding or an unreadable
// record; 2: bad arguments, or a path that cannot be read at all.
import { z } from 'zod';
import type { Finding } from '../model/finding.ts';
import { FINDING_KINDS } from '../model/finding.ts';
import { publicFinding } from '../model/public-finding.ts';
import type { ReadError, Trajectory } from '../model/trajectory.ts';
import { checkPaths, streamTokens, type CheckedTrajectory, type RunOptions } from '../pipeline.ts';
import { tokenDisplay, uncoveredLimitation, visionIdsOf, type ModelProfile } from '../profiles/profile.ts';
import { paint } from './output.ts';
import { logprobMismatch, runMismatch, type TrajectoryMismatch } from '../analysis/logprob-mismatch.ts';
import { RunLogprobs, runLogprobs, TrajectoryLogprobs, trajectoryLogprobs } from './mismatch-json.ts';
import { GroupChecks, groupMember, type GroupMember } from '../analysis/groups.ts';
import { FindingsParquetWriter } from '../export/findings-parquet.ts';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { runRoot, type InputSplit, type PlannedFile } from '../pipeline/shard.ts';
import { EntrySpool, entryJson, entryParts } from './report-spool.ts';

/** One model of a run: the name the data states and the profile its trajectories were checked with (docs/check-json.md#models). */
export const RunModel = z.object({
  /** As the data states it; null for trajectories that name none. */
  model: z.string().nullable(),
  profile: z.string(),
  trajectories: z.number().int(),
  /** For a model no profile covers, the one sentence that says so; else null. */
  limitation: z.string().nullable(),
  /** What the profile's loader could not read and defaulted (a model folder without some file). */
  notes: z.array(z.string()),
});
export type RunModel = z.infer<typeof RunModel>;

/** The models of a run in the order their first trajectory came, counted. */
export class RunModels {
  private readonly byKey = new Map<string, RunModel>();

  add(model: string | null, profile: Pick<ModelProfile, 'name' | 'notes' | 'uncoveredModel'>): void {
    const key = JSON.stringify([model, profile.name]);
    const known = this.byKey.get(key);
    if (known) {
      known.trajectories++;
      return;
    }
    const uncovered = profile.uncoveredModel;
    this.byKey.set(key, {
      model,
      profile: profile.name,
      trajectories: 1,
      limitation: uncovered !== undefined ? uncoveredLimitation(uncovered) : null,
      // A stand-in's note is its limitation.
      notes: uncovered !== undefined ? [] : [...profile.notes],
    });
  }

  list(): RunModel[] {
    return [...this.byKey.values()];
  }
}

/** Where in the run an entry was read: [file order (−1: a path that cannot be read), its split's first byte, its place in the split]. */
export const RunPosition = z.tuple([
  z.number().int().min(-1),
  z.number().int().nonnegative(),
  z.number().int().nonnegative(),
]);
export type RunPosition = z.infer<typeof RunPosition>;

/** A shard's part of a report (CheckReport `shard`). */
export const ShardPart = z.object({
  index: z.number().int().nonnegative(),
  count: z.number().int().positive(),
  run: z.string(),
  /** Files in the run. */
  files: z.number().int().nonnegative(),
  /** What it read of each: bytes [start, end) of the file at `order` (before alignment to line starts), `bytes` its size. */
  splits: z.array(
    z.object({
      order: z.number().int().nonnegative(),
      start: z.number().int().nonnegative(),
      end: z.number().int().nonnegative(),
      bytes: z.number().int().nonnegative(),
    }),
  ),
  positions: z.object({ trajectories: z.array(RunPosition), errors: z.array(RunPosition) }),
  /** Each trajectory's GRPO group member (analysis/groups.ts), null when it names no group. */
  members: z.array(
    z
      .object({
        group: z.string(),
        step: z.number().int().optional(),
        reward: z.number().nullable().optional(),
        prompt: z.string().optional(),
        sample: z.string().optional(),
      })
      .nullable(),
  ),
});
export type ShardPart = z.infer<typeof ShardPart>;

/** The stable `--json` contract (docs/check-json.md). */
export const CheckReport = z.object({
  version: z.literal(1),
  trajectories: z.array(
    z.object({
      id: z.string(),
      source: z.object({ file: z.string(), line: z.number().int() }),
      format: z.string(),
      model: z.string().nullable(),
      profile: z.string(),
      findings: z.array(z.unknown()),
      limitations: z.array(z.string()),
      /** The GRPO group and rollout step the trajectory belongs to (null when its format states none). */
      // Reports written before these fields existed read as null.
      group: z.string().nullable().default(null),
      step: z.number().int().nullable().default(null),
      /** Rollout against trainer logprobs, when the trajectory has both (keys in the order `check` writes them). */
      logprobs: TrajectoryLogprobs.optional(),
    }),
  ),
  /** GRPO groups (analysis/groups.ts), in the order their first sample came; their findings are also in each member's `findings`. */
  groups: z
    .array(
      z.object({
        id: z.string(),
        step: z.number().int().nullable(),
        size: z.number().int(),
        reward_mean: z.number().nullable(),
        reward_std: z.number().nullable(),
        degenerate: z.boolean(),
        findings: z.array(z.unknown()),
      }),
    )
    .default([]),
  /** The models the trajectories name, each with its profile; reports written before this field existed read as []. */
  models: z.array(RunModel).default([]),
  errors: z.array(
    z.object({ file: z.string(), line: z.number().int(), field: z.string().optional(), message: z.string() }),
  ),
  summary: z.object({
    trajectories: z.number().int(),
    clean: z.number().int(),
    withErrors: z.number().int(),
    withWarningsOnly: z.number().int(),
    /** No findings, but the format keeps too little for the checks to run (text-only dumps). */
    notCheckable: z.number().int(),
    unreadableRecords: z.number().int(),
    findingsByKind: z.record(z.string(), z.number().int()),
    /** Run totals of the logprob metrics, when any trajectory has trainer logprobs. */
    logprobs: RunLogprobs.optional(),
  }),
  /**
   * Only in the report of one shard (`check --shard K/N`), for `rollscope merge`: which shard, a
   * fingerprint of the run's files (names and sizes), the byte ranges of them it read, where in
   * the run each of its trajectories and errors was read, and the group member each trajectory
   * is (docs/distributed.md). Its entries name trajectories by the id their data states and
   * leave out group findings: `merge` gives the run-wide keys and runs the group checks.
   */
  shard: ShardPart.optional(),
});
export type CheckReport = z.infer<typeof CheckReport>;

export function newSummary(): CheckReport['summary'] {
  return {
    trajectories: 0,
    clean: 0,
    withErrors: 0,
    withWarningsOnly: 0,
    notCheckable: 0,
    unreadableRecords: 0,
    findingsByKind: Object.fromEntries(FINDING_KINDS.map((k) => [k, 0])),
  };
}

export function addToSummary(summary: CheckReport['summary'], findings: readonly Finding[], checkable = true): void {
  summary.trajectories++;
  const hasError = findings.some((f) => f.severity === 'error');
  if (hasError) summary.withErrors++;
  else if (findings.length > 0) summary.withWarningsOnly++;
  else if (!checkable) summary.notCheckable++;
  else summary.clean++;
  for (const f of findings) summary.findingsByKind[f.kind] = (summary.findingsByKind[f.kind] ?? 0) + 1;
}

/** Tokens around `index`, decoded one by one with whitespace and special tokens visible; the culprit bracketed. */
export function tokenContext(c: CheckedTrajectory, f: Finding, radius = 6): string | undefined {
  const tokens = streamTokens(c, f.stream, f.turn);
  if (!tokens || f.index < 0) return undefined;
  const from = Math.max(0, f.index - radius);
  const to = Math.min(tokens.length, f.index + radius + 1);
  const parts: string[] = [];
  for (let i = from; i < to; i++) {
    const piece = tokenDisplay(c.profile, tokens[i]!);
    parts.push(i === f.index ? paint.bold(paint.red(`[${piece}]`)) : piece);
  }
  return `${from > 0 ? '…' : ''}${parts.join(' ')}${to < tokens.length ? '…' : ''}`;
}

/** Examples of each finding kind the default output shows (`--all` lists every trajectory). */
const EXAMPLES_PER_KIND = 3;

/** A progress line on a terminal (trajectories, MB/s, ETA), rewritten in place and erased at the end. */
function progressLine(err: NodeJS.WriteStream): {
  update: (n: number) => void;
  read: (r: number, t: number) => void;
  done: () => void;
} {
  const t0 = performance.now();
  let read = 0;
  let total = 0;
  let shown = 0;
  return {
    read: (r, t) => {
      read = r;
      total = t;
    },
    update: (n) => {
      const now = performance.now();
      if (now - shown < 200) return;
      shown = now;
      const s = (now - t0) / 1000;
      const rate = read / 1e6 / s;
      const eta = rate > 0 && total > read ? `, ${Math.ceil((total - read) / 1e6 / rate)} s left` : '';
      err.write(
        `\r\x1b[K${n} trajectories, ${Math.round((read / Math.max(1, total)) * 100)} % of ${Math.round(total / 1e6)} MB, ${rate.toFixed(1)} MB/s${eta}`,
      );
    },
    done: () => err.write('\r\x1b[K'),
  };
}

/** Where the report goes: stdout, or a file written whole (util/atomic-file.ts). */
export interface TextOut {
  write(text: string): unknown;
}

export interface CheckOptions extends RunOptions {
  json: boolean;
  /** List every trajectory (default: a summary by finding kind with a few examples each). */
  all?: boolean;
  /** Also write one Parquet row per finding to this file (export/findings-parquet.ts). */
  findingsParquet?: string;
}

export async function runCheck(paths: string[], opts: CheckOptions, out: TextOut): Promise<number> {
  // `trajectories` stays empty: each entry is spooled as it comes (memory bounded on any run size)
  // and written at the end, with its group's findings, into the same bytes JSON.stringify(report) would give.
  const report: CheckReport = {
    version: 1,
    trajectories: [],
    groups: [],
    models: [],
    errors: [],
    summary: newSummary(),
  };
  const groupChecks = new GroupChecks();
  /** Each group's number in `groupChecks.summaries()` order (the order their first sample came). */
  const groupNumber = new Map<string, number>();
  const spool = opts.json ? new EntrySpool() : undefined;
  const models = new RunModels();
  let fatal = false;
  const errors: ReadError[] = [];
  let entries = 0;
  const mismatches: TrajectoryMismatch[] = [];
  // A shard reads only its share of the input (pipeline/shard.ts `planInputSplits`) and says where
  // each entry was read and which group member each trajectory is, so `merge` can order, key and
  // group the entries of every shard as one run.
  const shardOpts = opts.shard && { ...opts.shard, split: 'input' as const };
  const shardPart: ShardPart | undefined = shardOpts && {
    index: shardOpts.index,
    count: shardOpts.count,
    run: '',
    files: 0,
    splits: [],
    positions: { trajectories: [], errors: [] },
    members: [],
  };
  let splits: readonly InputSplit[] | undefined;
  let cursor = 0;
  let seq = 0;
  const place = (list: RunPosition[]) => {
    if (!shardPart) return;
    const split = splits?.[cursor];
    list.push(split ? [split.order, split.start, seq++] : [-1, 0, seq++]);
  };
  const root = opts.shard?.root ?? runRoot(paths);
  const onPlan = (plan: { files: readonly PlannedFile[]; splits: readonly InputSplit[] }) => {
    splits = plan.splits;
    seq = 0;
    const run = createHash('sha256');
    for (const f of plan.files)
      run.update(`${path.relative(root, path.resolve(f.file)).split(path.sep).join('/')}\t${f.bytes}\n`);
    shardPart!.run = run.digest('hex');
    shardPart!.files = plan.files.length;
    shardPart!.splits = plan.splits.map(({ order, start, end, bytes }) => ({ order, start, end, bytes }));
  };
  const findings = opts.findingsParquet ? new FindingsParquetWriter(opts.findingsParquet) : undefined;
  const examples = new Map<string, string[]>();
  const progress = process.stderr.isTTY ? progressLine(process.stderr) : undefined;
  if (opts.json) out.write('{"version":1,"trajectories":[');
  const events = checkPaths(
    paths,
    // Only the text output reads token streams (the tokens around a finding).
    { ...opts, ...(shardOpts ? { shard: shardOpts } : {}), reportOnly: true, noStreams: opts.json },
    { onRead: progress?.read, ...(shardPart ? { onPlan } : {}) },
  );
  try {
    for await (const ev of events) {
      if (ev.type === 'error') {
        if (shardPart) place(shardPart.positions.errors);
        errors.push(ev.error);
        if (ev.error.line === 0) fatal = true;
        continue;
      }
      if (ev.type === 'file') {
        cursor++;
        seq = 0;
        continue;
      }
      if (shardPart) place(shardPart.positions.trajectories);
      const c = ev.checked;
      findings?.add(c);
      const t = c.trajectory;
      addToSummary(report.summary, c.findings, hasTokens(t));
      models.add(t.model ?? null, c.profile);
      const member = c.report ? c.report.member : groupMember(t, visionIdsOf(c.profile));
      let group = -1;
      if (shardPart) shardPart.members.push(member ? shardMember(member) : null);
      else if (member) {
        const key = groupChecks.add(member);
        group = groupNumber.get(key) ?? groupNumber.size;
        groupNumber.set(key, group);
      }
      const entry: CheckReport['trajectories'][number] = {
        id: t.id,
        source: { file: t.source.file, line: t.source.line },
        format: t.source.format,
        model: t.model ?? null,
        profile: c.profile.name,
        findings: c.findings.map(publicFinding),
        limitations: t.limitations,
        group: t.group ?? null,
        step: t.step ?? null,
      };
      const m = c.report ? c.report.logprobs : logprobMismatch(t, opts.mismatch);
      if (m) {
        mismatches.push(m);
        entry.logprobs = trajectoryLogprobs(m);
      }
      if (spool) {
        const { head, tail } = entryParts(entry);
        spool.add(group, head, tail);
      } else if (opts.all) printTrajectory(c, out);
      else collectExamples(c, examples);
      progress?.update(report.summary.trajectories);
    }
    progress?.done();
    for (const g of groupChecks.summaries()) findings?.addGroup(g);
    findings?.commit();
  } catch (e) {
    findings?.discard();
    spool?.dispose();
    throw e;
  }
  progress?.done();
  report.errors = errors.map(({ file, line, field, message }) => ({
    file,
    line,
    ...(field ? { field } : {}),
    message,
  }));
  report.summary.unreadableRecords = errors.filter((e) => e.line > 0).length;
  const run = runMismatch(mismatches);
  if (run) report.summary.logprobs = runLogprobs(run, opts.mismatch);
  report.groups = groupChecks.summaries().map((g) => ({ ...g, findings: g.findings.map(publicFinding) }));
  report.models = models.list();
  if (spool) {
    // Each member lists its group's findings after its own (docs/check-json.md#groups).
    const extra = report.groups.map((g) => g.findings.map((f) => JSON.stringify(f)).join(','));
    try {
      for await (const e of spool.entries())
        await written(out, `${entries++ > 0 ? ',' : ''}${entryJson(e, e.group >= 0 ? extra[e.group]! : '')}`);
    } finally {
      spool.dispose();
    }
  }
  for (const g of report.groups) report.summary.findingsByKind.group! += g.findings.length;
  // A group's findings read best as their own message (they concern no single trajectory).
  for (const g of report.groups)
    for (const f of g.findings as Finding[]) {
      const list = examples.get('group') ?? [];
      if (list.length < EXAMPLES_PER_KIND) list.push(`${f.message}\n`);
      examples.set('group', list);
    }
  if (!opts.json && !opts.all) printExamples(examples, report.summary.findingsByKind, out);
  const shard = shardPart;
  if (opts.json)
    out.write(
      `],"groups":${JSON.stringify(report.groups)},"models":${JSON.stringify(report.models)},"errors":${JSON.stringify(report.errors)},"summary":${JSON.stringify(report.summary)}` +
        `${shard ? `,"shard":${JSON.stringify(shard)}` : ''}}\n`,
    );
  else printSummary(report, out, opts.all === true);
  if (fatal) return 2;
  return report.summary.withErrors > 0 || report.summary.unreadableRecords > 0 ? 1 : 0;
}

/** What `merge` needs of a group member to run the group checks (ShardPart `members`). */
function shardMember(m: GroupMember): NonNullable<ShardPart['members'][number]> {
  return {
    group: m.group,
    ...(m.step !== undefined ? { step: m.step } : {}),
    ...(m.reward !== undefined ? { reward: m.reward } : {}),
    ...(m.prompt !== undefined ? { prompt: m.prompt } : {}),
    ...(m.sample !== undefined ? { sample: m.sample } : {}),
  };
}

/** Write `text`, waiting for a stream that asks to be drained (stdout into a slow pipe) before going on. */
async function written(out: TextOut, text: string): Promise<void> {
  const stream = out as Partial<NodeJS.WritableStream>;
  if (out.write(text) === false && typeof stream.once === 'function')
    await new Promise<void>((resolve) => stream.once!('drain', () => resolve()));
}

/** Whether the record holds any token ids at all; text-only dumps do not, so no check can run on them. */
export function hasTokens(t: Trajectory): boolean {
  return (
    t.sample !== undefined || t.turns.some((turn) => turn.promptIds !== undefined || turn.generatedIds !== undefined)
  );
}

function printTrajectory(c: CheckedTrajectory, out: TextOut): void {
  const t = c.trajectory;
  const errs = c.findings.filter((f) => f.severity === 'error').length;
  const warns = c.findings.length - errs;
  const where = `${t.source.file}:${t.source.line}`;
  if (c.findings.length === 0) {
    // A record that cannot be checked (text-only dumps) is not "clean": say what could not run.
    const mark = hasTokens(t) ? paint.green('✓') : paint.yellow('?');
    out.write(`${mark} ${t.id}  ${paint.dim(`${where} ${t.source.format}, ${t.turns.length} turn(s)`)}\n`);
    for (const l of t.limitations) out.write(paint.dim(`    note: ${l}\n`));
    return;
  }
  const mark = errs > 0 ? paint.red('✗') : paint.yellow('!');
  out.write(
    `${mark} ${paint.bold(t.id)}  ${paint.dim(`${where} ${t.source.format}`)}  ${errs} error(s), ${warns} warning(s)\n`,
  );
  const f = c.findings[0]!;
  const label = `${f.kind}${f.cause ? `/${f.cause}` : ''}`;
  const at = [f.turn >= 0 ? `turn ${f.turn}` : '', f.index >= 0 ? `${f.stream ?? ''} token ${f.index}` : '']
    .filter(Boolean)
    .join(', ');
  out.write(
    `    ${f.severity === 'error' ? paint.red(label) : paint.yellow(label)}${at ? ` ${at}` : ''}: ${f.message}\n`,
  );
  const around = tokenContext(c, f);
  if (around) out.write(`    ${around}\n`);
  const rest = c.findings.slice(1).map((x) => `${x.kind}${x.cause ? `/${x.cause}` : ''}`);
  if (rest.length) out.write(paint.dim(`    also: ${rest.join(', ')}\n`));
  for (const l of t.limitations) out.write(paint.dim(`    note: ${l}\n`));
}

/** The first few trajectories of each finding kind, as `printTrajectory` shows the finding. */
function collectExamples(c: CheckedTrajectory, into: Map<string, string[]>): void {
  for (const kind of new Set(c.findings.map((f) => f.kind))) {
    const list = into.get(kind) ?? [];
    if (list.length >= EXAMPLES_PER_KIND) continue;
    const f = c.findings.find((x) => x.kind === kind)!;
    const rest = c.findings.filter((x) => x !== f);
    const text: string[] = [];
    printTrajectory({ ...c, findings: [f, ...rest] }, { write: (t: string) => text.push(t) });
    list.push(text.join(''));
    into.set(kind, list);
  }
}

function printExamples(examples: Map<string, string[]>, byKind: Record<string, number>, out: TextOut): void {
  for (const [kind, list] of examples) {
    const n = byKind[kind] ?? list.length;
    out.write(`${paint.bold(kind)}: ${n} finding(s)${n > list.length ? `, first ${list.length} shown` : ''}\n`);
    for (const e of list) out.write(e.replace(/^/gm, '  ').replace(/ +$/, ''));
  }
  if (examples.size > 0) out.write(paint.dim('(--all lists every trajectory, --json everything)\n'));
}

export function printSummary(r: CheckReport, out: TextOut, listGroups = true): void {
  // Every group finding with --all; the default summary showed the first few by kind already.
  if (listGroups)
    for (const g of r.groups)
      for (const f of g.findings) out.write(`${paint.yellow('group')} ${(f as Finding).message}\n`);
  // Once per model: a model no profile covers, and what a profile's loader defaulted.
  const notedProfiles = new Set<string>();
  for (const m of r.models) {
    if (m.limitation)
      out.write(
        `${paint.yellow('model')} ${m.limitation} (${m.trajectories} trajector${m.trajectories === 1 ? 'y' : 'ies'}: only the checks that need no tokenizer ran)\n`,
      );
    if (notedProfiles.has(m.profile)) continue;
    notedProfiles.add(m.profile);
    for (const n of m.notes) out.write(`${paint.yellow('profile')} ${m.profile}: ${n}\n`);
  }
  for (const e of r.errors) out.write(`${paint.red('error')} ${e.file}${e.line ? `:${e.line}` : ''}: ${e.message}\n`);
  const s = r.summary;
  const kinds = Object.entries(s.findingsByKind)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  out.write(
    `\n${s.trajectories} trajectories: ${s.clean} clean, ${s.withErrors} with errors, ${s.withWarningsOnly} with warnings only` +
      `${s.notCheckable ? `, ${s.notCheckable} not checkable (see notes)` : ''}` +
      `${s.unreadableRecords ? `; ${s.unreadableRecords} unreadable record(s)` : ''}${kinds ? `\nfindings: ${kinds}` : ''}\n`,
  );
}
