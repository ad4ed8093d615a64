// A finding as the JSON contracts show it (`check --json`, export rejects; docs/check-json.md).
import type { Finding } from './finding.ts';

/** Findings as the JSON contract shows them (optional fields only when set, in a fixed order). */
export function publicFinding(f: Finding): Record<string, unknown> {
  const o: Record<string, unknown> = { kind: f.kind };
  if (f.cause) o.cause = f.cause;
  if (f.field) o.field = f.field;
  o.severity = f.severity;
  o.turn = f.turn;
  o.index = f.index;
  if (f.stream) o.stream = f.stream;
  if (f.image !== undefined) o.image = f.image;
  if (f.expected !== undefined) o.expected = f.expected;
  if (f.actual !== undefined) o.actual = f.actual;
  o.message = f.message;
  return o;
}
