// `rollscope diff-runs A B`: each side is a run (checked through the pipeline into its CheckReport)
// or a `check --json` file (read and validated); the diff is server/report/diff-runs.ts.
import fs from 'node:fs';
import type { z } from 'zod';
import { runCheck, type CheckOptions } from './check.ts';
import { CheckReport } from '../report/check-report.ts';
import { diffRuns, kindLabel, type DiffFinding, type RunPair, type DiffRuns } from '../report/diff-runs.ts';
import { paint } from './output.ts';
import type { TextOut } from './check.ts';

/** A side that cannot be read as either a run or a report: exit status 2, like a path check cannot read. */
export class DiffInputError extends Error {}

/** Whether the JSON document is meant as a check report (it has the report's top-level fields). */
function looksLikeReport(doc: unknown): boolean {
  return doc !== null && typeof doc === 'object' && 'trajectories' in doc && 'summary' in doc && 'errors' in doc;
}

/** A `.json` file that holds a check report, parsed; undefined for anything else (a run's file). */
function reportFile(p: string): unknown {
  if (!p.endsWith('.json') || !fs.existsSync(p) || !fs.statSync(p).isFile()) return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(fs.readFileSync(p, 'utf8'));
  } catch {
    return undefined;
  }
  return looksLikeReport(doc) ? doc : undefined;
}

function zodMessage(e: z.ZodError): string {
  const i = e.issues[0]!;
  return `${i.path.join('.') || '(top)'}: ${i.message}`;
}

/** One side's report: a check report file as it is, else the report `check --json` gives for the path. */
export async function sideReport(p: string, opts: Omit<CheckOptions, 'json'>): Promise<CheckReport> {
  const doc = reportFile(p);
  if (doc !== undefined) {
    const r = CheckReport.safeParse(doc);
    if (!r.success) throw new DiffInputError(`${p}: not a valid check report: ${zodMessage(r.error)}`);
    if (r.data.shard)
      throw new DiffInputError(
        `${p}: the report of shard ${r.data.shard.index}/${r.data.shard.count}; fold the shards with rollscope merge first`,
      );
    return r.data;
  }
  if (!fs.existsSync(p)) throw new DiffInputError(`${p}: no such file or folder`);
  const { report, status } = await checkedReport([p], opts);
  if (status === 2) {
    const fatal = report.errors.find((e) => e.line === 0);
    throw new DiffInputError(`${p}: ${fatal?.message ?? 'cannot be read'}`);
  }
  return report;
}

/** The report `check --json PATHS` writes, and its exit status. */
export async function checkedReport(
  paths: readonly string[],
  opts: Omit<CheckOptions, 'json'>,
): Promise<{ report: CheckReport; status: number }> {
  const chunks: string[] = [];
  const out: TextOut = { write: (t: string) => chunks.push(t) };
  const status = await runCheck([...paths], { ...opts, json: true }, out);
  return { report: CheckReport.parse(JSON.parse(chunks.join(''))), status };
}

export async function runDiff(a: string, b: string, opts: Omit<CheckOptions, 'json'>): Promise<DiffRuns> {
  return diffRuns(await sideReport(a, opts), await sideReport(b, opts));
}

function at(f: DiffFinding): string {
  const where = [f.turn >= 0 ? `turn ${f.turn}` : '', f.index >= 0 ? `${f.stream ?? ''} token ${f.index}` : '']
    .filter(Boolean)
    .join(', ');
  return `${kindLabel(f)}${where ? ` (${where})` : ''}`;
}

const signed = (n: number, digits = 0) => `${n > 0 ? '+' : n < 0 ? '−' : '±'}${Math.abs(n).toFixed(digits)}`;

function pairLine(p: RunPair): string {
  const ids = p.a.id === p.b.id ? p.a.id : `${p.a.id} ↔ ${p.b.id}`;
  const step = p.b.step ?? p.a.step;
  const by =
    p.paired_by === 'prompt'
      ? ` by prompt${p.prompt_samples && p.prompt_samples.a > 1 ? `, ${p.prompt_samples.a} samples in order` : ''}`
      : '';
  return `${paint.bold(ids)}${step !== null ? `  step ${step}` : ''}${by ? paint.dim(by) : ''}`;
}

