// The open trajectory: its detail, and the streams and diffs fetched for it (kept per key so
// switching back and forth does not refetch).
import { create } from 'zustand';
import type { Conversation, DiffResult, LogprobView, TokenStream, TrajectoryDetail } from '../../server/http/api.ts';
import { api } from '../api.ts';

interface TrajectoryState {
  id: string | null;
  detail: TrajectoryDetail | null;
  streams: Record<string, TokenStream>;
  diffs: Record<string, DiffResult>;
  error: string | null;
  /** Rollout against trainer logprobs, once fetched. */
  logprobs: LogprobView | null;
  /** The conversation as the engine saw it, once fetched. */
  messages: Conversation | null;
  open(id: string): Promise<void>;
  loadMessages(): Promise<void>;
  loadLogprobs(): Promise<void>;
  /**
   * Fetch a stream (a long one head first). `speculative`: asked before the detail says which
   * streams exist (the page opens on the canonical one), so a failure is not an error.
   */
  loadStream(name: string, turn: number, speculative?: boolean): Promise<void>;
  loadDiff(a: string, b: string, turn: number): Promise<void>;
}

/**
 * A stream longer than this comes in two answers: its first HEAD_TOKENS tokens, drawn at once,
 * then the whole of it (a 128k-token stream is megabytes of JSON to compute, send and parse).
 */
export const HEAD_TOKENS = 4096;

/** Streams being fetched, by trajectory and key: a head on screen is not fetched again. */
const inFlight = new Map<string, Promise<void>>();
/** The detail being fetched. */
let opening: { id: string; done: Promise<void> } | null = null;

export const streamKey = (name: string, turn: number) => `${name}:${turn}`;
export const diffKey = (a: string, b: string, turn: number) => `${a}:${b}:${turn}`;

export const useTrajectory = create<TrajectoryState>((set, get) => ({
  id: null,
  detail: null,
  streams: {},
  diffs: {},
  error: null,
  logprobs: null,
  messages: null,
  async open(id) {
    if (get().id === id && (get().detail || get().error)) return;
    // Asked for before the first render (main.tsx) and again by the page: one request.
    if (get().id === id && opening?.id === id) return opening.done;
    set({ id, detail: null, streams: {}, diffs: {}, error: null, logprobs: null, messages: null });
    const done = (async () => {
      try {
        const detail = await api.detail(id);
        if (get().id === id) set({ detail });
      } catch (e) {
        if (get().id === id) set({ error: (e as Error).message });
      }
    })();
    opening = { id, done };
    await done;
    if (opening?.done === done) opening = null;
  },
  async loadStream(name, turn, speculative = false) {
    const id = get().id;
    if (!id) return;
    const key = streamKey(name, turn);
    const flight = `${id}\u0000${key}`;
    const running = inFlight.get(flight);
    if (running) {
      await running;
      // A guess that failed (no such stream) leaves the real request to fetch it and say why.
      if (speculative || get().id !== id || get().streams[key]) return;
    } else if (get().streams[key]) return;
    const keep = (s: TokenStream) => {
      if (get().id === id) set({ streams: { ...get().streams, [key]: s } });
    };
    const fetchIt = async () => {
      const length = get().detail?.streams.find((s) => s.name === name && s.turn === turn)?.length;
      if (length === undefined || length > 2 * HEAD_TOKENS) {
        const head = await api.stream(id, name, turn, HEAD_TOKENS);
        if (head.total === undefined || head.ids.length >= head.total) {
          // The head was the whole stream (or a shared page answered with the whole).
          const { total: _, ...whole } = head;
          return keep(whole);
        }
        keep(head);
      }
      keep(await api.stream(id, name, turn));
    };
    const p = fetchIt().catch((e: unknown) => {
      if (!speculative) set({ error: (e as Error).message });
    });
    inFlight.set(flight, p);
    try {
      await p;
    } finally {
      inFlight.delete(flight);
    }
  },
  async loadMessages() {
    const id = get().id;
    if (!id || get().messages) return;
    try {
      const messages = await api.messages(id);
      if (get().id === id) set({ messages });
    } catch (e) {
      if (get().id === id) set({ error: (e as Error).message });
    }
  },
  async loadLogprobs() {
    const id = get().id;
    if (!id || get().logprobs) return;
    try {
      const logprobs = await api.logprobs(id);
      if (get().id === id) set({ logprobs });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
  async loadDiff(a, b, turn) {
    const id = get().id;
    const key = diffKey(a, b, turn);
    if (!id || get().diffs[key]) return;
    try {
      const d = await api.diff(id, a, b, turn);
      if (get().id === id) set({ diffs: { ...get().diffs, [key]: d } });
    } catch (e) {
      set({ error: (e as Error).message });
    }
  },
}));

// Narrow hooks: a component re-renders only when the part it shows changes.

/** The open trajectory's detail (null while it loads). */
export const useDetail = () => useTrajectory((s) => s.detail);
export const useTrajectoryError = () => useTrajectory((s) => s.error);
/** One stream of the open trajectory, once fetched. */
export const useStream = (name: string, turn: number) => useTrajectory((s) => s.streams[streamKey(name, turn)]);
/** One diff of the open trajectory, once fetched. */
export const useDiff = (a: string, b: string, turn: number) => useTrajectory((s) => s.diffs[diffKey(a, b, turn)]);
export const useOpenTrajectory = () => useTrajectory((s) => s.open);
export const useLoadStream = () => useTrajectory((s) => s.loadStream);
export const useLoadDiff = () => useTrajectory((s) => s.loadDiff);
export const useLogprobs = () => useTrajectory((s) => s.logprobs);
export const useLoadLogprobs = () => useTrajectory((s) => s.loadLogprobs);
export const useMessages = () => useTrajectory((s) => s.messages);
export const useLoadMessages = () => useTrajectory((s) => s.loadMessages);
