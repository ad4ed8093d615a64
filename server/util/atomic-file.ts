// A file that appears under its name only when complete: written to a hidden temporary file in
// the same folder (`.NAME.<pid>.<random>.tmp`), synced, and renamed into place. A process stopped
// by SIGINT/SIGTERM/SIGHUP removes its temporary files; one killed by SIGKILL leaves only a
// hidden temporary file, never a partial NAME, so a rerun from scratch writes NAME whole.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

const live = new Set<string>();
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const handlers = new Map<NodeJS.Signals, () => void>();

function onSignal(sig: NodeJS.Signals): void {
  for (const f of live) {
    try {
      fs.unlinkSync(f);
    } catch {
      // already gone
    }
  }
  live.clear();
  // Alone on this signal: let it end the process as it would have.
  if (process.listenerCount(sig) === 1) {
    for (const [s, h] of handlers) process.removeListener(s, h);
    handlers.clear();
    process.kill(process.pid, sig);
  }
}

export function atomicTempPath(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

/** An open temporary file for `dest`: write to `fd`, then `commit()` (sync, rename) or `discard()`. */
export class AtomicFile {
  readonly tmp: string;
  readonly fd: number;
  private done = false;

  constructor(readonly dest: string) {
    this.tmp = atomicTempPath(dest);
    if (handlers.size === 0)
      for (const s of SIGNALS) {
        const h = () => onSignal(s);
        handlers.set(s, h);
        process.on(s, h);
      }
    this.fd = fs.openSync(this.tmp, 'wx');
    live.add(this.tmp);
  }

  write(text: string | Uint8Array): void {
    if (typeof text === 'string') fs.writeSync(this.fd, text);
    else fs.writeSync(this.fd, text, 0, text.length);
  }

  commit(): void {
    if (this.done) return;
    this.done = true;
    fs.fdatasyncSync(this.fd);
    fs.closeSync(this.fd);
    fs.renameSync(this.tmp, this.dest);
    live.delete(this.tmp);
  }

  discard(): void {
    if (this.done) return;
    this.done = true;
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
    try {
      fs.unlinkSync(this.tmp);
    } catch {
      // never written
    }
    live.delete(this.tmp);
  }
}

/** Text written to an AtomicFile through a buffer (call `flush()` before `commit()`). */
export function bufferedText(file: AtomicFile): { write(text: string): void; flush(): void } {
  let parts: string[] = [];
  let size = 0;
  const flush = () => {
    if (parts.length) file.write(parts.join(''));
    parts = [];
    size = 0;
  };
  return {
    write(text: string) {
      parts.push(text);
      size += text.length;
      if (size > 1 << 20) flush();
    },
    flush,
  };
}
