// The row contract and the row-as-trajectory parse check per-token arrays in plain loops
// (server/export/row-schema.ts) instead of zod's per-element validation. They must decide exactly
// as zod does on the whole object, for good rows and for every kind of bad value.
import { describe, expect, it } from 'vitest';
import { Trajectory } from '../server/model/trajectory.ts';
import {
  EXPORT_SCHEMA_VERSION,
  ExportRow,
  parseWithBulkArrays,
  passesRowContract,
  rowToTrajectory,
} from '../server/export/row-schema.ts';

function goodRow(): ExportRow {
  const tokens = [151644, 8948, 198, 151652, 151655, 151655, 151653, 100, 200, 151645];
  return {
    schema_version: EXPORT_SCHEMA_VERSION,
    id: 'r',
    source: { file: 'x.jsonl', line: 3, format: 'native' },
    model: 'qwen2.5-vl',
    group: 'g',
    tokens,
    response_length: 3,
    loss_mask: [1, 1, 0],
    rollout_log_probs: [-0.5, -0, 0],
    reward: 1,
    status: 'completed',
    images: [],
    image_grid_thw: [],
    placeholder_ranges: [],
    mm_token_type_ids: tokens.map((t) => (t === 151655 ? 1 : 0)),
    position_ids: [0, 1, 2].map(() => tokens.map((_, i) => i)),
    pixel_values: null,
  };
}

/** Bad values of every field the loops check, each where zod rejects it (or, for some, accepts it). */
const MUTATIONS: [string, (r: ExportRow) => void][] = [
  ['negative token', (r) => (r.tokens[2] = -1)],
  ['fractional token', (r) => (r.tokens[2] = 1.5)],
  ['NaN token', (r) => (r.tokens[2] = Number.NaN)],
  ['infinite token', (r) => (r.tokens[2] = Number.POSITIVE_INFINITY)],
  ['unsafe integer token', (r) => (r.tokens[2] = 2 ** 53)],
  ['string token', (r) => ((r.tokens as unknown[])[2] = '5')],
  ['-0 token', (r) => (r.tokens[2] = -0)],
  ['mask 2', (r) => (r.loss_mask[0] = 2)],
  ['mask NaN', (r) => (r.loss_mask[0] = Number.NaN)],
  ['mask -0', (r) => (r.loss_mask[0] = -0)],
  ['logprob NaN', (r) => (r.rollout_log_probs![1] = Number.NaN)],
  ['logprob -Infinity', (r) => (r.rollout_log_probs![1] = Number.NEGATIVE_INFINITY)],
  ['logprob null', (r) => ((r.rollout_log_probs as unknown[])[1] = null)],
  ['logprob positive', (r) => (r.rollout_log_probs![1] = 3)],
  ['no logprobs', (r) => (r.rollout_log_probs = null)],
  ['token type 3', (r) => (r.mm_token_type_ids[1] = 3)],
  ['token type 1.5', (r) => (r.mm_token_type_ids[1] = 1.5)],
  ['position NaN', (r) => (r.position_ids[1]![4] = Number.NaN)],
  ['position negative', (r) => (r.position_ids[1]![4] = -7)],
  ['position row not an array', (r) => ((r.position_ids as unknown[])[2] = 5)],
  ['tokens not an array', (r) => ((r as { tokens: unknown }).tokens = 'abc')],
  ['hole in tokens', (r) => (r.tokens.length = 12)],
  ['bad id (not the arrays)', (r) => ((r as { id: unknown }).id = 5)],
  ['bad status (not the arrays)', (r) => ((r as { status: unknown }).status = 'done')],
];

describe('the row contract without per-element zod', () => {
  it('accepts what ExportRow accepts and rejects what it rejects', () => {
    expect(passesRowContract(goodRow())).toBe(true);
    for (const [name, mutate] of MUTATIONS) {
      const row = goodRow();
      mutate(row);
      expect([name, passesRowContract(row)]).toEqual([name, ExportRow.safeParse(row).success]);
    }
  });
});

describe('a row read as a trajectory without per-element zod', () => {
  /** The trajectory input rowToTrajectory builds, taken from what it returns (turns, sample). */
  function inputOf(row: ExportRow) {
    const t = rowToTrajectory(row, { file: 'x.jsonl', line: 3 });
    return { ...t, turns: t.turns.map((x) => ({ ...x })), sample: { ...t.sample! } };
  }

  it('gives the object Trajectory.parse gives, or throws its error', () => {
    const base = inputOf(goodRow());
    expect(parseWithBulkArrays(base)).toEqual(Trajectory.parse(base));
    // Bad values a batch written by another tool may hold: each array, each kind of value.
    const bad: [string, (i: ReturnType<typeof inputOf>) => void][] = [
      ['NaN token (accepted)', (i) => (i.sample.tokens[1] = Number.NaN)],
      ['infinite token (rejected)', (i) => (i.sample.tokens[1] = Number.POSITIVE_INFINITY)],
      ['infinite prompt id (rejected)', (i) => (i.turns[0]!.promptIds = [1, Number.NEGATIVE_INFINITY])],
      ['null logprob (accepted)', (i) => (i.turns[0]!.generatedLogprobs = [null as unknown as number, -1])],
      ['string logprob (rejected)', (i) => (i.sample.logprobs = ['x' as unknown as number])],
      ['fractional token type (rejected)', (i) => (i.sample.mmTokenTypeIds = [0.5])],
      ['fractional position (rejected)', (i) => (i.sample.positionIds = [[0, 1.5]])],
      ['infinite mask (rejected)', (i) => (i.sample.lossMask = [Number.POSITIVE_INFINITY])],
      ['bad id (rejected)', (i) => ((i as { id: unknown }).id = 7)],
    ];
    for (const [name, mutate] of bad) {
      const input = structuredClone(base);
      mutate(input);
      const want = Trajectory.safeParse(input);
      if (want.success) expect([name, parseWithBulkArrays(input)]).toEqual([name, want.data]);
      else expect(() => parseWithBulkArrays(input), name).toThrow(want.error.message);
    }
  });

  it('returns arrays of its own, not the row', () => {
    const row = goodRow();
    const t = rowToTrajectory(row, { file: 'x.jsonl', line: 3 });
    expect(t.sample!.tokens).toEqual(row.tokens);
    expect(t.sample!.tokens).not.toBe(row.tokens);
    expect(t.sample!.positionIds![0]).not.toBe(row.position_ids[0]);
  });
});
