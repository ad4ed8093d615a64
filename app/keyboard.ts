// Keyboard on a trajectory page: j/k next/previous trajectory (in the overview's order), n next
// finding, Esc back to the run. One listener for the app's lifetime that reads the address and
// the stores at key time, so keys pressed right after a navigation act on where the user is,
// not on what React last rendered.
import type { FindingTarget } from '../server/http/api.ts';
import { formatHash, parseHash } from './stores/route.ts';
import { useRun } from './stores/run.ts';
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
export const PLACE_PARAMS = ['token', 'side', 'stream', 'turn', 'a', 'b', 'dturn', 'image'] as const;

/** Set a trajectory page's params to show finding `index` (shared with clicks in the findings panel). */
export function findingParams(index: number): Record<string, string> | undefined {
  const f = useTrajectory.getState().detail?.findings[index];
  if (!f) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...targetParams(f.target), finding: index, image: f.image }))
    if (v !== undefined) out[k] = String(v);
  return out;
}

function mergeParams(
  params: Record<string, string>,
  changes: Record<string, string | undefined>,
  drop: readonly string[],
): Record<string, string> {
  const next = { ...params };
  for (const k of drop) delete next[k];
  for (const [k, v] of Object.entries(changes)) if (v !== undefined) next[k] = v;
  return next;
}

export function installKeyboard(): void {
  window.addEventListener('keydown', (e) => {
    if (
      e.target instanceof HTMLInputElement ||
      e.target instanceof HTMLSelectElement ||
      e.target instanceof HTMLTextAreaElement
    )
      return;
    if (e.metaKey || e.ctrlKey || e.altKey) return;
    const route = parseHash(window.location.hash);
    if (route.page !== 'trajectory' || route.id === null) return;
    const items = useRun.getState().items;
    const i = items.findIndex((s) => s.id === route.id);
    const go = (id: string | undefined) => {
      if (id !== undefined) window.location.hash = formatHash({ page: 'trajectory', id, params: { view: 'stream' } });
    };
    // Sorted by group (the grouped overview), j/k stay within the group and J/K jump between groups.
    const byGroup = useRun.getState().query?.sort === 'group';
    const groupOf = (s: (typeof items)[number] | undefined) =>
      s ? `${s.step ?? ''}\u0000${s.group ?? ''}` : undefined;
    const here = groupOf(items[i]);
    const sameGroup = (id: (typeof items)[number] | undefined) =>
      !byGroup || groupOf(id) === here ? id?.id : undefined;
    if (e.key === 'j') go(i >= 0 ? sameGroup(items[i + 1]) : items[0]?.id);
    else if (e.key === 'k') go(i > 0 ? sameGroup(items[i - 1]) : undefined);
    else if (e.key === 'J') go(items.slice(i + 1).find((s) => groupOf(s) !== here)?.id);
    else if (e.key === 'K') {
      // The first sample of the previous group.
      let at = i - 1;
      while (at >= 0 && groupOf(items[at]) === here) at--;
      const prev = groupOf(items[at]);
      while (at > 0 && groupOf(items[at - 1]) === prev) at--;
      go(at >= 0 ? items[at]?.id : undefined);
    } else if (e.key === 'n') {
      const detail = useTrajectory.getState().detail;
      if (!detail || detail.summary.id !== route.id || detail.findings.length === 0) return;
      const cur = route.params.finding === undefined ? -1 : Number(route.params.finding);
      const next = (cur + 1) % detail.findings.length;
      const params = findingParams(next);
      if (params)
        window.location.hash = formatHash({
          ...route,
          params: mergeParams(route.params, params, PLACE_PARAMS),
        });
    } else if (e.key === 'Escape') window.location.hash = '#/';
  });
}
