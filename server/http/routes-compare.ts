// The run against its trained side (`serve ROLLOUT --trained TRAINED`):
//
//   GET /api/compare                                                → CompareRun
//   GET /api/trajectories/ID/compare                                → ComparePair
//   GET /api/trajectories/ID/compare/images/K/preview?side=trained  → PNG of the trained side's image K
//
// Without --trained, /api/compare says it is not available and the pair routes answer 404.
import { CompareRun, ComparePair, ComparePreviewQuery } from './api.ts';
import { RequestError, type ApiRoutes, type RouteTools } from './request-body.ts';
import { previewPng } from './preview.ts';
import { parseQuery } from './routes-trajectories.ts';
import type { RunStore } from './store.ts';
import type { TrainedSide } from './trained-side.ts';
import { comparePairView } from './views-compare.ts';

const NOT_AVAILABLE: CompareRun = {
  available: false,
  loading: false,
  trainedFiles: [],
  pairs: [],
  unmatched: { rollout: [], trained: [] },
  errors: [],
};

export function compareRoutes(store: RunStore, trained: TrainedSide | undefined, tools: RouteTools): ApiRoutes {
  return {
    async handle(req, res, url) {
      const parts = url.pathname
        .split('/')
        .filter(Boolean)
        .map((p) => decodeURIComponent(p));
      const isRun = parts[0] === 'api' && parts[1] === 'compare' && parts.length === 2;
      const isPair = parts[0] === 'api' && parts[1] === 'trajectories' && parts[3] === 'compare';
      if (!isRun && !isPair) return false;
      if (req.method !== 'GET' && req.method !== 'HEAD')
        throw new RequestError(405, `no ${req.method} route ${url.pathname}`);
      if (isRun) {
        tools.sendJson(res, CompareRun, trained?.run() ?? NOT_AVAILABLE);
        return true;
      }
      if (!trained) throw new RequestError(404, 'no trained side: start serve with --trained TRAINED');
      const id = parts[2]!;
      if (!store.summary(id)) throw new RequestError(404, `no trajectory with id "${id}"`);
      const checked = await store.get(id);
      if (!checked) throw new RequestError(404, `trajectory "${id}" is no longer in its file`);
      const rest = parts.slice(4);
      if (rest.length === 0) {
        tools.sendJson(
          res,
          ComparePair,
          comparePairView(id, checked, trained.pairOf(checked.trajectory.id), trained.run().loading),
        );
        return true;
      }
      if (rest.length === 3 && rest[0] === 'images' && /^\d{1,9}$/.test(rest[1]!) && rest[2] === 'preview') {
        const q = parseQuery(ComparePreviewQuery, url);
        const traj =
          q.side === 'rollout' ? checked.trajectory : trained.pairOf(checked.trajectory.id)?.trained.trajectory;
        if (!traj) throw new RequestError(404, `no trained trajectory joins "${id}"`);
        const png = await previewPng(
          traj,
          Number(rest[1]),
          q.w,
          q.side === 'rollout' ? store.roots() : trained.roots(),
        );
        res.writeHead(200, { 'Content-Type': 'image/png', 'Cache-Control': 'private, max-age=3600', ...tools.headers });
        res.end(png);
        return true;
      }
      throw new RequestError(404, `no API route ${url.pathname}`);
    },
    close() {},
  };
}
