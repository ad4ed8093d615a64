// The overview's list query over the run index: each filter field of the one schema
// (list-fields.ts, api.ts `ListFilter`) as one test, each sort key as one ordering, the facets of
// what the filter selects, and the answer cached per query and index version (the app pages
// through one query, and polls while a run is written).
import { packedHasToken } from '../../analysis/index-facts.ts';
import { matchesFilter, parseFilter } from '../../report/filter.ts';
import type {
  FindingCounts,
  ListFacets,
  ListFilter,
  ListQuery,
  SortKey,
  TrajectoryList,
  TrajectorySummary,
} from '../api.ts';
import { LIST_FILTER_FIELDS, LIST_ORDER_FIELDS, type ListFilterField } from '../list-fields.ts';
import { inRatioBin } from '../views-logprobs.ts';
import { addCounts, type Entry, type RunIndex } from './run-index.ts';

type Test = (e: Entry) => boolean;

/**
 * One test per filter field, built once per query from the field's value (the compiler asks for
 * a test when a field is added to the schema). A bad `where` throws its FilterError here: the API
 * answers 400 with its offset.
 */
const FILTER_TESTS: { [K in ListFilterField]-?: (value: NonNullable<ListFilter[K]>, index: RunIndex) => Test } = {
  kind: (kind) => (e) => (e.summary.findings.kind[kind] ?? 0) > 0,
  cause: (cause) => (e) => (e.summary.findings.cause[cause] ?? 0) > 0,
  severity: (severity) => (e) => (e.summary.findings.severity[severity] ?? 0) > 0,
  status: (status) => (e) => e.summary.health === status || e.summary.status === status,
  ratioBin: (bin) => (e) => inRatioBin(e.summary, bin),
  step: (step) => (e) => e.summary.step === step,
  group: (group) => (e) => e.summary.group === group,
  export: (verdict) => (e) => e.summary.rejects.length > 0 === (verdict === 'rejected'),
  where: (where, index) => {
    const node = parseFilter(where);
    return (e) => matchesFilter(node, index.filterSubject(e));
  },
  q: (q) => {
    const needle = q.toLowerCase();
    const tokenId = /^\d+$/.test(q) ? Number(q) : undefined;
    return (e) => {
      const s = e.summary;
      if (`${s.id} ${s.source.file} ${s.headline ?? ''}`.toLowerCase().includes(needle)) return true;
      return tokenId !== undefined && packedHasToken(e.tokenSet, tokenId);
    };
  },
};

/** The tests a filter asks for (empty and blank values ask for nothing). */
function testsOf(filter: ListFilter, index: RunIndex): Test[] {
  const tests: Test[] = [];
  for (const field of LIST_FILTER_FIELDS) {
    const raw = filter[field];
    const value = typeof raw === 'string' ? raw.trim() : raw;
    if (value === undefined || value === '') continue;
    tests.push((FILTER_TESTS[field] as (v: unknown, i: RunIndex) => Test)(value, index));
  }
  return tests;
}

const HEALTH_RANK = { ok: 0, warning: 1, error: 2 } as const;

/** Findings of a summary, counted once per counts object (a sort compares each summary many times). */
const findingTotals = new WeakMap<FindingCounts, number>();
function findingTotal(counts: FindingCounts): number {
  let n = findingTotals.get(counts);
  if (n === undefined) {
    n = 0;
    for (const k in counts.kind) n += counts.kind[k]!;
    findingTotals.set(counts, n);
  }
  return n;
}

/**
 * Each sort key's order: a number (computed once per row; null sorts last in either direction) or
 * a text. `group` is the grouped order the store computes from the index.
 */
type Order = { number: (s: TrajectorySummary) => number | null } | { text: (s: TrajectorySummary) => string } | 'group';

const SORT_ORDERS: Readonly<Record<SortKey, Order>> = {
  // Health first, then the number of findings (far below 2^32).
  findings: { number: (s) => HEALTH_RANK[s.health] * 2 ** 32 + findingTotal(s.findings) },
  id: { text: (s) => s.id },
  step: { number: (s) => s.step },
  group: 'group',
  sample: { number: (s) => s.sample },
  reward: { number: (s) => s.reward },
  advantage: { number: (s) => s.advantage },
  response: { number: (s) => s.responseTokens },
  tokens: { number: (s) => s.tokens },
  turns: { number: (s) => s.turns },
  images: { number: (s) => s.images },
  status: { text: (s) => s.status ?? s.finishReason ?? '' },
  format: { text: (s) => s.format },
  file: { text: (s) => `${s.source.file}\u0000${String(s.source.line).padStart(12, '0')}` },
};

