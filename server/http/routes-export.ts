// Export from the browser: the overview's filter or a selection of trajectories becomes a
// validated training batch (server/export/run.ts, the same export as `rollscope export`), written
// to a fresh folder under the system temp dir (never into the user's input folders) and offered
// as three downloads: the batch, FILE.manifest.json and FILE.rejects.jsonl.
//
//   POST /api/exports                     ExportRequest → 202 ExportJob (one export at a time)
//   GET  /api/exports/JOB                 → ExportJob (poll for progress)
//   POST /api/exports/JOB/cancel          → ExportJob
//   GET  /api/exports/JOB/files/ROLE      → the file (ROLE: batch, manifest, rejects)
//
// The export streams over the pipeline (checkPaths, one trajectory at a time) with only the files
// that hold the selection; memory is bounded as for the CLI, and a job keeps only counters.
import fs from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  ExportCancel,
  ExportJob,
  ExportRequest,
  type ExportFileRole,
  type ListFilter,
  type TrajectorySummary,
} from './api.ts';
import type { RunStore } from './store.ts';
import { answer, readJsonBody, RequestError, type ApiRoutes, type RouteTools } from './request-body.ts';
import { exportEvents, ExportError, type ExportResult } from '../export/run.ts';
import type { RejectEntry } from '../export/manifest.ts';
import { checkPaths, type CheckedTrajectory, type RunEvent } from '../pipeline.ts';
import { TrajectoryKeys, type KeySource } from '../model/trajectory-key.ts';

/** Finished jobs kept (with their files) before the oldest is removed. */
const KEEP_JOBS = 8;
const MAX_REQUEST_BYTES = 8 * 1024 * 1024;
/** Below this many trajectories to re-check, the analysis runs on the main thread (workers take a while to start). */
const WORKERS_FROM = 200;

const CONTENT_TYPES: Record<ExportFileRole | 'parquet', string> = {
  batch: 'application/x-ndjson',
  parquet: 'application/vnd.apache.parquet',
  manifest: 'application/json',
  rejects: 'application/x-ndjson',
};

interface Job {
  view: ExportJob;
  dir: string;
  abort: AbortController;
  result?: ExportResult;
}

// Export folders of every server in this process, removed when it exits.
const liveDirs = new Set<string>();
let exitHookInstalled = false;
function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
  liveDirs.delete(dir);
}
function trackDir(dir: string): void {
  liveDirs.add(dir);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const d of [...liveDirs]) removeDir(d);
  });
}

function describeFilter(f: ListFilter): string {
  const parts = Object.entries(f)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  return parts.length === 0 ? 'all trajectories' : `filter ${parts.join(', ')}`;
}

function describeIds(ids: readonly string[]): string {
  const shown = ids.slice(0, 10).join(', ');
  return `${ids.length} selected: ${shown}${ids.length > 10 ? `, … (${ids.length - 10} more)` : ''}`;
}

/**
 * Which checked trajectory is which summary: the pipeline names each trajectory by the key the
 * store gave it (`keyOf` below), so a summary's id is the trajectory's id.
 */
function selector(selected: readonly TrajectorySummary[]): (c: CheckedTrajectory) => boolean {
  const ids = new Set(selected.map((s) => s.id));
  return (c) => ids.has(c.trajectory.id);
}

/** The rejects file's entries counted by their first reason (each entry once: these add up to the rejected). */
function firstReasons(rejectsFile: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of fs.readFileSync(rejectsFile, 'utf8').split('\n')) {
    if (!line) continue;
    const first = (JSON.parse(line) as Pick<RejectEntry, 'reasons'>).reasons[0];
    if (first) out[first] = (out[first] ?? 0) + 1;
  }
  return out;
}

function stamp(d: Date): string {
  return d.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
}

