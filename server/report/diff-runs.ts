// Run against run (docs/diff-runs.md): two `check` reports of the same prompts — before and after a
// template fix, a checkpoint, an engine upgrade — paired trajectory by trajectory, and what changed
// in each pair: findings that appeared or vanished, reward, response length, logprob mismatch.
// Pure: reads two CheckReports, writes one DiffRuns document.
import { z } from 'zod';
import type { CheckReport, ReportEntry } from './check-report.ts';

type Entry = ReportEntry;

/** The fields of a finding the diff reads (the rest of `check --json`'s finding passes through). */
const DiffFinding = z
  .object({
    kind: z.string(),
    cause: z.string().optional(),
    field: z.string().optional(),
    severity: z.string(),
    turn: z.number().int(),
    index: z.number().int(),
    stream: z.string().optional(),
    image: z.number().int().optional(),
    message: z.string(),
  })
  .passthrough();
export type DiffFinding = z.infer<typeof DiffFinding>;

const Side = z.object({
  id: z.string(),
  file: z.string(),
  line: z.number().int(),
  format: z.string(),
  step: z.number().int().nullable(),
  group: z.string().nullable(),
});
export type DiffSide = z.infer<typeof Side>;

const LogprobSide = z
  .object({ meanAbsDelta: z.number(), maxAbsDelta: z.number(), pastCapShare: z.number() })
  .nullable();

/** A finding seen on both sides at another token: the same identity, its index moved (docs/diff-runs.md#findings). */
const MovedFinding = z.object({ finding: DiffFinding, index_a: z.number().int(), index_b: z.number().int() });

export const RunPair = z.object({
  a: Side,
  b: Side,
  /** `id`: the same trajectory id on both sides; `prompt`: the same first prompt (prompt_hash), k-th sample with k-th. */
  paired_by: z.enum(['id', 'prompt']),
  /** For a pair by prompt: how many trajectories of each side asked that prompt (several: paired in order). */
  prompt_samples: z.object({ a: z.number().int(), b: z.number().int() }).nullable(),
  /** Whether both sides' first prompts hash the same (null when either is unknown); false for a pair by id says "look". */
  same_prompt: z.boolean().nullable(),
  findings_added: z.array(DiffFinding),
  findings_removed: z.array(DiffFinding),
  findings_moved: z.array(MovedFinding),
  /** Findings both sides have at the same token (B's): what the change did not fix. Absent from older reports. */
  findings_kept: z.array(DiffFinding).default([]),
  reward_a: z.number().nullable(),
  reward_b: z.number().nullable(),
  /** reward_b − reward_a, null when either is unstated. */
  reward_delta: z.number().nullable(),
  response_tokens_a: z.number().int().nullable(),
  response_tokens_b: z.number().int().nullable(),
  /** response_tokens_b − response_tokens_a, null when either is unknown. */
  length_delta: z.number().int().nullable(),
  logprobs_a: LogprobSide,
  logprobs_b: LogprobSide,
  /** Mean |trainer − rollout| of b minus a's, null unless both sides have trainer logprobs. */
  mean_abs_delta_change: z.number().nullable(),
  /** Anything above differs (a moved finding alone is no change). */
  changed: z.boolean(),
});
export type RunPair = z.infer<typeof RunPair>;

const Unpaired = Side.extend({ findings: z.number().int(), errors: z.number().int() });

const Counts = z.object({
  pairs: z.number().int(),
  changed: z.number().int(),
  /** Pairs that lost findings and gained none. */
  fixed: z.number().int(),
  /** Pairs that gained a finding. */
  broke: z.number().int(),
  findings_added: z.number().int(),
  findings_removed: z.number().int(),
  added_by_kind: z.record(z.string(), z.number().int()),
  removed_by_kind: z.record(z.string(), z.number().int()),
  reward_changed: z.number().int(),
  /** Mean reward_delta over the pairs with both rewards, null when none has. */
  reward_delta_mean: z.number().nullable(),
  length_changed: z.number().int(),
  length_delta_mean: z.number().nullable(),
  logprobs_changed: z.number().int(),
  only_a: z.number().int(),
  only_b: z.number().int(),
});

