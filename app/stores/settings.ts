// View state that is not part of the address: which pad runs are open.
import { create } from 'zustand';

interface SettingsState {
  /** Pad runs shown token by token (by their first pad index). */
  expanded: Record<number, boolean>;
  toggleExpanded(padStart: number, open?: boolean): void;
  resetExpanded(): void;
}

export const useSettings = create<SettingsState>((set, get) => ({
  expanded: {},
  toggleExpanded: (padStart, open) =>
    set({ expanded: { ...get().expanded, [padStart]: open ?? !get().expanded[padStart] } }),
  resetExpanded: () => set({ expanded: {} }),
}));

// Narrow hooks: a component re-renders only when the part it shows changes.

/** Pad runs shown token by token, by their first pad index. */
export const useExpandedRuns = () => useSettings((s) => s.expanded);
export const useToggleExpanded = () => useSettings((s) => s.toggleExpanded);
export const useResetExpanded = () => useSettings((s) => s.resetExpanded);
