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