/** The `diff-runs --json` contract (docs/diff-runs.md). */
export const DiffRuns = z.object({
  version: z.literal(1),
  pairs: z.array(RunPair),
  only_a: z.array(Unpaired),
  only_b: z.array(Unpaired),
  summary: Counts.extend({
    paired_by_id: z.number().int(),
    paired_by_prompt: z.number().int(),
    /** Pairs by id whose first prompts differ: a changed prompt, or ids a format derives from line numbers. */
    id_pairs_prompt_differs: z.number().int(),
    unreadable_a: z.number().int(),
    unreadable_b: z.number().int(),
    /** Finding kinds (`kind/cause`) with an error in b and no error in a, over each whole run (`--fail-on new-errors`). */
    new_error_kinds: z.array(z.string()),
    /** Finding kinds with any finding in b and none in a (`--fail-on new-findings`). */
    new_finding_kinds: z.array(z.string()),
    /** Per rollout step (b's, else a's), in step order, unstated steps last. */
    steps: z.array(Counts.extend({ step: z.number().int().nullable() })),
  }),
});
export type DiffRuns = z.infer<typeof DiffRuns>;

/** A finding's kind as the diff counts it: the cause names the break (`prefix_break/duplicated_eos`). */
export function kindLabel(f: Pick<DiffFinding, 'kind' | 'cause'>): string {
  return f.cause ? `${f.kind}/${f.cause}` : f.kind;
}

/** What makes two findings the same finding, apart from the token they point at. */
function identity(f: DiffFinding): string {
  return JSON.stringify([
    f.kind,
    f.cause ?? null,
    f.field ?? null,
    f.severity,
    f.turn,
    f.stream ?? null,
    f.image ?? null,
  ]);
}

function findingsOf(e: Entry): DiffFinding[] {
  return e.findings.map((f) => DiffFinding.parse(f));
}

/**
 * Findings of b against a's: the same identity at the same index is kept; then, per identity, the
 * remaining ones of each side in index order, k-th with k-th, are the same finding moved (an earlier
 * change shifted its token); what is left appeared (b) or vanished (a).
 */
export function diffFindings(
  a: readonly DiffFinding[],
  b: readonly DiffFinding[],
): {
  added: DiffFinding[];
  removed: DiffFinding[];
  moved: z.infer<typeof MovedFinding>[];
  kept: DiffFinding[];
} {
  const key = (f: DiffFinding) => `${identity(f)}@${f.index}`;
  const counted = (list: readonly DiffFinding[]) => {
    const m = new Map<string, number>();
    for (const f of list) m.set(key(f), (m.get(key(f)) ?? 0) + 1);
    return m;
  };
  /** The findings of `list` beyond those `other` has at the same index. */
  const unmatched = (list: readonly DiffFinding[], other: Map<string, number>) =>
    list.filter((f) => {
      const n = other.get(key(f)) ?? 0;
      if (n === 0) return true;
      other.set(key(f), n - 1);
      return false;
    });
  const restA = unmatched(a, counted(b));
  const restB = unmatched(b, counted(a));
  const byIdentity = (list: DiffFinding[]) => {
    const m = new Map<string, DiffFinding[]>();
    for (const f of [...list].sort((x, y) => x.index - y.index)) m.set(identity(f), [...(m.get(identity(f)) ?? []), f]);
    return m;
  };
  const aBy = byIdentity(restA);
  const bBy = byIdentity(restB);
  const moved: z.infer<typeof MovedFinding>[] = [];
  const paired = new Set<DiffFinding>();
  for (const [id, as] of aBy) {
    const bs = bBy.get(id) ?? [];
    for (let k = 0; k < Math.min(as.length, bs.length); k++) {
      moved.push({ finding: bs[k]!, index_a: as[k]!.index, index_b: bs[k]!.index });
      paired.add(as[k]!);
      paired.add(bs[k]!);
    }
  }
  const restOfB = new Set(restB);
  return {
    added: restB.filter((f) => !paired.has(f)),
    removed: restA.filter((f) => !paired.has(f)),
    moved,
    kept: b.filter((f) => !restOfB.has(f)),
  };
}

const side = (e: Entry): DiffSide => ({
  id: e.id,
  file: e.source.file,
  line: e.source.line,
  format: e.format,
  step: e.step,
  group: e.group,
});

const logprobSide = (e: Entry) =>
  e.logprobs
    ? {
        meanAbsDelta: e.logprobs.meanAbsDelta,
        maxAbsDelta: e.logprobs.maxAbsDelta,
        pastCapShare: e.logprobs.pastCapShare,
      }
    : null;

