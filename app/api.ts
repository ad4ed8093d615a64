// The app's one data interface, with two transports: typed fetches of the server's API, or (in a
// page written by `rollscope share`) answers from the JSON the page embeds, computed by the same
// server views. Components never fetch on their own. The shapes come from server/http/api.ts as
// types only: the server validates them with zod; the browser bundle carries no schema code.
import type {
  AgainstPair,
  AgainstRun,
  ApiError,
  ComparePair,
  Conversation,
  CompareRun,
  DiffResult,
  ExportJob,
  ExportRequestInput,
  ListFilterInput,
  ListQueryInput,
  LogprobView,
  RatioHistogram,
  PlaygroundPrefill,
  PlaygroundRequestInput,
  PlaygroundResult,
  RunInfo,
  SharedTrajectory,
  GroupList,
  GroupQueryInput,
  RunSteps,
  TokenStream,
  TrajectoryDetail,
  TrajectoryList,
} from '../server/http/api.ts';

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** For a `where` that does not parse: the 0-based character at fault (docs/filter.md). */
    readonly offset?: number,
  ) {
    super(message);
  }
}

async function getJson<T>(url: string, signal?: AbortSignal, init: RequestInit = {}): Promise<T> {
  const res = await fetch(url, { ...init, signal });
  const body = (await res.json().catch(() => ({ error: `${res.status} ${res.statusText}` }))) as T | ApiError;
  if (!res.ok) {
    const e = body as Partial<ApiError>;
    throw new ApiFailure(res.status, e.error ?? `${res.status}`, e.offset);
  }
  return body as T;
}

/** State-changing requests: a JSON body (the server's request gate refuses anything else). */
const postJson = <T>(url: string, body: unknown, signal?: AbortSignal) =>
  getJson<T>(url, signal, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });

const enc = encodeURIComponent;

function search(params: Record<string, string | number | undefined | null>): string {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') s.set(k, String(v));
  const text = s.toString();
  return text ? `?${text}` : '';
}

export interface Api {
  /** `http`: a server answers (everything works); `static`: a shared page (read-only, one trajectory). */
  transport: 'http' | 'static';
  /** When the shared page was written (null when a server answers). */
  sharedAt: string | null;
  run(): Promise<RunInfo>;
  list(q: ListQueryInput, signal?: AbortSignal): Promise<TrajectoryList>;
  /** Per-step aggregates and the run's GRPO groups (`#/run`, the grouped overview). */
  steps(): Promise<RunSteps>;
  groups(q: GroupQueryInput): Promise<GroupList>;
  detail(id: string): Promise<TrajectoryDetail>;
  /** With `head`, only the first screen of it (`total` says how long the whole is); a shared page holds whole streams. */
  stream(id: string, name: string, turn: number, head?: number): Promise<TokenStream>;
  diff(id: string, a: string, b: string, turn: number): Promise<DiffResult>;
  previewUrl(id: string, k: number, w: number): string;
  /** Where the trajectory's shared page downloads from (null: this is one). */
  shareUrl(id: string): string | null;
  /** Rollout against trainer logprobs of one trajectory, and the run's importance-ratio histogram. */
  logprobs(id: string): Promise<LogprobView>;
  /** The conversation as the engine saw it (the Messages view). */
  messages(id: string): Promise<Conversation>;
  /** The importance ratios of what a list filter selects (its own `ratioBin` aside). */
  ratios(filter?: ListFilterInput): Promise<RatioHistogram>;
  /** `serve ROLLOUT --trained TRAINED`: every pair, and one trajectory's pair. */
  compareRun(): Promise<CompareRun>;
  comparePair(id: string): Promise<ComparePair>;
  /** `serve A --against B`: the diff of the two runs, and one pair at token level. */
  againstRun(): Promise<AgainstRun>;
  againstPair(a: string, b: string, stream?: string, turn?: number): Promise<AgainstPair>;
  startExport(request: ExportRequestInput): Promise<ExportJob>;
  exportJob(job: string): Promise<ExportJob>;
  cancelExport(job: string): Promise<ExportJob>;
  renderConversation(request: PlaygroundRequestInput, signal?: AbortSignal): Promise<PlaygroundResult>;
  playgroundPrefill(id: string): Promise<PlaygroundPrefill>;
}

