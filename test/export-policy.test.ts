// Which findings keep a trajectory out of an export (server/export/policy.ts): errors the
// re-alignment cannot repair, and warnings that doubt the row; warnings that describe a correct
// row (a non-canonical split kept verbatim, a raw-text prompt…) are exported and counted in the
// manifest. The table in docs/export-format.md is checked against the code's maps, and the maps'
// severities against every finding the fixtures and the demo produce.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  REPAIRED_BY_REALIGNMENT,
  SEVERITIES,
  WARNING_ROLE,
  warningRole,
  type RefinedRole,
  type WarningRole,
} from '../server/export/policy.ts';
import type { ExportOptions } from '../server/export/run.ts';
import { FINDING_KINDS, type Finding, type FindingKind } from '../server/model/finding.ts';
import { checkPaths, type CheckedTrajectory, type RunOptions } from '../server/pipeline.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { writeDemoRun } from '../server/demo/write.ts';
import { jsonlRecords } from './support/jsonl.ts';

const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const FIXTURES = path.join(REPO, 'test', 'fixtures');
let dir = '';
let demo = '';
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-policy-'));
  demo = path.join(dir, 'demo');
  await writeDemoRun(demo);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// ---------------------------------------------------------------------------------------------
// The table in docs/export-format.md, cell by cell, from the maps.

const code = (s: string) => `\`${s}\``;
const roleWords = (r: WarningRole) => (r === 'describes' ? 'describes the row' : 'doubts the row');

function refinements(r: RefinedRole): string[] {
  return [
    ...Object.entries(r.byCause ?? {}).map(([cause, role]) => `${roleWords(role!)} with cause ${code(cause)}`),
    ...Object.entries(r.byField ?? {}).map(([field, role]) => `${roleWords(role)} with field ${code(field)}`),
  ];
}

/** The cells of a kind's row: kind, severity, repaired, warning, exported by default. */
function expectedRow(kind: FindingKind): string[] {
  const severities = SEVERITIES[kind];
  const isError = severities.includes('error');
  const isWarning = severities.includes('warning');
  const repaired = REPAIRED_BY_REALIGNMENT[kind];
  const role = WARNING_ROLE[kind];
  const roleCell = !isWarning
    ? '—'
    : typeof role === 'string'
      ? roleWords(role)
      : [roleWords(role.role), ...refinements(role)].join('; ');
  const errorExport =
    repaired === true ? 'yes, re-aligned' : repaired === 'sample' ? 'when on the stored sample' : 'no';
  const warningExport = (() => {
    if (typeof role === 'string') return role === 'describes' ? 'yes' : 'only with `--include-warnings`';
    const base = role.role === 'describes' ? 'yes' : 'only with `--include-warnings`';
    const other = role.role === 'describes' ? 'only with `--include-warnings`' : 'yes';
    const where = [
      ...Object.entries(role.byCause ?? {})
        .filter(([, x]) => x !== role.role)
        .map(([c]) => `cause ${code(c)}`),
      ...Object.entries(role.byField ?? {})
        .filter(([, x]) => x !== role.role)
        .map(([f]) => `field ${code(f)}`),
    ];
    return `${base} (${where.join(', ')}: ${other})`;
  })();
  const exported =
    isError && isWarning ? `error: ${errorExport}; warning: ${warningExport}` : isError ? errorExport : warningExport;
  return [
    code(kind),
    severities.join(' or '),
    isError ? (repaired === true ? 'yes' : repaired === 'sample' ? 'on the stored sample' : 'no') : '—',
    roleCell,
    exported,
  ];
}

/** The rows of the first table after `heading` in a markdown file, cells trimmed, header and rule dropped. */
function tableAfter(file: string, heading: string): string[][] {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const at = lines.findIndex((l) => l.trim() === heading);
  if (at < 0) throw new Error(`${file}: no heading "${heading}"`);
  const start = lines.findIndex((l, i) => i > at && l.startsWith('|'));
  const rows: string[][] = [];
  for (let i = start; i < lines.length && lines[i]!.startsWith('|'); i++) {
    // Split on the pipes between cells (a `\|` inside a cell is an escaped pipe).
    const cells = lines[i]!.slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((c) => c.trim());
    rows.push(cells);
  }
  return rows.slice(2);
}

