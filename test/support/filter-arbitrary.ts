// Random filter ASTs (server/analysis/filter.ts) over every field, comparison, finding facet and
// value kind, for the property tests.
import fc from 'fast-check';
import {
  COMPARISON_OPS,
  FILTER_FIELDS,
  FINDING_FACETS,
  type FilterField,
  type FilterNode,
} from '../../server/analysis/filter.ts';

const fieldNames = Object.keys(FILTER_FIELDS) as FilterField[];
const awkward = fc.constantFrom('"', "'", '\\', '\n', 'é', '😀', ' ', 'a', '/');

/** Values for a comparison with `field`, from those the data may hold when `known` is given. */
function leafOf(known: Partial<Record<FilterField, readonly (string | number)[]>>): fc.Arbitrary<FilterNode> {
  const text = (field: FilterField) =>
    fc.oneof(
      fc.string({ unit: awkward, maxLength: 8 }),
      fc.string({ unit: 'binary', maxLength: 4 }),
      ...(known[field]?.length ? [fc.constantFrom(...(known[field] as string[]))] : []),
    );
  const number = (field: FilterField) =>
    fc.oneof(
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.integer({ min: -2, max: 300 }),
      ...(known[field]?.length ? [fc.constantFrom(...(known[field] as number[]))] : []),
    );
  return fc.oneof(
    fc.constantFrom(...fieldNames).chain((field): fc.Arbitrary<FilterNode> => {
      const type = FILTER_FIELDS[field];
      const isNull = fc.record({
        type: fc.constant('compare' as const),
        field: fc.constant(field),
        op: fc.constantFrom('=' as const, '!=' as const),
        value: fc.constant(null),
      });
      if (type === 'boolean')
        return fc.oneof(
          fc.constant<FilterNode>({ type: 'flag', field }),
          fc.record({
            type: fc.constant('compare' as const),
            field: fc.constant(field),
            op: fc.constantFrom('=' as const, '!=' as const),
            value: fc.constantFrom(true, false),
          }),
          isNull,
        );
      const value: fc.Arbitrary<string | number> = type === 'number' ? number(field) : text(field);
      return fc.oneof(
        {
          weight: 4,
          arbitrary: fc.record({
            type: fc.constant('compare' as const),
            field: fc.constant(field),
            op: fc.constantFrom(...COMPARISON_OPS),
            value,
          }),
        },
        { weight: 1, arbitrary: isNull },
      );
    }),
    fc.constantFrom(...(Object.keys(FINDING_FACETS) as (keyof typeof FINDING_FACETS)[])).chain((facet) =>
      fc.record({
        type: fc.constant('finding' as const),
        facet: fc.constant(facet),
        value: fc.constantFrom(...FINDING_FACETS[facet]),
      }),
    ),
  );
}

/** A random filter; `known` biases comparisons towards values a run holds, so they select something. */
export function filterAst(
  known: Partial<Record<FilterField, readonly (string | number)[]>> = {},
): fc.Arbitrary<FilterNode> {
  const leaf = leafOf(known);
  return fc.letrec<{ node: FilterNode }>((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.record({ type: fc.constant('not' as const), operand: tie('node') }),
      fc.record({ type: fc.constantFrom('and' as const, 'or' as const), left: tie('node'), right: tie('node') }),
    ),
  })).node;
}
