// The trainer's side of a trajectory given apart from it: a trainer sidecar (docs/native-format.md,
// "Trainer sidecar") names a trajectory by id and holds the trainer's per-token arrays, indexed like
// the stored sample's rollout logprobs. Attached before the checks, so the mismatch metrics and
// findings see it exactly as if the format had carried it.
import type { Trajectory } from './trajectory.ts';

export interface TrainerArrays {
  trainerLogprobs: (number | null)[];
  refLogprobs?: (number | null)[];
  advantages?: number[];
}

/** Trajectory id (as the data states it) → its trainer arrays. */
export type TrainerSide = Record<string, TrainerArrays>;

/** `traj` with the sidecar's arrays on its sample (unchanged when the sidecar does not name it or it has no sample). */
export function withTrainerSide(traj: Trajectory, side: TrainerSide | undefined): Trajectory {
  const arrays = side && Object.hasOwn(side, traj.id) ? side[traj.id] : undefined;
  if (!arrays || !traj.sample) return traj;
  return {
    ...traj,
    sample: {
      ...traj.sample,
      trainerLogprobs: arrays.trainerLogprobs,
      ...(arrays.refLogprobs ? { refLogprobs: arrays.refLogprobs } : {}),
      ...(arrays.advantages ? { advantages: arrays.advantages } : {}),
    },
  };
}
