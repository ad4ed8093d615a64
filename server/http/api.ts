// The HTTP API between `rollscope serve` and the browser app: one zod schema per query and per
// response. The server validates what it sends; the app imports these as TYPES only (no zod
// in the bundle), so the two sides cannot drift apart silently.
import { z } from 'zod';
import { DivergenceCause, Finding, FindingKind, Severity, StreamName } from '../model/finding.ts';
import { FormatName, GridThw, ReadError } from '../model/trajectory.ts';
import { RATIO_BIN_COUNT } from '../analysis/ratio-histogram.ts';
import { RunPair, DiffRuns } from '../report/diff-runs.ts';
import { RejectReason as RejectReasonSchema } from '../export/policy.ts';
import { DEFAULT_SORT, type ListFilterField, SORT_KEYS } from './list-fields.ts';

export type { DiffFinding, RunPair } from '../report/diff-runs.ts';

/** Why export leaves a trajectory out (the app words each one). */
export type { RejectReason } from '../export/policy.ts';

export const ApiError = z.object({
  error: z.string(),
  /** For a `where` that does not parse: the 0-based character at fault (docs/filter.md). */
  offset: z.number().int().nonnegative().optional(),
});
export type ApiError = z.infer<typeof ApiError>;

export const FindingCounts = z.object({
  kind: z.record(z.string(), z.number().int()),
  cause: z.record(z.string(), z.number().int()),
  severity: z.record(z.string(), z.number().int()),
});
export type FindingCounts = z.infer<typeof FindingCounts>;

export const TrajectorySummary = z.object({
  id: z.string(),
  format: FormatName,
  source: z.object({ file: z.string(), line: z.number().int() }),
  turns: z.number().int(),
  /** Length of the canonical stream. */
  tokens: z.number().int(),
  images: z.number().int(),
  reward: z.number().nullable(),
  /** The status the data states (slime `status`, AReaL and native records); null when it states none. */
  status: z.string().nullable(),
  /** The last turn's finish reason as the engine gave it (`stop`, `length`, `tool_calls`); null when unknown. */
  finishReason: z.string().nullable().default(null),
  /** `error` when any finding is an error, `warning` when only warnings, else `ok`. */
  health: z.enum(['ok', 'warning', 'error']),
  findings: FindingCounts,
  /** The most severe finding's message, for the row tooltip. */
  headline: z.string().nullable(),
  /** Rollout against trainer logprobs, when the trajectory has both (views-logprobs.ts). */
  mismatch: z
    .object({
      meanAbsDelta: z.number(),
      maxAbsDelta: z.number(),
      maxRatio: z.number(),
      pastCapShare: z.number(),
      /** Trained tokens per importance-ratio bin (analysis/ratio-histogram.ts), sparse [bin, count] pairs. */
      ratioBins: z.array(z.tuple([z.number().int(), z.number().int()])),
    })
    .nullable()
    .optional(),
  /** GRPO group and rollout step, as the data states them (null when it does not). */
  group: z.string().nullable().default(null),
  step: z.number().int().nullable().default(null),
  /** Its place among its group's samples in the order they were read (null outside a group), as `check --json` counts it. */
  sample: z.number().int().nullable().default(null),
  advantage: z.number().nullable().default(null),
  /** Generated (response) tokens. */
  responseTokens: z.number().int().nullable().default(null),
  /** Stopped at the length limit (status or last finish reason); null when the data states neither. */
  truncated: z.boolean().nullable().default(null),
  /** Error findings of the image-pad checks (steps.ts PLACEHOLDER_KINDS). */
  placeholderErrors: z.number().int().default(0),
  /**
   * Why `export` rejects it, as decided before re-aligning (its findings and structure, warnings not
   * included); empty when it is exported (building its row may still fail: an image unreadable).
   */
  rejects: z.array(RejectReasonSchema).default([]),
  /** Kinds of its errors the canonical re-alignment repairs (the export writes it repaired). */
  repaired: z.array(FindingKind).default([]),
});
export type TrajectorySummary = z.infer<typeof TrajectorySummary>;

export const RunFile = z.object({ file: z.string(), format: z.string().nullable(), trajectories: z.number().int() });

