// Which image pad is under the pointer, from either side: a pad chip in the token stream or a
// cell of the image overlay. Both views read it, so hovering one lights the other.
import { create } from 'zustand';

interface HoverState {
  image: number | null;
  /** Pad index within the image's pad run. */
  pad: number | null;
  from: 'stream' | 'image' | null;
  hover(image: number | null, pad: number | null, from: 'stream' | 'image' | null): void;
}

export const useHover = create<HoverState>((set) => ({
  image: null,
  pad: null,
  from: null,
  hover: (image, pad, from) => set({ image, pad, from }),
}));

// Narrow hooks: a component re-renders only when the part it shows changes.

/** The pad of image `image` under the pointer, from either side (-1 when none or no image). */
export const useLitPad = (image: number | undefined) =>
  useHover((h) => (image !== undefined && image >= 0 && h.image === image && h.pad !== null ? h.pad : -1));
/** Whether a cell of image `image` is under the pointer in its overlay (lights its collapsed pad run). */
export const useCellHovered = (image: number | undefined) =>
  useHover((h) => image !== undefined && image >= 0 && h.image === image && h.pad !== null && h.from === 'image');
export const useSetHover = () => useHover((h) => h.hover);
