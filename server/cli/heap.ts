// How far V8 lets the old generation grow past what stays live, for the long streaming commands
// (check, serve). V8 picks a growing factor of up to 4× the live heap after each full GC when
// collecting is cheap next to the program's allocation, as it is here: check keeps ~45 MB live
// (the tokenizers' tables, run-wide keys and group state), and nearly all it promotes is batch
// data that dies a moment later. So the old generation grew to ~4× that live set, and its size
// crept up over the run with the factor V8 measured: peak RSS rose with run size though nothing
// retained did. A fixed factor of 2 keeps it at ~2× live on any run (a full GC then every ~45 MB
// promoted, each ~10 ms). Measured on the standard run: peak RSS 331/320/319 MB at 75 MB/300 MB/1.2 GB instead of 335/372/388 MB, for ~3 % more CPU.
import v8 from 'node:v8';

const FLAG = '--heap-growing-percent';
/** Old generation limit after a full GC: (1 + this / 100) × what survived it. */
export const HEAP_GROWING_PERCENT = 100;

/** The V8 flag to set, or undefined when the user chose their own (node's argv or NODE_OPTIONS). */
export function heapGrowthFlag(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): string | undefined {
  const given = (a: string) => a.replace(/_/g, '-').startsWith(FLAG);
  if (execArgv.some(given) || nodeOptions.split(/\s+/).some(given)) return undefined;
  return `${FLAG}=${HEAP_GROWING_PERCENT}`;
}

/** Bound the old generation's growth for the rest of the process (worker threads share V8's flags). */
export function boundHeapGrowth(): void {
  const flag = heapGrowthFlag();
  if (flag) v8.setFlagsFromString(flag);
}
