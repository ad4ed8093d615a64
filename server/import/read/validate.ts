// Records checked against their zod schemas: zod issues become ReadErrors with dotted field paths,
// and the parse is bounded so that a hostile record cannot exhaust memory with issues.
import type { ZodError, ZodType } from 'zod';
import type { ReadError } from '../../model/trajectory.ts';
import { DEFAULT_LIMITS } from './limits.ts';

/** zod issues as ReadErrors: one per issue, field path in dotted form (`turns.1.generatedIds.3`). */
export function zodErrors(file: string, line: number, error: ZodError, fieldPrefix = ''): ReadError[] {
  return error.issues.slice(0, 5).map((issue) => {
    const field = [fieldPrefix, ...issue.path.map(String)].filter(Boolean).join('.');
    return { file, line, field, message: `${field || 'record'}: ${issue.message}` };
  });
}

/** Entries in arrays long enough to matter; below this zod's issue list stays small. */
const BULK_ARRAY = 1024;
const FULL_REPORT_ENTRIES = 50_000;

function bulkEntries(value: unknown, depthLimit: number): number {
  let total = 0;
  const stack: { v: unknown; d: number }[] = [{ v: value, d: 0 }];
  while (stack.length > 0) {
    const { v, d } = stack.pop()!;
    if (typeof v !== 'object' || v === null || d > depthLimit) continue;
    const children = Array.isArray(v) ? v : Object.values(v);
    if (Array.isArray(v) && v.length > BULK_ARRAY) total += v.length;
    for (const c of children) if (typeof c === 'object' && c !== null) stack.push({ v: c, d: d + 1 });
  }
  return total;
}

// --- Fast path for long arrays of numbers --------------------------------------------------------
// A record holds ~10k token ids, mask values and logprobs; zod validates each entry with a schema
// run, a payload object and an output array. Here an array schema whose entries are plain
// numbers checks a long array in one loop instead, with the verdict for each distinct value
// remembered (token ids repeat: image pads, common words). The loop only ever accepts: any entry
// that is not a number or that the entry schema refuses sends the whole array back to zod's own
// parse, so errors, their messages and their paths are exactly zod's. An accepted array is the
// output as it is (zod would copy it; the entries are the same numbers).

/** Arrays shorter than this go through zod as before. */
const FAST_ARRAY = 64;
/** Distinct values remembered per entry schema before the memo starts over. */
const VERDICTS_MAX = 65_536;

interface ZodInternals {
  def: Record<string, unknown> & { type: string };
  parse: (
    payload: { value: unknown; issues: unknown[] },
    ctx?: { direction?: string; abortEarly?: boolean },
  ) => unknown;
  run: ZodInternals['parse'];
}
const internals = (schema: unknown): ZodInternals => (schema as { _zod: ZodInternals })._zod;

/**
 * Entry schemas whose verdict on a number depends on the number alone: numbers, NaN, literals,
 * other primitives (a number never reaches them), unions and transforms of them.
 */
function numberPure(schema: unknown, seen = new Set<unknown>()): boolean {
  if (seen.has(schema)) return false;
  seen.add(schema);
  const def = internals(schema).def;
  switch (def.type) {
    case 'number':
      return !def.coerce;
    case 'unknown':
    case 'any':
    case 'nan':
    case 'literal':
    case 'boolean':
    case 'string':
    case 'null':
    case 'enum':
      return true;
    // A refinement of the value alone (`z.custom((v) => v === Infinity || v === -Infinity)`): its verdict on a number is a property of the number.
    case 'custom':
      return true;
    case 'union':
      return (def.options as unknown[]).every((o) => numberPure(o, seen));
    case 'pipe':
      return numberPure(def.in, seen) && (internals(def.out).def.type === 'transform' || numberPure(def.out, seen));
    default:
      return false;
  }
}

/** Entry schemas that take every finite number as it is (`z.number()` without checks, or a union with one). */
function acceptsAnyFinite(schema: unknown): boolean {
  const def = internals(schema).def;
  if (def.type === 'number') return !def.coerce && !(def.checks as unknown[] | undefined)?.length;
  // The lenient value lists (import/turns-from-mask.ts) take every entry as it is, then transform.
  if (def.type === 'unknown' || def.type === 'any') return true;
  if (def.type === 'union') return (def.options as unknown[]).some(acceptsAnyFinite);
  return false;
}