const delta = (a: number | null | undefined, b: number | null | undefined) =>
  a === null || a === undefined || b === null || b === undefined ? null : b - a;

function pairOf(a: Entry, b: Entry, pairedBy: RunPair['paired_by'], samples: RunPair['prompt_samples']): RunPair {
  const f = diffFindings(findingsOf(a), findingsOf(b));
  const la = logprobSide(a);
  const lb = logprobSide(b);
  const pair: RunPair = {
    a: side(a),
    b: side(b),
    paired_by: pairedBy,
    prompt_samples: samples,
    same_prompt: a.prompt_hash && b.prompt_hash ? a.prompt_hash === b.prompt_hash : null,
    findings_added: f.added,
    findings_removed: f.removed,
    findings_moved: f.moved,
    findings_kept: f.kept,
    reward_a: a.reward,
    reward_b: b.reward,
    reward_delta: delta(a.reward, b.reward),
    response_tokens_a: a.response_tokens,
    response_tokens_b: b.response_tokens,
    length_delta: delta(a.response_tokens, b.response_tokens),
    logprobs_a: la,
    logprobs_b: lb,
    mean_abs_delta_change: la && lb ? lb.meanAbsDelta - la.meanAbsDelta : null,
    changed: false,
  };
  pair.changed =
    f.added.length > 0 ||
    f.removed.length > 0 ||
    pair.reward_a !== pair.reward_b ||
    pair.response_tokens_a !== pair.response_tokens_b ||
    logprobsChanged(pair);
  return pair;
}

function logprobsChanged(p: RunPair): boolean {
  return JSON.stringify(p.logprobs_a) !== JSON.stringify(p.logprobs_b);
}

/**
 * Pairs trajectories by id (the entry ids: a duplicate's `#k` suffix pairs the k-th of that stated id
 * on each side), then the rest by `prompt_hash`, the k-th trajectory of a prompt in a with the k-th in
 * b in the order each report lists them.
 */
export function pairEntries(
  a: readonly Entry[],
  b: readonly Entry[],
): {
  pairs: { a: Entry; b: Entry; by: RunPair['paired_by']; samples: RunPair['prompt_samples'] }[];
  onlyA: Entry[];
  onlyB: Entry[];
} {
  const bById = new Map(b.map((e) => [e.id, e]));
  const used = new Set<Entry>();
  const pairs: { a: Entry; b: Entry; by: RunPair['paired_by']; samples: RunPair['prompt_samples'] }[] = [];
  const restA: Entry[] = [];
  for (const e of a) {
    const other = bById.get(e.id);
    if (other) {
      pairs.push({ a: e, b: other, by: 'id', samples: null });
      used.add(other);
    } else restA.push(e);
  }
  const byPrompt = (list: readonly Entry[]) => {
    const m = new Map<string, Entry[]>();
    for (const e of list) {
      const h = e.prompt_hash;
      if (h) m.set(h, [...(m.get(h) ?? []), e]);
    }
    return m;
  };
  const aPrompts = byPrompt(restA);
  const bPrompts = byPrompt(b.filter((e) => !used.has(e)));
  const pairedA = new Set<Entry>();
  for (const [hash, as] of aPrompts) {
    const bs = bPrompts.get(hash) ?? [];
    for (let k = 0; k < Math.min(as.length, bs.length); k++) {
      pairs.push({ a: as[k]!, b: bs[k]!, by: 'prompt', samples: { a: as.length, b: bs.length } });
      pairedA.add(as[k]!);
      used.add(bs[k]!);
    }
  }
  // Pairs in a's order, whichever way they were found.
  const order = new Map(a.map((e, i) => [e, i]));
  pairs.sort((x, y) => order.get(x.a)! - order.get(y.a)!);
  return {
    pairs,
    onlyA: restA.filter((e) => !pairedA.has(e)),
    onlyB: b.filter((e) => !used.has(e)),
  };
}

const unpaired = (e: Entry) => {
  const f = findingsOf(e);
  return { ...side(e), findings: f.length, errors: f.filter((x) => x.severity === 'error').length };
};