export const RunInfo = z.object({
  /** The paths `serve` was given (files or folders), relative to the working folder when inside it. */
  paths: z.array(z.string()).default([]),
  /** Files as the user gave them (relative to the working folder when inside it). */
  files: z.array(RunFile),
  trajectories: z.number().int(),
  /** Trajectories with at least one finding of each kind / cause / severity. */
  counts: FindingCounts,
  health: z.object({ ok: z.number().int(), warning: z.number().int(), error: z.number().int() }),
  profile: z.object({ name: z.string(), family: z.string() }),
  /** The built-in model profiles (the playground renders with any of them, or with the run's). */
  builtinProfiles: z.array(z.string()).default([]),
  /** The model profiles the run's trajectories were checked with, most trajectories first. */
  models: z.array(
    z.object({
      profile: z.string(),
      trajectories: z.number().int(),
      /** The model names the records state (e.g. `Qwen/Qwen2.5-VL-7B-Instruct`), if any. */
      names: z.array(z.string()),
      /** For a model no profile covers, the one sentence that says so (`pass --model FOLDER`); else null. */
      limitation: z.string().nullable(),
      /** What the profile's loader could not read and defaulted (a model folder without some file). */
      notes: z.array(z.string()),
    }),
  ),
  errors: z.array(ReadError),
  demo: z.boolean(),
  /** Still loading (files are checked in the background). */
  loading: z.boolean(),
  /** Trajectories that state each field (the run table shows a column only when some do). */
  stated: z
    .object({
      step: z.number().int(),
      group: z.number().int(),
      advantage: z.number().int(),
      reward: z.number().int(),
      status: z.number().int(),
    })
    .default({ step: 0, group: 0, advantage: 0, reward: 0, status: 0 }),
  /** Changes whenever a trajectory is added or read again grown (a call log's session took a turn). */
  revision: z.number().int().default(0),
});
export type RunInfo = z.infer<typeof RunInfo>;

export const SortKey = z.enum(SORT_KEYS);
export type SortKey = z.infer<typeof SortKey>;

/**
 * The overview's filter (list-fields.ts names its fields): what the list shows, what its chips and
 * histograms count, and what "export the current filter" exports. One schema for all of them.
 */
const LIST_FILTER_SHAPE = {
  kind: FindingKind.optional(),
  cause: DivergenceCause.optional(),
  severity: Severity.optional(),
  /** `ok`, `warning`, `error` (health), or any status string the data states. */
  status: z.string().max(200).optional(),
  /** Substring of id/file, or a token id (digits) that occurs in the trajectory. */
  q: z.string().max(500).optional(),
  /** Only trajectories with trained tokens in this importance-ratio bin (`GET /api/run/ratios`). */
  ratioBin: z.coerce
    .number()
    .int()
    .min(0)
    .max(RATIO_BIN_COUNT - 1)
    .optional(),
  /** Only this rollout step / this GRPO group (by its id; with `step`, that step's group). */
  step: z.coerce.number().int().nonnegative().optional(),
  group: z.string().max(500).optional(),
  /** A filter expression (docs/filter.md), over the same fields as `check --where`. */
  where: z.string().max(4000).optional(),
  /** What `export` decides before re-aligning (TrajectorySummary `rejects`): the rows it rejects, or writes. */
  export: z.enum(['rejected', 'exported']).optional(),
} satisfies Record<ListFilterField, z.ZodType>;
// Every field list-fields.ts names, and no other: a field added on one side only fails to compile.
const filterFieldsExact: [Exclude<keyof typeof LIST_FILTER_SHAPE, ListFilterField>] extends [never] ? true : never =
  true;
void filterFieldsExact;

export const ListFilter = z.object(LIST_FILTER_SHAPE);
export type ListFilter = z.infer<typeof ListFilter>;
export type ListFilterInput = z.input<typeof ListFilter>;

export const ListQuery = ListFilter.extend({
  sort: SortKey.default(DEFAULT_SORT),
  order: z.enum(['asc', 'desc']).default('desc'),
  offset: z.coerce.number().int().nonnegative().default(0),
  limit: z.coerce.number().int().positive().max(100_000).default(1000),
});
export type ListQuery = z.infer<typeof ListQuery>;
export type ListQueryInput = z.input<typeof ListQuery>;

/** What the filtered list holds, counted as the run's header counts the run: the chips follow the filter. */
export const ListFacets = z.object({
  counts: FindingCounts,
  health: z.object({ ok: z.number().int(), warning: z.number().int(), error: z.number().int() }),
  /**
   * What an export of them would write, as decided before re-aligning (TrajectorySummary `rejects`):
   * rows written and rejected, the rejected by their first reason (each counted once), those
   * rejected only for warnings that doubt them (written with include-warnings), and the written
   * rows per kind of error the re-alignment repairs.
   */
  export: z.object({
    exported: z.number().int(),
    rejected: z.number().int(),
    byFirstReason: z.record(z.string(), z.number().int()),
    onlyWarnings: z.number().int(),
    repaired: z.record(z.string(), z.number().int()),
  }),
});
export type ListFacets = z.infer<typeof ListFacets>;

export const TrajectoryList = z.object({
  total: z.number().int(),
  offset: z.number().int(),
  items: z.array(TrajectorySummary),
  /** Counts over every trajectory the filter selects (not only this page). */
  facets: ListFacets,
});
export type TrajectoryList = z.infer<typeof TrajectoryList>;

export const StreamInfo = z.object({
  name: StreamName,
  /** For `prompt`: whose prompt (⧺ generation) it is. */
  turn: z.number().int(),
  length: z.number().int(),
  label: z.string(),
});
export type StreamInfo = z.infer<typeof StreamInfo>;

