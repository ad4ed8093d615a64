// The run: its summary (files, counts per finding kind) and the list the overview shows, as the
// address states it (app/list-state.ts): its rows in order and what the filter selects counted.
// A filter the server refuses keeps the last good list on screen, with the error beside it.
import { create } from 'zustand';
import type { ListFacets, ListQueryInput, RunInfo, TrajectorySummary } from '../../server/http/api.ts';
import { api, ApiFailure } from '../api.ts';

interface RunState {
  info: RunInfo | null;
  items: TrajectorySummary[];
  total: number;
  facets: ListFacets | null;
  /** The query `items` answers (so j/k walk the list the user sees); null before the first list. */
  query: ListQueryInput | null;
  /** Whether the last list asked for is the one shown (false while it loads, and after a refused filter). */
  current: boolean;
  error: string | null;
  /** The list query's `where` does not parse: the server's message and the character at fault. */
  whereError: { where: string; message: string; offset: number } | null;
  loadInfo(): Promise<void>;
  loadList(q: ListQueryInput): Promise<void>;
  /** Resolves once the list of `q` is the one held (loading it if needed): what a key acts on. */
  ensureList(q: ListQueryInput): Promise<void>;
}

let inflight: { key: string; ctrl: AbortController; done: Promise<void> } | null = null;
const FIRST_PAGE = 500;
const PAGE = 10_000;

const keyOf = (q: ListQueryInput) => JSON.stringify(q);

/** `fresh` in the order of `shown` for the rows both hold (updated), then the new rows in their order. */
function keepPlaces(shown: readonly TrajectorySummary[], fresh: readonly TrajectorySummary[]): TrajectorySummary[] {
  const byId = new Map(fresh.map((s) => [s.id, s]));
  const kept = shown.flatMap((s) => {
    const now = byId.get(s.id);
    return now ? [now] : [];
  });
  const seen = new Set(kept.map((s) => s.id));
  return kept.concat(fresh.filter((s) => !seen.has(s.id)));
}

export const useRun = create<RunState>((set, get) => ({
  info: null,
  items: [],
  total: 0,
  facets: null,
  query: null,
  current: false,
  error: null,
  whereError: null,
  async loadInfo() {
    try {
      set({ info: await api.run(), error: null });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
  loadList(q) {
    inflight?.ctrl.abort();
    const ctrl = new AbortController();
    const key = keyOf(q);
    const done = (async () => {
      // The same query again (the run grew): rows already shown keep their places, new ones follow.
      const same = get().query !== null && keyOf(get().query!) === key;
      if (!same) set({ current: false });
      try {
        // The first page paints at once; the rest follows in pages so 100k rows never block the view.
        let offset = 0;
        let items: TrajectorySummary[] = [];
        for (;;) {
          const list = await api.list({ ...q, offset, limit: offset === 0 ? FIRST_PAGE : PAGE }, ctrl.signal);
          items = offset === 0 ? list.items : items.concat(list.items);
          offset += list.items.length;
          const last = offset >= list.total || list.items.length === 0;
          if (last || !same)
            set({
              items: same ? keepPlaces(get().items, items) : items,
              total: list.total,
              facets: list.facets,
              query: q,
              current: last,
              error: null,
              whereError: null,
            });
          if (last) break;
        }
      } catch (e) {
        if ((e as Error).name === 'AbortError') return;
        // A filter that does not parse: the last good list stays, the expression's error beside it.
        if (e instanceof ApiFailure && e.status === 400 && e.offset !== undefined && q.where !== undefined)
          set({
            current: false,
            error: null,
            whereError: { where: String(q.where), message: e.message, offset: e.offset },
          });
        else set({ error: (e as Error).message });
      }
    })();
    inflight = { key, ctrl, done };
    return done.finally(() => {
      if (inflight?.done === done) inflight = null;
    });
  },
  async ensureList(q) {
    const key = keyOf(q);
    if (get().query && keyOf(get().query!) === key && get().current) return;
    if (inflight?.key === key) return inflight.done;
    return get().loadList(q);
  },
}));

// Narrow hooks: a component re-renders only when the part it shows changes.

export const useRunInfo = () => useRun((s) => s.info);
/** Whether the server is still checking files. */
export const useRunLoading = () => useRun((s) => s.info?.loading ?? false);
/** The trajectories of the list the overview shows, in its order. */
export const useRunItems = () => useRun((s) => s.items);
export const useRunTotal = () => useRun((s) => s.total);
export const useRunFacets = () => useRun((s) => s.facets);
export const useRunError = () => useRun((s) => s.error);
export const useWhereError = () => useRun((s) => s.whereError);
/** The query the list answers (null before the first list). */
export const useRunQuery = () => useRun((s) => s.query);
export const useListCurrent = () => useRun((s) => s.current);
export const useLoadInfo = () => useRun((s) => s.loadInfo);
export const useLoadList = () => useRun((s) => s.loadList);
