// What the server lists of one checked trajectory: its summary row (the run table's columns, its
// finding counts and health), the distinct token ids it holds (a token-id query without its
// streams), and its group membership; and a summary's counts with its group's findings added.
import type { Finding } from '../../model/finding.ts';
import type { Trajectory } from '../../model/trajectory.ts';
import type { CheckedTrajectory, ReportFacts } from '../../analysis/checked.ts';
import { indexFacts } from '../../analysis/index-facts.ts';
import { factsOf } from '../../report/build.ts';
import { originalRejections, repairedByRealignment } from '../../export/policy.ts';
import { PLACEHOLDER_KINDS } from '../steps.ts';
import type { FindingCounts, TrajectorySummary } from '../api.ts';

export type Health = TrajectorySummary['health'];

export function countFindings(findings: readonly Finding[]): FindingCounts {
  const out: FindingCounts = { kind: {}, cause: {}, severity: {} };
  for (const f of findings) {
    out.kind[f.kind] = (out.kind[f.kind] ?? 0) + 1;
    if (f.cause) out.cause[f.cause] = (out.cause[f.cause] ?? 0) + 1;
    out.severity[f.severity] = (out.severity[f.severity] ?? 0) + 1;
  }
  return out;
}

/**
 * What the store lists of a trajectory: its record's fields, findings, and the facts computed from
 * its streams where it was analyzed (a worker sends them instead of the streams: wire.ts `forStore`).
 */
export interface Indexed {
  summary: TrajectorySummary;
  tokenSet: Uint8Array;
  member: ReportFacts['member'];
}

export function summarize(id: string, c: CheckedTrajectory): Indexed {
  const t = c.trajectory;
  const report = factsOf(c, undefined);
  const index = c.index ?? indexFacts(c, report.logprobs);
  const counts = countFindings(c.findings);
  const health = c.findings.some((f) => f.severity === 'error') ? 'error' : c.findings.length > 0 ? 'warning' : 'ok';
  const summary: TrajectorySummary = {
    id,
    format: t.source.format,
    source: { file: t.source.file, line: t.source.line },
    turns: t.turns.length,
    tokens: index.tokens,
    images: t.images.length,
    // JSON cannot carry a NaN or infinite reward; its invalid_value finding says what it was.
    reward: typeof t.reward === 'number' && Number.isFinite(t.reward) ? t.reward : null,
    status: t.status ?? null,
    finishReason: t.turns[t.turns.length - 1]?.finishReason ?? null,
    health,
    findings: counts,
    headline: headline(c.findings[0]?.message),
    mismatch: index.mismatch,
    group: t.group ?? null,
    step: t.step ?? null,
    sample: null,
    advantage: typeof t.advantage === 'number' && Number.isFinite(t.advantage) ? t.advantage : null,
    responseTokens: report.responseTokens,
    truncated: truncated(t),
    placeholderErrors: c.findings.filter((f) => f.severity === 'error' && PLACEHOLDER_KINDS.includes(f.kind)).length,
    // What the export decides before it re-aligns (its findings and structure; docs/export-format.md).
    rejects: originalRejections(c, false).reasons,
    repaired: [
      ...new Set(c.findings.filter((f) => f.severity === 'error' && repairedByRealignment(f)).map((f) => f.kind)),
    ],
  };
  return { summary, tokenSet: index.tokenSet, member: report.member };
}

/**
 * Whether generation stopped at the length limit, as the data states it: a `truncated` status, or
 * the finish reason `length` (slime maps SGLang's `length` to TRUNCATED; vLLM and SGLang report
 * `length`; docs/reference/frameworks.md).
 */
function truncated(t: Trajectory): boolean | null {
  const status = t.status?.toLowerCase();
  if (status === 'truncated' || status === 'length') return true;
  if (status === 'completed' || status === 'stop') return false;
  const reason = t.turns[t.turns.length - 1]?.finishReason?.toLowerCase();
  if (reason === 'length') return true;
  if (reason === undefined) return null;
  return false;
}

/** The row tooltip: the first finding's sentence, capped (100k rows × full messages would be most of the list's bytes). */
function headline(message: string | undefined): string | null {
  if (message === undefined) return null;
  return message.length > 200 ? `${message.slice(0, 199)}…` : message;
}

/** The health and counts of a trajectory's own findings plus its group's. */
export function withGroupCounts(
  own: { findings: FindingCounts; health: Health },
  group: readonly Finding[],
): { findings: FindingCounts; health: Health } {
  if (group.length === 0) return own;
  const findings: FindingCounts = {
    kind: { ...own.findings.kind },
    cause: { ...own.findings.cause },
    severity: { ...own.findings.severity },
  };
  for (const f of group) {
    findings.kind[f.kind] = (findings.kind[f.kind] ?? 0) + 1;
    findings.severity[f.severity] = (findings.severity[f.severity] ?? 0) + 1;
  }
  return { findings, health: own.health === 'error' ? 'error' : 'warning' };
}