export const ImageInfo = z.object({
  index: z.number().int(),
  width: z.number().int().nullable(),
  height: z.number().int().nullable(),
  /** Why the image's bytes or size are not available. */
  unavailable: z.string().nullable(),
  hasPreview: z.boolean(),
  settings: z.object({ minPixels: z.number(), maxPixels: z.number(), patchSize: z.number(), mergeSize: z.number() }),
  /** The image math (`imageTokens`) for this image, when its size is known. */
  layout: z
    .object({
      resizedWidth: z.number().int(),
      resizedHeight: z.number().int(),
      gridThw: GridThw,
      padCount: z.number().int(),
      cellSize: z.number().int(),
      cellsWide: z.number().int(),
      cellsHigh: z.number().int(),
    })
    .nullable(),
  problem: z.string().nullable(),
  /** Pads found for this image in the observed stream (null when it has no span there). */
  actualPads: z.number().int().nullable(),
  expectedPads: z.number().int().nullable(),
  /** The stored `image_grid_thw` entry, when the data has one. */
  storedGrid: GridThw.nullable(),
});
export type ImageInfo = z.infer<typeof ImageInfo>;

/** One piece of a message: its text, the model's reasoning, a tool call it wrote, or an image (its pad run). */
export const MessagePart = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string() }),
  /** The family's reasoning block (its think tags): shown folded. */
  z.object({ type: z.literal('reasoning'), text: z.string() }),
  /** A tool call in the family's tool-call tags as the model wrote it (`arguments` as written; null name: not parsed). */
  z.object({ type: z.literal('tool_call'), name: z.string().nullable(), arguments: z.string() }),
  /** Image `image` of the trajectory; its pad run in the message's stream (null for a record's message: no tokens). */
  z.object({
    type: z.literal('image'),
    image: z.number().int(),
    padStart: z.number().int().nullable(),
    padLength: z.number().int().nullable(),
    expectedPads: z.number().int().nullable(),
  }),
]);
export type MessagePart = z.infer<typeof MessagePart>;

export const ConversationMessage = z.object({
  /** `system`, `user`, `assistant`, `tool` (a tool response, as the template wraps it), or what the record says. */
  role: z.string(),
  /** The model call whose prompt first held it, or (generated) the call that generated it. */
  turn: z.number().int(),
  /** The model's own tokens (a turn's generation). */
  generated: z.boolean(),
  /**
   * Not a whole message: what a re-rendered history put where the last call's tokens stood (a prompt
   * that stops extending the last one restarts here, mid-message).
   */
  fragment: z.boolean(),
  /** Where its tokens are: [start, end) of a stream (null: the conversation is the record's messages, no ids). */
  tokens: z
    .object({ stream: StreamName, turn: z.number().int(), start: z.number().int(), end: z.number().int() })
    .nullable(),
  parts: z.array(MessagePart),
  /** How the generation stopped (its turn's finish reason), for a generated message. */
  finishReason: z.string().nullable(),
  /** Findings (indices into the detail's findings) at one of its tokens, or about its turn. */
  findings: z.array(z.number().int()),
});
export type ConversationMessage = z.infer<typeof ConversationMessage>;

/**
 * The conversation as the engine saw it (`GET /api/trajectories/ID/messages`): each call's new
 * prompt tokens and its generation, cut into messages (views-messages.ts).
 */
export const Conversation = z.object({
  /** `prompts`: each turn's prompt ids; `canonical`: the re-aligned stream; `messages`: the record's messages (no ids). */
  source: z.enum(['prompts', 'canonical', 'messages']),
  /** Why the conversation comes from where it does, when it is not the engine's prompts. */
  note: z.string().nullable(),
  messages: z.array(ConversationMessage),
});
export type Conversation = z.infer<typeof Conversation>;

/** The streams `/diff` compares: `a` against `b`; for the prefix pair (`prompt`/`prompt`), `turn` is the later turn. */
export const DiffA = z.enum(['canonical', 'prompt', 'sample']);
export type DiffA = z.infer<typeof DiffA>;
export const DiffB = z.enum(['rerender', 'prompt', 'sample']);
export type DiffB = z.infer<typeof DiffB>;
export const DiffPair = z.object({ a: DiffA, b: DiffB, turn: z.number().int() });
export type DiffPair = z.infer<typeof DiffPair>;

/**
 * Where the app shows a finding: the diff of its divergence (its token on `side`), or its own
 * stream at its token (`token` null when no single token is at fault).
 */
export const FindingTarget = z.discriminatedUnion('view', [
  z.object({
    view: z.literal('diff'),
    ...DiffPair.shape,
    side: z.enum(['a', 'b']),
    token: z.number().int().nullable(),
  }),
  z.object({
    view: z.literal('stream'),
    stream: StreamName,
    turn: z.number().int(),
    token: z.number().int().nullable(),
  }),
  /** Rollout against trainer logprobs (`/logprobs`), at a token of the training sample. */
  z.object({ view: z.literal('logprobs'), token: z.number().int().nullable() }),
]);
export type FindingTarget = z.infer<typeof FindingTarget>;

/** A finding and where to see it (null: none of the trajectory's streams holds it). */
export const LocatedFinding = Finding.extend({ target: FindingTarget.nullable() });
export type LocatedFinding = z.infer<typeof LocatedFinding>;

