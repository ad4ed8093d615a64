// A token stream's rows, as the stream view draws them (pure: no React, no stores, so tests and
// bench/ can run it). Rows break after a newline, at turn boundaries, and every ROW_TOKENS tokens;
// each image's pad run is one row (thumbnail + count) until expanded, then one row per row of
// merged cells, so the rows of pads line up with the rows of the image.
import type { TokenStream, TurnMark } from '../../server/http/api.ts';

export const ROW_TOKENS = 32;

/** A value derived once per object (a stream or diff side), kept as long as the object lives. */
export function derivedOnce<K extends object, V>(derive: (key: K) => V): (key: K) => V {
  const cache = new WeakMap<K, V>();
  return (key) => {
    let value = cache.get(key);
    if (value === undefined) {
      value = derive(key);
      cache.set(key, value);
    }
    return value;
  };
}

const specialSet = derivedOnce((s: { specialIds: number[] }) => new Set(s.specialIds));
/** Whether token `i` of a stream (or diff side) is an added/special token. */
export function isSpecial(s: { ids: number[]; specialIds: number[] }, i: number): boolean {
  return specialSet(s).has(s.ids[i]!);
}

/** The visible piece of token `i`. */
export const pieceAt = (s: { ids: number[]; pieces: Record<string, string> }, i: number): string =>
  s.pieces[s.ids[i]!] ?? '';

type Join = TokenStream['joins'][number];
type WithJoins = { ids: number[]; pieces: Record<string, string>; joins?: Join[] };

const joinMap = derivedOnce((s: WithJoins) => {
  const m = new Map<number, Join>();
  for (const j of s.joins ?? []) for (let i = j.start; i < j.end; i++) m.set(i, j);
  return m;
});

/** The character token `i` holds part of, when byte-level BPE split it across tokens (the server's `joins`). */
export const joinAt = (s: WithJoins, i: number): Join | undefined => joinMap(s).get(i);

/** Shown on the chips after the first of a split character: the character is drawn on the first. */
export const JOIN_CONTINUATION = '⁀';

/** What token `i`'s chip shows: its piece, or for a split character the character on the first chip. */
export function shownPiece(s: WithJoins, i: number): string {
  const j = joinAt(s, i);
  if (!j) return pieceAt(s, i);
  return i === j.start ? j.text : JOIN_CONTINUATION;
}

/** Class of a chip in a split character (first, middle or last of its tokens). */
export function joinClass(s: WithJoins, i: number): string {
  const j = joinAt(s, i);
  if (!j) return '';
  return i === j.start ? ' join join-first' : i === j.end - 1 ? ' join join-last' : ' join join-mid';
}

/** The hover text of a chip in a split character: which tokens hold it, and this token's raw bytes. */
export function joinTitle(s: WithJoins, i: number): string {
  const j = joinAt(s, i);
  if (!j) return '';
  return `\nbytes ${pieceAt(s, i)} · tokens #${j.start}–#${j.end - 1} together are “${j.text}”`;
}

export type Row =
  | { kind: 'mark'; mark: TurnMark }
  | { kind: 'tokens'; start: number; end: number }
  | { kind: 'pads'; span: number }
  | { kind: 'padrow'; span: number; start: number; end: number }
  | { kind: 'cut'; span: number };

/**
 * The rows of a stream. An expanded pad run gets one row per row of the image's merged cells
 * (the server's `cellsWide`), or rows of ROW_TOKENS pads when the image's grid is unknown.
 */
export function buildRows(
  s: Pick<TokenStream, 'ids' | 'pieces' | 'turns' | 'vision'> & { joins?: Join[] },
  expanded: Record<number, boolean>,
): Row[] {
  // Once per token, so nothing but array reads per token: a 128k-token stream arrives whole in
  // one task, and this runs in it.
  const rows: Row[] = [];
  const n = s.ids.length;
  const marks = new Map<number, TurnMark[]>();
  for (const m of s.turns) {
    const here = marks.get(m.index);
    if (here) here.push(m);
    else marks.set(m.index, [m]);
  }
  const spanAt = new Map<number, number>();
  for (const [i, v] of s.vision.entries()) spanAt.set(v.padStart, i);
  /** 1 where a mark or a pad run may start: the only places the maps are asked. */
  const starts = new Uint8Array(n + 1);
  for (const k of [...marks.keys(), ...spanAt.keys()]) if (k >= 0 && k < n) starts[k] = 1;
  /** 1 inside a character split across tokens, after its first token: it stays on one row. */
  const inJoin = new Uint8Array(n + 1);
  for (const j of s.joins ?? []) for (let i = Math.max(0, j.start + 1); i < j.end && i <= n; i++) inJoin[i] = 1;
  const endsLine = new Map<number, boolean>();
  const endsLineAt = (i: number): boolean => {
    const id = s.ids[i]!;
    let v = endsLine.get(id);
    if (v === undefined) {
      v = (s.pieces[id] ?? '').includes('⏎');
      endsLine.set(id, v);
    }
    return v;
  };
  let start = 0;
  const flush = (end: number) => {
    if (end > start) rows.push({ kind: 'tokens', start, end });
    start = end;
  };
  for (let i = 0; i < n; ) {
    if (starts[i]) {
      const m = marks.get(i);
      if (m) {
        flush(i);
        for (const mark of m) rows.push({ kind: 'mark', mark });
      }
      const si = spanAt.get(i);
      if (si !== undefined && s.vision[si]!.padLength > 0) {
        flush(i);
        const span = s.vision[si]!;
        const end = span.padStart + span.padLength;
        if (expanded[span.padStart]) {
          const w = Math.max(1, span.cellsWide ?? ROW_TOKENS);
          for (let r = span.padStart; r < end; r += w)
            rows.push({ kind: 'padrow', span: si, start: r, end: Math.min(end, r + w) });
        } else rows.push({ kind: 'pads', span: si });
        if (span.end < 0) rows.push({ kind: 'cut', span: si });
        start = end;
        i = end;
        continue;
      }
    }
    i++;
    if (!inJoin[i] && (endsLineAt(i - 1) || i - start >= ROW_TOKENS)) flush(i);
  }
  flush(n);
  return rows;
}

/** Index of the row that holds token `t`. */
export function rowOfToken(rows: readonly Row[], s: TokenStream, t: number): number {
  return rows.findIndex((r) => {
    if (r.kind === 'tokens' || r.kind === 'padrow') return t >= r.start && t < r.end;
    if (r.kind === 'pads') {
      const v = s.vision[r.span]!;
      return t >= v.padStart && t < v.padStart + v.padLength;
    }
    return false;
  });
}
