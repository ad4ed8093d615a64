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

/**
 * The keys of one run. Asking again for a trajectory read from the same file and line with the
 * same stated id gives the same key, so a file read twice (the server re-reads growing files)
 * keeps its keys.
 */
export class TrajectoryKeys {
  private readonly unique = uniqueIds();
  private readonly bySource = new Map<string, string>();

  private static where(t: KeySource): string {
    return `${t.source.file}\u0000${t.source.line}\u0000${t.id}`;
  }

  /** The trajectory's key, given now if it has none yet. */
  keyOf(t: KeySource): string {
    const where = TrajectoryKeys.where(t);
    let key = this.bySource.get(where);
    if (key === undefined) {
      key = this.unique(t.id);
      this.bySource.set(where, key);
    }
    return key;
  }

  /** The trajectory's key if it was given one, without giving one. */
  peek(t: KeySource): string | undefined {
    return this.bySource.get(TrajectoryKeys.where(t));
  }
}
