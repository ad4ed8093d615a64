// Typed fetches of the server's API. The shapes come from server/http/api.ts as types only:
// the server validates them with zod; the browser bundle carries no schema code.
import type { DiffResult, ListQueryInput, RunInfo, TokenStream, TrajectoryDetail, TrajectoryList } from '../server/http/api.ts';

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function getJson<T>(url: string, signal?: AbortSignal): Promise<T> {
  const res = await fetch(url, { signal });
  const body = (await res.json().catch(() => ({ error: `${res.status} ${res.statusText}` }))) as T | { error: string };
  if (!res.ok) throw new ApiFailure(res.status, (body as { error?: string }).error ?? `${res.status}`);
  return body as T;
}

const enc = encodeURIComponent;

function search(params: Record<string, string | number | undefined | null>): string {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') s.set(k, String(v));
  const text = s.toString();
  return text ? `?${text}` : '';
}

export const api = {
  run: () => getJson<RunInfo>('/api/run'),
  list: (q: ListQueryInput, signal?: AbortSignal) => getJson<TrajectoryList>(`/api/trajectories${search(q as Record<string, string | number | undefined>)}`, signal),
  detail: (id: string) => getJson<TrajectoryDetail>(`/api/trajectories/${enc(id)}`),
  stream: (id: string, name: string, turn: number) => getJson<TokenStream>(`/api/trajectories/${enc(id)}/stream${search({ name, turn })}`),
  diff: (id: string, a: string, b: string, turn: number) => getJson<DiffResult>(`/api/trajectories/${enc(id)}/diff${search({ a, b, turn })}`),
  previewUrl: (id: string, k: number, w: number) => `/api/trajectories/${enc(id)}/images/${k}/preview?w=${w}`,
};
