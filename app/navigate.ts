// Addresses of the app's pages built from the list they belong to (app/list-state.ts): a
// trajectory opened from a list carries it (`list=`), so j/k walk it and Esc returns to it.
import { encodeList, type ListParams } from './list-state.ts';
import { formatHash, type Params } from './stores/route.ts';

/** The overview showing list `lp`, with `extra` params (its cursor `sel`, its drawer `open`). */
export function overviewHash(lp: ListParams, extra: Params = {}): string {
  return formatHash({ page: 'overview', id: null, params: { ...(lp as Params), ...extra } });
}

/** Trajectory `id` opened from list `lp` (its view params in `params`). */
export function trajectoryHash(id: string, lp: ListParams, params: Params = {}): string {
  const list = encodeList(lp);
  return formatHash({ page: 'trajectory', id, params: { ...params, ...(list ? { list } : {}) } });
}
