// The run: its summary (files, counts per finding kind) and the current page of the trajectory list.
import { create } from 'zustand';
import type { ListQueryInput, RunInfo, TrajectorySummary } from '../../server/http/api.ts';
import { api } from '../api.ts';

interface RunState {
  info: RunInfo | null;
  items: TrajectorySummary[];
  total: number;
  /** The query `items` answers (so j/k walk the list the user sees). */
  query: ListQueryInput | null;
  error: string | null;
  loadInfo(): Promise<void>;
  loadList(q: ListQueryInput): Promise<void>;
}

let inflight: AbortController | null = null;

export const useRun = create<RunState>((set) => ({
  info: null,
  items: [],
  total: 0,
  query: null,
  error: null,
  async loadInfo() {
    try {
      set({ info: await api.run(), error: null });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
  async loadList(q) {
    inflight?.abort();
    inflight = new AbortController();
    try {
      const list = await api.list({ ...q, limit: 100_000 }, inflight.signal);
      set({ items: list.items, total: list.total, query: q, error: null });
    } catch (e) {
      if ((e as Error).name !== 'AbortError') set({ error: (e as Error).message });
    }
  },
}));
