// The filter language (server/report/filter.ts, docs/filter.md): parsing, names checked against
// the model's lists, errors at the offending character, null, and print∘parse round trips on
// random expressions.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  FILTER_FIELDS,
  FilterError,
  type FilterSubject,
  matchesFilter,
  parseFilter,
  printFilter,
} from '../server/report/filter.ts';
import { DIVERGENCE_CAUSES, FINDING_KINDS } from '../server/model/finding.ts';
import { filterAst } from './support/filter-arbitrary.ts';

function subject(over: Partial<FilterSubject['entry']> = {}, group: FilterSubject['group'] = null): FilterSubject {
  return {
    entry: {
      id: 't1',
      source: { file: 'run/a.jsonl' },
      format: 'verl',
      model: null,
      group: null,
      step: null,
      sample: null,
      reward: null,
      advantage: null,
      turns: null,
      images: null,
      response_tokens: null,
      status: null,
      findings: [],
      ...over,
    },
    group,
  };
}

function errorOf(text: string): FilterError {
  try {
    parseFilter(text);
  } catch (e) {
    if (e instanceof FilterError) return e;
    throw e;
  }
  throw new Error(`${text} parsed`);
}

const matches = (text: string, s: FilterSubject) => matchesFilter(parseFilter(text), s);

describe('parsing', () => {
  it('gives and precedence over or, and not over and', () => {
    expect(parseFilter('reward >= 1 or step < 3 and not kind:prefix_break')).toEqual({
      type: 'or',
      left: { type: 'compare', field: 'reward', op: '>=', value: 1 },
      right: {
        type: 'and',
        left: { type: 'compare', field: 'step', op: '<', value: 3 },
        right: { type: 'not', operand: { type: 'finding', facet: 'kind', value: 'prefix_break' } },
      },
    });
  });

  it('reads quoted strings with escapes, bare enum words, numbers in JSON syntax and keywords in any case', () => {
    expect(parseFilter(`id = 'it\\'s "x"\\n\\u00e9'`)).toEqual({
      type: 'compare',
      field: 'id',
      op: '=',
      value: 'it\'s "x"\né',
    });
    expect(parseFilter('format = verl')).toEqual({ type: 'compare', field: 'format', op: '=', value: 'verl' });
    expect(parseFilter('model = Qwen/Qwen2.5-VL-7B-Instruct')).toMatchObject({ value: 'Qwen/Qwen2.5-VL-7B-Instruct' });
    expect(parseFilter('group.reward_std > -1.5e-3')).toMatchObject({ value: -0.0015 });
    expect(parseFilter('NOT group.degenerate AND reward = NULL')).toEqual({
      type: 'and',
      left: { type: 'not', operand: { type: 'flag', field: 'group.degenerate' } },
      right: { type: 'compare', field: 'reward', op: '=', value: null },
    });
  });

  it.each([
    ['rewrd >= 1', 0, 'unknown field "rewrd" (known: reward, step, group,'],
    ['reward >= 1 and kind:prefix_brake', 21, 'unknown kind "prefix_brake" (known: prefix_break,'],
    ['cause:duplicated_eoss', 6, 'unknown cause "duplicated_eoss" (known: duplicated_eos,'],
    ['severity:fatal', 9, 'unknown severity "fatal" (known: error, warning)'],
    ['colour:red', 0, 'unknown finding facet "colour" (known: kind, cause, severity)'],
    ['(reward >= 1', 12, 'expected ")" to close the "(" at character 1'],
    ['reward >= "1"', 10, 'reward is a number'],
    ['step >= 100 and', 15, 'expected a field'],
    ['reward > null', 9, 'null compares only with = or !='],
    ['group.degenerate < true', 17, 'compare it with = or !='],
    ['reward', 6, 'expected a comparison'],
    ['id = "open', 5, 'unterminated string'],
    ['id = "\\q"', 6, 'unknown escape \\q'],
    ['reward >= 1 step', 12, 'expected "and", "or"'],
    ['reward >= 1x', 11, 'a number ends here'],
    ['reward # 1', 7, 'unexpected character "#"'],
    ['format = verll', 9, 'unknown format "verll" (known:'],
  ])('%s: error at %i', (text, offset, message) => {
    const e = errorOf(text);
    expect(e.offset).toBe(offset);
    expect(e.message).toContain(message);
    expect(e.pointer()).toBe(`${text}\n${' '.repeat(offset)}^`);
  });

  it('lists every kind and cause of the model when a name is unknown', () => {
    const kinds = errorOf('kind:nope').message;
    for (const k of FINDING_KINDS) expect(kinds).toContain(k);
    const causes = errorOf('cause:nope').message;
    for (const c of DIVERGENCE_CAUSES) expect(causes).toContain(c);
    const fields = errorOf('nope = 1').message;
    for (const f of Object.keys(FILTER_FIELDS)) expect(fields).toContain(f);
  });
});

describe('evaluation', () => {
  const prefixBreak = { kind: 'prefix_break', cause: 'duplicated_eos', severity: 'error' };
  const degenerate = { size: 4, reward_mean: 1, reward_std: 0, degenerate: true };

  it('compares numbers and strings, and reads findings and the group', () => {
    const s = subject({ reward: 1, step: 120, findings: [prefixBreak], group: 'g7' }, degenerate);
    expect(matches('reward >= 1 and step >= 100', s)).toBe(true);
    expect(matches('reward >= 1 and not severity:error', s)).toBe(false);
    expect(matches('kind:prefix_break and cause:duplicated_eos', s)).toBe(true);
    expect(matches('cause:missing_eos or kind:group', s)).toBe(false);
    expect(matches('group.degenerate and group.size = 4 and group.reward_std <= 0', s)).toBe(true);
    expect(matches('group = g7 and group.degenerate = true', s)).toBe(true);
    expect(matches('file = "run/a.jsonl" and id < "t2" and format != slime', s)).toBe(true);
  });

  it('holds no comparison with null but = null, and not negates it (two-valued)', () => {
    const s = subject({ reward: null });
    expect(matches('reward >= 0', s)).toBe(false);
    expect(matches('reward < 0', s)).toBe(false);
    expect(matches('reward != 1', s)).toBe(false);
    expect(matches('reward = null', s)).toBe(true);
    expect(matches('reward != null', s)).toBe(false);
    expect(matches('not reward >= 0', s)).toBe(true);
    // A field the report does not carry reads as null; so does every group field outside a group.
    expect(matches('turns = null and group.size = null and not group.degenerate', subject())).toBe(true);
    expect(matches('group.size < 100', subject())).toBe(false);
  });
});

describe('print and parse', () => {
  it('parse(print(ast)) is the AST, and print(parse(text)) gives the printed text back', () => {
    fc.assert(
      fc.property(filterAst(), (ast) => {
        const printed = printFilter(ast);
        const parsed = parseFilter(printed);
        expect(parsed).toEqual(ast);
        expect(printFilter(parsed)).toBe(printed);
      }),
      { numRuns: 500 },
    );
  });

  it('prints parentheses only where precedence needs them', () => {
    expect(
      printFilter(parseFilter(`${'(a_b)'.replace('a_b', 'reward = 1')} or (step = 2 and (id = x or id = y))`)),
    ).toBe('reward = 1 or step = 2 and (id = "x" or id = "y")');
    expect(printFilter(parseFilter('not (kind:group or reward = 1) and ((step = 1))'))).toBe(
      'not (kind:group or reward = 1) and step = 1',
    );
    expect(printFilter(parseFilter('step = 1 or (step = 2 or step = 3)'))).toBe('step = 1 or (step = 2 or step = 3)');
  });
});
