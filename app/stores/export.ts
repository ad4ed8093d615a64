// The export dialog: what to export, and the job the server runs (polled until it is done, then
// its batch downloaded). One job at a time, as the server runs them.
import { create } from 'zustand';
import { useShallow } from 'zustand/react/shallow';
import type { ExportJob, ExportRequestInput } from '../../server/http/api.ts';
import { api } from '../api.ts';

const POLL_MS = 250;

interface ExportState {
  open: boolean;
  job: ExportJob | null;
  error: string | null;
  show(): void;
  /** Close the dialog (a running export goes on; reopening shows it). */
  hide(): void;
  start(request: ExportRequestInput): Promise<void>;
  cancel(): Promise<void>;
  /** Forget a finished job, to set up the next export. */
  reset(): void;
}

let timer: ReturnType<typeof setTimeout> | undefined;

/** Start the browser's download of a file the server offers as an attachment. */
export function downloadFile(url: string, name: string): void {
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

export const useExport = create<ExportState>((set, get) => {
  const poll = async (id: string) => {
    timer = undefined;
    try {
      const job = await api.exportJob(id);
      if (get().job?.id !== id) return;
      set({ job });
      if (job.state === 'running') timer = setTimeout(() => void poll(id), POLL_MS);
      else if (job.state === 'done') {
        // The batch arrives as a download; the manifest and rejects stay as links in the dialog.
        const batch = job.files.find((f) => f.role === 'batch');
        if (batch) downloadFile(batch.url, batch.name);
      }
    } catch (e) {
      set({ error: (e as Error).message });
    }
  };
  return {
    open: false,
    job: null,
    error: null,
    // A running export is shown again; a finished one has been downloaded: start afresh.
    show: () => set(get().job?.state === 'running' ? { open: true } : { open: true, job: null, error: null }),
    hide: () => set({ open: false }),
    async start(request) {
      if (timer) clearTimeout(timer);
      set({ error: null, job: null });
      try {
        const job = await api.startExport(request);
        set({ job });
        timer = setTimeout(() => void poll(job.id), POLL_MS);
      } catch (e) {
        set({ error: (e as Error).message });
      }
    },
    async cancel() {
      const job = get().job;
      if (job?.state !== 'running') return;
      try {
        await api.cancelExport(job.id);
      } catch (e) {
        set({ error: (e as Error).message });
      }
    },
    reset() {
      if (get().job?.state === 'running') return;
      set({ job: null, error: null });
    },
  };
});

// Narrow hooks: a component re-renders only when the part it shows changes.

export const useExportOpen = () => useExport((s) => s.open);
export const useExportJob = () => useExport((s) => s.job);
export const useExportError = () => useExport((s) => s.error);
/** The dialog's actions (stable: created once with the store). */
export const useExportActions = () =>
  useExport(useShallow((s) => ({ show: s.show, hide: s.hide, start: s.start, cancel: s.cancel, reset: s.reset })));
