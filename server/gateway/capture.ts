// The capture folder: JSON lines, each written by one write(2) of the whole line to a file opened
// O_APPEND, so a reader (`rollscope serve DIR` following it, or a gateway killed mid-run) never
// sees half a record. File names carry the replica, the process id and the start time, and are
// created exclusively: replicas and restarts never write the same file. A file takes new sessions
// until it passes `rotateBytes`; a session already in it finishes there, so every session stays in
// one file and `check DIR` names it once (trajectory ids are unique per file, docs/check-json.md).
import fs from 'node:fs';
import path from 'node:path';
import { CaptureLine } from './protocol.ts';

export interface CaptureFile {
  readonly path: string;
  bytes: number;
  /** Sessions whose lines go here. */
  sessions: number;
}

interface OpenFile extends CaptureFile {
  fd: number;
}

/** `20261202T101500.123Z`: sortable, no characters a file system refuses. */
function stamp(d: Date): string {
  return d.toISOString().replace(/[-:]/g, '');
}

export class CaptureWriter {
  private current: OpenFile | undefined;
  private readonly open = new Set<OpenFile>();
  private readonly started = stamp(new Date());
  private sequence = 0;
  private closed = false;

  constructor(
    readonly dir: string,
    private readonly opts: { replica: string; rotateBytes: number },
  ) {
    fs.mkdirSync(dir, { recursive: true });
  }

  /** The file a new session writes to. */
  fileForNewSession(): CaptureFile {
    if (this.closed) throw new Error('capture closed');
    if (!this.current || this.current.bytes >= this.opts.rotateBytes) {
      const previous = this.current;
      this.current = this.create();
      if (previous && previous.sessions === 0) this.closeFile(previous);
    }
    this.current.sessions++;
    return this.current;
  }

  /** A session no longer writes to `file` (evicted): a full file with no session left is closed. */
  release(file: CaptureFile): void {
    const f = file as OpenFile;
    f.sessions = Math.max(0, f.sessions - 1);
    if (f.sessions === 0 && f !== this.current && this.open.has(f)) this.closeFile(f);
  }

  /** Validate and append one line. */
  write(file: CaptureFile, line: CaptureLine): void {
    const f = file as OpenFile;
    if (this.closed || !this.open.has(f)) throw new Error(`capture file ${f.path} is closed`);
    const bytes = Buffer.from(`${JSON.stringify(CaptureLine.parse(line))}\n`, 'utf8');
    let at = 0;
    // One write(2) for the line; a regular file takes it whole unless the disk is full.
    while (at < bytes.length) at += fs.writeSync(f.fd, bytes, at, bytes.length - at);
    f.bytes += bytes.length;
  }

  /** Every file written so far that is still open. */
  files(): string[] {
    return [...this.open].map((f) => f.path);
  }

  /** Flush to disk and close every file. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const f of [...this.open]) this.closeFile(f);
    this.current = undefined;
  }

  private create(): OpenFile {
    for (;;) {
      const name = `gateway-${this.opts.replica}-${process.pid}-${this.started}-${String(this.sequence++).padStart(3, '0')}.jsonl`;
      const file = path.join(this.dir, name);
      try {
        const fd = fs.openSync(
          file,
          fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_APPEND,
          0o600,
        );
        const f: OpenFile = { path: file, fd, bytes: 0, sessions: 0 };
        this.open.add(f);
        return f;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
    }
  }

  private closeFile(f: OpenFile): void {
    this.open.delete(f);
    try {
      fs.fsyncSync(f.fd);
    } finally {
      fs.closeSync(f.fd);
    }
  }
}