export const TrajectoryDetail = z.object({
  summary: TrajectorySummary,
  model: z.string().nullable(),
  profile: z.string(),
  findings: z.array(LocatedFinding),
  limitations: z.array(z.string()),
  notes: z.array(z.string()),
  streams: z.array(StreamInfo),
  images: z.array(ImageInfo),
  /** Diffs worth showing, best first (`a`/`b` query values for /diff). */
  diffs: z.array(DiffPair.extend({ label: z.string(), diverges: z.boolean() })),
  meta: z.record(z.string(), z.unknown()).nullable(),
  /**
   * The findings grouped by the event that caused them, the worst first (analysis/root-cause.ts):
   * the finding that names it (`root`, an index into `findings`) and those that follow from it,
   * each with only what the root does not already say.
   */
  causes: z.array(
    z.object({
      root: z.number().int(),
      consequences: z.array(z.object({ index: z.number().int(), text: z.string() })),
    }),
  ),
});
export type TrajectoryDetail = z.infer<typeof TrajectoryDetail>;

export const StreamQuery = z.object({
  name: StreamName.default('canonical'),
  turn: z.coerce.number().int().min(-1).default(-1),
  /**
   * Only the first `head` tokens (a few more where the cut would split an image's pad run or a
   * character): the first screen of a long stream, sent before the whole of it.
   */
  head: z.coerce.number().int().min(1).optional(),
});
export type StreamQuery = z.infer<typeof StreamQuery>;

export const VisionSpanInfo = z.object({
  image: z.number().int(),
  kind: z.enum(['image', 'video']),
  start: z.number().int(),
  padStart: z.number().int(),
  padLength: z.number().int(),
  /** -1 when the stream ends inside the image. */
  end: z.number().int(),
  expectedPads: z.number().int().nullable(),
  gridThw: GridThw.nullable(),
  /** Merged cells per row of the image: how many pads make one row of it (null when its grid is unknown). */
  cellsWide: z.number().int().nullable(),
});
export type VisionSpanInfo = z.infer<typeof VisionSpanInfo>;

export const TurnMark = z.object({
  index: z.number().int(),
  turn: z.number().int(),
  /** What starts here: `generated` (the model's tokens), `observation`, or `response` (sample tail). */
  what: z.enum(['prompt', 'generated', 'observation', 'response']),
});
export type TurnMark = z.infer<typeof TurnMark>;

/**
 * Decoded pieces once per distinct token id (a 128k-token stream has a few thousand distinct
 * ids), whitespace made visible (`·` space, `⏎` newline, `→` tab).
 */
export const Pieces = z.object({
  pieces: z.record(z.string(), z.string()),
  /** Added/special token ids among them (drawn as tags). */
  specialIds: z.array(z.number().int()),
  /**
   * Tokens `start..end-1` that hold one character between them (byte-level BPE split its UTF-8
   * bytes, so each piece alone is `\xNN` bytes), and the text they form, whitespace made visible.
   */
  joins: z.array(z.object({ start: z.number().int(), end: z.number().int(), text: z.string() })),
});
export type Pieces = z.infer<typeof Pieces>;

export const TokenStream = z.object({
  name: StreamName,
  turn: z.number().int(),
  ids: z.array(z.number().int()),
  ...Pieces.shape,
  /** Per token; null where the stream has no mask / logprob there. */
  lossMask: z.array(z.number().nullable()).nullable(),
  logprobs: z.array(z.number().nullable()).nullable(),
  /** Tokens whose logprob is NaN, infinite or positive (JSON cannot carry NaN; these show as invalid). */
  badLogprobs: z.array(z.number().int()),
  turns: z.array(TurnMark),
  vision: z.array(VisionSpanInfo),
  /** Set when this is the head of the stream (`head=N`): the whole stream's length, of which `ids` are the first. */
  total: z.number().int().optional(),
});
export type TokenStream = z.infer<typeof TokenStream>;

export const DiffQuery = z.object({
  a: DiffA.default('canonical'),
  b: DiffB.default('rerender'),
  /** For the prefix pair (`a=prompt&b=prompt`): the later turn k+1, compared against turn k's prompt ⧺ generation. */
  turn: z.coerce.number().int().min(0).default(1),
});
export type DiffQuery = z.infer<typeof DiffQuery>;

export const DiffSide = z.object({
  label: z.string(),
  ids: z.array(z.number().int()),
  ...Pieces.shape,
});

export const DiffResult = z.object({
  a: DiffSide,
  b: DiffSide,
  /** Aligned rows: index into a and into b (-1 = nothing on that side). */
  rowsA: z.array(z.number().int()),
  rowsB: z.array(z.number().int()),
  /** Row of each hunk's start, and whether that row is the first divergence. */
  hunks: z.array(
    z.object({
      row: z.number().int(),
      aStart: z.number().int(),
      aEnd: z.number().int(),
      bStart: z.number().int(),
      bEnd: z.number().int(),
    }),
  ),
  divergence: z
    .object({
      row: z.number().int(),
      aIndex: z.number().int(),
      bIndex: z.number().int(),
      cause: DivergenceCause,
      explanation: z.string(),
      /** Decoded text around the divergence on each side: before, the differing tokens, after. */
      textA: z.tuple([z.string(), z.string(), z.string()]),
      textB: z.tuple([z.string(), z.string(), z.string()]),
    })
    .nullable(),
  /** For prefix pairs: b may run on past a (the next observation) without that being a difference. */
  prefixOnly: z.boolean(),
});
export type DiffResult = z.infer<typeof DiffResult>;