function fastArrayParse(array: unknown, element: unknown): void {
  const zod = internals(array);
  const slow = zod.parse;
  const anyFinite = acceptsAnyFinite(element);
  const verdicts = new Map<number, boolean>();
  const accepts = (x: number): boolean => {
    const known = verdicts.get(x);
    if (known !== undefined) return known;
    const r = (element as ZodType).safeParse(x);
    // Only an entry that comes out as it went in may skip zod (a transform that changes numbers may not).
    const ok = r.success && Object.is(r.data, x);
    if (!Object.is(x, -0)) {
      if (verdicts.size >= VERDICTS_MAX) verdicts.clear();
      verdicts.set(x, ok);
    }
    return ok;
  };
  const fast: ZodInternals['parse'] = (payload, ctx) => {
    const input = payload.value;
    if (!Array.isArray(input) || input.length < FAST_ARRAY || ctx?.direction === 'backward') return slow(payload, ctx);
    let last = Number.NaN;
    for (let i = 0; i < input.length; i++) {
      const x: unknown = input[i];
      if (typeof x !== 'number') return slow(payload, ctx);
      if (x === last || (anyFinite && Number.isFinite(x))) continue;
      if (!accepts(x)) return slow(payload, ctx);
      last = x;
    }
    return payload;
  };
  if (zod.run === slow) zod.run = fast;
  zod.parse = fast;
}

const accelerated = new WeakSet<object>();

/** Give every array-of-numbers schema reachable from `schema` the fast path (once per schema). */
function accelerate(schema: unknown): void {
  const stack = [schema];
  while (stack.length > 0) {
    const s = stack.pop();
    if (typeof s !== 'object' || s === null || accelerated.has(s) || !('_zod' in s)) continue;
    accelerated.add(s);
    const def = internals(s).def;
    if (def.type === 'array' && numberPure(def.element)) fastArrayParse(s, def.element);
    for (const key of ['innerType', 'element', 'in', 'out', 'valueType', 'keyType', 'left', 'right'])
      if (def[key]) stack.push(def[key]);
    for (const key of ['options', 'items']) if (Array.isArray(def[key])) stack.push(...(def[key] as unknown[]));
    if (def.type === 'object') stack.push(...Object.values(def.shape as Record<string, unknown>));
    if (def.type === 'lazy') stack.push((def.getter as () => unknown)());
  }
}

/**
 * zod safeParse that a hostile record cannot turn into a crash: zod collects one issue per bad
 * array entry and spreads them into the parent's list, so 200 k wrong-typed token ids throw
 * RangeError and 10 M exhaust the heap. Records with large arrays are validated with zod's
 * abort-early mode (the first issue of each container; zod uses it for `z.validate`), the rest
 * with the full issue list.
 */
export function safeParseBounded<T>(
  schema: ZodType<T>,
  value: unknown,
): { success: true; data: T } | { success: false; error: ZodError } {
  accelerate(schema);
  // `abortEarly` is honoured by zod's parser (core/schemas.js) but not part of its public types.
  const abortEarly = { abortEarly: true } as unknown as Parameters<ZodType<T>['safeParse']>[1];
  // Abort-early mode only changes which issues are collected: a record it accepts is accepted, with
  // the same output, in full mode too. So the common case pays one pass and no size walk; only a
  // record that fails and is small enough is parsed again for the full issue list.
  const first = schema.safeParse(value, abortEarly);
  if (first.success) return { success: true, data: first.data };
  if (bulkEntries(value, DEFAULT_LIMITS.maxDepth) > FULL_REPORT_ENTRIES) return { success: false, error: first.error };
  const r = schema.safeParse(value);
  return r.success ? { success: true, data: r.data } : { success: false, error: r.error };
}

/** Validate one record against a zod schema: the value, or ReadErrors naming line and field. */
export function validateRecord<T>(
  schema: ZodType<T>,
  value: unknown,
  file: string,
  line: number,
  fieldPrefix = '',
): { data: T } | { errors: ReadError[] } {
  const r = safeParseBounded(schema, value);
  return r.success ? { data: r.data } : { errors: zodErrors(file, line, r.error, fieldPrefix) };
}
