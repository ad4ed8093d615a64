// Where a finding is seen, as trajectory-page address params (the server says where: its target),
// shared by clicks in the findings panel, the root-cause headline and n/N.
import type { FindingTarget } from '../server/http/api.ts';
import { useTrajectory } from './stores/trajectory.ts';

/** The address params that show a finding's target (the server says where it is seen). */
export function targetParams(t: FindingTarget | null): Record<string, string | number | undefined> {
  if (!t) return {};
  const token = t.token ?? undefined;
  if (t.view === 'diff') return { view: 'diff', a: t.a, b: t.b, dturn: t.turn, side: t.side, token };
  if (t.view === 'logprobs') return { view: 'logprobs', token };
  return { view: 'stream', stream: t.stream, turn: t.stream === 'prompt' ? t.turn : undefined, token };
}

/** The params a finding's place is made of: opening another finding drops them first (a stream token is not a diff row). */
export const PLACE_PARAMS = ['token', 'side', 'stream', 'turn', 'a', 'b', 'dturn', 'image', 'finding'] as const;

/** The params that show finding `index` of the open trajectory (undefined: no such finding). */
export function findingParams(index: number): Record<string, string> | undefined {
  const f = useTrajectory.getState().detail?.findings[index];
  if (!f) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...targetParams(f.target), finding: index, image: f.image }))
    if (v !== undefined) out[k] = String(v);
  return out;
}

/**
 * The address params after opening finding `index`: its place replaces the current one; a finding
 * with no place of its own (the whole trajectory, its group) only becomes the active one, and the
 * page stays on what it shows (a stream with no mark would say nothing about it).
 */
export function paramsForFinding(params: Record<string, string>, index: number): Record<string, string> | undefined {
  const place = findingParams(index);
  if (!place) return undefined;
  const f = useTrajectory.getState().detail?.findings[index];
  if (!f?.target) return { ...params, finding: String(index) };
  const next = { ...params };
  for (const k of PLACE_PARAMS) delete next[k];
  return { ...next, ...place };
}
