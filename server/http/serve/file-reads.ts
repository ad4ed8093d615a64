// Reading a served run's files incrementally: what is new in a file since its last read, as
// pipeline input. A record-local JSONL file is streamed (only summaries stay in memory) and read
// on from where the last read stopped; any other file is loaded again and only its trajectories
// not read before (or read before and grown since) go on. A half-written last line waits.
import fs from 'node:fs';
import type { FormatName, ReadError, Trajectory } from '../../model/trajectory.ts';
import { batchingFor, type PipelineInput } from '../../pipeline.ts';
import type { LoadedFile } from '../../import/index.ts';
import { readLines, type RecordLine } from '../../import/read/lines.ts';
import { readFileChunks } from '../../import/stream.ts';

/** Appended lines are imported in batches of this many. */
const APPENDED_BATCH_LINES = 16;

export interface FileState {
  size: number;
  format: string | null;
  errors: ReadError[];
  count: number;
  /** Lines of a whole-loaded file whose trajectory could not be analyzed: not retried when the file grows. */
  failedLines: Set<number>;
  /** A record-local JSONL file read as a stream (never held whole): where the next read starts. */
  streamed?: { end: number; nextLine: number; format: FormatName };
}

export interface FileReadsOptions {
  format?: string;
  model?: string;
  /** Whether `t` was read before as it is now (a whole-loaded file read again skips it). */
  known(t: Trajectory): boolean;
  /** Complete lines a streamed read went past (where each starts: a re-read of one record reads one line). */
  noteLines(file: string, lines: readonly RecordLine[]): void;
}

export class FileReads {
  readonly files = new Map<string, FileState>();

  constructor(private readonly opts: FileReadsOptions) {}

  /** The size last read of `file` (undefined: never read). */
  sizeOf(file: string): number | undefined {
    return this.files.get(file)?.size;
  }

  /** What is new in `file` since the last read, as pipeline input (nothing when its size is unchanged). */
  async *inputs(file: string, size: number, pooled: boolean): AsyncGenerator<PipelineInput> {
    const state = this.files.get(file) ?? {
      size: -1,
      format: null,
      errors: [],
      count: 0,
      failedLines: new Set<number>(),
    };
    this.files.set(file, state);
    if (state.size === size) return;
    state.size = size;
    // A file whose format reads records one by one is streamed (as `check` and `export` read it):
    // only summaries stay in memory, and later reads start where the last one stopped.
    if (state.streamed && size < state.streamed.end) state.streamed = { ...state.streamed, end: 0, nextLine: 1 }; // rewritten: read again, seen records skipped
    if (state.streamed) {
      let batch: RecordLine[] = [];
      for await (const l of readLines(file, { start: state.streamed.end, firstLine: state.streamed.nextLine })) {
        batch.push(l);
        if (batch.length >= APPENDED_BATCH_LINES) {
          const chunk = this.streamedChunk(file, state, batch);
          if (chunk) yield chunk;
          batch = [];
        }
      }
      const chunk = this.streamedChunk(file, state, batch);
      if (chunk) yield chunk;
    } else {
      for await (const chunk of readFileChunks(file, {
        format: this.opts.format,
        model: this.opts.model,
        // On this thread, a batch is imported in one go while requests wait: small ones keep the
        // overview answering while a big run is checked (and cost less in the scavenger; pipeline.ts).
        ...batchingFor(pooled),
      })) {
        if (chunk.kind === 'loaded') {
          yield { kind: 'loaded', loaded: this.takeLoaded(file, size, state, chunk.loaded) };
          continue;
        }
        if (!state.streamed) {
          state.streamed = { end: 0, nextLine: 1, format: chunk.format };
          state.format = chunk.format;
          state.errors = [];
        }
        const lines = this.streamedChunk(file, state, chunk.lines);
        if (lines) yield lines;
      }
    }
    yield { kind: 'end', file };
  }

  /** A record or analysis error of the read: a streamed file's own; a whole-loaded file's line is not retried. Returns whether it was the file's. */
  error(error: ReadError): boolean {
    const state = this.files.get(error.file);
    if (state?.streamed) {
      state.errors.push(error);
      return true;
    }
    state?.failedLines.add(error.line);
    return false;
  }

  /** Complete lines of a streamed file, noted for re-reads; a partial last line waits for the rest of it. */
  private streamedChunk(file: string, state: FileState, lines: readonly RecordLine[]): PipelineInput | undefined {
    const complete = lines.filter((l) => l.problem !== 'unterminated');
    const last = complete.at(-1);
    if (!last || !state.streamed) return undefined;
    this.opts.noteLines(file, complete);
    state.streamed = { ...state.streamed, end: last.offset + last.length + 1, nextLine: last.line + 1 };
    return { kind: 'lines', file, format: state.streamed.format, lines: complete };
  }

  /** A whole-loaded file's errors are the file's own; only trajectories not read before go on. */
  private takeLoaded(file: string, size: number, state: FileState, loaded: LoadedFile): LoadedFile {
    state.format = loaded.format ?? null;
    // A file still being written ends in a partial line: its parse error is not an error yet.
    const text = size > 0 ? readLastByte(file) : '\n';
    const lastLine = loaded.errors.reduce((m, e) => Math.max(m, e.line), 0);
    state.errors = text === '\n' ? loaded.errors : loaded.errors.filter((e) => e.line !== lastLine);
    // Records already read (by file, line and id) are skipped: a growing file only adds new lines,
    // except to a trajectory grouped from several calls (a gateway's session took another turn).
    const fresh = loaded.trajectories.filter((t) => !state.failedLines.has(t.source.line) && !this.opts.known(t));
    return { ...loaded, errors: [], trajectories: fresh };
  }
}

function readLastByte(file: string): string {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const buf = Buffer.alloc(1);
    fs.readSync(fd, buf, 0, 1, size - 1);
    return buf.toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}