/**
 * Everything a shared page shows of one trajectory (server/http/share-page.ts): the answers the app's
 * API calls would get, computed by the same views, embedded in the page and answered by the app's
 * static transport (app/api.ts). Keys: `name:turn` for streams, `a:b:turn` for diffs, the image
 * index for previews (data: URLs).
 */
export const SharedTrajectory = z.object({
  version: z.literal(1),
  id: z.string(),
  createdAt: z.string(),
  run: RunInfo,
  list: TrajectoryList,
  detail: TrajectoryDetail,
  messages: Conversation,
  streams: z.record(z.string(), TokenStream),
  diffs: z.record(z.string(), DiffResult),
  previews: z.record(z.string(), z.string()),
});
export type SharedTrajectory = z.infer<typeof SharedTrajectory>;

// ---------------------------------------------------------------------------------------------
// Rollout against trainer logprobs (views-logprobs.ts): one trajectory's tokens, the run's ratios.

export const MismatchStatsSchema = z.object({
  tokens: z.number().int(),
  meanAbsDelta: z.number(),
  maxAbsDelta: z.number(),
  maxAt: z.number().int(),
  k3: z.number(),
  maxRatio: z.number(),
  minRatio: z.number(),
  pastCapShare: z.number(),
  firstPastThreshold: z.number().int().optional(),
});

export const Thresholds = z.object({ maxDelta: z.number(), meanDelta: z.number(), isCap: z.number() });

export const LogprobView = z.object({
  /** False when the trajectory has no trainer logprobs (or no rollout logprobs); `reason` says which. */
  available: z.boolean(),
  reason: z.string().nullable(),
  /**
   * No trainer side, but the rollout's own logprobs are there: `rollout` holds them (on the
   * sample's tokens, else the re-aligned stream) and the view shows them alone.
   */
  rolloutOnly: z.boolean().default(false),
  /** Tokens whose rollout logprob no sampler gives (NaN, ±∞, above 0): JSON carries them as null in `rollout`. */
  invalid: z.array(z.number().int()).default([]),
  /** The training sample's tokens, or for rollout logprobs alone without a sample the re-aligned stream (the index space of every array below). */
  ids: z.array(z.number().int()),
  ...Pieces.shape,
  /** Per token, null outside the response or where a side has no finite logprob. */
  rollout: z.array(z.number().nullable()),
  trainer: z.array(z.number().nullable()),
  /** Δ = trainer − rollout, and the importance ratio exp(Δ). */
  delta: z.array(z.number().nullable()),
  ratio: z.array(z.number().nullable()),
  /** Loss mask per token (null outside the response): a 0 is never counted nor coloured as divergent. */
  mask: z.array(z.number().nullable()),
  /** Trained tokens whose |Δ| exceeds the threshold, in order. */
  pastThreshold: z.array(z.number().int()),
  /** Each turn's generated tokens [start, end) and each image's span [start, end), absolute. */
  turns: z.array(z.object({ turn: z.number().int(), start: z.number().int(), end: z.number().int() })),
  images: z.array(z.object({ image: z.number().int(), start: z.number().int(), end: z.number().int() })),
  /** Where the response starts (everything before it is prompt, never compared). */
  responseStart: z.number().int(),
  thresholds: Thresholds,
  stats: MismatchStatsSchema.extend({
    turns: z.array(MismatchStatsSchema.extend({ turn: z.number().int() })),
    shift: z.object({ by: z.union([z.literal(1), z.literal(-1)]), meanAbsDeltaShifted: z.number() }).optional(),
  }).nullable(),
});
export type LogprobView = z.infer<typeof LogprobView>;

export const RatioHistogram = z.object({
  bins: z.array(
    z.object({
      bin: z.number().int(),
      /** Ratio range [lo, hi); hi null for the open top bin. */
      lo: z.number(),
      hi: z.number().nullable(),
      tokens: z.number().int(),
      trajectories: z.number().int(),
    }),
  ),
  isCap: z.number(),
  /** Trajectories with trainer logprobs, and the trained tokens they hold. */
  trajectories: z.number().int(),
  tokens: z.number().int(),
});
export type RatioHistogram = z.infer<typeof RatioHistogram>;

// ---------------------------------------------------------------------------------------------
// `serve ROLLOUT --trained TRAINED` (routes-compare.ts): the run against what the trainer was given.

export const CompareSide = z.object({ id: z.string(), file: z.string(), line: z.number().int(), format: z.string() });
export type CompareSide = z.infer<typeof CompareSide>;

