// `rollscope check PATH... [--model M] [--json]`: is this rollout safe to train on?
// Exit 0: no error-level finding and every record read; 1: an error finding or an unreadable
// record; 2: bad arguments, or a path that cannot be read at all. The report itself is built by
// report/build.ts; this file streams it out and writes it for a person.
import type { Finding } from '../model/finding.ts';
import { checkPaths, streamTokens, type CheckedTrajectory, type RunOptions } from '../pipeline.ts';
import { tokenDisplay } from '../profiles/profile.ts';
import { paint } from './output.ts';
import { FindingsParquetWriter } from '../export/findings-parquet.ts';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { runRoot, SplitPositions, type InputSplit, type PlannedFile } from '../pipeline/shard.ts';
import type { GroupMember } from '../analysis/groups.ts';
import { EntrySpool, entryJson, entryParts } from './report-spool.ts';
import {
  checkExitStatus,
  type CheckReport,
  type RunPosition,
  type ShardMember,
  type ShardPart,
} from '../report/check-report.ts';
import { CheckReportBuilder, hasTokens } from '../report/build.ts';
import { JunitLayout, JunitStream } from '../report/junit.ts';
import type { ReportEntry } from '../report/check-report.ts';
import type { FilterNode } from '../report/filter.ts';
import { FilteredReport } from '../report/filtered.ts';
import { readsGroup } from '../report/filter.ts';
import { groupsOfRun, whereMatcher } from '../pipeline/where.ts';
import { groupKey } from '../analysis/groups.ts';

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
  /** Also write the report as JUnit XML here (report/junit.ts; docs/junit.md). */
  junit?: TextOut;
  /** `--where`: list and count only the trajectories this filter selects (docs/filter.md). */
  where?: { expression: string; node: FilterNode };
}

