// Worker-thread side of the analysis pool: runs the same code the main thread would
// (pipeline/analyze.ts: analyzeTrajectory, importAndAnalyze) and sends back everything but the
// profile object (tokenizers are not transferable; the main thread re-opens it by name).
import { parentPort } from 'node:worker_threads';
import { z } from 'zod';
import { FormatName, type Trajectory } from './model/trajectory.ts';
import {
  analyzeTrajectory,
  importAndAnalyze,
  withExport,
  type ChunkOutcome,
  type RunOptions,
} from './pipeline/analyze.ts';
import { unitEvents } from './pipeline/units.ts';
import { packForWire, toWire, unpackFromWire, type Reply, type WireEvent } from './pipeline/wire.ts';

const RecordLine = z.object({
  line: z.number().int(),
  offset: z.number().int(),
  length: z.number().int(),
  text: z.string(),
  problem: z.enum(['too_long', 'unterminated', 'invalid_utf8', 'unreadable']).optional(),
  field: z.string().optional(),
  badByte: z.number().int().optional(),
  reason: z.string().optional(),
});
const Common = {
  seq: z.number().int(),
  opts: z.custom<RunOptions>((v) => typeof v === 'object' && v !== null),
  roots: z.array(z.string()),
};
const Job = z.discriminatedUnion('kind', [
  // The main thread validated the trajectory with the Trajectory schema when it loaded it (loadFile);
  // validating its token arrays again here would cost more than analyzing them.
  z.object({
    kind: z.literal('trajectory'),
    trajectory: z.custom<Trajectory>((v) => typeof v === 'object' && v !== null && 'turns' in v),
    ...Common,
  }),
  z.object({ kind: z.literal('lines'), file: z.string(), format: FormatName, lines: z.array(RecordLine), ...Common }),
  z.object({
    kind: z.literal('unit'),
    unit: z.object({
      order: z.number().int(),
      file: z.string(),
      whole: z.boolean(),
      from: z.number().int().nonnegative(),
      to: z.number().int().nonnegative(),
      firstLine: z.number().int().positive(),
      last: z.boolean(),
    }),
    ...Common,
  }),
]);

function wireEvents(events: ChunkOutcome['events'], opts: RunOptions): WireEvent[] {
  return events.map(
    (e): WireEvent =>
      e.type === 'trajectory'
        ? {
            type: 'trajectory',
            checked: toWire(e.checked, opts),
            ...('exported' in e && e.exported ? { exported: e.exported } : {}),
          }
        : e,
  );
}

function post(reply: Reply): void {
  const transfer: ArrayBuffer[] = [];
  parentPort!.postMessage(packForWire(reply, transfer), transfer);
}

/** A unit read here: its events posted as they come, batch by batch (the main thread puts them in run order). */
async function readUnit(job: Extract<z.infer<typeof Job>, { kind: 'unit' }>): Promise<void> {
  try {
    for await (const part of unitEvents(job.unit, job.opts, job.roots)) {
      if ('done' in part)
        post({ seq: job.seq, ok: true, kind: 'unit-done', ...(part.format ? { format: part.format } : {}) });
      else
        post({
          seq: job.seq,
          ok: true,
          kind: 'unit-part',
          events: wireEvents(part.events, job.opts),
          imported: part.imported,
          ...(part.readTo !== undefined ? { readTo: part.readTo } : {}),
        });
    }
  } catch (e) {
    post({ seq: job.seq, ok: false, message: (e as Error).message });
  }
}

let units: Promise<void> = Promise.resolve();

parentPort!.on('message', async (raw: unknown) => {
  const job = Job.parse(unpackFromWire(raw));
  // One unit at a time, in the order they came: the main thread hands the oldest out first and waits for it first.
  if (job.kind === 'unit') {
    units = units.then(() => readUnit(job));
    return;
  }
  let reply: Reply;
  try {
    if (job.kind === 'trajectory') {
      const ev = await withExport(
        { type: 'trajectory', checked: await analyzeTrajectory(job.trajectory, job.opts, job.roots) },
        job.opts,
      );
      if (ev.type !== 'trajectory') throw new Error('the analysis of a trajectory gave no trajectory');
      reply = {
        seq: job.seq,
        ok: true,
        kind: 'trajectory',
        result: toWire(ev.checked, job.opts),
        ...('exported' in ev && ev.exported ? { exported: ev.exported } : {}),
      };
    } else {
      const { events, imported } = await importAndAnalyze(job, job.opts, job.roots);
      reply = { seq: job.seq, ok: true, kind: 'lines', events: wireEvents(events, job.opts), imported };
    }
  } catch (e) {
    reply = { seq: job.seq, ok: false, message: (e as Error).message };
  }
  post(reply);
});
