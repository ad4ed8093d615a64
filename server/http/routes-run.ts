// The run as steps and GRPO groups, read-only (the store computes the aggregates; the app draws):
//
//   GET /api/run/steps               → RunSteps (per step: counts, findings, reward/length histograms)
//   GET /api/run/groups?GroupQuery   → GroupList (groups in read order, with their members)
import { GroupList, GroupQuery, RunSteps } from './api.ts';
import type { RunStore } from './store.ts';
import { RequestError, type ApiRoutes, type RouteTools } from './request-body.ts';
import { parseQuery } from './routes-trajectories.ts';

export function runRoutes(store: RunStore, tools: RouteTools): ApiRoutes {
  return {
    async handle(req, res, url) {
      const route = url.pathname.replace(/\/+$/, '');
      if (route !== '/api/run/steps' && route !== '/api/run/groups') return false;
      if (req.method !== 'GET' && req.method !== 'HEAD')
        throw new RequestError(405, `no ${req.method} route ${url.pathname}`);
      if (route === '/api/run/steps') tools.sendJson(res, RunSteps, store.steps());
      else tools.sendJson(res, GroupList, store.groups(parseQuery(GroupQuery, url)));
      return true;
    },
    close() {},
  };
}
