// The trained side of `serve --trained`: the run's pairs (fetched once, again while loading) and
// the pair of the open trajectory.
import { create } from 'zustand';
import type { ComparePair, CompareRun } from '../../server/http/api.ts';
import { api } from '../api.ts';

interface CompareState {
  run: CompareRun | null;
  pairs: Record<string, ComparePair>;
  error: string | null;
  loadRun(): Promise<void>;
  loadPair(id: string): Promise<void>;
}

export const useCompare = create<CompareState>((set, get) => ({
  run: null,
  pairs: {},
  error: null,
  async loadRun() {
    try {
      set({ run: await api.compareRun(), error: null });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
  async loadPair(id) {
    if (get().pairs[id] && !get().run?.loading) return;
    try {
      const pair = await api.comparePair(id);
      set({ pairs: { ...get().pairs, [id]: pair } });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
}));

export const useCompareRun = () => useCompare((s) => s.run);
export const useComparePair = (id: string) => useCompare((s) => s.pairs[id]);
export const useCompareError = () => useCompare((s) => s.error);
export const useLoadCompareRun = () => useCompare((s) => s.loadRun);
export const useLoadComparePair = () => useCompare((s) => s.loadPair);
