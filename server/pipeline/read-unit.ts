// A thread's piece of a run's input (pipeline/units.ts), as it crosses to the thread that reads it.

/** One thread's piece of work: a whole file, or line-aligned bytes [from, to) of one. */
export interface ReadUnit {
  /** The file's place in the run's input order. */
  order: number;
  file: string;
  /** Whole: the file loaded or streamed from its start (the unit is the whole split). */
  whole: boolean;
  /** For a range: the first line start at or after the cut, the first at or after the next cut, and the first line's number. */
  from: number;
  to: number;
  firstLine: number;
  /** The last unit of its split: the split's `file` event follows its events. */
  last: boolean;
}