const collator = new Intl.Collator(undefined, { numeric: true });

/** `items` ordered by `order` (ties, and equal keys, in their given order: paging is deterministic). */
function sortRows(items: TrajectorySummary[], order: Exclude<Order, 'group'>, dir: 1 | -1): TrajectorySummary[] {
  const at = Array.from({ length: items.length }, (_, i) => i);
  if ('number' in order) {
    const keys = new Float64Array(items.length);
    const missing = new Uint8Array(items.length);
    for (let i = 0; i < items.length; i++) {
      const v = order.number(items[i]!);
      if (v === null || !Number.isFinite(v)) missing[i] = 1;
      else keys[i] = v;
    }
    at.sort((i, j) => missing[i]! - missing[j]! || (keys[i]! < keys[j]! ? -dir : keys[i]! > keys[j]! ? dir : i - j));
  } else {
    const keys = items.map(order.text);
    at.sort((i, j) => dir * collator.compare(keys[i]!, keys[j]!) || i - j);
  }
  return at.map((i) => items[i]!);
}

/** Groups by their first sample, load order within a group; the ungrouped after them. */
function groupedRows(index: RunIndex, matches: TrajectorySummary[]): TrajectorySummary[] {
  const rank = new Map<string, number>();
  for (const key of index.groupMembers.keys()) rank.set(key, rank.size);
  const at = new Map(index.order.map((id, i) => [id, i]));
  const groupRank = (s: TrajectorySummary) => {
    const key = index.entries.get(s.id)!.groupKey;
    return key === undefined ? rank.size : rank.get(key)!;
  };
  return matches.sort((a, b) => groupRank(a) - groupRank(b) || at.get(a.id)! - at.get(b.id)!);
}

export function facetsOf(rows: readonly TrajectorySummary[]): ListFacets {
  const counts: FindingCounts = { kind: {}, cause: {}, severity: {} };
  const health = { ok: 0, warning: 0, error: 0 };
  const exp: ListFacets['export'] = { exported: 0, rejected: 0, byFirstReason: {}, onlyWarnings: 0, repaired: {} };
  for (const s of rows) {
    addCounts(counts, health, s);
    const first = s.rejects[0];
    if (first === undefined) {
      exp.exported++;
      for (const k of s.repaired) exp.repaired[k] = (exp.repaired[k] ?? 0) + 1;
    } else {
      exp.rejected++;
      exp.byFirstReason[first] = (exp.byFirstReason[first] ?? 0) + 1;
      if (s.rejects.every((r) => r === 'warning')) exp.onlyWarnings++;
    }
  }
  return { counts, health, export: exp };
}

/** The list query of one run index, its last answer cached. */
export class ListQueries {
  private last: { key: string; rows: TrajectorySummary[]; facets: ListFacets } | undefined;

  constructor(private readonly index: RunIndex) {}

  /** Every trajectory `filter` selects, in load order. */
  select(filter: ListFilter): TrajectorySummary[] {
    const tests = testsOf(filter, this.index);
    const out: TrajectorySummary[] = [];
    for (const id of this.index.order) {
      const e = this.index.entries.get(id)!;
      if (tests.every((t) => t(e))) out.push(e.summary);
    }
    return out;
  }

  list(query: ListQuery): TrajectoryList {
    const key = JSON.stringify([
      this.index.version,
      ...LIST_FILTER_FIELDS.map((f) => query[f]),
      ...LIST_ORDER_FIELDS.map((f) => query[f]),
    ]);
    if (this.last?.key !== key) {
      const selected = this.select(query);
      const order = SORT_ORDERS[query.sort];
      const rows =
        order === 'group'
          ? groupedRows(this.index, selected)
          : sortRows(selected, order, query.order === 'asc' ? 1 : -1);
      this.last = { key, rows, facets: facetsOf(rows) };
    }
    const { rows, facets } = this.last;
    return {
      total: rows.length,
      offset: query.offset,
      items: rows.slice(query.offset, query.offset + query.limit),
      facets,
    };
  }
}
