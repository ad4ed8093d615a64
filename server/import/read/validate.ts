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
  const bulky = bulkEntries(value, DEFAULT_LIMITS.maxDepth) > FULL_REPORT_ENTRIES;
  // `abortEarly` is honoured by zod's parser (core/schemas.js) but not part of its public types.
  const ctx = bulky ? ({ abortEarly: true } as unknown as Parameters<ZodType<T>['safeParse']>[1]) : undefined;
  const r = schema.safeParse(value, ctx);
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
