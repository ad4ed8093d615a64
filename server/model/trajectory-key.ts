// A trajectory's id across rollscope: `check --json`, the server's API and the browser's URL,
// and an exported row all name a trajectory by the same key (docs/check-json.md, "Trajectory
// ids"). The key is the id the data states; when an earlier trajectory of the same run (the
// same file for an importer, the same set of paths for a run) already has that id, it is
// `ID#2`, `ID#3`, … (the first free number), in the order the run is read.

/** Between a stated id and the number that tells its duplicates apart. */
export const DUPLICATE_MARK = '#';

/** Hands out names unique among those it gave: `base`, then `base#2`, `base#3`, … skipping any taken. */
export function uniqueIds(): (base: string) => string {
  const taken = new Set<string>();
  const next = new Map<string, number>();
  return (base) => {
    if (!taken.has(base)) {
      taken.add(base);
      return base;
    }
    let n = next.get(base) ?? 2;
    while (taken.has(`${base}${DUPLICATE_MARK}${n}`)) n++;
    next.set(base, n + 1);
    const id = `${base}${DUPLICATE_MARK}${n}`;
    taken.add(id);
    return id;
  };
}

/** What identifies one trajectory of a run before it has a key: where it was read, and the id it states. */
export interface KeySource {
  id: string;
  source: { file: string; line: number };
}

/** A key given for a stated id (kept as such when the key is not the id itself, or a line had several ids). */
interface Given {
  stated: string;
  key: string;
}

/**
 * The keys of one run. Asking again for a trajectory read from the same file and line with the
 * same stated id gives the same key, so a file read twice (the server re-reads growing files)
 * keeps its keys. A run remembers one entry per trajectory to its end, so each is small: by file,
 * then line, the key alone when it is the stated id (the usual case), else the stated id beside it.
 */
export class TrajectoryKeys {
  private readonly unique = uniqueIds();
  private readonly byFile = new Map<string, Map<number, string | Given[]>>();

  /** The trajectory's key, given now if it has none yet. */
  keyOf(t: KeySource): string {
    const known = this.peek(t);
    if (known !== undefined) return known;
    const key = this.unique(t.id);
    let lines = this.byFile.get(t.source.file);
    if (!lines) {
      lines = new Map();
      this.byFile.set(t.source.file, lines);
    }
    // A line read again with another stated id (a rewritten file) keeps the keys of both.
    const e = lines.get(t.source.line);
    const given = { stated: t.id, key };
    if (e === undefined) lines.set(t.source.line, key === t.id ? key : [given]);
    else if (typeof e === 'string') lines.set(t.source.line, [{ stated: e, key: e }, given]);
    else e.push(given);
    return key;
  }

  /** The trajectory's key if it was given one, without giving one. */
  peek(t: KeySource): string | undefined {
    const e = this.byFile.get(t.source.file)?.get(t.source.line);
    if (typeof e === 'string') return e === t.id ? e : undefined;
    return e?.find((g) => g.stated === t.id)?.key;
  }
}
