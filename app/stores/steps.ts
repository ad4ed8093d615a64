// The run as steps and GRPO groups: the per-step aggregates and the group verdicts the server
// computes (/api/run/steps, /api/run/groups). Reloaded when the run grows.
import { create } from 'zustand';
import type { GroupInfo, RunSteps } from '../../server/http/api.ts';
import { api } from '../api.ts';

interface StepsState {
  steps: RunSteps | null;
  /** Group verdicts by group key (`step\0id`), for the grouped overview's headers. */
  groups: ReadonlyMap<string, GroupInfo>;
  error: string | null;
  loadSteps(): Promise<void>;
  loadGroups(step?: number): Promise<void>;
}

let lastStepsText = '';

export const useSteps = create<StepsState>((set) => ({
  steps: null,
  groups: new Map(),
  error: null,
  async loadSteps() {
    try {
      const steps = await api.steps();
      // The page polls: an unchanged answer keeps its object, so no chart is drawn again for it.
      const text = JSON.stringify(steps);
      if (text === lastStepsText) return set({ error: null });
      lastStepsText = text;
      set({ steps, error: null });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
  async loadGroups(step) {
    try {
      const groups = new Map<string, GroupInfo>();
      for (let offset = 0; ; ) {
        const page = await api.groups({ step, offset, limit: 5000, members: 'false' });
        for (const g of page.items) groups.set(g.key, g);
        offset += page.items.length;
        if (offset >= page.total || page.items.length === 0) break;
      }
      set({ groups, error: null });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
}));

/** The key the server gives a group (server/analysis/groups.ts groupKey). */
export const groupKeyOf = (step: number | null, group: string) => `${step ?? ''}\u0000${group}`;

// Narrow hooks: a component re-renders only when the part it shows changes.
export const useRunSteps = () => useSteps((s) => s.steps);
export const useGroupInfos = () => useSteps((s) => s.groups);
export const useStepsError = () => useSteps((s) => s.error);
export const useLoadSteps = () => useSteps((s) => s.loadSteps);
export const useLoadGroups = () => useSteps((s) => s.loadGroups);
