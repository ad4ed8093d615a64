// The URL is the state of record: `#/` is the run overview (with its filters), and
// `#/t/<id>?view=stream&stream=canonical&turn=-1&token=470` addresses one token of one
// trajectory, so a link in a bug report (or a reload) opens exactly that token.
import { create } from 'zustand';

export type Params = Record<string, string>;

export interface Route {
  page: 'overview' | 'trajectory' | 'playground' | 'compare' | 'run' | 'against';
  id: string | null;
  params: Params;
}

export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#/, '') || '/';
  const [pathPart = '/', queryPart = ''] = raw.split('?', 2) as [string, string?];
  const params: Params = {};
  for (const [k, v] of new URLSearchParams(queryPart ?? '')) params[k] = v;
  const m = /^\/t\/(.+)$/.exec(pathPart);
  if (m) return { page: 'trajectory', id: decodeURIComponent(m[1]!), params };
  if (pathPart === '/playground') return { page: 'playground', id: null, params };
  if (pathPart === '/compare') return { page: 'compare', id: null, params };
  if (pathPart === '/run') return { page: 'run', id: null, params };
  if (pathPart === '/against') return { page: 'against', id: null, params };
  return { page: 'overview', id: null, params };
}

export function formatHash(route: Route): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(route.params)) if (v !== '' && v !== undefined) q.set(k, v);
  const qs = q.toString();
  const base =
    route.page === 'trajectory' && route.id !== null
      ? `#/t/${encodeURIComponent(route.id)}`
      : route.page === 'playground'
        ? '#/playground'
        : route.page === 'compare'
          ? '#/compare'
          : route.page === 'run'
            ? '#/run'
            : route.page === 'against'
              ? '#/against'
              : '#/';
  return qs ? `${base}?${qs}` : base;
}

interface RouteState extends Route {
  /** Go to a route (a new history entry). */
  go(route: Route): void;
  /** Change some params of the current route; `undefined` removes one. */
  set(params: Record<string, string | number | undefined>, replace?: boolean): void;
}

export const useRoute = create<RouteState>((setState) => ({
  ...parseHash(window.location.hash),
  go(route) {
    window.location.hash = formatHash(route);
  },
  set(changes, replace = false) {
    // From the address as it is now, not as last rendered: a navigation just made (its hashchange
    // not yet seen) is never overwritten by a param change that follows it.
    const { page, id, params } = parseHash(window.location.hash);
    const next: Params = { ...params };
    for (const [k, v] of Object.entries(changes)) {
      if (v === undefined || v === '') delete next[k];
      else next[k] = String(v);
    }
    const hash = formatHash({ page, id, params: next });
    if (replace) {
      history.replaceState(null, '', hash);
      setState(parseHash(hash));
    } else window.location.hash = hash;
  },
}));

window.addEventListener('hashchange', () => useRoute.setState(parseHash(window.location.hash)));

// Narrow hooks: a component re-renders only when the part it shows changes.

export const usePage = () => useRoute((r) => r.page);
/** The trajectory the address names (null off a trajectory page). */
export const useRouteId = () => useRoute((r) => r.id);
export const useParams = () => useRoute((r) => r.params);
/** One param of the address (undefined when absent). */
export const useParam = (name: string): string | undefined => useRoute((r) => r.params[name]);
export const useSetParams = () => useRoute((r) => r.set);
export const useGo = () => useRoute((r) => r.go);