describe('docs/export-format.md: the table of finding kinds', () => {
  it('lists every finding kind once, with the severity, repair, warning role and export the code gives it', () => {
    const doc = tableAfter(path.join(REPO, 'docs', 'export-format.md'), '### Finding kinds and the export');
    const want = FINDING_KINDS.map(expectedRow);
    const shown = want.map((r) => `| ${r.join(' | ')} |`).join('\n');
    expect(doc, `the table should read (then run biome to align it):\n${shown}\n`).toEqual(want);
  });
});

// ---------------------------------------------------------------------------------------------
// Severities as the checks report them.

async function checkedAll(paths: string[], opts: RunOptions = {}): Promise<CheckedTrajectory[]> {
  const out: CheckedTrajectory[] = [];
  for await (const ev of checkPaths(paths, { workers: 0, ...opts })) if (ev.type === 'trajectory') out.push(ev.checked);
  return out;
}

/** A run whose processor settings are not the ones its slime samples were made with (their stored grids say so). */
const OTHER_SETTINGS = { maxPixels: 128 * 28 * 28 };
const SLIME = path.join(FIXTURES, 'slime', 'samples.jsonl');

/** The Qwen3-VL tool conversation of the vLLM tool-call log without its prompt ids, the first call's usage off by 7. */
function withoutPromptIds(): string {
  const lines = fs
    .readFileSync(path.join(FIXTURES, 'vllm', 'tool-calls.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map(
      (l) =>
        JSON.parse(l) as {
          trajectory_id?: string;
          response: { prompt_token_ids?: number[]; usage: { prompt_tokens: number } };
        },
    )
    .filter((l) => l.trajectory_id === 'tools-qwen3-vl');
  for (const l of lines) delete l.response.prompt_token_ids;
  lines[0]!.response.usage.prompt_tokens += 7;
  const file = path.join(dir, 'other-template.jsonl');
  fs.writeFileSync(file, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
  return file;
}

describe('SEVERITIES', () => {
  it('every finding of the fixtures and the demo run has a severity its kind declares', async () => {
    const findings: Finding[] = [
      ...(await checkedAll([FIXTURES, demo])),
      ...(await checkedAll([SLIME], { processor: OTHER_SETTINGS })),
      ...(await checkedAll([withoutPromptIds()])),
    ].flatMap((c) => c.findings);
    expect(findings.length).toBeGreaterThan(100);
    const seen = new Map<FindingKind, Set<string>>();
    for (const f of findings) {
      expect(SEVERITIES[f.kind], `${f.kind} reported as ${f.severity}: ${f.message}`).toContain(f.severity);
      if (!seen.has(f.kind)) seen.set(f.kind, new Set());
      seen.get(f.kind)!.add(f.severity);
    }
    // Both severities of the kinds that have two are produced.
    for (const kind of ['rerender_mismatch', 'prompt_tokens_mismatch', 'placeholder_count'] as const)
      expect([...(seen.get(kind) ?? [])].sort(), kind).toEqual(['error', 'warning']);
  });
});

// ---------------------------------------------------------------------------------------------
// The policy on real data.

interface Rejected {
  id: string | null;
  reasons: string[];
  findings: { kind: string; severity: string }[];
}

async function exportOf(paths: string[], name: string, opts: Partial<ExportOptions> = {}) {
  const out = path.join(dir, name);
  const r = await exportRun(paths, { out, workers: 0, ...opts });
  const rows = jsonlRecords(out) as { id: string; source: { format: string } }[];
  const rejects = jsonlRecords(r.rejectsFile) as unknown as Rejected[];
  return { manifest: r.manifest, ids: new Set(rows.map((x) => x.id)), rows, rejects };
}

const describes = (f: Finding) => f.severity === 'warning' && warningRole(f) === 'describes';

describe('warnings that describe a row export; warnings that doubt it reject', () => {
  it('non-canonical splits (the cause fixtures of every format, the demo) export by default, listed in the manifest', async () => {
    const causes = path.join(FIXTURES, 'causes');
    const checked = await checkedAll([causes, demo]);
    // Trajectories whose findings are all warnings that describe them, one a non-canonical split.
    const described = checked.filter(
      (c) => c.findings.some((f) => f.kind === 'non_canonical_split') && c.findings.every(describes),
    );
    expect(described.length).toBeGreaterThanOrEqual(6);
    const { manifest, ids, rows, rejects } = await exportOf([causes, demo], 'splits.jsonl');
    for (const c of described) {
      const rejected = rejects.find((r) => r.id === c.trajectory.id);
      // Rejected only for what the data lacks (an AReaL record without images), never for the warning.
      if (rejected) expect(rejected.reasons, c.trajectory.id).not.toContain('warning');
      else expect(ids.has(c.trajectory.id), c.trajectory.id).toBe(true);
    }
    const exported = described.filter((c) => ids.has(c.trajectory.id));
    expect(new Set(exported.map((c) => c.trajectory.source.format)).size).toBeGreaterThanOrEqual(4);
    expect(manifest.counts.exportedWithWarnings.non_canonical_split).toBeGreaterThanOrEqual(exported.length);
    expect(rows.length).toBe(manifest.counts.exported);
    expect(manifest.counts.read).toBe(manifest.counts.exported + manifest.counts.rejected);
  });

  it('a raw-text prompt (Agent Lightning, no chat format) exports by default, listed in the manifest', async () => {
    const file = path.join(FIXTURES, 'agent-lightning', 'plain-text.jsonl');
    const { manifest, ids } = await exportOf([file], 'plain.jsonl');
    expect([...ids]).toEqual(['ro-plain']);
    expect(manifest.counts.exportedWithWarnings.chat_format_unrecognized).toBe(1);
  });

  it('a pad count only other processor settings explain still rejects; --include-warnings exports it', async () => {
    const checked = await checkedAll([SLIME], { processor: OTHER_SETTINGS });
    const warned = checked.filter((c) =>
      c.findings.some((f) => f.kind === 'placeholder_count' && f.severity === 'warning'),
    );
    expect(warned.length).toBeGreaterThan(0);
    const plain = await exportOf([SLIME], 'pads.jsonl', { processor: OTHER_SETTINGS });
    for (const c of warned) {
      expect(plain.ids.has(c.trajectory.id), c.trajectory.id).toBe(false);
      expect(plain.rejects.find((r) => r.id === c.trajectory.id)?.reasons).toContain('warning');
    }
    const included = await exportOf([SLIME], 'pads-all.jsonl', { processor: OTHER_SETTINGS, includeWarnings: true });
    for (const c of warned.filter((x) => x.findings.every((f) => f.severity === 'warning')))
      expect(included.ids.has(c.trajectory.id), c.trajectory.id).toBe(true);
    expect(included.manifest.counts.exportedWithWarnings.placeholder_count).toBeGreaterThan(0);
  });

  it('prompt tokens the engine counted otherwise than the render (another template) still reject; --include-warnings exports', async () => {
    const file = withoutPromptIds();
    const [c] = await checkedAll([file]);
    expect(c!.findings.map((f) => [f.kind, f.severity])).toEqual([['prompt_tokens_mismatch', 'warning']]);
    const plain = await exportOf([file], 'other-template-out.jsonl');
    expect(plain.rejects.map((r) => r.reasons)).toEqual([['warning']]);
    expect(plain.manifest.counts.byReason.warning).toBe(1);
    const included = await exportOf([file], 'other-template-all.jsonl', { includeWarnings: true });
    expect([...included.ids]).toEqual([c!.trajectory.id]);
    expect(included.manifest.counts.exportedWithWarnings.prompt_tokens_mismatch).toBe(1);
  });
});