export const httpApi: Api = {
  transport: 'http',
  sharedAt: null,
  run: () => getJson<RunInfo>('/api/run'),
  steps: () => getJson<RunSteps>('/api/run/steps'),
  groups: (q) => getJson<GroupList>(`/api/run/groups${search(q as Record<string, string | number | undefined>)}`),
  list: (q, signal) =>
    getJson<TrajectoryList>(`/api/trajectories${search(q as Record<string, string | number | undefined>)}`, signal),
  detail: (id) => getJson<TrajectoryDetail>(`/api/trajectories/${enc(id)}`),
  stream: (id, name, turn, head) =>
    getJson<TokenStream>(`/api/trajectories/${enc(id)}/stream${search({ name, turn, head })}`),
  diff: (id, a, b, turn) => getJson<DiffResult>(`/api/trajectories/${enc(id)}/diff${search({ a, b, turn })}`),
  previewUrl: (id, k, w) => `/api/trajectories/${enc(id)}/images/${k}/preview?w=${w}`,
  shareUrl: (id) => `/api/trajectories/${enc(id)}/share`,
  logprobs: (id) => getJson<LogprobView>(`/api/trajectories/${enc(id)}/logprobs`),
  messages: (id) => getJson<Conversation>(`/api/trajectories/${enc(id)}/messages`),
  compareRun: () => getJson<CompareRun>('/api/compare'),
  comparePair: (id) => getJson<ComparePair>(`/api/trajectories/${enc(id)}/compare`),
  againstRun: () => getJson<AgainstRun>('/api/against'),
  againstPair: (a, b, stream, turn) => getJson<AgainstPair>(`/api/against/pair${search({ a, b, stream, turn })}`),
  ratios: (filter = {}) =>
    getJson<RatioHistogram>(`/api/run/ratios${search(filter as Record<string, string | number | undefined>)}`),
  startExport: (request) => postJson<ExportJob>('/api/exports', request),
  exportJob: (job) => getJson<ExportJob>(`/api/exports/${enc(job)}`),
  cancelExport: (job) => postJson<ExportJob>(`/api/exports/${enc(job)}/cancel`, {}),
  renderConversation: (request, signal) => postJson<PlaygroundResult>('/api/playground/render', request, signal),
  playgroundPrefill: (id) => getJson<PlaygroundPrefill>(`/api/playground/conversation${search({ id })}`),
};

/** The answers a shared page embeds; anything else needs the server (404, or 501 for what only a server does). */
export function staticApi(data: SharedTrajectory): Api {
  /** `value` of trajectory `id`, when the page holds both. */
  const held = async <T>(id: string, value: T | undefined, what: string): Promise<T> => {
    if (id !== data.id) throw new ApiFailure(404, `this shared page holds trajectory "${data.id}" only, not "${id}"`);
    if (value === undefined) throw new ApiFailure(404, `${what} is not in this shared page`);
    return value;
  };
  const needsServer = async (what: string): Promise<never> => {
    throw new ApiFailure(501, `${what} needs \`rollscope serve\`; this is a shared page`);
  };
  return {
    transport: 'static',
    sharedAt: data.createdAt,
    run: async () => data.run,
    // The one trajectory the page holds: a shared page offers no filter (app/components/SharedPage.tsx).
    list: async (q) => (Number(q.offset ?? 0) > 0 ? { ...data.list, offset: Number(q.offset), items: [] } : data.list),
    detail: (id) => held(id, data.detail, 'the trajectory'),
    stream: (id, name, turn) => held(id, data.streams[`${name}:${turn}`], `the ${name} stream`),
    diff: (id, a, b, turn) => held(id, data.diffs[`${a}:${b}:${turn}`], `the diff of ${a} against ${b}`),
    // No preview: an address that never loads (the image shows as unavailable), never a request.
    previewUrl: (_id, k) => data.previews[k] ?? 'data:,',
    shareUrl: () => null,
    // One trajectory: no steps or groups to aggregate (the run page needs the server).
    steps: async () => ({ steps: [], rewardRange: null, lengthRange: null }),
    groups: async () => ({ total: 0, offset: 0, ungrouped: 0, items: [] }),
    logprobs: () => needsServer('The logprob view'),
    messages: (id) => held(id, data.messages, 'the conversation'),
    // A shared page holds no trained side and no run-wide histogram: say so as the server would.
    ratios: async () => ({ bins: [], isCap: 2, trajectories: 0, tokens: 0 }),
    compareRun: async () => ({
      available: false,
      loading: false,
      trainedFiles: [],
      pairs: [],
      unmatched: { rollout: [], trained: [] },
      errors: [],
    }),
    comparePair: () => needsServer('The trained side'),
    againstRun: async () => ({ available: false, loading: false, aFiles: [], bFiles: [], diff: null, error: null }),
    againstPair: () => needsServer('The run against another'),
    startExport: () => needsServer('Export'),
    exportJob: () => needsServer('Export'),
    cancelExport: () => needsServer('Export'),
    renderConversation: () => needsServer('The playground'),
    playgroundPrefill: () => needsServer('The playground'),
  };
}

/** The JSON a shared page embeds (server/http/share-page.ts writes it), or null in the served app. */
function embeddedData(): SharedTrajectory | null {
  const el = typeof document === 'undefined' ? null : document.getElementById('rollscope-shared');
  return el?.textContent ? (JSON.parse(el.textContent) as SharedTrajectory) : null;
}

const shared = embeddedData();
export const api: Api = shared ? staticApi(shared) : httpApi;

/** The trajectory a shared page holds (null in the served app). */
export const sharedId = (): string | null => shared?.id ?? null;
