// Export from the overview: the current filter or the ticked trajectories become a training batch
// (the same export as `rollscope export`), with a progress bar while the server re-checks them,
// then the batch downloads and its manifest and rejects are offered beside it.
import { useEffect, useRef, useState } from 'react';
import type { ExportJob, ExportRequest, ListFilter, RejectReason } from '../../server/http/api.ts';
import { useExportActions, useExportError, useExportJob } from '../stores/export.ts';
import { usePicked } from '../stores/selection.ts';
import { causeLabel, kindLabel } from './labels.ts';
import './Export.css';
import { formatCount, formatBytes } from '../format.ts';

type Scope = 'filter' | 'selection';
type Format = ExportRequest['format'];

/** The filter in words, as the overview shows it. */
function filterWords(f: ListFilter): string {
  const parts = [
    f.status
      ? f.status === 'ok'
        ? 'clean'
        : f.status === 'error'
          ? 'with errors'
          : f.status === 'warning'
            ? 'warnings only'
            : `status ${f.status}`
      : '',
    f.kind ? kindLabel(f.kind) : '',
    f.cause ? causeLabel(f.cause) : '',
    f.q ? `matching “${f.q}”` : '',
    f.where ? `where ${f.where}` : '',
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(' · ') : 'no filter: the whole run';
}

/** Every reason a trajectory is not exported, in words (the compiler asks for one when a reason is added). */
const REASON_WORDS: Readonly<Record<RejectReason, string>> = {
  unfixable_finding: 'an error re-alignment cannot repair',
  warning: 'warnings that doubt the row (not included)',
  no_generated_ids: 'no generated ids',
  no_prompt: 'prompt unknown',
  observation_unknown: 'observation unknown',
  incomplete_logprobs: 'incomplete logprobs',
  grid_unknown: 'image grid unknown',
  video_unsupported: 'video',
  position_ids: 'position ids',
  image_unavailable: 'image unavailable',
  recheck_failed: 'failed the re-check',
  unreadable: 'unreadable',
  analysis_failed: 'analysis failed',
  no_profile: 'no profile for its model',
};

const reasonWords = (r: string): string =>
  Object.hasOwn(REASON_WORDS, r) ? REASON_WORDS[r as RejectReason] : r.replace(/_/g, ' ');

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

function Done({ job }: { job: ExportJob }) {
  const c = job.counts!;
  const reasons = Object.entries(c.byReason).filter(([, n]) => n > 0);
  const warned = Object.entries(c.exportedWithWarnings).filter(([, n]) => n > 0);
  return (
    <div className="export-done" data-testid="export-done">
      <div className="export-counts" data-testid="export-counts">
        <b>{formatCount(c.read)}</b> read = <b className="ok-text">{formatCount(c.exported)}</b> exported +{' '}
        <b className="rej-text">{formatCount(c.rejected)}</b> rejected
      </div>
      {warned.length > 0 && (
        <div className="small muted" data-testid="export-warned" title="warnings that describe a correct row">
          exported with warnings: {warned.map(([k, n]) => `${n} × ${kindLabel(k)}`).join(', ')}
        </div>
      )}
      {reasons.length > 0 && (
        <ul className="reasons small" title="a rejected trajectory may have several reasons">
          {reasons.map(([r, n]) => (
            <li key={r}>
              {n} × {reasonWords(r)}
            </li>
          ))}
        </ul>
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

export function ExportDialog({ filter, shown }: { filter: ListFilter; shown: number }) {
  const job = useExportJob();
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
  const go = () =>
    void start({
      format,
      includeWarnings,
      selection: scope === 'filter' ? { kind: 'filter', filter } : { kind: 'ids', ids: [...selected] },
    });

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
                  <span className="muted">({filterWords(filter)})</span>
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
                Export {formatCount(count)} trajector{count === 1 ? 'y' : 'ies'} as{' '}
                {format === 'jsonl' ? 'JSONL' : 'Parquet'}
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
            {job.state === 'done' && <Done job={job} />}
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
