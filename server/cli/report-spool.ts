// `check --json` reads a run as a stream, but a GRPO group's findings are known only once the whole
// run is read, and they belong in each member's `findings` too (docs/check-json.md#groups). The
// entries wait in a spool file in the temporary folder, one line each with the number of the group
// they belong to, and are copied into the report at the end with their group's findings after their
// own: memory stays one number per group, whatever the size of the run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

/** One report entry split around the end of its `findings` array, so findings can be appended unparsed. */
export interface SpooledEntry {
  /** -1 when the trajectory names no group. */
  group: number;
  /** The entry's JSON up to the last element of its `findings` (ends with `[` when it has none). */
  head: string;
  /** The entry's JSON after the `findings` array, from the key that follows it. */
  tail: string;
}

/** `entry` (its keys in report order, `findings` among them) as the parts a spool keeps. */
export function entryParts(entry: Record<string, unknown>): { head: string; tail: string } {
  const before: Record<string, unknown> = {};
  const after: Record<string, unknown> = {};
  let seen = false;
  for (const [k, v] of Object.entries(entry)) {
    if (seen) after[k] = v;
    else before[k] = v;
    if (k === 'findings') seen = true;
  }
  // JSON.stringify(entry) is `${head}],${tail}`: `before` ends with `]}`, `after` starts with `{`.
  return { head: JSON.stringify(before).slice(0, -2), tail: JSON.stringify(after).slice(1) };
}

/** The entry's JSON with `extra` (JSON of findings, comma-separated) after its own findings. */
export function entryJson(e: SpooledEntry, extra: string): string {
  const own = !e.head.endsWith('[');
  return `${e.head}${extra === '' ? '' : own ? `,${extra}` : extra}],${e.tail}`;
}

const FLUSH_BYTES = 1 << 20;

export class EntrySpool {
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-report-'));
  private readonly file = path.join(this.dir, 'entries');
  private fd: number | undefined = fs.openSync(this.file, 'w');
  private pending: string[] = [];
  private pendingBytes = 0;

  add(group: number, head: string, tail: string): void {
    // JSON text holds no raw tab or newline (JSON.stringify escapes them): they delimit the parts.
    const line = `${group}\t${head}\t${tail}\n`;
    this.pending.push(line);
    this.pendingBytes += line.length;
    if (this.pendingBytes >= FLUSH_BYTES) this.flush();
  }

  private flush(): void {
    if (this.fd === undefined || this.pending.length === 0) return;
    fs.writeSync(this.fd, this.pending.join(''));
    this.pending = [];
    this.pendingBytes = 0;
  }

  /** The entries in the order they were added (call once, after the last `add`). */
  async *entries(): AsyncGenerator<SpooledEntry> {
    this.flush();
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
    const lines = readline.createInterface({ input: fs.createReadStream(this.file), crlfDelay: Infinity });
    for await (const line of lines) {
      const a = line.indexOf('\t');
      const b = line.indexOf('\t', a + 1);
      yield { group: Number(line.slice(0, a)), head: line.slice(a + 1, b), tail: line.slice(b + 1) };
    }
  }

  dispose(): void {
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