export function exportRoutes(store: RunStore, tools: RouteTools): ApiRoutes {
  const jobs = new Map<string, Job>();

  function evictOld(): void {
    const finished = [...jobs.values()].filter((j) => j.view.state !== 'running');
    for (const j of finished.slice(0, Math.max(0, finished.length - (KEEP_JOBS - 1)))) {
      jobs.delete(j.view.id);
      removeDir(j.dir);
    }
  }

  function start(request: ExportRequest): Job {
    if ([...jobs.values()].some((j) => j.view.state === 'running'))
      throw new RequestError(409, 'an export is already running; wait for it or cancel it');
    const sel = request.selection;
    let selected: TrajectorySummary[];
    let selection: string;
    if (sel.kind === 'filter') {
      selected = store.select(sel.filter);
      selection = describeFilter(sel.filter);
    } else {
      const unknown = sel.ids.filter((id) => !store.summary(id));
      if (unknown.length > 0)
        throw new RequestError(
          400,
          `no trajectory with id ${unknown
            .slice(0, 5)
            .map((id) => JSON.stringify(id))
            .join(', ')}${unknown.length > 5 ? ` (and ${unknown.length - 5} more)` : ''}`,
        );
      const ids = [...new Set(sel.ids)];
      selected = ids.map((id) => store.summary(id)!);
      selection = describeIds(ids);
    }
    if (selected.length === 0) throw new RequestError(400, 'nothing to export: the selection is empty');

    // Only the files that hold the selection are read again (named as the store read them, so
    // its keys apply); the progress counts their trajectories.
    const files = [...new Set(selected.map((s) => s.source.file))];
    const inFiles = new Set(files);
    const toScan = store.select({}).filter((s) => inFiles.has(s.source.file)).length;

    evictOld();
    // Hidden (a leading dot), so a run served from a folder that holds the temp dir (serving /tmp)
    // never reads its own exports back as input: expandPaths skips dot-folders.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), '.rollscope-export-'));
    trackDir(dir);
    const started = new Date();
    const out = path.join(dir, `rollscope-${stamp(started)}.${request.format}`);
    const id = randomBytes(12).toString('hex');
    const job: Job = {
      dir,
      abort: new AbortController(),
      view: {
        id,
        state: 'running',
        format: request.format,
        includeWarnings: request.includeWarnings,
        scope: sel.kind,
        selection,
        selected: selected.length,
        progress: { scanned: 0, toScan, read: 0, exported: 0, rejected: 0, bytesWritten: 0 },
        counts: null,
        files: [],
        error: null,
        startedAt: started.toISOString(),
        finishedAt: null,
      },
    };
    jobs.set(id, job);

    const runOpts = store.options();
    const roots = [...store.roots()];
    const progress = job.view.progress;
    async function* counted(events: AsyncIterable<RunEvent>): AsyncGenerator<RunEvent> {
      for await (const ev of events) {
        if (ev.type === 'trajectory') progress.scanned++;
        yield ev;
      }
    }
    const workers = toScan >= WORKERS_FROM ? Math.max(1, Math.min(4, os.availableParallelism() - 1)) : 0;
    // The store's keys where it has them; a record appended since its last read has none and is not selected.
    const known = store.keys();
    const unknown = new TrajectoryKeys();
    const keyOf = (t: KeySource) => known.peek(t) ?? `\u0000${unknown.keyOf(t)}`;
    const events = counted(checkPaths(files, { ...runOpts, roots, workers }, { keyOf }));
    exportEvents(
      events,
      {
        out,
        format: request.format,
        includeWarnings: request.includeWarnings,
        model: runOpts.model,
        inputFormat: runOpts.format,
        processor: runOpts.processor,
        allowRemoteImages: runOpts.allowRemoteImages,
        roots,
        select: selector(selected),
        selection,
        signal: job.abort.signal,
      },
      (p) => {
        progress.read = p.read;
        progress.exported = p.exported;
        progress.rejected = p.rejected;
        progress.bytesWritten = p.bytesWritten;
      },
      files.length,
    ).then(
      (result) => {
        job.result = result;
        const { counts } = result.manifest;
        Object.assign(job.view, {
          state: 'done',
          finishedAt: new Date().toISOString(),
          counts: {
            read: counts.read,
            exported: counts.exported,
            rejected: counts.rejected,
            byReason: counts.byReason,
            byFirstReason: firstReasons(result.rejectsFile),
            exportedWithWarnings: counts.exportedWithWarnings,
            repaired: counts.repairedByFindingKind,
          },
          files: (
            [
              ['batch', result.out],
              ['manifest', result.manifestFile],
              ['rejects', result.rejectsFile],
            ] as const
          ).map(([role, file]) => ({
            role,
            name: path.basename(file),
            bytes: fs.statSync(file).size,
            url: `/api/exports/${id}/files/${role}`,
          })),
        });
        progress.read = counts.read;
        progress.exported = counts.exported;
        progress.rejected = counts.rejected;
      },
      (e: unknown) => {
        const cancelled = e instanceof ExportError && e.code === 'aborted';
        Object.assign(job.view, {
          state: cancelled ? 'cancelled' : 'failed',
          error: (e as Error).message,
          finishedAt: new Date().toISOString(),
        });
        removeDir(dir);
      },
    );
    return job;
  }

  function jobOf(id: string): Job {
    const job = jobs.get(id);
    if (!job)
      throw new RequestError(
        404,
        `no export "${id}" (exports are kept while the server runs, the last ${KEEP_JOBS} of them)`,
      );
    return job;
  }

  function sendFile(req: http.IncomingMessage, res: http.ServerResponse, job: Job, role: ExportFileRole): void {
    const info = job.view.files.find((f) => f.role === role);
    if (!job.result || !info)
      throw new RequestError(
        409,
        `export ${job.view.id} is ${job.view.state}: no files${job.view.state === 'running' ? ' yet' : ''}`,
      );
    const file =
      role === 'batch' ? job.result.out : role === 'manifest' ? job.result.manifestFile : job.result.rejectsFile;
    const type = role === 'batch' && job.view.format === 'parquet' ? CONTENT_TYPES.parquet : CONTENT_TYPES[role];
    res.writeHead(200, {
      'Content-Type': type,
      'Content-Length': String(fs.statSync(file).size),
      // The name is ours (rollscope-DATE.FORMAT[.manifest.json|.rejects.jsonl]): plain ASCII.
      'Content-Disposition': `attachment; filename="${info.name}"`,
      'Cache-Control': 'no-store',
      ...tools.headers,
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    fs.createReadStream(file)
      .on('error', () => res.destroy())
      .pipe(res);
  }

  return {
    async handle(req, res, url) {
      const parts = url.pathname
        .split('/')
        .filter(Boolean)
        .map((p) => decodeURIComponent(p));
      if (parts[0] !== 'api' || parts[1] !== 'exports') return false;
      await answer(res, tools, async () => {
        const get = req.method === 'GET' || req.method === 'HEAD';
        if (parts.length === 2) {
          if (req.method !== 'POST') throw new RequestError(405, 'POST an ExportRequest to /api/exports');
          const job = start(await readJsonBody(req, ExportRequest, MAX_REQUEST_BYTES));
          return tools.sendJson(res, ExportJob, job.view, 202);
        }
        const job = jobOf(parts[2]!);
        if (parts.length === 3 && get) return tools.sendJson(res, ExportJob, job.view);
        if (parts.length === 4 && parts[3] === 'cancel') {
          if (req.method !== 'POST') throw new RequestError(405, 'POST to cancel an export');
          await readJsonBody(req, ExportCancel, 1024);
          job.abort.abort();
          return tools.sendJson(res, ExportJob, job.view);
        }
        if (parts.length === 5 && parts[3] === 'files' && get) {
          const role = parts[4];
          if (role !== 'batch' && role !== 'manifest' && role !== 'rejects')
            throw new RequestError(404, `no export file "${role}"; use batch, manifest or rejects`);
          return sendFile(req, res, job, role);
        }
        throw new RequestError(404, `no API route ${req.method} ${url.pathname}`);
      });
      return true;
    },
    close() {
      for (const job of jobs.values()) job.abort.abort();
    },
  };
}
