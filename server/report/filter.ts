// The filter language of `--where` and the overview's URL (docs/filter.md): a lexer, a
// recursive-descent parser to an AST, a printer that gives the AST back as text, and an evaluator
// over one `check --json` entry and its group. Names are checked when parsed, against the
// exhaustive lists of the model, so a filter that parses never fails to evaluate.
import { DIVERGENCE_CAUSES, FINDING_KINDS, Severity } from '../model/finding.ts';
import { FORMAT_NAMES } from '../model/trajectory.ts';
import { GROUP_FINDING } from '../analysis/groups.ts';
import type { ReportEntry, ReportGroup } from './check-report.ts';

/** A filter that cannot be read: `offset` is the 0-based character of `expression` at fault. */
export class FilterError extends Error {
  constructor(
    message: string,
    readonly expression: string,
    readonly offset: number,
  ) {
    super(message);
    this.name = 'FilterError';
  }

  /** The expression's line holding the offending character, with a caret under it (what the command line prints). */
  pointer(): string {
    const start = this.expression.lastIndexOf('\n', this.offset - 1) + 1;
    const end = this.expression.indexOf('\n', this.offset);
    const line = this.expression.slice(start, end < 0 ? undefined : end);
    // Tabs kept as tabs under the caret line, so the caret lines up in any terminal.
    const pad = line.slice(0, this.offset - start).replace(/[^\t]/g, ' ');
    return `${line}\n${pad}^`;
  }
}

type FieldType = 'number' | 'string' | 'boolean';

/** The fields a filter can compare, with their type, in the order docs/filter.md lists them. */
export const FILTER_FIELDS = {
  reward: 'number',
  step: 'number',
  group: 'string',
  sample: 'number',
  turns: 'number',
  response_tokens: 'number',
  advantage: 'number',
  images: 'number',
  format: 'string',
  model: 'string',
  status: 'string',
  id: 'string',
  file: 'string',
  'group.degenerate': 'boolean',
  'group.reward_std': 'number',
  'group.reward_mean': 'number',
  'group.size': 'number',
} as const satisfies Record<string, FieldType>;
export type FilterField = keyof typeof FILTER_FIELDS;

/** `kind:…`, `cause:…`, `severity:…`: true when any finding of the trajectory (its group's included) has that value. */
export const FINDING_FACETS = {
  kind: FINDING_KINDS,
  cause: DIVERGENCE_CAUSES,
  severity: Severity.options,
} as const satisfies Record<string, readonly string[]>;
export type FindingFacet = keyof typeof FINDING_FACETS;

export const COMPARISON_OPS = ['=', '!=', '<', '<=', '>', '>='] as const;
export type ComparisonOp = (typeof COMPARISON_OPS)[number];

export type FilterValue = number | string | boolean | null;

export type FilterNode =
  | { type: 'and' | 'or'; left: FilterNode; right: FilterNode }
  | { type: 'not'; operand: FilterNode }
  | { type: 'compare'; field: FilterField; op: ComparisonOp; value: FilterValue }
  | { type: 'finding'; facet: FindingFacet; value: string }
  /** A boolean field on its own (`group.degenerate`): true when the field is true. */
  | { type: 'flag'; field: FilterField };

// ---------------------------------------------------------------------------------------------
// Lexer

type Token =
  | { type: 'word'; text: string; at: number; end: number }
  | { type: 'number'; value: number; at: number; end: number }
  | { type: 'string'; value: string; at: number; end: number }
  | { type: 'op'; text: ComparisonOp; at: number; end: number }
  | { type: '(' | ')' | ':' | 'end'; at: number; end: number };

