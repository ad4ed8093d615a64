// JSON lines to a file, appended through a buffer so memory stays bounded by one flush however
// many rows pass through. The file is created exclusively (`wx`): a writer never clobbers.
import fs from 'node:fs/promises';

const FLUSH_BYTES = 1 << 20;

export class JsonlWriter {
  private pending: (string | Uint8Array)[] = [];
  private pendingBytes = 0;
  private written = 0;
  private rows = 0;

  private constructor(private readonly handle: fs.FileHandle) {}

  static async create(file: string): Promise<JsonlWriter> {
    return new JsonlWriter(await fs.open(file, 'wx'));
  }

  get bytesWritten(): number {
    return this.written + this.pendingBytes;
  }

  get rowCount(): number {
    return this.rows;
  }

  async write(value: unknown): Promise<void> {
    const line = `${JSON.stringify(value)}\n`;
    this.pending.push(line);
    this.pendingBytes += Buffer.byteLength(line);
    this.rows++;
    if (this.pendingBytes >= FLUSH_BYTES) await this.flush();
  }

  /** A line encoded elsewhere around its id (export/encoded.ts `IdSplit`): `before`, the id as JSON, `after`. */
  async writeAround(around: { before: Uint8Array; after: Uint8Array }, id: string): Promise<void> {
    const key = Buffer.from(JSON.stringify(id));
    this.pending.push(around.before, key, around.after);
    this.pendingBytes += around.before.length + key.length + around.after.length;
    this.rows++;
    if (this.pendingBytes >= FLUSH_BYTES) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const chunk = Buffer.concat(this.pending.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
    this.pending = [];
    this.written += this.pendingBytes;
    this.pendingBytes = 0;
    await this.handle.write(chunk);
  }

  /** Flush, sync to disk (so a rename after it publishes complete data), close. */
  async close(): Promise<void> {
    await this.flush();
    await this.handle.datasync();
    await this.handle.close();
  }

  /** Close without caring about the content (the file is about to be removed). */
  async abandon(): Promise<void> {
    this.pending = [];
    await this.handle.close().catch(() => undefined);
  }
}
