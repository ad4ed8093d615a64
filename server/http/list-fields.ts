// The fields of the overview's list query, as data: the filter fields (what selects trajectories)
// and the view fields (how the selection is ordered and shown). The zod schema of the query
// (api.ts `ListFilter`, `ListQuery`) is built over exactly these names (the compiler checks it),
// and the store, the export request and the app read the names from here, so a filter field
// cannot be known to one of them and missing from another. Imports nothing: the app runs it as is.

/** What selects trajectories: every one of these narrows the list, the export of "the current filter", the chips. */
export const LIST_FILTER_FIELDS = [
  'kind',
  'cause',
  'severity',
  'status',
  'q',
  'ratioBin',
  'step',
  'group',
  'where',
  'export',
] as const;
export type ListFilterField = (typeof LIST_FILTER_FIELDS)[number];

/** How the list is ordered (they change no count): sort key and direction. */
export const LIST_ORDER_FIELDS = ['sort', 'order'] as const;
export type ListOrderField = (typeof LIST_ORDER_FIELDS)[number];

/**
 * `group` (grouped): GRPO groups in the order their first sample was read, each group's samples in
 * read order (ungrouped last). Every other key orders by that column of the run table.
 */
export const SORT_KEYS = [
  'findings',
  'id',
  'step',
  'group',
  'sample',
  'reward',
  'advantage',
  'response',
  'tokens',
  'turns',
  'images',
  'status',
  'format',
  'file',
] as const;
export type SortKeyName = (typeof SORT_KEYS)[number];

/** The list's default order: the worst first. */
export const DEFAULT_SORT: SortKeyName = 'findings';
