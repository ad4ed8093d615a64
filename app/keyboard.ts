// The app's keyboard: one window listener for the app's lifetime that hands each key to the
// bindings the pages on screen registered (useKeys), the latest first, so keys act on what the
// user sees. Every list page walks its rows with one hook (useListKeys: j/k, J/K, n/N, Enter);
// `/` focuses the page's filter, `?` lists the keys of the page (KeyHelp), Esc closes what is open
// or goes back. A key typed into a field, or while a modal dialog is open, is the field's.
import { useEffect, useRef } from 'react';
import { create } from 'zustand';
import { parseHash, type Route, useRoute } from './stores/route.ts';

export interface KeyBinding {
  /** `e.key` values that trigger it (`j`, `J`, `Enter`, `Escape`, ` `). */
  keys: readonly string[];
  /** What it does, for the `?` help (omitted: not listed). */
  does?: string;
  run(e: KeyboardEvent): void;
}

/** A page's bindings and the page they were drawn for. */
type Registered = { bindings: { current: readonly KeyBinding[] }; page: { current: Route['page'] } };
const registry: Registered[] = [];

interface HelpState {
  open: boolean;
  toggle(open?: boolean): void;
}
export const useKeyHelp = create<HelpState>((set, get) => ({
  open: false,
  toggle: (open) => set({ open: open ?? !get().open }),
}));

/** The bindings on screen, the latest registered first, each key once (what `?` lists). */
export function activeBindings(): KeyBinding[] {
  const seen = new Set<string>();
  const out: KeyBinding[] = [];
  for (let i = registry.length - 1; i >= 0; i--)
    for (const b of registry[i]!.bindings.current) {
      if (!b.does || b.keys.every((k) => seen.has(k))) continue;
      for (const k of b.keys) seen.add(k);
      out.push(b);
    }
  return out;
}

/** Keys the app answers on every page. */
export const GLOBAL_KEYS: readonly { keys: string; does: string }[] = [
  { keys: '/', does: 'focus the filter' },
  { keys: '?', does: 'show or hide this help' },
];

function typing(e: KeyboardEvent): boolean {
  const t = e.target;
  return (
    t instanceof HTMLInputElement ||
    t instanceof HTMLSelectElement ||
    t instanceof HTMLTextAreaElement ||
    (t instanceof HTMLElement && t.isContentEditable)
  );
}

let installed = false;

export function installKeyboard(): void {
  if (installed) return;
  installed = true;
  window.addEventListener('keydown', (e) => {
    if (e.metaKey || e.ctrlKey || e.altKey || e.defaultPrevented) return;
    if (typing(e)) return;
    // A modal dialog (the export) keeps the keyboard to itself.
    if (document.querySelector('dialog[open]')) return;
    const help = useKeyHelp.getState();
    if (e.key === '?') {
      e.preventDefault();
      help.toggle();
      return;
    }
    if (help.open && e.key === 'Escape') {
      help.toggle(false);
      return;
    }
    if (e.key === '/') {
      const filter = document.querySelector<HTMLElement>('[data-key-filter]');
      if (filter) {
        e.preventDefault();
        filter.focus();
        if (filter instanceof HTMLInputElement) filter.select();
      }
      return;
    }
    // Keys pressed faster than the page draws: a page the address has already left (its
    // navigation not yet drawn) answers none, so j on a just-opened trajectory never moves the list;
    // the key waits for the page the address is on and acts there once it has drawn.
    const page = parseHash(window.location.hash).page;
    if (!registry.some((r) => r.page.current === page)) {
      e.preventDefault();
      waiting = [...waiting, { page, event: e }].slice(-MAX_WAITING);
      return;
    }
    if (dispatch(e, page)) e.preventDefault();
  });
}

/** Keys pressed while their page was still being drawn (at most a few: a held key repeats). */
let waiting: { page: Route['page']; event: KeyboardEvent }[] = [];
const MAX_WAITING = 8;

/** Hand `e` to the latest bindings of `page` that take its key; whether one did. */
function dispatch(e: KeyboardEvent, page: Route['page']): boolean {
  for (let i = registry.length - 1; i >= 0; i--) {
    if (registry[i]!.page.current !== page) continue;
    const b = registry[i]!.bindings.current.find((x) => x.keys.includes(e.key));
    if (b) {
      b.run(e);
      return true;
    }
  }
  return false;
}

/** Register `bindings` while the component is mounted (read at key time: they may close over fresh state). */
export function useKeys(bindings: readonly KeyBinding[]): void {
  const ref = useRef<readonly KeyBinding[]>(bindings);
  ref.current = bindings;
  const page = useRef<Route['page']>('overview');
  page.current = useRoute((r) => r.page);
  useEffect(() => {
    const entry: Registered = { bindings: ref, page };
    registry.push(entry);
    const due = waiting.filter((w) => w.page === page.current);
    waiting = waiting.filter((w) => w.page !== page.current);
    for (const w of due) dispatch(w.event, w.page);
    return () => {
      const at = registry.indexOf(entry);
      if (at >= 0) registry.splice(at, 1);
    };
  }, []);
}

