// Caches of the work the samples of a run share (a GRPO group's prompt images, generated text that
// comes back at a later step), bounded by the bytes their entries hold and emptied least recently
// used first. Each thread (the main thread, each analysis worker) has its own: they hold plain
// values, never shared state. A cache may only skip work whose result is a function of its key, so
// a run gives the same report with it as without (test/shared-cache.test.ts); what each one keys
// by is documented in bench/README.md ("The shared-work caches").

/** MB the shared caches of one thread may hold, in all: `ROLLSCOPE_SHARED_CACHE_MB` (0 turns them off). */
export const SHARED_CACHE_ENV = 'ROLLSCOPE_SHARED_CACHE_MB';
const DEFAULT_SHARED_CACHE_MB = 48;
/** A plain decimal number (an exponent allowed), so `0x10`, `Infinity` and `12MB` are not taken for sizes. */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

/**
 * A bound that is no size. A typo in a pipeline's environment must not quietly turn the caches off:
 * the CLI reports it (exit status 2) before any work.
 */
export class SharedCacheSettingError extends Error {}

/** The MB `stated` asks for: unset or blank is the default; anything but a finite number >= 0 throws. */
export function parseSharedCacheMb(stated: string | undefined): number {
  if (stated === undefined || stated.trim() === '') return DEFAULT_SHARED_CACHE_MB;
  const mb = DECIMAL.test(stated.trim()) ? Number(stated) : Number.NaN;
  if (!Number.isFinite(mb) || mb < 0)
    throw new SharedCacheSettingError(
      `${SHARED_CACHE_ENV}=${JSON.stringify(stated)} is not a cache size: it takes a number of MB >= 0 ` +
        `(0 turns the shared-work caches off; unset or empty: ${DEFAULT_SHARED_CACHE_MB})`,
    );
  return mb;
}

/**
 * The byte bound of the shared caches of this thread; 0 when they are off. The CLI checks the
 * variable before any analysis starts (cli/main.ts), so under it a worker never throws here; a
 * caller that skips the check gets an `analysis_failed` finding naming the variable, never a
 * quiet change of speed.
 */
export function sharedCacheBytes(): number {
  const mb = parseSharedCacheMb(process.env[SHARED_CACHE_ENV]);
  return mb > 0 ? Math.floor(mb * 1024 * 1024) : 0;
}

/** A map bounded by the bytes its entries are said to hold, least recently used out first. */
export class ByteLru<K, V> {
  private readonly entries = new Map<K, { value: V; bytes: number }>();
  private held = 0;
  /** Lookups answered and not (what the tests and a hit-rate measurement read). */
  hits = 0;
  misses = 0;

  constructor(readonly maxBytes: number) {}

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  get bytes(): number {
    return this.held;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value under `key`, when there is one and `accept` (the check of a hash key's hit) takes it. */
  get(key: K, accept?: (value: V) => boolean): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || (accept !== undefined && !accept(entry.value))) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    // Map keeps insertion order: moving the entry to the end makes the first one the least recent.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /** Keep `value` under `key`; an entry larger than the whole bound is not kept. */
  set(key: K, value: V, bytes: number): void {
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.held -= old.bytes;
    }
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { value, bytes });
    this.held += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.held <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.held -= entry.bytes;
    }
  }

  clear(): void {
    this.entries.clear();
    this.held = 0;
  }
}

/** A 32-bit hash of `ids[start, end)` (murmur-style mixing): a cache key, always checked against the ids themselves. */
export function hashIds(ids: ArrayLike<number>, start = 0, end = ids.length): number {
  let h = 0x9747b28c ^ (end - start);
  for (let i = start; i < end; i++) {
    let k = Math.imul(ids[i]! | 0, 0xcc9e2d51);
    k = Math.imul((k << 15) | (k >>> 17), 0x1b873593);
    h ^= k;
    h = Math.imul((h << 13) | (h >>> 19), 5) + 0xe6546b64;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h | 0;
}

/** Whether `a` holds exactly the values of `ids[start, end)`. */
export function sameIds(a: ArrayLike<number>, ids: ArrayLike<number>, start: number, end: number): boolean {
  if (a.length !== end - start) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== ids[start + i]) return false;
  return true;
}
