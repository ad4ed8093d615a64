// The other run of `serve A --against B` (docs/diff-runs.md): B in a store of its own beside the
// served run's, the diff of the two runs' check reports (report/diff-runs.ts), and one pair at
// token level: a stream both sides have, A's tokens against B's with the first difference marked.
import path from 'node:path';
import type { CheckedTrajectory } from '../pipeline.ts';
import { streamTokens } from '../pipeline.ts';
import type { CheckReport } from '../report/check-report.ts';
import { diffRuns, type RunPair, type DiffRuns } from '../report/diff-runs.ts';
import type { AgainstPair, AgainstRun, AgainstStream, DiffResult, StreamInfo } from './api.ts';
import type { RunStore } from './store.ts';
import { availableStreams, idsDiff, NotFound } from './views.ts';

/** Builds a run's check report (the CLI passes its own: the report `check --json` writes). */
export type ReportOf = (paths: readonly string[]) => Promise<CheckReport>;

export interface AgainstSide {
  /** B's trajectories, read and checked as the served run's are. */
  store: RunStore;
  ready: Promise<void>;
  run(): AgainstRun;
  /** The pair of A's `a` and B's `b` in the diff, when the diff paired them. */
  pair(a: string, b: string): RunPair | undefined;
}

const display = (file: string) => {
  const rel = path.relative(process.cwd(), file);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
};

export function openAgainstSide(
  aPaths: readonly string[],
  bPaths: readonly string[],
  store: RunStore,
  reportOf: ReportOf,
): AgainstSide {
  let loading = true;
  let diff: DiffRuns | null = null;
  let error: string | null = null;
  const pairs = new Map<string, RunPair>();
  const ready = Promise.all([reportOf(aPaths), reportOf(bPaths)])
    .then(([a, b]) => {
      diff = diffRuns(a, b);
      for (const p of diff.pairs) pairs.set(JSON.stringify([p.a.id, p.b.id]), p);
    })
    .catch((e: unknown) => {
      error = (e as Error).message;
    })
    .finally(() => {
      loading = false;
    });
  return {
    store,
    ready,
    run: () => ({
      available: true,
      loading,
      aFiles: aPaths.map(display),
      bFiles: bPaths.map(display),
      diff,
      error,
    }),
    pair: (a, b) => pairs.get(JSON.stringify([a, b])),
  };
}

const sameStream = (x: StreamInfo, y: StreamInfo) => x.name === y.name && x.turn === y.turn;

function equalIds(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The pair at token level: `q.stream` (and turn) when both sides have it, else the first stream that differs. */
export function againstPairView(
  pair: RunPair,
  a: CheckedTrajectory,
  b: CheckedTrajectory,
  q: { stream?: StreamInfo['name']; turn?: number },
): AgainstPair {
  const bStreams = availableStreams(b);
  const streams: AgainstStream[] = [];
  for (const s of availableStreams(a)) {
    const other = bStreams.find((x) => sameStream(s, x));
    if (!other) continue;
    const ta = streamTokens(a, s.name, s.turn) ?? [];
    const tb = streamTokens(b, s.name, s.turn) ?? [];
    streams.push({ ...s, bLength: other.length, diverges: !equalIds(ta, tb) });
  }
  const asked =
    q.stream !== undefined
      ? streams.find((s) => s.name === q.stream && (q.turn === undefined || s.turn === q.turn))
      : undefined;
  if (q.stream !== undefined && !asked)
    throw new NotFound(`the pair ${pair.a.id} ↔ ${pair.b.id} has no ${q.stream} stream on both sides`);
  const shown = asked ?? streams.find((s) => s.diverges) ?? streams[0];
  if (!shown) return { pair, streams, stream: null, turn: -1, tokens: null };
  const ta = streamTokens(a, shown.name, shown.turn) ?? [];
  const tb = streamTokens(b, shown.name, shown.turn) ?? [];
  const where = shown.name === 'prompt' ? `turn ${shown.turn} prompt` : shown.name;
  const labels = { a: `A ${where}`, b: `B ${where}` };
  // The classifier words what its second stream has against the first (the re-render against the
  // generation): the side that lost findings is the one the difference explains, so for a pair B
  // fixed it reads A against B, and shows A on the left still.
  const fixedInB = pair.findings_removed.length > 0 && pair.findings_added.length === 0;
  return {
    pair,
    streams,
    stream: shown.name,
    turn: shown.turn,
    tokens: fixedInB
      ? swapSides(idsDiff(a.profile, tb, ta, { a: labels.b, b: labels.a }))
      : idsDiff(a.profile, ta, tb, labels),
  };
}

/** The same diff with its sides exchanged (rows, hunks and the divergence's indices and text). */
export function swapSides(d: DiffResult): DiffResult {
  return {
    a: d.b,
    b: d.a,
    rowsA: d.rowsB,
    rowsB: d.rowsA,
    hunks: d.hunks.map((h) => ({ row: h.row, aStart: h.bStart, aEnd: h.bEnd, bStart: h.aStart, bEnd: h.aEnd })),
    divergence: d.divergence && {
      ...d.divergence,
      aIndex: d.divergence.bIndex,
      bIndex: d.divergence.aIndex,
      textA: d.divergence.textB,
      textB: d.divergence.textA,
    },
    prefixOnly: d.prefixOnly,
  };
}
