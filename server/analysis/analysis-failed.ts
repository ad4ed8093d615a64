// A step of one trajectory's analysis that raised an exception becomes an `analysis_failed`
// finding on that trajectory (docs/check-json.md): which step, the exception's message, and the
// turn and field where known. The trajectory is never lost to an exception, and the steps that do
// not depend on the failed one still run.
import type { Finding } from '../model/finding.ts';

export const ANALYSIS_STEPS = [
  /** Reading image bytes and sizes, and the image token math. */
  'image sizing',
  /** Joining a trainer sidecar (`--trainer FILE`). */
  'trainer side',
  /** Choosing and loading the model profile. */
  'profile',
  /** The chat template (and the request normalization before it). */
  'render',
  /** Encoding rendered text, decoding generated ids. */
  'tokenize',
  /** The canonical re-alignment. */
  'realign',
  /** One of the checks (the message names it). */
  'checks',
  /** Building, re-checking or writing an export row. */
  'export',
  /** Comparing a rollout with its trained side. */
  'compare',
] as const;
export type AnalysisStep = (typeof ANALYSIS_STEPS)[number];

/** Where in the trajectory a step was working. */
export interface StepPlace {
  turn?: number;
  /** The model field whose value the step was reading (`turns.0.messages`). */
  field?: string;
  /** Which function of the step, when the step has several (the checks). */
  detail?: string;
}

/**
 * An exception that knows the step it came from (render.ts raises `render` for the template,
 * `tokenize` for the tokenizer), so the caller's finding names the step that really failed.
 * The message is the original one.
 */
export class AnalysisStepError extends Error {
  override name = 'AnalysisStepError';
  constructor(
    readonly step: AnalysisStep,
    readonly error: unknown,
  ) {
    super(errorMessage(error));
  }
}

/** Run `fn`, re-raising what it throws as an AnalysisStepError of `step` (one already named is kept). */
export function inStep<T>(step: AnalysisStep, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw e instanceof AnalysisStepError ? e : new AnalysisStepError(step, e);
  }
}

/** `inStep` for async steps. */
export async function inStepAsync<T>(step: AnalysisStep, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw e instanceof AnalysisStepError ? e : new AnalysisStepError(step, e);
  }
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  return String(e);
}

/** The `analysis_failed` finding for an exception; `step` unless the exception names its own. */
export function analysisFailed(step: AnalysisStep, e: unknown, place: StepPlace = {}): Finding {
  const failed = e instanceof AnalysisStepError ? e.step : step;
  const error = errorMessage(e);
  const turn = place.turn ?? -1;
  const where = [
    place.detail,
    turn >= 0 ? `turn ${turn}` : undefined,
    place.field !== undefined ? place.field : undefined,
  ].filter((s): s is string => s !== undefined);
  return {
    kind: 'analysis_failed',
    severity: 'error',
    turn,
    index: -1,
    ...(place.field !== undefined ? { field: place.field } : {}),
    actual: { step: failed, error },
    message: `the ${failed} step failed${where.length > 0 ? ` (${where.join(', ')})` : ''}: ${error}; what depends on it was not checked`,
  };
}

/**
 * The failures of one trajectory's analysis, one finding per distinct exception: the same
 * conversation failing to render in the re-alignment, the re-render and the prompt-length check
 * is one failure, reported where it was met first.
 */
export class StepFailures {
  readonly findings: Finding[] = [];
  private readonly seen = new Set<string>();

  add(step: AnalysisStep, e: unknown, place: StepPlace = {}): void {
    const f = analysisFailed(step, e, place);
    const { step: failed, error } = f.actual as { step: string; error: string };
    const key = `${failed}\u0000${error}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.findings.push(f);
  }

  /** `fn`'s value, or undefined when it threw (the failure recorded). */
  async guard<T>(step: AnalysisStep, place: StepPlace, fn: () => T | Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (e) {
      this.add(step, e, place);
      return undefined;
    }
  }
}
