// The rollout step of a sample, as a format states it or as the run's folder layout names it:
// verl and prime-rl write one folder per step (`step_<n>/`, `global_step_<n>/`), and a dump may
// be named after its step (`step_12.jsonl`). An importer that reads a stated step sets it; the
// folder layout fills in the rest (see docs/reference/frameworks.md).
import path from 'node:path';
import type { ImportResult } from './importer.ts';

const STEP_NAME = /^(?:global_)?step[_-]?(\d{1,9})$/i;

/** The step a path names (the component closest to the file wins), or undefined. */
export function stepFromPath(file: string): number | undefined {
  const parts = file.split(/[\\/]/).filter(Boolean);
  const last = parts.length - 1;
  if (last >= 0) parts[last] = parts[last]!.replace(/(\.[a-z0-9]+)+$/i, '');
  for (let i = last; i >= 0; i--) {
    const m = STEP_NAME.exec(parts[i]!);
    if (m) return Number(m[1]);
  }
  return undefined;
}

/** A stated step: a non-negative integer, or a string of digits (slime may keep ids as strings). */
export function stepOf(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === 'string' && /^\d{1,15}$/.test(value)) return Number(value);
  return undefined;
}

/** Trajectories without a stated step get the one their file's path names. */
export function withPathStep(result: ImportResult, file: string): ImportResult {
  const step = stepFromPath(path.normalize(file));
  if (step === undefined) return result;
  for (const t of result.trajectories) if (t.step === undefined) t.step = step;
  return result;
}
