// The run and its trajectories, read-only:
//
//   GET /api/run                                   → RunInfo
//   GET /api/run/ratios?ListFilter                 → RatioHistogram (importance ratios of what the filter selects)
//   GET /api/trajectories?ListQuery                → TrajectoryList
//   GET /api/trajectories/ID                       → TrajectoryDetail
//   GET /api/trajectories/ID/stream?StreamQuery    → TokenStream
//   GET /api/trajectories/ID/diff?DiffQuery        → DiffResult
//   GET /api/trajectories/ID/logprobs              → LogprobView (rollout against trainer logprobs)
//   GET /api/trajectories/ID/messages              → Conversation (the conversation as the engine saw it)
//   GET /api/trajectories/ID/images/K              → ImageInfo
//   GET /api/trajectories/ID/images/K/preview?w=W  → PNG, resized with sharp
//   GET /api/trajectories/ID/share                 → the trajectory as one self-contained HTML file
//
// A view of one trajectory is one entry of TRAJECTORY_VIEWS: its path after the id, the schemas
// of its query and its response (api.ts), and the function of views.ts that computes it.
// Errors are thrown (RequestError, views' NotFound, ImageUnavailable) and answered by the server.
import type http from 'node:http';
import { z } from 'zod';
import {
  Conversation,
  DiffQuery,
  DiffResult,
  ImageInfo,
  ListFilter,
  ListQuery,
  LogprobView,
  PreviewQuery,
  RatioHistogram,
  RunInfo,
  StreamQuery,
  TokenStream,
  TrajectoryDetail,
  TrajectoryList,
  type TrajectorySummary,
} from './api.ts';
import type { RunStore } from './store.ts';
import { RequestError, type ApiRoutes, type RouteTools } from './request-body.ts';
import { imageInfos, tokenDiff, tokenStream, trajectoryDetail, withGroupFindings } from './views.ts';
import { previewPng } from './preview.ts';
import { APP_DIR, AppNotBuilt, shareFileName, shareHtml, sharedTrajectory } from './share-page.ts';
import { logprobView, ratioHistogram } from './views-logprobs.ts';
import { conversation } from './views-messages.ts';
import type { CheckedTrajectory, RunOptions } from '../pipeline.ts';

/** What a view of one trajectory is computed from. */
export interface ViewRequest {
  summary: TrajectorySummary;
  checked: CheckedTrajectory;
  opts: RunOptions;
  store: RunStore;
  url: URL;
  /** The numbers the path's `:n` segments matched, in order. */
  args: number[];
  /** Folder of the built app (inlined into shared pages). */
  appDir: string;
}

export interface TrajectoryView {
  /** Path segments after `/api/trajectories/ID`; `:n` matches a non-negative integer. */
  path: readonly string[];
  answer(view: ViewRequest, res: http.ServerResponse, tools: RouteTools): Promise<void>;
}

