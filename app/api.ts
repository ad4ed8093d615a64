// Typed fetches of the server's API. The shapes come from server/http/api.ts as types only:
// the server validates them with zod; the browser bundle carries no schema code.
import type {
  DiffResult,
  ExportJob,
  ExportRequestInput,
  ListQueryInput,
  PlaygroundPrefill,
  PlaygroundRequestInput,
  PlaygroundResult,
  RunInfo,
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
  ) {
    super(message);
  }
}

async function getJson<T>(url: string, signal?: AbortSignal, init: RequestInit = {}): Promise<T> {
  const res = await fetch(url, { ...init, signal });
  const body = (await res.json().catch(() => ({ error: `${res.status} ${res.statusText}` }))) as T | { error: string };
  if (!res.ok) throw new ApiFailure(res.status, (body as { error?: string }).error ?? `${res.status}`);
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

export const api = {
  run: () => getJson<RunInfo>('/api/run'),
  steps: () => getJson<RunSteps>('/api/run/steps'),
  groups: (q: GroupQueryInput) =>
    getJson<GroupList>(`/api/run/groups${search(q as Record<string, string | number | undefined>)}`),
  list: (q: ListQueryInput, signal?: AbortSignal) =>
    getJson<TrajectoryList>(`/api/trajectories${search(q as Record<string, string | number | undefined>)}`, signal),
  detail: (id: string) => getJson<TrajectoryDetail>(`/api/trajectories/${enc(id)}`),
  stream: (id: string, name: string, turn: number) =>
    getJson<TokenStream>(`/api/trajectories/${enc(id)}/stream${search({ name, turn })}`),
  diff: (id: string, a: string, b: string, turn: number) =>
    getJson<DiffResult>(`/api/trajectories/${enc(id)}/diff${search({ a, b, turn })}`),
  previewUrl: (id: string, k: number, w: number) => `/api/trajectories/${enc(id)}/images/${k}/preview?w=${w}`,
  startExport: (request: ExportRequestInput) => postJson<ExportJob>('/api/exports', request),
  exportJob: (job: string) => getJson<ExportJob>(`/api/exports/${enc(job)}`),
  cancelExport: (job: string) => postJson<ExportJob>(`/api/exports/${enc(job)}/cancel`, {}),
  renderConversation: (request: PlaygroundRequestInput, signal?: AbortSignal) =>
    postJson<PlaygroundResult>('/api/playground/render', request, signal),
  playgroundPrefill: (id: string) => getJson<PlaygroundPrefill>(`/api/playground/conversation${search({ id })}`),
};
