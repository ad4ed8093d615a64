// Export from the overview: the current filter or the ticked trajectories become a training batch
// (the same export as `rollscope export`), with a progress bar while the server re-checks them,
// then the batch downloads and its manifest and rejects are offered beside it.
import { useEffect, useRef, useState } from 'react';
import type {
  ExportJob,
  ExportRequest,
  ListFacets,
  ListFilterInput,
  TrajectorySummary,
} from '../../server/http/api.ts';
import { useExportActions, useExportError, useExportJob } from '../stores/export.ts';
import { usePicked } from '../stores/selection.ts';
import { useRunItems } from '../stores/run.ts';
import { kindLabel } from './labels.ts';
import { reasonWords } from './reasons.ts';
import './Export.css';
import { formatCount, formatBytes } from '../format.ts';

type Scope = 'filter' | 'selection';
type Format = ExportRequest['format'];

/** What an export of some trajectories will write, as decided from their findings before re-aligning. */
interface Promise_ {
  selected: number;
  exported: number;
  rejected: number;
  /** Rejected by their first reason (adds up to `rejected`). */
  byFirstReason: [string, number][];
  /** Written rows per kind of error the re-alignment repairs. */
  repaired: [string, number][];
  /** Trajectories whose verdict is not known here (ticked under another filter): decided when written. */
  unknown: number;
}

const sortedCounts = (r: Record<string, number>): [string, number][] =>
  Object.entries(r)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));

/** The promise for the filter (its facets), with or without the warnings included. */
function promiseOfFacets(f: ListFacets['export'], shown: number, includeWarnings: boolean): Promise_ {
  const byFirst = { ...f.byFirstReason };
  let exported = f.exported;
  let rejected = f.rejected;
  if (includeWarnings) {
    exported += f.onlyWarnings;
    rejected -= f.onlyWarnings;
    byFirst.warning = Math.max(0, (byFirst.warning ?? 0) - f.onlyWarnings);
  }
  return {
    selected: shown,
    exported,
    rejected,
    byFirstReason: sortedCounts(byFirst),
    repaired: sortedCounts(f.repaired),
    unknown: 0,
  };
}

/** The promise for ticked trajectories: those the list holds are known; the rest are decided when written. */
function promiseOfRows(
  ids: ReadonlySet<string>,
  rows: readonly TrajectorySummary[],
  includeWarnings: boolean,
): Promise_ {
  const byId = new Map(rows.map((s) => [s.id, s]));
  const out: Promise_ = { selected: ids.size, exported: 0, rejected: 0, byFirstReason: [], repaired: [], unknown: 0 };
  const byFirst: Record<string, number> = {};
  const repaired: Record<string, number> = {};
  for (const id of ids) {
    const s = byId.get(id);
    if (!s) {
      out.unknown++;
      continue;
    }
    const reasons = includeWarnings ? s.rejects.filter((r) => r !== 'warning') : s.rejects;
    if (reasons.length === 0) {
      out.exported++;
      for (const k of s.repaired) repaired[k] = (repaired[k] ?? 0) + 1;
    } else {
      out.rejected++;
      byFirst[reasons[0]!] = (byFirst[reasons[0]!] ?? 0) + 1;
    }
  }
  out.byFirstReason = sortedCounts(byFirst);
  out.repaired = sortedCounts(repaired);
  return out;
}

const repairedWords = (repaired: readonly [string, number][]) =>
  repaired.map(([k, n]) => `${kindLabel(k)} ${formatCount(n)}`).join(', ');

/** The promise in words: how many rows, how many rejected and why, what the re-alignment repairs. */
function PromiseText({ p }: { p: Promise_ }) {
  return (
    <div className="export-promise" data-testid="export-promise">
      <div>
        <b data-testid="promise-exported">{formatCount(p.exported)}</b> written ·{' '}
        <b data-testid="promise-rejected">{formatCount(p.rejected)}</b> rejected
        {p.unknown > 0 ? ` · ${formatCount(p.unknown)} decided when written (ticked under another filter)` : ''}
      </div>
      {p.byFirstReason.length > 0 && (
        <ul className="reasons small" data-testid="promise-reasons">
          {p.byFirstReason.map(([r, n]) => (
            <li key={r}>
              {formatCount(n)} × {reasonWords(r)}
            </li>
          ))}
        </ul>
      )}
      {p.repaired.length > 0 && (
        <div className="small muted" data-testid="promise-repaired">
          repaired by re-alignment: {repairedWords(p.repaired)}
        </div>
      )}
      <div className="small muted">
        decided from their findings; an image whose bytes cannot be read is found only when the row is written (the
        manifest then says so)
      </div>
    </div>
  );
}