export async function runCheck(paths: string[], opts: CheckOptions, out: TextOut): Promise<number> {
  // Each entry is spooled as it comes (memory bounded on any run size) and written at the end, with
  // its group's findings, into the same bytes JSON.stringify(report) would give.
  // A shard reads only its share of the input (pipeline/shard.ts `planInputSplits`) and says where
  // each entry was read and which group member each trajectory is, so `merge` can order, key and
  // group the entries of every shard as one run (report/merge.ts).
  const shardOpts = opts.shard;
  const builder = new CheckReportBuilder(opts.mismatch, shardOpts !== undefined);
  // JUnit reads the entries back as JSON does, with their group's findings (known at the end).
  const spool = opts.json || opts.junit ? new EntrySpool() : undefined;
  const junit = opts.junit ? new JunitLayout() : undefined;
  const started = performance.now();
  let fileEnded = started;
  let entries = 0;
  // A shard's report is completed by merge (keys, groups): a filter reads the whole report, so it
  // applies to a whole run only (the command refuses --where with --shard).
  if (opts.where && opts.shard) throw new Error('--where applies to a whole run, not to one shard');
  // With --where: whether each spooled trajectory holds token ids (the filtered summary's notCheckable).
  const checkable: boolean[] = [];
  const shard: ShardPart | undefined = shardOpts && {
    index: shardOpts.index,
    count: shardOpts.count,
    run: '',
    files: 0,
    splits: [],
    positions: { trajectories: [], errors: [] },
    members: [],
  };
  // Paths that cannot be read come before the first split.
  const positions = new SplitPositions();
  const place = (list: RunPosition[]) => list.push(positions.next());
  const root = opts.shard?.root ?? runRoot(paths);
  const onPlan = (plan: { files: readonly PlannedFile[]; splits: readonly InputSplit[] }) => {
    positions.plan(plan.splits);
    const run = createHash('sha256');
    for (const f of plan.files)
      run.update(`${path.relative(root, path.resolve(f.file)).split(path.sep).join('/')}\t${f.bytes}\n`);
    shard!.run = run.digest('hex');
    shard!.files = plan.files.length;
    shard!.splits = plan.splits.map(({ order, start, end, bytes }) => ({ order, start, end, bytes }));
  };
  let trajectories = 0;
  const findings = opts.findingsParquet ? new FindingsParquetWriter(opts.findingsParquet) : undefined;
  const examples = new Map<string, string[]>();
  const progress = process.stderr.isTTY ? progressLine(process.stderr) : undefined;
  if (opts.json) out.write('{"version":1,"trajectories":[');
  // Printed for a person, the filter is evaluated as trajectories come (a group-reading filter after
  // a first pass for the groups); what is printed and summed is a report of the kept ones alone.
  const printedWhere =
    opts.where && !spool
      ? whereMatcher(
          opts.where,
          readsGroup(opts.where.node)
            ? await groupsOfRun(paths, { ...opts, reportOnly: true, noStreams: true })
            : new Map(),
        )
      : undefined;
  const printed = printedWhere ? new CheckReportBuilder(opts.mismatch) : undefined;
  const printedGroups = new Set<string>();
  const events = checkPaths(
    paths,
    // Only the text output reads token streams (the tokens around a finding).
    { ...opts, ...(shardOpts ? { shard: shardOpts } : {}), reportOnly: true, noStreams: opts.json },
    { onRead: progress?.read, ...(shard ? { onPlan } : {}) },
  );
  let run: ReturnType<CheckReportBuilder['finish']>;
  try {
    for await (const ev of events) {
      if (ev.type === 'error') {
        if (shard) place(shard.positions.errors);
        builder.addError(ev.error);
        junit?.addError(ev.error);
        continue;
      }
      if (ev.type === 'file') {
        positions.fileEnded();
        const now = performance.now();
        junit?.fileDone(ev.file, (now - fileEnded) / 1000);
        fileEnded = now;
        continue;
      }
      if (shard) place(shard.positions.trajectories);
      const c = ev.checked;
      findings?.add(c);
      const { entry, group, member } = builder.addTrajectory(c);
      if (shard) shard.members.push(member && shardMember(member));
      junit?.addEntry(entry);
      if (opts.where) checkable.push(hasTokens(c.trajectory));
      if (printedWhere) {
        if (!printedWhere(c)) continue;
        printed!.addTrajectory(c);
        if (entry.group !== null) printedGroups.add(groupKey({ group: entry.group, step: entry.step ?? undefined }));
      }
      if (spool) {
        const { head, tail } = entryParts(entry);
        spool.add(group, head, tail);
      }
      if (!opts.json) {
        if (opts.all) printTrajectory(c, out);
        else collectExamples(c, examples);
      }
      progress?.update(++trajectories);
    }
    progress?.done();
    run = builder.finish();
    for (const g of builder.groupSummaries) findings?.addGroup(g);
    findings?.commit();
  } catch (e) {
    findings?.discard();
    spool?.dispose();
    throw e;
  }
  // Group fields are known only now: the filter reads each entry as it is written out (docs/filter.md).
  const filtered = opts.where && spool && new FilteredReport(opts.where, run, opts.mismatch);
  if (spool) {
    // Each member lists its group's findings after its own (docs/check-json.md#groups).
    const extra = run.groups.map((g) => g.findings.map((f) => JSON.stringify(f)).join(','));
    let at = 0;
    const xml =
      junit && opts.junit
        ? new JunitStream(junit, (t) => opts.junit!.write(t), { seconds: (performance.now() - started) / 1000 })
        : undefined;
    try {
      for await (const e of spool.entries()) {
        const json = entryJson(e, e.group >= 0 ? extra[e.group]! : '');
        const i = at++;
        const entry = JSON.parse(json) as ReportEntry;
        if (filtered && !filtered.keep(entry, e.group, checkable[i]!)) continue;
        if (opts.json) await written(out, `${entries++ > 0 ? ',' : ''}${json}`);
        xml?.entry(entry);
      }
      xml?.end();
    } finally {
      spool.dispose();
    }
  }
  const narrowed = filtered ? filtered.finish(run.summary) : undefined;
  if (narrowed) {
    run.summary = narrowed.summary;
    run.models = narrowed.models;
  }
  if (printed) {
    // The kept trajectories' own counts; the groups (whole, from the run) of those among them.
    const kept = printed.finish();
    kept.summary.unreadableRecords = run.summary.unreadableRecords;
    run.groups = run.groups.filter((g) => printedGroups.has(groupKey({ group: g.id, step: g.step ?? undefined })));
    kept.summary.findingsByKind.group = run.groups.reduce((n, g) => n + g.findings.length, 0);
    run.summary = kept.summary;
    run.models = kept.models;
  }
  // A group's findings read best as their own message (they concern no single trajectory).
  for (const g of run.groups)
    for (const f of g.findings as Finding[]) {
      const list = examples.get('group') ?? [];
      if (list.length < EXAMPLES_PER_KIND) list.push(`${f.message}\n`);
      examples.set('group', list);
    }
  if (!opts.json && !opts.all) printExamples(examples, run.summary.findingsByKind, out);
  if (opts.json)
    out.write(
      `],"groups":${JSON.stringify(run.groups)},"models":${JSON.stringify(run.models)},"errors":${JSON.stringify(run.errors)},"summary":${JSON.stringify(run.summary)}` +
        `${narrowed ? `,"filter":${JSON.stringify(narrowed.filter)}` : ''}${shard ? `,"shard":${JSON.stringify(shard)}` : ''}}\n`,
    );
  else printSummary({ version: 1, trajectories: [], ...run }, out, opts.all === true);
  return checkExitStatus(run);
}

/** What `merge` needs of a group member to run the group checks (ShardPart `members`). */
function shardMember(m: GroupMember): ShardMember {
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
