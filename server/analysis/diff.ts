// Token-sequence diff: Myers' O((N+M)·D) algorithm ("An O(ND) Difference Algorithm and Its
// Variations", 1986) after trimming the common prefix and suffix, so one inserted token shows
// as one insertion rather than a shifted tail. Token streams differ in a handful of places,
// so D is small; past `maxEdits` the middle is reported as one replaced block instead of
// spending quadratic time.

/** One differing region: `a[aStart, aEnd)` was replaced by `b[bStart, bEnd)` (either side may be empty). */
export interface Hunk {
  aStart: number;
  aEnd: number;
  bStart: number;
  bEnd: number;
}

export function commonPrefixLength(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export function startsWith(seq: ArrayLike<number>, prefix: ArrayLike<number>): boolean {
  return prefix.length <= seq.length && commonPrefixLength(seq, prefix) === prefix.length;
}

/**
 * Whether `seq` starts with `parts` end to end (a concatenation without building it: most
 * prompts do extend the last turn, and each copy would be a whole conversation long).
 */
export function startsWithParts(seq: ArrayLike<number>, parts: readonly ArrayLike<number>[]): boolean {
  let at = 0;
  for (const part of parts) {
    if (at + part.length > seq.length) return false;
    for (let i = 0; i < part.length; i++) if (seq[at + i] !== part[i]) return false;
    at += part.length;
  }
  return true;
}

export function diffTokens(a: readonly number[], b: readonly number[], maxEdits = 4000): Hunk[] {
  let pre = 0;
  const minLen = Math.min(a.length, b.length);
  while (pre < minLen && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < minLen - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const aMid = a.slice(pre, a.length - suf);
  const bMid = b.slice(pre, b.length - suf);
  if (aMid.length === 0 && bMid.length === 0) return [];
  if (aMid.length === 0 || bMid.length === 0) {
    return [{ aStart: pre, aEnd: pre + aMid.length, bStart: pre, bEnd: pre + bMid.length }];
  }
  const script = myers(aMid, bMid, maxEdits);
  if (!script) return [{ aStart: pre, aEnd: pre + aMid.length, bStart: pre, bEnd: pre + bMid.length }];
  return script.map((h) => ({
    aStart: h.aStart + pre,
    aEnd: h.aEnd + pre,
    bStart: h.bStart + pre,
    bEnd: h.bEnd + pre,
  }));
}

/** Forward Myers with a trace of V arrays, then backtracking into hunks. Returns null past maxEdits. */
function myers(a: readonly number[], b: readonly number[], maxEdits: number): Hunk[] | null {
  const n = a.length;
  const m = b.length;
  const max = Math.min(n + m, maxEdits);
  const offset = max + 1;
  const trace: Int32Array[] = [];
  let v = new Int32Array(2 * max + 3);
  let found = -1;
  for (let d = 0; d <= max; d++) {
    const next = v.slice();
    for (let k = -d; k <= d; k += 2) {
      let x: number;
      if (k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!)) x = v[offset + k + 1]!;
      else x = v[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      next[offset + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    trace.push(next);
    v = next;
    if (found >= 0) break;
  }
  if (found < 0) return null;

  // Backtrack: collect single-token edits from the end, then merge adjacent ones into hunks.
  const edits: { type: 'del' | 'ins'; ai: number; bi: number }[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const prev = trace[d - 1]!;
    const k = x - y;
    const down = k === -d || (k !== d && prev[offset + k - 1]! < prev[offset + k + 1]!);
    const prevK = down ? k + 1 : k - 1;
    const prevX = prev[offset + prevK]!;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
    }
    if (down) edits.push({ type: 'ins', ai: x, bi: prevY });
    else edits.push({ type: 'del', ai: prevX, bi: y });
    x = prevX;
    y = prevY;
  }
  edits.reverse();
  const hunks: Hunk[] = [];
  for (const e of edits) {
    const last = hunks[hunks.length - 1];
    const aPos = e.ai;
    const bPos = e.bi;
    if (last && last.aEnd === aPos && last.bEnd === bPos) {
      if (e.type === 'del') last.aEnd++;
      else last.bEnd++;
    } else {
      hunks.push(
        e.type === 'del'
          ? { aStart: aPos, aEnd: aPos + 1, bStart: bPos, bEnd: bPos }
          : { aStart: aPos, aEnd: aPos, bStart: bPos, bEnd: bPos + 1 },
      );
    }
  }
  return hunks;
}

/** Merge hunks separated by fewer than `gap` equal tokens (a retokenized word often diffs as two hunks). */
export function mergeNearbyHunks(hunks: readonly Hunk[], gap: number): Hunk[] {
  const out: Hunk[] = [];
  for (const h of hunks) {
    const last = out[out.length - 1];
    if (last && h.aStart - last.aEnd < gap && h.bStart - last.bEnd < gap) {
      last.aEnd = h.aEnd;
      last.bEnd = h.bEnd;
    } else out.push({ ...h });
  }
  return out;
}
