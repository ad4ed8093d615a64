// The other run of `serve A --against B`: the diff of the two runs (fetched once, again while the
// runs are being checked) and the pairs opened at token level, by pair and stream.
import { create } from 'zustand';
import type { AgainstPair, AgainstRun } from '../../server/http/api.ts';
import { api } from '../api.ts';

const pairKey = (a: string, b: string, stream?: string, turn?: number) => JSON.stringify([a, b, stream, turn]);

interface AgainstState {
  run: AgainstRun | null;
  pairs: Record<string, AgainstPair>;
  error: string | null;
  loadRun(): Promise<void>;
  loadPair(a: string, b: string, stream?: string, turn?: number): Promise<void>;
}

export const useAgainst = create<AgainstState>((set, get) => ({
  run: null,
  pairs: {},
  error: null,
  async loadRun() {
    try {
      set({ run: await api.againstRun(), error: null });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
  async loadPair(a, b, stream, turn) {
    const key = pairKey(a, b, stream, turn);
    if (get().pairs[key]) return;
    try {
      const pair = await api.againstPair(a, b, stream, turn);
      set({ pairs: { ...get().pairs, [key]: pair }, error: null });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
}));

export const useAgainstRun = () => useAgainst((s) => s.run);
export const useAgainstError = () => useAgainst((s) => s.error);
export const useLoadAgainstRun = () => useAgainst((s) => s.loadRun);
export const useLoadAgainstPair = () => useAgainst((s) => s.loadPair);
export const useAgainstPair = (a: string, b: string, stream?: string, turn?: number) =>
  useAgainst((s) => s.pairs[pairKey(a, b, stream, turn)]);
