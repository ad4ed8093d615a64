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
