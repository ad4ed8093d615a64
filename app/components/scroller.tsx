// A Virtuoso scroller that takes no keyboard focus of its own, for lists whose wrapper is the
// focusable listbox (the token streams): the wrapper's arrow keys move the selection and the list
// scrolls to it. Virtuoso's own scroller is focusable, which a listbox may not hold (axe-core
// aria-required-children: a listbox owns options, not another focus stop).
import { forwardRef } from 'react';
import type { ScrollerProps } from 'react-virtuoso';

export const ListboxScroller = forwardRef<HTMLDivElement, ScrollerProps>(function ListboxScroller(
  { tabIndex: _focusable, ...props },
  ref,
) {
  return <div {...props} ref={ref} />;
});
