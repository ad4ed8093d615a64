// The served run against another (`serve A --against B`; docs/diff-runs.md):
//
//   GET /api/against                                   → AgainstRun (the DiffRuns of A against B)
//   GET /api/against/pair?a=ID&b=ID[&stream=S&turn=K]  → AgainstPair (one pair side by side at token level)
//
// Without --against, /api/against says it is not available and the pair route answers 404.
import { AgainstPair, AgainstPairQuery, AgainstRun } from './api.ts';
import { againstPairView, type AgainstSide } from './against.ts';
import { RequestError, type ApiRoutes, type RouteTools } from './request-body.ts';
import { parseQuery } from './routes-trajectories.ts';
import type { RunStore } from './store.ts';

const NOT_AVAILABLE: AgainstRun = { available: false, loading: false, aFiles: [], bFiles: [], diff: null, error: null };

export function againstRoutes(store: RunStore, against: AgainstSide | undefined, tools: RouteTools): ApiRoutes {
  return {
    async handle(req, res, url) {
      const isRun = url.pathname === '/api/against';
      const isPair = url.pathname === '/api/against/pair';
      if (!isRun && !isPair) return false;
      if (req.method !== 'GET' && req.method !== 'HEAD')
        throw new RequestError(405, `no ${req.method} route ${url.pathname}`);
      if (isRun) {
        tools.sendJson(res, AgainstRun, against?.run() ?? NOT_AVAILABLE);
        return true;
      }
      if (!against) throw new RequestError(404, 'no other run: start serve with --against B');
      const q = parseQuery(AgainstPairQuery, url);
      if (against.run().loading) throw new RequestError(503, 'the runs are still being checked');
      const pair = against.pair(q.a, q.b);
      if (!pair) throw new RequestError(404, `"${q.a}" of A and "${q.b}" of B are no pair of the diff`);
      const a = await store.get(q.a);
      if (!a) throw new RequestError(404, `no trajectory "${q.a}" in A`);
      const b = await against.store.get(q.b);
      if (!b) throw new RequestError(404, `no trajectory "${q.b}" in B`);
      tools.sendJson(res, AgainstPair, againstPairView(pair, a, b, q));
      return true;
    },
    close() {
      against?.store.close();
    },
  };
}