/** A bare word: field names (`group.reward_std`), keywords, and enum values (`verl`, `prefix_break`). */
const WORD = /[A-Za-z_][A-Za-z0-9_.\-/]*/y;
/** JSON's number syntax (what the printer writes). */
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const ESCAPES: Record<string, string> = {
  '"': '"',
  "'": "'",
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

function lex(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const at = i;
    if (c === '(' || c === ')' || c === ':') {
      tokens.push({ type: c, at, end: ++i });
      continue;
    }
    const two = text.slice(i, i + 2);
    if (two === '!=' || two === '<=' || two === '>=') {
      tokens.push({ type: 'op', text: two, at, end: (i += 2) });
      continue;
    }
    if (c === '=' || c === '<' || c === '>') {
      tokens.push({ type: 'op', text: c, at, end: ++i });
      continue;
    }
    if (c === '"' || c === "'") {
      let value = '';
      i++;
      for (;;) {
        if (i >= text.length) throw new FilterError(`unterminated string (opened with ${c})`, text, at);
        const d = text[i]!;
        if (d === c) break;
        if (d !== '\\') {
          value += d;
          i++;
          continue;
        }
        const e = text[i + 1];
        if (e === 'u') {
          const hex = text.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new FilterError('\\u takes four hex digits', text, i);
          value += String.fromCharCode(Number.parseInt(hex, 16));
          i += 6;
        } else if (e !== undefined && e in ESCAPES) {
          value += ESCAPES[e];
          i += 2;
        } else
          throw new FilterError(
            `unknown escape \\${e ?? ''} (known: \\" \\' \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)`,
            text,
            i,
          );
      }
      tokens.push({ type: 'string', value, at, end: ++i });
      continue;
    }
    NUMBER.lastIndex = i;
    const n = NUMBER.exec(text);
    if (n && (c === '-' || /[0-9]/.test(c))) {
      i += n[0].length;
      if (i < text.length && /[A-Za-z0-9_.]/.test(text[i]!))
        throw new FilterError(`a number ends here (quote the value if it is a string)`, text, i);
      tokens.push({ type: 'number', value: Number(n[0]), at, end: i });
      continue;
    }
    WORD.lastIndex = i;
    const w = WORD.exec(text);
    if (w) {
      i += w[0].length;
      tokens.push({ type: 'word', text: w[0], at, end: i });
      continue;
    }
    throw new FilterError(`unexpected character ${JSON.stringify(c)}`, text, at);
  }
  tokens.push({ type: 'end', at: text.length, end: text.length });
  return tokens;
}

// ---------------------------------------------------------------------------------------------
// Parser

const KEYWORDS = ['and', 'or', 'not', 'null', 'true', 'false'] as const;

function keyword(t: Token): string | undefined {
  if (t.type !== 'word') return undefined;
  const k = t.text.toLowerCase();
  return (KEYWORDS as readonly string[]).includes(k) ? k : undefined;
}

function listed(values: readonly string[]): string {
  return values.join(', ');
}

function describe(t: Token): string {
  switch (t.type) {
    case 'end':
      return 'the end of the expression';
    case 'word':
      return JSON.stringify(t.text);
    case 'number':
      return `the number ${t.value}`;
    case 'string':
      return `the string ${JSON.stringify(t.value)}`;
    case 'op':
      return JSON.stringify(t.text);
    default:
      return JSON.stringify(t.type);
  }
}

