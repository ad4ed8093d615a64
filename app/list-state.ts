// The overview's list as the address states it: the filter fields and order of the one list
// schema (server/http/list-fields.ts), plus the grouping (`by=group`). Everything that shows or
// walks "the list" reads it from here: the overview, the query the run store loads, the export of
// the current filter, j/k on a trajectory page (whose address carries the list it was opened
// from in `list=`), and Esc back to exactly that list.
import type { ListFilterInput, ListQueryInput, SortKey } from '../server/http/api.ts';
import { DEFAULT_SORT, LIST_FILTER_FIELDS, LIST_ORDER_FIELDS, SORT_KEYS } from '../server/http/list-fields.ts';
import type { Params } from './stores/route.ts';

/** The address params that make up the list (and nothing else of a page's address). */
export const LIST_PARAMS = [...LIST_FILTER_FIELDS, ...LIST_ORDER_FIELDS, 'by'] as const;
export type ListParam = (typeof LIST_PARAMS)[number];
export type ListParams = Partial<Record<ListParam, string>>;

/** The list params of an address (empty values dropped). */
export function listParamsOf(params: Params): ListParams {
  const out: ListParams = {};
  for (const k of LIST_PARAMS) if (params[k] !== undefined && params[k] !== '') out[k] = params[k];
  return out;
}

/** The filter of a list, as the list query and the export request take it (the server parses the values). */
export function filterOf(lp: ListParams): ListFilterInput {
  const out: Record<string, string> = {};
  for (const k of LIST_FILTER_FIELDS) if (lp[k] !== undefined) out[k] = lp[k];
  return out as ListFilterInput;
}

export const isGrouped = (lp: ListParams) => lp.by === 'group';

/** The sort a list asks for: the grouped list is in group order whatever its `sort` says. */
export function sortOf(lp: ListParams): { sort: SortKey; order: 'asc' | 'desc' } {
  if (isGrouped(lp)) return { sort: 'group', order: 'asc' };
  const sort = (SORT_KEYS as readonly string[]).includes(lp.sort ?? '') ? (lp.sort as SortKey) : DEFAULT_SORT;
  return { sort, order: lp.order === 'asc' ? 'asc' : 'desc' };
}

export function queryOf(lp: ListParams): ListQueryInput {
  return { ...filterOf(lp), ...sortOf(lp) };
}

/** Whether the list is narrowed by any filter. */
export const hasFilter = (lp: ListParams) => LIST_FILTER_FIELDS.some((k) => lp[k] !== undefined);

/** Every filter field removed (the order and grouping kept). */
export function withoutFilter(lp: ListParams): ListParams {
  const out = { ...lp };
  for (const k of LIST_FILTER_FIELDS) delete out[k];
  return out;
}

/** A list as one address param's value (`list=` of a trajectory page): its params in a fixed order. */
export function encodeList(lp: ListParams): string {
  const q = new URLSearchParams();
  for (const k of LIST_PARAMS) if (lp[k] !== undefined) q.set(k, lp[k]);
  return q.toString();
}

export function decodeList(text: string | undefined): ListParams {
  const out: ListParams = {};
  if (!text) return out;
  const q = new URLSearchParams(text);
  for (const k of LIST_PARAMS) {
    const v = q.get(k);
    if (v !== null && v !== '') out[k] = v;
  }
  return out;
}

/** Two lists are the same list when their queries are (the key the run store caches by). */
export const listKey = (lp: ListParams) => JSON.stringify(queryOf(lp));