/** Parse the URL's query with `schema` (empty values count as absent); a 400 names the bad field. */
export function parseQuery<S extends z.ZodType>(schema: S, url: URL): z.output<S> {
  const raw: Record<string, string> = {};
  for (const [k, v] of url.searchParams) if (v !== '') raw[k] = v;
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    throw new RequestError(
      400,
      `bad query: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'query'}: ${i.message}`).join('; ')}`,
    );
  return parsed.data;
}

const NoQuery = z.object({});

/** A view answered with JSON: the query parsed with `query`, the result validated with `response`. */
export function jsonView<Q extends z.ZodType, R extends z.ZodType>(
  viewPath: readonly string[],
  query: Q,
  response: R,
  compute: (view: ViewRequest, query: z.output<Q>) => z.input<R> | Promise<z.input<R>>,
): TrajectoryView {
  return {
    path: viewPath,
    async answer(view, res, tools) {
      tools.sendJson(res, response, await compute(view, parseQuery(query, view.url)));
    },
  };
}

function imageInfo(view: ViewRequest): ImageInfo {
  const k = view.args[0]!;
  const info = imageInfos(view.checked, view.opts)[k];
  if (!info) throw new RequestError(404, `trajectory "${view.summary.id}" has no image ${k}`);
  return info;
}

const imagePreview: TrajectoryView = {
  path: ['images', ':n', 'preview'],
  async answer(view, res, tools) {
    const { w } = parseQuery(PreviewQuery, view.url);
    const png = await previewPng(view.checked.trajectory, imageInfo(view).index, w, view.store.roots());
    res.writeHead(200, { 'Content-Type': 'image/png', 'Cache-Control': 'private, max-age=3600', ...tools.headers });
    res.end(png);
  },
};

/** The trajectory as one self-contained HTML file (server/http/share-page.ts), the same bytes `rollscope share` writes. */
const sharePageView: TrajectoryView = {
  path: ['share'],
  async answer(view, res, tools) {
    parseQuery(NoQuery, view.url);
    let html: Buffer;
    try {
      html = Buffer.from(shareHtml(await sharedTrajectory(view.store, view.summary.id), view.appDir));
    } catch (e) {
      if (e instanceof AppNotBuilt) throw new RequestError(503, e.message);
      throw e;
    }
    res.writeHead(200, {
      ...tools.headers,
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Disposition': `attachment; filename="${shareFileName(view.summary.id)}"`,
      'Cache-Control': 'no-store',
    });
    res.end(html);
  },
};

/** Every view of one trajectory; the first whose path matches answers. */
export const TRAJECTORY_VIEWS: readonly TrajectoryView[] = [
  jsonView([], NoQuery, TrajectoryDetail, (v) =>
    withGroupFindings(trajectoryDetail(v.summary, v.checked, v.opts), v.store.groupFindings(v.summary.id)),
  ),
  jsonView(['stream'], StreamQuery, TokenStream, (v, q) => tokenStream(v.checked, q.name, q.turn, v.opts, q.head)),
  jsonView(['diff'], DiffQuery, DiffResult, (v, q) => tokenDiff(v.checked, q)),
  jsonView(['logprobs'], NoQuery, LogprobView, (v) => logprobView(v.checked, v.opts)),
  jsonView(['messages'], NoQuery, Conversation, (v) => conversation(v.checked, v.opts)),
  jsonView(['images', ':n'], NoQuery, ImageInfo, imageInfo),
  imagePreview,
  sharePageView,
];

/** The `:n` numbers when `parts` matches `pattern`, else undefined. */
function matchPath(pattern: readonly string[], parts: readonly string[]): number[] | undefined {
  if (pattern.length !== parts.length) return undefined;
  const args: number[] = [];
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === ':n') {
      if (!/^\d{1,9}$/.test(parts[i]!)) return undefined;
      args.push(Number(parts[i]));
    } else if (pattern[i] !== parts[i]) return undefined;
  }
  return args;
}

export function trajectoryRoutes(store: RunStore, tools: RouteTools, appDir = APP_DIR): ApiRoutes {
  async function answerView(id: string, rest: readonly string[], url: URL, res: http.ServerResponse) {
    let view: TrajectoryView | undefined;
    let args: number[] | undefined;
    for (const v of TRAJECTORY_VIEWS) {
      args = matchPath(v.path, rest);
      if (args) {
        view = v;
        break;
      }
    }
    if (!view || !args) throw new RequestError(404, `no API route ${url.pathname}`);
    const summary = store.summary(id);
    if (!summary) throw new RequestError(404, `no trajectory with id "${id}"`);
    const checked = await store.get(id);
    if (!checked) throw new RequestError(404, `trajectory "${id}" is no longer in ${summary.source.file}`);
    await view.answer({ summary, checked, opts: store.options(), store, url, args, appDir }, res, tools);
  }

  return {
    async handle(req, res, url) {
      const parts = url.pathname
        .split('/')
        .filter(Boolean)
        .map((p) => decodeURIComponent(p));
      const runRatios = parts[1] === 'run' && parts[2] === 'ratios' && parts.length === 3;
      const mine =
        parts[0] === 'api' && (parts[1] === 'trajectories' || (parts[1] === 'run' && parts.length === 2) || runRatios);
      if (!mine) return false;
      if (req.method !== 'GET' && req.method !== 'HEAD')
        throw new RequestError(405, `no ${req.method} route ${url.pathname}`);
      if (runRatios) {
        // The trajectories the overview's filter selects, but for the ratio bin it may have picked
        // (the histogram keeps every bar, the picked one marked).
        const { ratioBin: _, ...filter } = parseQuery(ListFilter, url);
        tools.sendJson(res, RatioHistogram, ratioHistogram(store.select(filter), store.options()));
      } else if (parts[1] === 'run') tools.sendJson(res, RunInfo, store.info());
      else if (parts.length === 2) tools.sendJson(res, TrajectoryList, store.list(parseQuery(ListQuery, url)));
      else await answerView(parts[2]!, parts.slice(3), url, res);
      return true;
    },
    close() {},
  };
}