function Progress({ job }: { job: ExportJob }) {
  const p = job.progress;
  // Re-checking the files is the long part; the selected ones finish as they come by.
  const fraction = p.toScan > 0 ? Math.min(1, p.scanned / p.toScan) : 0;
  return (
    <div className="export-progress" data-testid="export-progress">
      <div className="bar" role="progressbar" aria-valuemin={0} aria-valuemax={p.toScan} aria-valuenow={p.scanned}>
        <div className="fill" style={{ width: `${(fraction * 100).toFixed(1)}%` }} />
      </div>
      <div className="small">
        {p.scanned === 0 ? 'starting the analysis · ' : ''}re-checked {formatCount(p.scanned)} of{' '}
        {formatCount(p.toScan)} trajectories · {formatCount(p.read)} of {formatCount(job.selected)} selected done ·{' '}
        <span className="ok-text">{formatCount(p.exported)} exported</span> ·{' '}
        <span className="rej-text">{formatCount(p.rejected)} rejected</span> · {formatBytes(p.bytesWritten)} written
      </div>
    </div>
  );
}

function Done({ job, promised }: { job: ExportJob; promised: Promise_ | null }) {
  const c = job.counts!;
  const reasons = sortedCounts(c.byFirstReason);
  const warned = sortedCounts(c.exportedWithWarnings);
  const repaired = sortedCounts(c.repaired);
  const kept =
    promised && promised.unknown === 0 && promised.exported === c.exported && promised.rejected === c.rejected;
  return (
    <div className="export-done" data-testid="export-done">
      <div className="export-counts" data-testid="export-counts">
        <b>{formatCount(c.read)}</b> read = <b className="ok-text">{formatCount(c.exported)}</b> exported +{' '}
        <b className="rej-text">{formatCount(c.rejected)}</b> rejected
      </div>
      {promised && !kept && promised.unknown === 0 && (
        <div className="small warning-text" data-testid="export-surprise">
          {formatCount(promised.exported - c.exported)} fewer written than its findings said: writing the rows found
          more (see the rejects file)
        </div>
      )}
      {reasons.length > 0 && (
        <ul className="reasons small" data-testid="export-reasons">
          {reasons.map(([r, n]) => (
            <li key={r}>
              {formatCount(n)} × {reasonWords(r)}
            </li>
          ))}
        </ul>
      )}
      {repaired.length > 0 && (
        <div className="small muted" data-testid="export-repaired">
          repaired by re-alignment: {repairedWords(repaired)}
        </div>
      )}
      {warned.length > 0 && (
        <div className="small muted" data-testid="export-warned" title="warnings that describe a correct row">
          exported with warnings: {warned.map(([k, n]) => `${n} × ${kindLabel(k)}`).join(', ')}
        </div>
      )}
      <table className="downloads">
        <tbody>
          {job.files.map((f) => (
            <tr key={f.role} className={f.role === 'batch' ? 'batch' : ''}>
              <td className="role">{f.role}</td>
              <td>
                <a className="download" href={f.url} download={f.name} data-testid={`download-${f.role}`}>
                  ⬇ {f.name}
                </a>
              </td>
              <td className="num muted">{formatBytes(f.bytes)}</td>
              <td className="what muted small">
                {f.role === 'batch'
                  ? 'download started'
                  : f.role === 'manifest'
                    ? 'inputs, hashes, counts, settings'
                    : 'each trajectory not exported, with why'}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function ExportDialog({
  filter,
  words,
  facets,
  shown,
}: {
  filter: ListFilterInput;
  /** The filter in words, as the overview says it. */
  words: readonly string[];
  facets: ListFacets | null;
  shown: number;
}) {
  const job = useExportJob();
  const rows = useRunItems();
  const error = useExportError();
  const { hide, start, cancel, reset } = useExportActions();
  const selected = usePicked();
  const dialog = useRef<HTMLDialogElement>(null);
  const [scope, setScope] = useState<Scope>(selected.size > 0 ? 'selection' : 'filter');
  const [format, setFormat] = useState<Format>('jsonl');
  const [includeWarnings, setIncludeWarnings] = useState(false);
  const running = job?.state === 'running';

  // A modal <dialog>: the page behind is inert, focus stays inside, Esc closes it (onCancel).
  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);

  const count = scope === 'filter' ? shown : selected.size;
  const promise =
    scope === 'filter'
      ? facets && promiseOfFacets(facets.export, shown, includeWarnings)
      : promiseOfRows(selected, rows, includeWarnings);
  // What was promised when the export started: the done view holds the manifest to it.
  const [promised, setPromised] = useState<Promise_ | null>(null);
  const go = () => {
    setPromised(promise);
    void start({
      format,
      includeWarnings,
      selection: scope === 'filter' ? { kind: 'filter', filter } : { kind: 'ids', ids: [...selected] },
    });
  };

  return (
    <dialog
      ref={dialog}
      className="modal-dialog"
      aria-label="Export a training batch"
      onCancel={(e) => {
        e.preventDefault();
        hide();
      }}
      // Esc closes, and so does a click on the backdrop (it lands on the dialog itself: its content fills it).
      onKeyDown={(e) => {
        if (e.key !== 'Escape') return;
        e.preventDefault();
        hide();
      }}
      onClick={(e) => {
        if (e.target === e.currentTarget) hide();
      }}
    >
      <div className="modal export-dialog" data-testid="export-dialog">
        <header>
          <h2>Export a training batch</h2>
          <button type="button" className="close" onClick={hide} aria-label="close">
            ×
          </button>
        </header>
        {!job && (
          <>
            <div className="field" role="radiogroup" aria-label="what to export">
              <div className="legend">What</div>
              <label className="choice">
                <input type="radio" name="scope" checked={scope === 'filter'} onChange={() => setScope('filter')} />
                <span>
                  <b>The current filter</b> — {formatCount(shown)} trajector{shown === 1 ? 'y' : 'ies'}{' '}
                  <span className="muted">({words.length > 0 ? words.join(' · ') : 'no filter: the whole run'})</span>
                </span>
              </label>
              <label className={`choice${selected.size === 0 ? ' disabled' : ''}`}>
                <input
                  type="radio"
                  name="scope"
                  checked={scope === 'selection'}
                  disabled={selected.size === 0}
                  onChange={() => setScope('selection')}
                />
                <span>
                  <b>The selected trajectories</b> — {formatCount(selected.size)} ticked
                  {selected.size === 0 ? ' (tick rows in the list to pick some)' : ''}
                </span>
              </label>
            </div>
            <div className="field">
              <div className="legend">Format</div>
              <fieldset className="seg">
                <legend className="sr-only">format</legend>
                <button
                  type="button"
                  className={format === 'jsonl' ? 'active' : ''}
                  aria-pressed={format === 'jsonl'}
                  onClick={() => setFormat('jsonl')}
                >
                  JSONL
                </button>
                <button
                  type="button"
                  className={format === 'parquet' ? 'active' : ''}
                  aria-pressed={format === 'parquet'}
                  onClick={() => setFormat('parquet')}
                >
                  Parquet
                </button>
              </fieldset>
              <label className="check">
                <input
                  type="checkbox"
                  checked={includeWarnings}
                  onChange={(e) => setIncludeWarnings(e.target.checked)}
                />{' '}
                include trajectories whose warnings doubt them (warnings that describe a correct row never exclude it)
              </label>
            </div>
            {promise && <PromiseText p={promise} />}
            <p className="muted small explain">
              Each trajectory is re-aligned the canonical way and checked again; only rows with no error left are
              written. Every other trajectory goes to the rejects file with its findings, so read = exported + rejected.
              The files are written to a temporary folder on the server, never beside your data.
            </p>
            <div className="actions">
              <button type="button" onClick={hide}>
                Close
              </button>
              <button type="button" className="primary" data-testid="export-start" disabled={count === 0} onClick={go}>
                {promise && promise.unknown === 0
                  ? `Write ${formatCount(promise.exported)} row${promise.exported === 1 ? '' : 's'} of ${formatCount(count)} as ${format === 'jsonl' ? 'JSONL' : 'Parquet'}`
                  : `Export ${formatCount(count)} trajector${count === 1 ? 'y' : 'ies'} as ${format === 'jsonl' ? 'JSONL' : 'Parquet'}`}
              </button>
            </div>
          </>
        )}
        {job && (
          <div className="export-job">
            <div className="small muted">
              {job.format === 'jsonl' ? 'JSONL' : 'Parquet'} · {formatCount(job.selected)} trajector
              {job.selected === 1 ? 'y' : 'ies'} {job.scope === 'filter' ? `(${job.selection})` : 'ticked in the list'}
              {job.includeWarnings ? ' · warnings included' : ''}
            </div>
            {running && <Progress job={job} />}
            {job.state === 'done' && <Done job={job} promised={promised} />}
            {(job.state === 'failed' || job.state === 'cancelled') && (
              <div className={`banner ${job.state === 'failed' ? 'error' : 'warning'}`}>
                {job.state === 'failed' ? 'The export failed: ' : 'Cancelled: '}
                {job.error}
              </div>
            )}
            <div className="actions">
              {running ? (
                <button type="button" onClick={() => void cancel()}>
                  Cancel export
                </button>
              ) : (
                <>
                  <button type="button" onClick={reset}>
                    New export
                  </button>
                  <button type="button" className="primary" onClick={hide}>
                    Close
                  </button>
                </>
              )}
            </div>
          </div>
        )}
        {error && <div className="banner error">{error}</div>}
      </div>
    </dialog>
  );
}
