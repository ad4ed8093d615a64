// The run: its summary (files, counts per finding kind) and the current page of the trajectory list.
import { create } from 'zustand';
import type { ListQueryInput, RunInfo, TrajectorySummary } from '../../server/http/api.ts';
import { api, ApiFailure } from '../api.ts';

interface RunState {
  info: RunInfo | null;
  items: TrajectorySummary[];
  total: number;
  /** The query `items` answers (so j/k walk the list the user sees). */
  query: ListQueryInput | null;
  error: string | null;
  /** The list query's `where` does not parse: the server's message and the character at fault. */
  whereError: { where: string; message: string; offset: number } | null;
  loadInfo(): Promise<void>;
  loadList(q: ListQueryInput): Promise<void>;
}

let inflight: AbortController | null = null;
const FIRST_PAGE = 500;
const PAGE = 10_000;

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
  query: null,
  error: null,
  whereError: null,
  async loadInfo() {
    try {
      set({ info: await api.run(), error: null });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
  async loadList(q) {
    inflight?.abort();
    const ctrl = new AbortController();
    inflight = ctrl;
    try {
      // The first page paints at once; the rest follows in pages so 100k rows never block the view.
      let offset = 0;
      let items: TrajectorySummary[] = [];
      // The same query again (the run grew): rows already shown keep their places, new ones follow.
      const shown = JSON.stringify(get().query) === JSON.stringify(q) ? get().items : null;
      for (;;) {
        const list = await api.list({ ...q, offset, limit: offset === 0 ? FIRST_PAGE : PAGE }, ctrl.signal);
        items = offset === 0 ? list.items : items.concat(list.items);
        offset += list.items.length;
        if (offset >= list.total || list.items.length === 0) break;
        if (!shown) set({ items, total: list.total, query: q, error: null, whereError: null });
      }
      set({
        items: shown ? keepPlaces(shown, items) : items,
        total: items.length,
        query: q,
        error: null,
        whereError: null,
      });
    } catch (e) {
      if ((e as Error).name === 'AbortError') return;
      if (e instanceof ApiFailure && e.status === 400 && e.offset !== undefined && q.where !== undefined)
        set({
          items: [],
          total: 0,
          query: q,
          error: null,
          whereError: { where: q.where, message: e.message, offset: e.offset },
        });
      else set({ error: (e as Error).message });
    }
  },
}));

// Narrow hooks: a component re-renders only when the part it shows changes.

export const useRunInfo = () => useRun((s) => s.info);
/** Whether the server is still checking files. */
export const useRunLoading = () => useRun((s) => s.info?.loading ?? false);
/** The trajectories of the list the overview shows, in its order. */
export const useRunItems = () => useRun((s) => s.items);
export const useRunTotal = () => useRun((s) => s.total);
export const useRunError = () => useRun((s) => s.error);
export const useWhereError = () => useRun((s) => s.whereError);
/** The query the list answers (null before the first list). */
export const useRunQuery = () => useRun((s) => s.query);
export const useLoadInfo = () => useRun((s) => s.loadInfo);
export const useLoadList = () => useRun((s) => s.loadList);
