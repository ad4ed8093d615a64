// The playground: the conversation being edited, what to compare it with, and the server's
// answer (rendered text, ids, pieces, and the diff against a trajectory's stream). Kept across
// tab switches; a conversation prefilled from one trajectory is replaced by the next one's until
// the user edits it.
import { create } from 'zustand';
import { useShallow } from 'zustand/react/shallow';
import type { PlaygroundPrefill, PlaygroundResult } from '../../server/http/api.ts';
import { api, ApiFailure } from '../api.ts';

/** A stream of the trajectory to diff against (as the server prefills it). */
export type CompareTarget = PlaygroundPrefill['target'];

interface PlaygroundState {
  /**
   * Where the playground is: `free` (its own page) or a trajectory's id (its tab). Entering another
   * starts afresh: one trajectory's conversation, result or error never shows on another.
   */
  context: string | null;
  /** The model profile to render with (null: the trajectory's, or the run's). */
  profile: string | null;
  text: string;
  addGenerationPrompt: boolean;
  /** The stream of the trajectory to diff against (null: no diff). */
  target: CompareTarget | null;
  /** The stream may run on past the rendered ids (a prompt against prompt ⧺ generation). */
  prefix: boolean;
  /** Trajectory whose first turn filled `text`, while the user has not edited it. */
  prefilledFrom: string | null;
  /** Why the text could not be prefilled (the trajectory has no messages). */
  prefillNote: string | null;
  result: PlaygroundResult | null;
  /** The trajectory `result` was diffed against. */
  resultFor: string | null;
  error: string | null;
  busy: boolean;
  /** Enter a context (see `context`); `text` (from the address) replaces the conversation when given. */
  enter(context: string, text?: string): void;
  setText(text: string): void;
  set(changes: Partial<Pick<PlaygroundState, 'addGenerationPrompt' | 'target' | 'prefix' | 'profile'>>): void;
  /** Fill the text with trajectory `id`'s first-turn messages unless the user has written their own; renders them. */
  prefill(id: string, force?: boolean): Promise<void>;
  render(id: string | null): Promise<void>;
}

let inflight: AbortController | null = null;

const FRESH = {
  text: '',
  addGenerationPrompt: true,
  target: null,
  prefix: true,
  prefilledFrom: null,
  prefillNote: null,
  result: null,
  resultFor: null,
  error: null,
  busy: false,
} as const;

export const usePlayground = create<PlaygroundState>((set, get) => ({
  context: null,
  profile: null,
  text: '',
  addGenerationPrompt: true,
  target: null,
  prefix: true,
  prefilledFrom: null,
  prefillNote: null,
  result: null,
  resultFor: null,
  error: null,
  busy: false,
  enter(context, text) {
    if (get().context !== context) {
      inflight?.abort();
      set({ ...FRESH, context, profile: null });
    }
    // A conversation from the address is the user's own (not a prefill to replace).
    if (text !== undefined && text !== get().text) set({ text, prefilledFrom: null, error: null });
  },
  // An edit makes the last error stale: it is said again only if the next render fails.
  setText: (text) => set({ text, prefilledFrom: null, error: null }),
  set: (changes) => set(changes),
  async prefill(id, force = false) {
    const { text, prefilledFrom } = get();
    const own = text.trim() !== '' && prefilledFrom === null;
    if (!force && (own || prefilledFrom === id)) return;
    try {
      const p = await api.playgroundPrefill(id);
      set({
        text: p.conversation,
        addGenerationPrompt: p.addGenerationPrompt,
        target: p.target,
        prefix: true,
        prefilledFrom: id,
        prefillNote: null,
        result: null,
        error: null,
      });
      await get().render(id);
    } catch (e) {
      if (!(e instanceof ApiFailure) || e.status !== 404) return set({ error: (e as Error).message });
      // No messages to start from: leave the user's text alone, drop another trajectory's.
      set({
        prefillNote: e.message,
        ...(prefilledFrom !== null ? { text: '', prefilledFrom: null, result: null } : {}),
      });
    }
  },
  async render(id) {
    inflight?.abort();
    const ctrl = new AbortController();
    inflight = ctrl;
    const { text, addGenerationPrompt, target, prefix, profile, context } = get();
    set({ busy: true, error: null });
    try {
      const result = await api.renderConversation(
        {
          conversation: text,
          addGenerationPrompt,
          target: id && target ? { id, ...target, prefix } : null,
          ...(profile ? { profile } : {}),
        },
        ctrl.signal,
      );
      if (get().context !== context) return;
      set({ result, resultFor: id && target ? id : null, busy: false });
    } catch (e) {
      if ((e as Error).name === 'AbortError') return;
      set({ error: (e as Error).message, busy: false, result: null });
    }
  },
}));

// Narrow hooks: a component re-renders only when the part it shows changes.

/** What the playground shows: the text and its options, the answer, and how the request went. */
export const usePlaygroundView = () =>
  usePlayground(
    useShallow((s) => ({
      text: s.text,
      profile: s.profile,
      addGenerationPrompt: s.addGenerationPrompt,
      target: s.target,
      prefix: s.prefix,
      prefillNote: s.prefillNote,
      result: s.result,
      resultFor: s.resultFor,
      error: s.error,
      busy: s.busy,
    })),
  );
/** The playground's actions (stable: created once with the store). */
export const usePlaygroundActions = () =>
  usePlayground(
    useShallow((s) => ({ enter: s.enter, setText: s.setText, set: s.set, prefill: s.prefill, render: s.render })),
  );