export interface ListKeys<T> {
  rows: readonly T[];
  /** The row the cursor is on (-1: none yet; j then starts at the first). */
  cursor: number;
  setCursor(index: number): void;
  /** Enter: open the row. */
  open(row: T, index: number): void;
  /** What a row of "the next one to look at" is (n/N): a row with findings, a pair that changed. */
  notable?(row: T): boolean;
  /** J/K jump between blocks of rows that share this key (a GRPO group, a step). */
  blockOf?(row: T): string;
  /** j/k stay within the cursor's block (the grouped list: J/K leave it). */
  withinBlock?: boolean;
  /** Further bindings of the page (x selects, o folds, p peeks). */
  extra?: readonly KeyBinding[];
  /** Words for the rows in the help: "trajectory", "pair". */
  noun: string;
  /** What a notable row is, in the help (default "with findings"). */
  notableWords?: string;
}

/** The next index from `at` in direction `dir` whose row passes `test` (undefined: none). */
export function nextIndex<T>(rows: readonly T[], at: number, dir: 1 | -1, test: (row: T, i: number) => boolean) {
  for (let i = at + dir; i >= 0 && i < rows.length; i += dir) if (test(rows[i]!, i)) return i;
  return undefined;
}

/** The first row of the block before (dir -1) or after (dir 1) the block of row `at`. */
export function blockStart<T>(rows: readonly T[], at: number, dir: 1 | -1, blockOf: (row: T) => string) {
  const here = at >= 0 && at < rows.length ? blockOf(rows[at]!) : undefined;
  if (dir === 1) return nextIndex(rows, at, 1, (r) => blockOf(r) !== here);
  // Back to the start of this block, then to the start of the one before it.
  let i = at;
  while (i > 0 && blockOf(rows[i - 1]!) === here) i--;
  if (i <= 0) return undefined;
  const prev = blockOf(rows[i - 1]!);
  i--;
  while (i > 0 && blockOf(rows[i - 1]!) === prev) i--;
  return i;
}

/** The keys of every list page: j/k move, J/K jump blocks, n/N the next notable row, Enter opens. */
export function listBindings<T>(o: ListKeys<T>, cursor: () => number = () => o.cursor): KeyBinding[] {
  const move = (to: number | undefined) => {
    if (to === undefined || o.rows.length === 0) return;
    o.setCursor(Math.max(0, Math.min(o.rows.length - 1, to)));
  };
  const notableWords = o.notableWords ?? 'with findings';
  // No rows: nothing to walk (the page's other keys still answer).
  if (o.rows.length === 0) return [...(o.extra ?? [])];
  /** `to`, unless the list keeps j/k within a block and `to` is in another one. */
  const step = (to: number) => {
    const at = cursor();
    if (at < 0) return 0;
    const from = o.rows[at];
    const there = o.rows[to];
    if (o.withinBlock && o.blockOf && from !== undefined && there !== undefined && o.blockOf(from) !== o.blockOf(there))
      return undefined;
    return to;
  };
  const bindings: KeyBinding[] = [
    {
      keys: ['j'],
      does: o.withinBlock ? `next ${o.noun} of the group` : `next ${o.noun}`,
      run: () => move(step(cursor() + 1)),
    },
    {
      keys: ['k'],
      does: o.withinBlock ? `previous ${o.noun} of the group` : `previous ${o.noun}`,
      run: () => move(step(cursor() - 1)),
    },
    {
      keys: ['Enter'],
      does: `open the ${o.noun}`,
      run: () => {
        const at = cursor();
        const row = o.rows[at];
        if (row !== undefined) o.open(row, at);
      },
    },
  ];
  if (o.blockOf) {
    const blockOf = o.blockOf;
    bindings.push(
      { keys: ['J'], does: 'first of the next group', run: () => move(blockStart(o.rows, cursor(), 1, blockOf)) },
      { keys: ['K'], does: 'first of the previous group', run: () => move(blockStart(o.rows, cursor(), -1, blockOf)) },
    );
  }
  if (o.notable) {
    const notable = o.notable;
    bindings.push(
      { keys: ['n'], does: `next ${o.noun} ${notableWords}`, run: () => move(nextIndex(o.rows, cursor(), 1, notable)) },
      {
        keys: ['N'],
        does: `previous ${o.noun} ${notableWords}`,
        run: () => move(nextIndex(o.rows, cursor(), -1, notable)),
      },
    );
  }
  return [...bindings, ...(o.extra ?? [])];
}

/**
 * Register the list keys of a page (see listBindings). The cursor is read from a ref that a move
 * sets at once: keys can arrive faster than React renders the moved cursor.
 */
export function useListKeys<T>(o: ListKeys<T>): void {
  const cursor = useRef(o.cursor);
  const rendered = useRef(o.cursor);
  // A cursor set from outside (a click, the address) wins over the last key's.
  if (rendered.current !== o.cursor) {
    rendered.current = o.cursor;
    cursor.current = o.cursor;
  }
  const setCursor = (i: number) => {
    cursor.current = i;
    o.setCursor(i);
  };
  useKeys(listBindings({ ...o, setCursor }, () => cursor.current));
}