/** Parse `text` (docs/filter.md#grammar); throws a `FilterError` at the first character that does not fit. */
export function parseFilter(text: string): FilterNode {
  const tokens = lex(text);
  let pos = 0;
  const peek = () => tokens[pos]!;
  const next = () => tokens[pos++]!;
  const fail = (message: string, t: Token = peek()): never => {
    throw new FilterError(message, text, t.at);
  };

  const or = (): FilterNode => {
    let left = and();
    while (keyword(peek()) === 'or') {
      next();
      left = { type: 'or', left, right: and() };
    }
    return left;
  };
  const and = (): FilterNode => {
    let left = unary();
    while (keyword(peek()) === 'and') {
      next();
      left = { type: 'and', left, right: unary() };
    }
    return left;
  };
  const unary = (): FilterNode => {
    if (keyword(peek()) === 'not') {
      next();
      return { type: 'not', operand: unary() };
    }
    return primary();
  };
  const primary = (): FilterNode => {
    const t = next();
    if (t.type === '(') {
      const inner = or();
      if (peek().type !== ')')
        fail(`expected ")" to close the "(" at character ${t.at + 1}, found ${describe(peek())}`);
      next();
      return inner;
    }
    if (t.type !== 'word' || keyword(t) !== undefined)
      return fail(`expected a field, kind:, cause:, severity: or "(", found ${describe(t)}`, t);
    if (peek().type === ':') {
      const facet = t.text;
      if (!Object.hasOwn(FINDING_FACETS, facet))
        return fail(
          `unknown finding facet ${JSON.stringify(facet)} (known: ${listed(Object.keys(FINDING_FACETS))})`,
          t,
        );
      next();
      const v = next();
      const value = v.type === 'word' || v.type === 'string' ? (v.type === 'word' ? v.text : v.value) : undefined;
      const valid: readonly string[] = FINDING_FACETS[facet as FindingFacet];
      if (value === undefined) return fail(`expected a ${facet} after "${facet}:" (one of ${listed(valid)})`, v);
      if (!valid.includes(value)) return fail(`unknown ${facet} ${JSON.stringify(value)} (known: ${listed(valid)})`, v);
      return { type: 'finding', facet: facet as FindingFacet, value };
    }
    if (!Object.hasOwn(FILTER_FIELDS, t.text))
      return fail(
        `unknown field ${JSON.stringify(t.text)} (known: ${listed(Object.keys(FILTER_FIELDS))}, and kind:, cause:, severity:)`,
        t,
      );
    const field = t.text as FilterField;
    const type = FILTER_FIELDS[field];
    const o = peek();
    if (o.type !== 'op') {
      if (type === 'boolean') return { type: 'flag', field };
      return fail(`expected a comparison (${COMPARISON_OPS.join(' ')}) after ${field}, found ${describe(o)}`, o);
    }
    next();
    const v = next();
    const value = literal(v, field, type);
    if (value === null && o.text !== '=' && o.text !== '!=')
      return fail(`null compares only with = or != (${field} ${o.text} null is never true)`, v);
    if (type === 'boolean' && o.text !== '=' && o.text !== '!=')
      return fail(`${field} is true or false: compare it with = or !=`, o);
    return { type: 'compare', field, op: o.text, value };
  };
  const literal = (v: Token, field: FilterField, type: FieldType): FilterValue => {
    const k = keyword(v);
    if (k === 'null') return null;
    if (type === 'boolean') {
      if (k === 'true' || k === 'false') return k === 'true';
      return fail(`${field} is true or false, found ${describe(v)}`, v);
    }
    if (type === 'number') {
      if (v.type === 'number') return v.value;
      return fail(`${field} is a number, found ${describe(v)}`, v);
    }
    if (v.type === 'string') return v.value;
    if (v.type === 'word' && k === undefined) {
      // A bare word names an enum value: check it where the values are known.
      if (field === 'format' && !(FORMAT_NAMES as readonly string[]).includes(v.text))
        return fail(
          `unknown format ${JSON.stringify(v.text)} (known: ${listed(FORMAT_NAMES)}; quote it to compare as text)`,
          v,
        );
      return v.text;
    }
    return fail(`${field} is text: expected a quoted string or a bare word, found ${describe(v)}`, v);
  };

  const node = or();
  if (peek().type !== 'end') fail(`expected "and", "or" or the end of the expression, found ${describe(peek())}`);
  return node;
}

// ---------------------------------------------------------------------------------------------
// Printer

const PRECEDENCE: Record<FilterNode['type'], number> = { or: 1, and: 2, not: 3, compare: 4, finding: 4, flag: 4 };

function printValue(v: FilterValue): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v);
  return JSON.stringify(v);
}

/** The expression as text that parses back to `node`, with parentheses only where precedence needs them. */
export function printFilter(node: FilterNode): string {
  const wrap = (child: FilterNode, min: number) => {
    const s = printFilter(child);
    return PRECEDENCE[child.type] < min ? `(${s})` : s;
  };
  switch (node.type) {
    case 'or':
      return `${wrap(node.left, 1)} or ${wrap(node.right, 2)}`;
    case 'and':
      return `${wrap(node.left, 2)} and ${wrap(node.right, 3)}`;
    case 'not':
      return `not ${wrap(node.operand, 3)}`;
    case 'compare':
      return `${node.field} ${node.op} ${printValue(node.value)}`;
    case 'finding':
      return `${node.facet}:${WORD_ONLY.test(node.value) ? node.value : JSON.stringify(node.value)}`;
    case 'flag':
      return node.field;
  }
}
const WORD_ONLY = /^[A-Za-z_][A-Za-z0-9_.\-/]*$/;

