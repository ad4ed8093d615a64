// `rollscope compare ROLLOUT TRAINED [--json]`: did the trainer see what the rollout generated?
// Both sides go through the one pipeline (server/pipeline/compare-runs.ts, shared with `serve --trained`);
// pairs are joined by trajectory id, then by sample index (server/analysis/compare.ts `joinSides`).
// Exit status as `check`: 1 when a pair differs or a record could not be read, 2 on bad arguments
// or unreadable paths.
import { z } from 'zod';
import { TRAINED_FIELDS } from '../analysis/compare.ts';
import { type ComparedRuns, compareRuns } from '../pipeline/compare-runs.ts';
import type { CheckedTrajectory, RunOptions } from '../pipeline.ts';
import { publicFinding } from '../model/public-finding.ts';
import { paint } from './output.ts';

const Side = z.object({ id: z.string(), file: z.string(), line: z.number().int(), format: z.string() });

/** The stable `--json` contract of compare (docs/compare.md). */
export const CompareReport = z.object({
  version: z.literal(1),
  pairs: z.array(z.object({ rollout: Side, trained: Side, findings: z.array(z.unknown()) })),
  unmatched: z.object({ rollout: z.array(Side), trained: z.array(Side) }),
  errors: z.array(
    z.object({ file: z.string(), line: z.number().int(), field: z.string().optional(), message: z.string() }),
  ),
  summary: z.object({
    pairs: z.number().int(),
    matching: z.number().int(),
    differing: z.number().int(),
    unmatchedRollout: z.number().int(),
    unmatchedTrained: z.number().int(),
    differencesByField: z.record(z.string(), z.number().int()),
  }),
});
export type CompareReport = z.infer<typeof CompareReport>;

const side = (c: CheckedTrajectory) => ({
  id: c.trajectory.id,
  file: c.trajectory.source.file,
  line: c.trajectory.source.line,
  format: c.trajectory.source.format,
});

/** The JSON contract of a comparison (server/pipeline/compare-runs.ts computes it). */
export function compareReport(r: ComparedRuns): CompareReport {
  const differencesByField: Record<string, number> = Object.fromEntries(TRAINED_FIELDS.map((f) => [f, 0]));
  const pairs = r.pairs.map((p) => {
    for (const f of p.findings) if (f.field) differencesByField[f.field] = (differencesByField[f.field] ?? 0) + 1;
    return { rollout: side(p.rollout), trained: side(p.trained), findings: p.findings.map(publicFinding) };
  });
  const differing = pairs.filter((p) => p.findings.length > 0).length;
  return {
    version: 1,
    pairs,
    unmatched: { rollout: r.onlyRollout.map(side), trained: r.onlyTrained.map(side) },
    errors: r.errors.map(({ file, line, field, message }) => ({ file, line, ...(field ? { field } : {}), message })),
    summary: {
      pairs: pairs.length,
      matching: pairs.length - differing,
      differing,
      unmatchedRollout: r.onlyRollout.length,
      unmatchedTrained: r.onlyTrained.length,
      differencesByField,
    },
  };
}

export async function runCompare(
  rolloutPaths: readonly string[],
  trainedPaths: readonly string[],
  opts: RunOptions & { json: boolean },
  out: NodeJS.WritableStream,
): Promise<number> {
  const compared = await compareRuns(rolloutPaths, trainedPaths, opts);
  const report = compareReport(compared);
  if (opts.json) out.write(`${JSON.stringify(report)}\n`);
  else printReport(report, out);
  if (compared.fatal) return 2;
  return report.summary.differing > 0 || report.errors.length > 0 ? 1 : 0;
}

function printReport(r: CompareReport, out: NodeJS.WritableStream): void {
  for (const p of r.pairs) {
    const where = `${p.rollout.file}:${p.rollout.line} ↔ ${p.trained.file}:${p.trained.line}`;
    if (p.findings.length === 0) {
      out.write(`${paint.green('✓')} ${p.rollout.id}  ${paint.dim(where)}\n`);
      continue;
    }
    out.write(
      `${paint.red('✗')} ${paint.bold(p.rollout.id)}  ${paint.dim(where)}  ${p.findings.length} difference(s)\n`,
    );
    for (const f of p.findings as { field: string; index: number; message: string }[]) {
      out.write(`    ${paint.red(f.field)}${f.index >= 0 ? ` token ${f.index}` : ''}: ${f.message}\n`);
    }
  }
  for (const s of r.unmatched.rollout)
    out.write(`${paint.yellow('?')} ${s.id}  ${paint.dim(`${s.file}:${s.line}`)}  only in the rollout\n`);
  for (const s of r.unmatched.trained)
    out.write(`${paint.yellow('?')} ${s.id}  ${paint.dim(`${s.file}:${s.line}`)}  only on the trained side\n`);
  for (const e of r.errors) out.write(`${paint.red('error')} ${e.file}${e.line ? `:${e.line}` : ''}: ${e.message}\n`);
  const s = r.summary;
  const fields = Object.entries(s.differencesByField)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  out.write(
    `\n${s.pairs} pair(s): ${s.matching} the same, ${s.differing} different; ${s.unmatchedRollout} only in the rollout, ${s.unmatchedTrained} only on the trained side${fields ? `\ndifferences: ${fields}` : ''}\n`,
  );
}