export const CompareRun = z.object({
  /** False when serve was not given `--trained`. */
  available: z.boolean(),
  loading: z.boolean(),
  trainedFiles: z.array(z.string()),
  pairs: z.array(
    z.object({
      rollout: CompareSide,
      trained: CompareSide,
      /** Fields that differ (tokens, images, placeholders, loss_mask, logprobs, position_ids). */
      fields: z.array(z.string()),
      headline: z.string().nullable(),
    }),
  ),
  unmatched: z.object({ rollout: z.array(CompareSide), trained: z.array(CompareSide) }),
  errors: z.array(ReadError),
});
export type CompareRun = z.infer<typeof CompareRun>;

/** One field of the pair: whether it matches, and the values on both sides around its first difference. */
export const CompareField = z.object({
  field: z.string(),
  /** `same`, `differs`, or `absent` (the trained side does not carry this field). */
  state: z.enum(['same', 'differs', 'absent']),
  index: z.number().int(),
  message: z.string(),
  /** Tokens around the first difference and each side's value there (as text). */
  window: z
    .object({
      from: z.number().int(),
      pieces: z.array(z.string()),
      rollout: z.array(z.string()),
      trained: z.array(z.string()),
    })
    .nullable(),
});
export type CompareField = z.infer<typeof CompareField>;

export const CompareImage = z.object({
  index: z.number().int(),
  width: z.number().int().nullable(),
  height: z.number().int().nullable(),
  sha256: z.string().nullable(),
  /** Preview address, when the side has the image's bytes. */
  preview: z.string().nullable(),
  unavailable: z.string().nullable(),
});
export type CompareImage = z.infer<typeof CompareImage>;

export const ComparePair = z.object({
  rollout: CompareSide,
  /** Null when no trained trajectory joins this one (`reason` says why). */
  trained: CompareSide.nullable(),
  reason: z.string().nullable(),
  /** How the pair was joined: by id, or by sample index. */
  joinedBy: z.enum(['id', 'sample_index']).nullable(),
  fields: z.array(CompareField),
  /** The rollout's canonical tokens (a) against the trained tokens (b), aligned, the first difference in words. */
  tokens: DiffResult.nullable(),
  images: z.object({ rollout: z.array(CompareImage), trained: z.array(CompareImage) }),
  /** Pad runs on each side (offset, length) and the stated image_grid_thw. */
  placeholders: z.object({
    rollout: z.array(z.object({ offset: z.number().int(), length: z.number().int() })),
    trained: z.array(z.object({ offset: z.number().int(), length: z.number().int() })),
    rolloutGrids: z.array(GridThw.nullable()),
    trainedGrids: z.array(GridThw).nullable(),
  }),
});
export type ComparePair = z.infer<typeof ComparePair>;

export const ComparePreviewQuery = z.object({
  side: z.enum(['rollout', 'trained']).default('trained'),
  w: z.coerce.number().int().min(16).max(2048).default(256),
});

export const PreviewQuery = z.object({ w: z.coerce.number().int().min(16).max(2048).default(512) });

// ---------------------------------------------------------------------------------------------
// Run against run (`serve A --against B`; server/http/routes-against.ts, docs/diff-runs.md).

/** GET /api/against: the diff of the served run (A) against B, once both are checked. */
export const AgainstRun = z.object({
  /** False when serve was not given `--against`. */
  available: z.boolean(),
  loading: z.boolean(),
  aFiles: z.array(z.string()),
  bFiles: z.array(z.string()),
  diff: DiffRuns.nullable(),
  error: z.string().nullable(),
});
export type AgainstRun = z.infer<typeof AgainstRun>;

export const AgainstPairQuery = z.object({
  a: z.string(),
  b: z.string(),
  stream: StreamName.optional(),
  turn: z.coerce.number().int().min(-1).optional(),
});

/** A stream both sides of a pair have, and whether their tokens differ. */
export const AgainstStream = StreamInfo.extend({ bLength: z.number().int(), diverges: z.boolean() });
export type AgainstStream = z.infer<typeof AgainstStream>;

/** GET /api/against/pair?a=ID&b=ID[&stream=S&turn=K]: one pair at token level, side by side. */
export const AgainstPair = z.object({
  pair: RunPair,
  /** Streams both sides have, in the trajectory view's order. */
  streams: z.array(AgainstStream),
  /** The stream shown: the one asked for, else the first that differs, else the first. */
  stream: StreamName.nullable(),
  turn: z.number().int(),
  /** A's tokens against B's, the first difference classified; null when the sides share no stream. */
  tokens: DiffResult.nullable(),
});
export type AgainstPair = z.infer<typeof AgainstPair>;

// ---------------------------------------------------------------------------------------------
// Export from the browser (server/http/routes-export.ts): POST a selection, poll the job, download.

export const ExportSelection = z.discriminatedUnion('kind', [
  /** Every trajectory the filter shows. */
  z.object({ kind: z.literal('filter'), filter: ListFilter.strict() }).strict(),
  /** Trajectories picked one by one (the overview's checkboxes), by their ids in the list. */
  z.object({ kind: z.literal('ids'), ids: z.array(z.string().min(1).max(2000)).min(1).max(100_000) }).strict(),
]);
export type ExportSelection = z.infer<typeof ExportSelection>;

