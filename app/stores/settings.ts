// View preferences that are not part of the address: how tokens are coloured, which pad runs are open.
import { create } from 'zustand';

interface SettingsState {
  colorBy: 'mask' | 'logprob';
  setColorBy(c: 'mask' | 'logprob'): void;
  /** Pad runs shown token by token (by their first pad index). */
  expanded: Record<number, boolean>;
  toggleExpanded(padStart: number, open?: boolean): void;
  resetExpanded(): void;
}

export const useSettings = create<SettingsState>((set, get) => ({
  colorBy: 'mask',
  setColorBy: (colorBy) => set({ colorBy }),
  expanded: {},
  toggleExpanded: (padStart, open) => set({ expanded: { ...get().expanded, [padStart]: open ?? !get().expanded[padStart] } }),
  resetExpanded: () => set({ expanded: {} }),
}));