function count(pairs: readonly RunPair[], onlyA: number, onlyB: number): z.infer<typeof Counts> {
  const byKind = (lists: DiffFinding[][]) => {
    const m: Record<string, number> = {};
    for (const f of lists.flat()) m[kindLabel(f)] = (m[kindLabel(f)] ?? 0) + 1;
    return m;
  };
  const mean = (xs: number[]) => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : null);
  const rewards = pairs.flatMap((p) => (p.reward_delta === null ? [] : [p.reward_delta]));
  const lengths = pairs.flatMap((p) => (p.length_delta === null ? [] : [p.length_delta]));
  return {
    pairs: pairs.length,
    changed: pairs.filter((p) => p.changed).length,
    fixed: pairs.filter((p) => p.findings_removed.length > 0 && p.findings_added.length === 0).length,
    broke: pairs.filter((p) => p.findings_added.length > 0).length,
    findings_added: pairs.reduce((s, p) => s + p.findings_added.length, 0),
    findings_removed: pairs.reduce((s, p) => s + p.findings_removed.length, 0),
    added_by_kind: byKind(pairs.map((p) => p.findings_added)),
    removed_by_kind: byKind(pairs.map((p) => p.findings_removed)),
    reward_changed: pairs.filter((p) => p.reward_a !== p.reward_b).length,
    reward_delta_mean: mean(rewards),
    length_changed: pairs.filter((p) => p.response_tokens_a !== p.response_tokens_b).length,
    length_delta_mean: mean(lengths),
    logprobs_changed: pairs.filter(logprobsChanged).length,
    only_a: onlyA,
    only_b: onlyB,
  };
}

/** Kinds (`kind/cause`) of the findings of a whole report that pass `keep`. */
function kindsOf(r: CheckReport, keep: (f: DiffFinding) => boolean): Set<string> {
  const kinds = new Set<string>();
  for (const e of r.trajectories) for (const f of findingsOf(e)) if (keep(f)) kinds.add(kindLabel(f));
  return kinds;
}

const newKinds = (a: Set<string>, b: Set<string>) => [...b].filter((k) => !a.has(k)).sort();

export function diffRuns(a: CheckReport, b: CheckReport): DiffRuns {
  const { pairs: joined, onlyA, onlyB } = pairEntries(a.trajectories, b.trajectories);
  const pairs = joined.map((p) => pairOf(p.a, p.b, p.by, p.samples));
  const stepOf = (s: DiffSide) => s.step;
  const steps = new Map<number | null, { pairs: RunPair[]; onlyA: number; onlyB: number }>();
  const at = (step: number | null) => {
    let s = steps.get(step);
    if (!s) {
      s = { pairs: [], onlyA: 0, onlyB: 0 };
      steps.set(step, s);
    }
    return s;
  };
  for (const p of pairs) at(p.b.step ?? p.a.step).pairs.push(p);
  for (const e of onlyA) at(stepOf(side(e))).onlyA++;
  for (const e of onlyB) at(stepOf(side(e))).onlyB++;
  const stepKeys = [...steps.keys()].sort((x, y) => (x === null ? 1 : y === null ? -1 : x - y));
  const isError = (f: DiffFinding) => f.severity === 'error';
  return {
    version: 1,
    pairs,
    only_a: onlyA.map(unpaired),
    only_b: onlyB.map(unpaired),
    summary: {
      ...count(pairs, onlyA.length, onlyB.length),
      paired_by_id: pairs.filter((p) => p.paired_by === 'id').length,
      paired_by_prompt: pairs.filter((p) => p.paired_by === 'prompt').length,
      id_pairs_prompt_differs: pairs.filter((p) => p.paired_by === 'id' && p.same_prompt === false).length,
      unreadable_a: a.summary.unreadableRecords,
      unreadable_b: b.summary.unreadableRecords,
      new_error_kinds: newKinds(kindsOf(a, isError), kindsOf(b, isError)),
      new_finding_kinds: newKinds(
        kindsOf(a, () => true),
        kindsOf(b, () => true),
      ),
      steps: stepKeys.map((step) => {
        const s = steps.get(step)!;
        return { step, ...count(s.pairs, s.onlyA, s.onlyB) };
      }),
    },
  };
}

export const FAIL_ON = ['new-errors', 'new-findings', 'never'] as const;
export type FailOn = (typeof FAIL_ON)[number];

/** `diff-runs --fail-on`: 1 when b has a kind of finding (errors only for `new-errors`) a has none of, else 0. */
export function diffExitStatus(d: DiffRuns, failOn: FailOn): number {
  if (failOn === 'never') return 0;
  const kinds = failOn === 'new-errors' ? d.summary.new_error_kinds : d.summary.new_finding_kinds;
  return kinds.length > 0 ? 1 : 0;
}