export const ExportRequest = z
  .object({
    format: z.enum(['jsonl', 'parquet']),
    includeWarnings: z.boolean().default(false),
    selection: ExportSelection,
  })
  .strict();
export type ExportRequest = z.infer<typeof ExportRequest>;
export type ExportRequestInput = z.input<typeof ExportRequest>;

export const EXPORT_FILE_ROLES = ['batch', 'manifest', 'rejects'] as const;
export const ExportFileRole = z.enum(EXPORT_FILE_ROLES);
export type ExportFileRole = z.infer<typeof ExportFileRole>;

export const ExportJob = z.object({
  id: z.string(),
  state: z.enum(['running', 'done', 'failed', 'cancelled']),
  format: z.enum(['jsonl', 'parquet']),
  includeWarnings: z.boolean(),
  /** Whether a filter or ticked trajectories were exported. */
  scope: z.enum(['filter', 'ids']),
  /** The selection in words, as the manifest records it. */
  selection: z.string(),
  /** Trajectories selected when the export started. */
  selected: z.number().int(),
  progress: z.object({
    /** Trajectories re-checked so far in the files that hold the selection, and how many those files hold. */
    scanned: z.number().int(),
    toScan: z.number().int(),
    /** Selected trajectories handled so far: read = exported + rejected. */
    read: z.number().int(),
    exported: z.number().int(),
    rejected: z.number().int(),
    bytesWritten: z.number().int(),
  }),
  /** The manifest's counts, once the batch is written. */
  counts: z
    .object({
      read: z.number().int(),
      exported: z.number().int(),
      rejected: z.number().int(),
      /** Rejected entries per reason (an entry may have several: these may add up to more than `rejected`). */
      byReason: z.record(z.string(), z.number().int()),
      /** Rejected entries by their first reason, each counted once (these add up to `rejected`). */
      byFirstReason: z.record(z.string(), z.number().int()).default({}),
      /** Exported trajectories per kind of warning they carry (warnings that describe a correct row). */
      exportedWithWarnings: z.record(z.string(), z.number().int()),
      /** Exported trajectories per kind of error the canonical re-alignment repaired (the CLI's "repaired by re-alignment"). */
      repaired: z.record(z.string(), z.number().int()).default({}),
    })
    .nullable(),
  /** The batch, its manifest and its rejects, once written (download links). */
  files: z.array(z.object({ role: ExportFileRole, name: z.string(), bytes: z.number().int(), url: z.string() })),
  error: z.string().nullable(),
  startedAt: z.string(),
  finishedAt: z.string().nullable(),
});
export type ExportJob = z.infer<typeof ExportJob>;

/** `POST /api/exports/JOB/cancel` takes an empty object. */
export const ExportCancel = z.object({}).strict();

// ---------------------------------------------------------------------------------------------
// Playground (server/http/routes-ask.ts): render a pasted conversation, diff it against a stream.

/** Longest conversation text accepted (room for a few inline data: URL images). */
export const MAX_PLAYGROUND_CHARS = 24 * 1024 * 1024;

export const PlaygroundRequest = z
  .object({
    /** An OpenAI-style conversation `{"messages": [...], "tools"?: [...]}` as JSON text (parsed as Python's json.loads would). */
    conversation: z.string().min(1).max(MAX_PLAYGROUND_CHARS),
    addGenerationPrompt: z.boolean().default(true),
    /**
     * The model profile to render with: a built-in name or one the run's trajectories were checked
     * with (RunInfo `models`); default: the target trajectory's, else the run's.
     */
    profile: z.string().min(1).max(4096).optional(),
    /** Render with this trajectory's profile and diff the result against one of its streams. */
    target: z
      .object({
        id: z.string().min(1).max(2000),
        stream: StreamName,
        turn: z.number().int().min(-1).default(-1),
        /** The stream may go on past the rendered ids (a prompt against prompt ⧺ generation) without that being a difference. */
        prefix: z.boolean().default(true),
      })
      .strict()
      .nullish(),
  })
  .strict();
export type PlaygroundRequest = z.infer<typeof PlaygroundRequest>;
export type PlaygroundRequestInput = z.input<typeof PlaygroundRequest>;

export const PlaygroundImage = z.object({
  /** Where the image is in the conversation, e.g. `messages[0].content[1]`. */
  field: z.string(),
  /** `width/height` or `data: URL`. */
  source: z.string(),
  width: z.number().int(),
  height: z.number().int(),
  resizedWidth: z.number().int(),
  resizedHeight: z.number().int(),
  gridThw: GridThw,
  padCount: z.number().int(),
});
export type PlaygroundImage = z.infer<typeof PlaygroundImage>;

export const PlaygroundResult = z.object({
  /** The model profile the conversation was rendered with. */
  profile: z.string(),
  text: z.string(),
  /** The text tokenized: one placeholder per image, as the template writes it. */
  tokenIds: z.array(z.number().int()),
  /** What the model sees: each image's pad expanded to its count. */
  ids: z.array(z.number().int()),
  ...Pieces.shape,
  /** Image spans in `ids`. */
  vision: z.array(VisionSpanInfo),
  images: z.array(PlaygroundImage),
  notes: z.array(z.string()),
  /** The rendered ids (a) against the target stream (b), when a target was given. */
  diff: DiffResult.nullable(),
});
export type PlaygroundResult = z.infer<typeof PlaygroundResult>;

