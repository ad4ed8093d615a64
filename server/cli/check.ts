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
import { runRoot } from '../pipeline/shard.ts';
import { EntrySpool, entryJson, entryParts } from './report-spool.ts';
import { checkExitStatus, type CheckReport } from '../report/check-report.ts';
import { CheckReportBuilder, hasTokens } from '../report/build.ts';

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
  // Each entry is spooled as it comes (memory bounded on any run size) and written at the end, with
  // its group's findings, into the same bytes JSON.stringify(report) would give.
  const builder = new CheckReportBuilder(opts.mismatch);
  const spool = opts.json ? new EntrySpool() : undefined;
  let entries = 0;
  // Run-wide positions of what this shard lists, counting what the other shards own: trajectories
  // and errors in one count, so a trajectory that fails analysis (an error in its owner, a skipped
  // trajectory elsewhere) takes one place in every shard. Kept only for a shard's report (one
  // number per trajectory, to the end of the run).
  const positions = { trajectories: [] as number[], errors: [] as number[] };
  const place = (list: number[]) => {
    if (opts.shard) list.push(seen);
    seen++;
  };
  let seen = 0;
  let trajectories = 0;
  const runFiles = createHash('sha256');
  const root = opts.shard?.root ?? runRoot(paths);
  const findings = opts.findingsParquet ? new FindingsParquetWriter(opts.findingsParquet) : undefined;
  const examples = new Map<string, string[]>();
  const progress = process.stderr.isTTY ? progressLine(process.stderr) : undefined;
  if (opts.json) out.write('{"version":1,"trajectories":[');
  const events = checkPaths(
    paths,
    // Only the text output reads token streams (the tokens around a finding).
    { ...opts, reportOnly: true, noStreams: opts.json },
    {
      onSkipped: () => {
        seen++;
      },
      onRead: progress?.read,
    },
  );
  let run: ReturnType<CheckReportBuilder['finish']>;
  try {
    for await (const ev of events) {
      if (ev.type === 'error') {
        place(positions.errors);
        builder.addError(ev.error);
        continue;
      }
      if (ev.type === 'file') {
        runFiles.update(`${path.relative(root, path.resolve(ev.file)).split(path.sep).join('/')}\n`);
        continue;
      }
      place(positions.trajectories);
      const c = ev.checked;
      findings?.add(c);
      const { entry, group } = builder.addTrajectory(c);
      if (spool) {
        const { head, tail } = entryParts(entry);
        spool.add(group, head, tail);
      } else if (opts.all) printTrajectory(c, out);
      else collectExamples(c, examples);
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
  if (spool) {
    // Each member lists its group's findings after its own (docs/check-json.md#groups).
    const extra = run.groups.map((g) => g.findings.map((f) => JSON.stringify(f)).join(','));
    try {
      for await (const e of spool.entries())
        await written(out, `${entries++ > 0 ? ',' : ''}${entryJson(e, e.group >= 0 ? extra[e.group]! : '')}`);
    } finally {
      spool.dispose();
    }
  }
  // A group's findings read best as their own message (they concern no single trajectory).
  for (const g of run.groups)
    for (const f of g.findings as Finding[]) {
      const list = examples.get('group') ?? [];
      if (list.length < EXAMPLES_PER_KIND) list.push(`${f.message}\n`);
      examples.set('group', list);
    }
  if (!opts.json && !opts.all) printExamples(examples, run.summary.findingsByKind, out);
  const shard: CheckReport['shard'] = opts.shard && {
    index: opts.shard.index,
    count: opts.shard.count,
    run: runFiles.digest('hex'),
    positions,
  };
  if (opts.json)
    out.write(
      `],"groups":${JSON.stringify(run.groups)},"models":${JSON.stringify(run.models)},"errors":${JSON.stringify(run.errors)},"summary":${JSON.stringify(run.summary)}` +
        `${shard ? `,"shard":${JSON.stringify(shard)}` : ''}}\n`,
    );
  else printSummary({ version: 1, trajectories: [], ...run }, out, opts.all === true);
  return checkExitStatus(run);
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
