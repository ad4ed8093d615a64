// Worker-thread side of the analysis pool: receives trajectories, runs the same
// analyzeTrajectory the main thread would, and sends back everything but the profile object
// (tokenizers are not transferable; the main thread re-opens the profile by name from its cache).
import { parentPort } from 'node:worker_threads';
import { z } from 'zod';
import { Trajectory } from './model/trajectory.ts';
import { analyzeTrajectory, type RunOptions } from './pipeline.ts';

const Job = z.object({ seq: z.number(), trajectory: Trajectory, opts: z.custom<RunOptions>(), roots: z.array(z.string()) });

parentPort!.on('message', async (raw: unknown) => {
  const job = Job.parse(raw);
  try {
    const { profile, ...rest } = await analyzeTrajectory(job.trajectory, job.opts, job.roots);
    parentPort!.postMessage({ seq: job.seq, ok: true, result: { ...rest, profileName: profile.name } });
  } catch (e) {
    parentPort!.postMessage({ seq: job.seq, ok: false, message: (e as Error).message });
  }
});