function otherChanges(p: RunPair): string[] {
  const out: string[] = [];
  if (p.reward_a !== p.reward_b) out.push(`reward ${p.reward_a ?? '–'} → ${p.reward_b ?? '–'}`);
  if (p.response_tokens_a !== p.response_tokens_b)
    out.push(`response ${p.response_tokens_a ?? '–'} → ${p.response_tokens_b ?? '–'} tokens`);
  if (p.mean_abs_delta_change !== null && p.mean_abs_delta_change !== 0)
    out.push(`mean |Δ logprob| ${signed(p.mean_abs_delta_change, 4)}`);
  else if ((p.logprobs_a === null) !== (p.logprobs_b === null))
    out.push(p.logprobs_b ? 'trainer logprobs only in B' : 'trainer logprobs only in A');
  return out;
}

/** For a person: what got fixed, what broke, what else changed, per step. */
export function printDiff(d: DiffRuns, out: TextOut): void {
  const fixed = d.pairs.filter((p) => p.findings_removed.length > 0 && p.findings_added.length === 0);
  const broke = d.pairs.filter((p) => p.findings_added.length > 0);
  const other = d.pairs.filter((p) => p.changed && p.findings_added.length === 0 && p.findings_removed.length === 0);
  if (fixed.length) out.write(`${paint.green('fixed')} in ${fixed.length} pair(s):\n`);
  for (const p of fixed) {
    out.write(`  ${paint.green('✓')} ${pairLine(p)}\n`);
    for (const f of p.findings_removed) out.write(`      gone: ${at(f)}: ${f.message}\n`);
    for (const c of otherChanges(p)) out.write(paint.dim(`      ${c}\n`));
  }
  if (broke.length) out.write(`${paint.red('broke')} in ${broke.length} pair(s):\n`);
  for (const p of broke) {
    out.write(`  ${paint.red('✗')} ${pairLine(p)}\n`);
    for (const f of p.findings_added) out.write(`      new: ${at(f)}: ${f.message}\n`);
    for (const f of p.findings_removed) out.write(paint.dim(`      gone: ${at(f)}\n`));
    for (const c of otherChanges(p)) out.write(paint.dim(`      ${c}\n`));
  }
  if (other.length) out.write(`${paint.yellow('changed')} otherwise in ${other.length} pair(s):\n`);
  for (const p of other) out.write(`  ${paint.yellow('~')} ${pairLine(p)}  ${otherChanges(p).join('; ')}\n`);
  for (const [name, list] of [
    ['A', d.only_a],
    ['B', d.only_b],
  ] as const)
    for (const e of list)
      out.write(
        `${paint.yellow('?')} ${e.id}  ${paint.dim(`${e.file}:${e.line}`)}  only in ${name}${e.findings ? ` (${e.findings} finding(s), ${e.errors} error(s))` : ''}\n`,
      );
  const s = d.summary;
  if (s.steps.some((x) => x.step !== null)) {
    out.write('\nper step:\n');
    for (const x of s.steps)
      out.write(
        `  ${x.step === null ? 'no step' : `step ${x.step}`}: ${x.pairs} pair(s), ${x.fixed} fixed, ${x.broke} broke, findings +${x.findings_added} −${x.findings_removed}` +
          `${x.reward_delta_mean !== null ? `, reward ${signed(x.reward_delta_mean, 3)}` : ''}${x.only_a || x.only_b ? `, only A ${x.only_a}, only B ${x.only_b}` : ''}\n`,
      );
  }
  const kinds = (m: Record<string, number>) =>
    Object.entries(m)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
  out.write(
    `\n${s.pairs} pair(s) (${s.paired_by_id} by id, ${s.paired_by_prompt} by prompt): ${s.fixed} fixed, ${s.broke} broke, ${s.changed - s.fixed - s.broke} changed otherwise, ${s.pairs - s.changed} the same; ${s.only_a} only in A, ${s.only_b} only in B\n` +
      `${s.findings_removed ? `gone: ${kinds(s.removed_by_kind)}\n` : ''}${s.findings_added ? `new: ${kinds(s.added_by_kind)}\n` : ''}` +
      `${s.new_error_kinds.length ? `${paint.red('errors of a kind A did not have')}: ${s.new_error_kinds.join(', ')}\n` : ''}` +
      `${s.unreadable_a || s.unreadable_b ? `unreadable records: A ${s.unreadable_a}, B ${s.unreadable_b}\n` : ''}` +
      `${s.id_pairs_prompt_differs ? `${paint.yellow('note')}: ${s.id_pairs_prompt_differs} pair(s) by id have different first prompts (a changed prompt, or ids that are line numbers: check the pairing)\n` : ''}`,
  );
}
