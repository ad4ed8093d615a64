// Trajectories picked in the overview (the row checkboxes), for exporting a selection. Kept
// across filter changes: picking some under one filter and more under another adds up.
import { create } from 'zustand';

interface SelectionState {
  ids: ReadonlySet<string>;
  toggle(id: string): void;
  /** Select (or unselect) all of `ids` at once ("select all shown"). */
  setMany(ids: readonly string[], on: boolean): void;
  clear(): void;
}

export const useSelection = create<SelectionState>((set, get) => ({
  ids: new Set(),
  toggle(id) {
    const next = new Set(get().ids);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    set({ ids: next });
  },
  setMany(ids, on) {
    const next = new Set(get().ids);
    for (const id of ids) {
      if (on) next.add(id);
      else next.delete(id);
    }
    set({ ids: next });
  },
  clear: () => set({ ids: new Set() }),
}));

// Narrow hooks: a component re-renders only when the part it shows changes.

/** The ticked ids (a new set on each change). */
export const usePicked = () => useSelection((s) => s.ids);
export const usePickedCount = () => useSelection((s) => s.ids.size);
export const useTogglePicked = () => useSelection((s) => s.toggle);
export const useSetPicked = () => useSelection((s) => s.setMany);
export const useClearPicked = () => useSelection((s) => s.clear);