/** A trajectory's first-turn conversation as playground text, images given by their size. */
export const PlaygroundPrefill = z.object({
  id: z.string(),
  turn: z.number().int(),
  conversation: z.string(),
  addGenerationPrompt: z.boolean(),
  /** The stream the rendered prompt should begin: the turn's prompt ⧺ generation. */
  target: z.object({ stream: StreamName, turn: z.number().int() }),
});
export type PlaygroundPrefill = z.infer<typeof PlaygroundPrefill>;

/** A histogram over a run-wide range: `counts[i]` values fell in bin i of `bins` equal bins from `min` to `max`. */
export const Histogram = z.object({
  counts: z.array(z.number().int()),
  mean: z.number().nullable(),
  n: z.number().int(),
});
export type Histogram = z.infer<typeof Histogram>;
export const HistogramRange = z.object({ min: z.number(), max: z.number(), bins: z.number().int() });
export type HistogramRange = z.infer<typeof HistogramRange>;

/** What the run page plots per step; null where the step's data gives no value (a gap, not a zero). */
export const StepTrends = z.object({
  /** Share of the step's trajectories with a prefix break. */
  prefixBreakShare: z.number().nullable(),
  /** Trajectories with an error of the image-pad checks. */
  placeholderErrors: z.number().int(),
  reward: z.object({
    mean: z.number().nullable(),
    std: z.number().nullable(),
    p10: z.number().nullable(),
    p90: z.number().nullable(),
  }),
  responseTokens: z.object({ p50: z.number().nullable(), p95: z.number().nullable() }),
  /** Share truncated among the trajectories that state whether they were. */
  truncatedShare: z.number().nullable(),
  degenerateShare: z.number().nullable(),
  /** Mean over the trajectories with both logprobs of their mean |trainer − rollout|, in nats. */
  meanAbsDelta: z.number().nullable(),
  /** Mean over the same trajectories of the share of tokens whose importance ratio is past the IS cap. */
  pastCapShare: z.number().nullable(),
});
export type StepTrends = z.infer<typeof StepTrends>;

/** One rollout step of the run (step null: the trajectories that state none). */
export const StepSummary = z.object({
  step: z.number().int().nullable(),
  trajectories: z.number().int(),
  health: z.object({ ok: z.number().int(), warning: z.number().int(), error: z.number().int() }),
  /** Trajectories with at least one finding of each kind (group findings included). */
  findings: z.record(z.string(), z.number().int()),
  groups: z.number().int(),
  degenerateGroups: z.number().int(),
  reward: Histogram,
  /** Generated tokens per trajectory. */
  length: Histogram,
  /** The logprob mismatch per step (`trends.meanAbsDelta`), once the data carries it (null until then). */
  logprobs: z.number().nullable(),
  trends: StepTrends,
});
export type StepSummary = z.infer<typeof StepSummary>;

export const RunSteps = z.object({
  steps: z.array(StepSummary),
  /** The ranges every step's histograms share (null when no trajectory states a reward / length). */
  rewardRange: HistogramRange.nullable(),
  lengthRange: HistogramRange.nullable(),
});
export type RunSteps = z.infer<typeof RunSteps>;

export const GroupQuery = z.object({
  step: z.coerce.number().int().nonnegative().optional(),
  degenerate: z.enum(['true', 'false']).optional(),
  /** `false`: the verdicts only (the grouped overview has the members from the list already). */
  members: z.enum(['true', 'false']).default('true'),
  offset: z.coerce.number().int().nonnegative().default(0),
  limit: z.coerce.number().int().positive().max(10_000).default(500),
});
export type GroupQuery = z.infer<typeof GroupQuery>;
export type GroupQueryInput = z.input<typeof GroupQuery>;

export const GroupMemberInfo = z.object({
  id: z.string(),
  reward: z.number().nullable(),
  advantage: z.number().nullable(),
  health: z.enum(['ok', 'warning', 'error']),
  responseTokens: z.number().int().nullable(),
});
export type GroupMemberInfo = z.infer<typeof GroupMemberInfo>;

/** One GRPO group: `check --json`'s group entry plus its members, in the order they were read. */
export const GroupInfo = z.object({
  key: z.string(),
  id: z.string(),
  step: z.number().int().nullable(),
  size: z.number().int(),
  reward_mean: z.number().nullable(),
  reward_std: z.number().nullable(),
  degenerate: z.boolean(),
  findings: z.array(Finding),
  members: z.array(GroupMemberInfo),
});
export type GroupInfo = z.infer<typeof GroupInfo>;

export const GroupList = z.object({
  total: z.number().int(),
  offset: z.number().int(),
  /** Trajectories of the run that name no group (not listed here). */
  ungrouped: z.number().int(),
  items: z.array(GroupInfo),
});
export type GroupList = z.infer<typeof GroupList>;
