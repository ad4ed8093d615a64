// What a run is asked to do (check, export, serve): shared by the pipeline, its workers and the
// wire between them, so none of them imports the others for it.
import type { TrainerSide } from '../model/trainer-side.ts';
import type { ProcessorSettings } from '../model/trajectory.ts';
import type { MismatchThresholds } from '../analysis/logprob-mismatch.ts';
import type { RowSpec } from '../export/encoded.ts';
import type { ShardSpec } from './shard.ts';

export interface RunOptions {
  /** Built-in profile name, model name, or local model folder. */
  model?: string;
  format?: string;
  processor?: ProcessorSettings;
  /** Folders local images may be read from (default: the folders of the inputs). */
  roots?: string[];
  /** Threads that read and analyze the input; 0: the main thread alone; unset: chosen by run size (pipeline.ts `workersFor`). */
  workers?: number;
  /** Fetch http(s) images named by the records (`--allow-remote-images`; SSRF-guarded, server/images/remote.ts). */
  allowRemoteImages?: boolean;
  /** Rollout-vs-trainer logprob thresholds (`--max-logprob-delta`, `--mean-logprob-delta`, `--is-cap`). */
  mismatch?: MismatchThresholds;
  /** Read only this shard's input splits (pipeline/shard.ts). */
  shard?: ShardSpec;
  /**
   * Bytes of a read unit (pipeline/units.ts): the threads' piece of work. Unset: about four units a
   * thread, from 1 to 32 MiB (`unitBytesFor`); tests set it small to cut small files.
   */
  unitBytes?: number;
  /** Trainer arrays given beside the data (`--trainer FILE`, import/trainer-sidecar.ts), by trajectory id. */
  trainer?: TrainerSide;
  /**
   * The consumer reads only the findings and a trajectory's summary fields (`check`): analysis
   * workers then compute its group member and logprob figures themselves and send back no token
   * streams, alignment or inline image bytes (pipeline/wire.ts `forReport`).
   */
  reportOnly?: boolean;
  /**
   * With `reportOnly`, the consumer does not read token streams either (`check --json`; its text
   * output shows tokens around a finding): each trajectory analyzed on this thread is cut to what
   * a worker would send as soon as it is checked, so a batch holds no streams of the records it
   * has done while it analyzes the rest. What a batch holds lives long enough to be promoted to
   * V8's old generation, which grows to a multiple of that.
   */
  noStreams?: boolean;
  /**
   * The consumer is the server's store (`serve`, server/http/store.ts), which lists a summary per
   * trajectory and re-reads a record when its analysis is asked for: analysis workers compute the
   * run index's facts themselves and send back no token streams, alignment or inline image bytes
   * (pipeline/wire.ts `forStore`).
   */
  storeIndex?: boolean;
  /**
   * The run is exported (`export`): each trajectory's row or reject entry is built, re-checked and
   * encoded right after its analysis, on the same thread (export/encoded.ts), and the trajectory
   * goes on without its streams; the export's thread only writes the bytes.
   */
  exportRows?: RowSpec;
}