// ---------------------------------------------------------------------------------------------
// Evaluator

/** What a filter reads of a finding. */
export interface FilterFinding {
  kind: string;
  cause?: string;
  severity: string;
}

/**
 * One entry of `check --json` (docs/check-json.md), the fields a filter reads; its `findings` are its
 * own, then its group's, as the report lists them (a reader may give one facet per element).
 */
export type FilterEntry = Pick<
  ReportEntry,
  | 'id'
  | 'format'
  | 'model'
  | 'group'
  | 'step'
  | 'sample'
  | 'reward'
  | 'advantage'
  | 'turns'
  | 'images'
  | 'response_tokens'
  | 'status'
  | 'findings'
> & { source: Pick<ReportEntry['source'], 'file'> };

/** The summary of the entry's group in the report's `groups`. */
export type FilterGroup = Pick<ReportGroup, 'size' | 'reward_mean' | 'reward_std' | 'degenerate'>;

export interface FilterSubject {
  entry: FilterEntry;
  /** Null when the trajectory belongs to no group (then every group field is null). */
  group: FilterGroup | null;
}

/** Every field of a subject, as the filter reads it (undefined read as null). */
const READ_FIELD: Record<FilterField, (s: FilterSubject) => FilterValue | undefined> = {
  reward: (s) => s.entry.reward,
  advantage: (s) => s.entry.advantage,
  step: (s) => s.entry.step,
  group: (s) => s.entry.group,
  sample: (s) => s.entry.sample,
  turns: (s) => s.entry.turns,
  response_tokens: (s) => s.entry.response_tokens,
  images: (s) => s.entry.images,
  format: (s) => s.entry.format,
  model: (s) => s.entry.model,
  status: (s) => s.entry.status,
  id: (s) => s.entry.id,
  file: (s) => s.entry.source.file,
  'group.degenerate': (s) => s.group?.degenerate,
  'group.reward_std': (s) => s.group?.reward_std,
  'group.reward_mean': (s) => s.group?.reward_mean,
  'group.size': (s) => s.group?.size,
};

function compare(a: FilterValue, op: ComparisonOp, b: FilterValue): boolean {
  // null is a value no comparison holds for, except = null and != null (docs/filter.md#null).
  if (b === null) return op === '=' ? a === null : op === '!=' ? a !== null : false;
  if (a === null || typeof a !== typeof b) return false;
  switch (op) {
    case '=':
      return a === b;
    case '!=':
      return a !== b;
    case '<':
      return a < b;
    case '<=':
      return a <= b;
    case '>':
      return a > b;
    case '>=':
      return a >= b;
  }
}

function hasFinding(findings: readonly unknown[], facet: FindingFacet, value: string): boolean {
  return findings.some((f) => (f as Partial<FilterFinding> | null)?.[facet] === value);
}

/** Whether `subject` matches `node`: two-valued, so `not` selects exactly what its operand does not. */
export function matchesFilter(node: FilterNode, subject: FilterSubject): boolean {
  switch (node.type) {
    case 'and':
      return matchesFilter(node.left, subject) && matchesFilter(node.right, subject);
    case 'or':
      return matchesFilter(node.left, subject) || matchesFilter(node.right, subject);
    case 'not':
      return !matchesFilter(node.operand, subject);
    case 'compare':
      return compare(READ_FIELD[node.field](subject) ?? null, node.op, node.value);
    case 'finding':
      return hasFinding(subject.entry.findings, node.facet, node.value);
    case 'flag':
      return READ_FIELD[node.field](subject) === true;
  }
}

/** Whether `node` reads a field of the trajectory's group (those are known only once the run is read). */
export function readsGroup(node: FilterNode): boolean {
  switch (node.type) {
    case 'and':
    case 'or':
      return readsGroup(node.left) || readsGroup(node.right);
    case 'not':
      return readsGroup(node.operand);
    case 'compare':
    case 'flag':
      return node.field.startsWith('group.');
    case 'finding':
      // A group's findings are in each member's findings (docs/check-json.md#groups), all of one kind and severity.
      return node.facet !== 'cause' && GROUP_FINDING[node.facet] === node.value;
  }
}
