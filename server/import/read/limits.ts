// The limits on untrusted input. Trajectory files are written by crashing jobs and by code under
// test (docs/security.md): every limit here is checked while streaming or before JSON.parse
// allocates, so a hostile line costs bounded memory and time and never takes the other records of
// the file with it.

export interface ReadLimits {
  /** Longest JSONL line; longer ones are skipped without being held in memory. */
  maxLineBytes: number;
  /** Largest whole-file JSON document (`[...]` or a pretty-printed object). */
  maxDocumentBytes: number;
  /** Deepest nesting of arrays/objects in one record. */
  maxDepth: number;
  /** Most entries in one JSON array. */
  maxArrayEntries: number;
  /** gzip input: decompressed bytes allowed per compressed byte... */
  maxGzipRatio: number;
  /** ...but never fewer than this many (tiny files of repeated records compress very well). */
  minGzipAllowance: number;
}

const DEFAULT_MAX_LINE_BYTES = 128 * 1024 * 1024;

export const DEFAULT_LIMITS: ReadLimits = {
  // A screenshot-heavy agent trajectory with inline base64 images stays under this; 4× it is the
  // peak memory of reading one line (chunks, the joined buffer, the string, the parsed value).
  maxLineBytes: DEFAULT_MAX_LINE_BYTES,
  // V8 cannot make a string longer than ~512 M characters; half of that leaves room to parse.
  maxDocumentBytes: 256 * 1024 * 1024,
  // Real records nest < 20 levels, and Python's json.dumps stops near 1000 (its recursion limit).
  // 256 keeps every recursive consumer downstream (JSON.parse's reviver, zod, structuredClone
  // to the analysis workers, JSON.stringify, the app's JSON view) far from the stack limit.
  maxDepth: 256,
  // The longest Qwen-VL context is 1 M tokens (Qwen3-VL with YaRN); 4 M entries leaves room for
  // flattened 3-row mRoPE position ids. More is not a rollout, and a list of millions of
  // wrong-typed entries would become millions of zod issues (out of memory).
  maxArrayEntries: 4 * 1024 * 1024,
  // JSONL compresses 3–20× with gzip; deflate's ceiling is ~1032× (all zeros), i.e. a bomb.
  maxGzipRatio: 200,
  minGzipAllowance: 64 * 1024 * 1024,
};

/** The defaults with the given overrides (an `undefined` override keeps the default). */
export function readLimits(overrides: Partial<ReadLimits> = {}): ReadLimits {
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  return { ...DEFAULT_LIMITS, ...defined };
}
