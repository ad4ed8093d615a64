// The files of a run being written, polled cheaply on a big folder: a folder is listed again only
// when its mtime changed (a new file or `step_N/` folder changes its parent's), and a poll stats
// new and recently grown files, plus a bounded slice of the quiet ones, so appending to an old
// file is still seen within a few polls. Folders are listed by the rule `expandPaths` follows
// (import/index.ts runFolderEntries): the same files, order and errors.
import fs from 'node:fs';
import type { ReadError } from '../../model/trajectory.ts';
import { runFolderEntries } from '../../import/index.ts';

/** A file that grew this recently is looked at on every poll. */
const HOT_MS = 60_000;
/** Files looked at per poll among the ones that have not changed for a while (round robin). */
const COLD_PER_POLL = 256;
/** A folder modified this recently is listed again whatever its mtime says (mtime ticks can be coarse). */
const FRESH_FOLDER_MS = 3_000;

export class RunFolders {
  private readonly dirs = new Map<string, { mtimeMs: number; children: { path: string; dir: boolean }[] }>();
  private readonly lastChange = new Map<string, number>();
  private cursor = 0;

  constructor(private readonly paths: readonly string[]) {}

  expand(): { files: string[]; errors: ReadError[] } {
    const files: string[] = [];
    const errors: ReadError[] = [];
    const now = Date.now();
    const walk = (dir: string, st: fs.Stats) => {
      let known = this.dirs.get(dir);
      if (!known || known.mtimeMs !== st.mtimeMs || now - st.mtimeMs < FRESH_FOLDER_MS) {
        known = { mtimeMs: st.mtimeMs, children: runFolderEntries(dir) };
        this.dirs.set(dir, known);
      }
      for (const c of known.children) {
        if (!c.dir) {
          files.push(c.path);
          continue;
        }
        try {
          walk(c.path, fs.statSync(c.path));
        } catch {
          this.dirs.delete(c.path);
        }
      }
    };
    for (const p of this.paths) {
      let st: fs.Stats;
      try {
        st = fs.statSync(p);
      } catch {
        errors.push({ file: p, line: 0, message: 'no such file or directory' });
        continue;
      }
      if (st.isDirectory()) walk(p, st);
      else files.push(p);
    }
    return { files, errors };
  }

  /** The files to stat on this poll: never seen, modified lately, or the quiet ones' turn. */
  due(files: readonly string[], now: number): string[] {
    const out: string[] = [];
    const quiet: string[] = [];
    for (const f of files) {
      const at = this.lastChange.get(f);
      if (at === undefined || now - at < HOT_MS) out.push(f);
      else quiet.push(f);
    }
    if (quiet.length <= COLD_PER_POLL) return out.concat(quiet);
    for (let i = 0; i < COLD_PER_POLL; i++) out.push(quiet[(this.cursor + i) % quiet.length]!);
    this.cursor = (this.cursor + COLD_PER_POLL) % quiet.length;
    return out;
  }

  /** A stat of `file`: its mtime says whether it is being written (then it is looked at on every poll). */
  saw(file: string, mtimeMs: number): void {
    this.lastChange.set(file, Math.max(this.lastChange.get(file) ?? mtimeMs, mtimeMs));
  }
}
