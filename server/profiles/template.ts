// Hugging Face chat templates rendered the way transformers' `apply_chat_template` renders them.
//
// transformers (src/transformers/utils/chat_template_utils.py, `_compile_jinja_template`) compiles
// templates with `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[AssistantTracker, jinja2.ext.loopcontrols])`, replaces the `tojson` filter with
// `json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)`
// and adds the globals `raise_exception` (raises TemplateError) and `strftime_now`. The tokenizer
// then calls `render(messages=…, tools=…, documents=…, add_generation_prompt=…, **kwargs)` with
// `tools`/`documents` None when absent.
//
// Parsing, control flow and most expressions come from @huggingface/jinja. Where its JavaScript
// value model prints differently from Python, this module steps in, without forking the engine:
//  * it walks the parsed AST once and wraps every `{{ … }}` output in a node that prints with
//    Python's `str()` (None, True/False, float repr, list/dict repr), and every `for` iterable in a
//    node that iterates an undefined value as empty and a string by characters, as jinja2 does;
//  * an `Interpreter` subclass handles those nodes plus `tojson`, `string`, `join` and `~`, which
//    the library hard-codes with JSON/JavaScript formatting; everything else goes to the library;
//  * input values are converted to runtime values here, not by the library, so that Python floats
//    (`PyFloat`), exact big integers (`bigint`) and ordered dicts (`Map`) survive.
//
// Residual differences (the library's semantics, used only outside the printing paths above):
//  * arithmetic on integers beyond 2^53 is done in doubles, and `==` compares JavaScript values
//    (`1 == '1'` is true, Python says False);
//  * `dict.items()` yields lists, so a printed item is `['k', 1]` where Python prints `('k', 1)`;
//  * attribute syntax on a dict prefers the key over a dict method (`d.items` with a key "items");
//  * unknown tests/filters raise "Unknown …"; the
//    parser rejects some valid jinja2 (one-element tuples `(1,)`); `{% filter tojson %}` blocks
//    keep the library's JSON formatting (only the `| tojson` expression form is replaced);
//  * printing a function gives `<function>` (Python prints an address);
//  * string repr decides printability from the JavaScript Unicode tables (Unicode 15+ in Node 20)
//    while Python 3.11 uses Unicode 14: characters assigned after 14 print raw here, escaped there;
//  * jinja2's `lipsum`, `cycler` and `joiner` globals are absent; `strftime_now` knows the common
//    C-locale directives only.
import { Environment, Interpreter, parse, tokenize } from '@huggingface/jinja';
import { PyFloat, pythonFloatRepr } from './python-literal.ts';

type Program = ReturnType<typeof parse>;
type Statement = Program['body'][number];
type RV = ReturnType<Interpreter['evaluate']>;
type NumberRV = Extract<RV, { value: number }>;
type StringRV = Extract<RV, { value: string }>;
type BooleanRV = Extract<RV, { value: boolean }>;
type NullRV = Extract<RV, { value: null }>;
type UndefinedRV = Extract<RV, { value: undefined }>;
type ArrayRV = Extract<RV, { value: RV[] }>;
type MapRV = Extract<RV, { value: Map<string, RV> }>;
type NativeFunction = (args: RV[], scope: Environment) => RV;
type FunctionRV = Extract<RV, { value: NativeFunction }>;

// The package exports only Template/Environment/Interpreter/tokenize/parse, not its value classes,
// and its `exports` map forbids deep imports. The runtime's own JS -> value converter
// (`Environment.set`) produces instances of those classes, so their constructors are taken from
// there; `instanceof` checks inside the library then accept what we build.
const probeEnv = new Environment();
let probeCount = 0;
function classOf<T extends RV, A extends unknown[]>(sample: RV, expected: string): new (...args: A) => T {
  if (sample.type !== expected) throw new Error(`@huggingface/jinja changed: expected ${expected}, got ${sample.type}`);
  return sample.constructor as unknown as new (
    ...args: A
  ) => T;
}
function probe(value: unknown): RV {
  return probeEnv.set(`probe${probeCount++}`, value);
}
const IntegerValue = classOf<NumberRV, [number]>(probe(1), 'IntegerValue');
const FloatValue = classOf<NumberRV, [number]>(probe(1.5), 'FloatValue');
const StringValue = classOf<StringRV, [string]>(probe(''), 'StringValue');
const BooleanValue = classOf<BooleanRV, [boolean]>(probe(true), 'BooleanValue');
const NullValue = classOf<NullRV, []>(probe(null), 'NullValue');
const UndefinedValue = classOf<UndefinedRV, []>(probe(undefined), 'UndefinedValue');
const ArrayValue = classOf<ArrayRV, [RV[]]>(probe([]), 'ArrayValue');
const ObjectValue = classOf<MapRV, [Map<string, RV>]>(probe({}), 'ObjectValue');
const FunctionValue = classOf<FunctionRV, [NativeFunction]>(
  probe(() => null),
  'FunctionValue',
);
const namespaceFn = probeEnv.lookupVariable('namespace');
if (!(namespaceFn instanceof FunctionValue)) throw new Error('@huggingface/jinja changed: no namespace()');
const NamespaceValue = classOf<MapRV, [Map<string, RV>]>(namespaceFn.value([], probeEnv), 'NamespaceValue');
/** The library's abstract base class: lets callers pass ready-made runtime values through. */
const RuntimeValueBase = Object.getPrototypeOf(IntegerValue) as abstract new (...args: never[]) => RV;

/** Exact value of integers beyond 2^53 (the runtime value itself holds the nearest double). */
const exactIntegers = new WeakMap<RV, bigint>();

/** What `raise_exception(message)` throws (jinja2.exceptions.TemplateError in transformers). */
export class TemplateError extends Error {
  override name = 'TemplateError';
}

export interface ChatTemplateInput {
  messages: unknown[];
  tools?: unknown[];
  add_generation_prompt?: boolean;
  add_vision_id?: boolean;
  [extra: string]: unknown;
}

/**
 * A compiled chat template. `render` accepts plain JavaScript data (JSON.parse output: integral
 * numbers are ints, others floats, objects in JavaScript key order) as well as what
 * `parsePythonJson` returns (`PyFloat`, `bigint`, `Map`), which renders exactly as Python would.
 */
export class ChatTemplate {
  private readonly program: Program;
  /** How vLLM and SGLang pass `content` to this template (detectContentFormat). */
  readonly contentFormat: ContentFormat;

  /**
   * @param specialTokens the tokenizer's special tokens by name (`bos_token`, `eos_token`, …), which
   *   transformers passes to every render (`**tokenizer.special_tokens_map`): Gemma's template writes
   *   `{{ bos_token }}`. An input variable of the same name wins.
   */
  constructor(
    source: string,
    private readonly specialTokens: Readonly<Record<string, string>> = {},
  ) {
    this.program = parse(tokenize(source, { lstrip_blocks: true, trim_blocks: true }));
    this.contentFormat = detectContentFormat(this.program);
    pythonizeBlock(this.program.body);
  }

  render(input: ChatTemplateInput): string {
    const env = new Environment();
    installGlobals(env);
    // transformers always passes these three; absent tools/documents are None, not undefined.
    const variables: Record<string, unknown> = {
      ...this.specialTokens,
      tools: null,
      documents: null,
      add_generation_prompt: false,
    };
    for (const [key, value] of Object.entries(input)) if (value !== undefined) variables[key] = value;
    for (const [key, value] of Object.entries(variables)) env.setVariable(key, toRuntime(value));
    const out = new PythonInterpreter(env).run(this.program);
    if (!(out instanceof StringValue)) throw new Error(`template evaluated to ${out.type}`);
    return out.value;
  }
}

// ---------------------------------------------------------------------------------------------
// Content format

/**
 * `openai` when the template loops over a message's content (`{% for c in message['content'] %}`),
 * so a serving stack passes content as a list of parts; `string` otherwise. vLLM decides it from the
 * template's AST the same way (vllm-project/vllm vllm/entrypoints/chat_utils.py
 * `_detect_content_format`; docs/reference/chat-templates.md#content-format).
 */
export type ContentFormat = 'string' | 'openai';

/** Every node of the AST (depth first). */
function* nodesOf(node: unknown): Generator<Statement> {
  if (Array.isArray(node)) {
    for (const x of node) yield* nodesOf(x);
    return;
  }
  if (node instanceof Map) {
    for (const [k, v] of node) {
      yield* nodesOf(k);
      yield* nodesOf(v);
    }
    return;
  }
  if (typeof node !== 'object' || node === null || typeof (node as { type?: unknown }).type !== 'string') return;
  yield node as Statement;
  for (const value of Object.values(node)) if (typeof value === 'object') yield* nodesOf(value);
}

/** `varname`, `varname.key` / `varname['key']`, through filters, tests and slices (vLLM `_is_var_or_elems_access`). */
function accesses(node: Statement, varname: string, key?: string): boolean {
  if (isNode(node, 'FilterExpression')) return accesses(node.operand, varname, key);
  if (node.type === 'TestExpression')
    return accesses((node as unknown as { operand: Statement }).operand, varname, key);
  if (node.type === 'MemberExpression') {
    const m = node as unknown as { object: Statement; property: Statement; computed: boolean };
    if (m.computed && m.property.type === 'SliceExpression') return accesses(m.object, varname, key);
    if (key === undefined) return false;
    const named = isNode(m.object, 'Identifier') && m.object.value === varname;
    const prop = m.property as unknown as { type: string; value?: unknown };
    return named && (m.computed ? prop.type === 'StringLiteral' : prop.type === 'Identifier') && prop.value === key;
  }
  return key === undefined && isNode(node, 'Identifier') && node.value === varname;
}

function detectContentFormat(program: Program): ContentFormat {
  const nodes = [...nodesOf(program.body)];
  // `messages` and the variables set from it ({% set loop_messages = messages[1:] %}).
  const messageLists = ['messages'];
  for (let i = 0; i < messageLists.length; i++) {
    for (const n of nodes) {
      if (n.type !== 'Set') continue;
      const set = n as unknown as { assignee: Statement; value: Statement | null };
      if (!set.value || !isNode(set.assignee, 'Identifier') || !accesses(set.value, messageLists[i]!)) continue;
      if (!messageLists.includes(set.assignee.value)) messageLists.push(set.assignee.value);
    }
  }
  const loops = nodes.filter((n): n is Statement & { loopvar: Statement; iterable: Statement } => n.type === 'For');
  const iterated = (loop: { iterable: Statement }) =>
    isNode(loop.iterable, 'SelectExpression') ? loop.iterable.lhs : loop.iterable;
  const messageVars = loops.flatMap((loop) =>
    isNode(loop.loopvar, 'Identifier') && messageLists.some((v) => accesses(iterated(loop), v))
      ? [loop.loopvar.value]
      : [],
  );
  return loops.some((loop) => messageVars.some((v) => accesses(iterated(loop), v, 'content'))) ? 'openai' : 'string';
}

// ---------------------------------------------------------------------------------------------
// AST preparation

const PRINT = 'rollscope.PythonPrint';
const ITERATE = 'rollscope.PythonIterable';
interface WrapperNode {
  type: typeof PRINT | typeof ITERATE;
  expr: Statement;
}

/** Shapes of the library's AST nodes we touch (dist/ast.d.ts; the classes are not exported). */
interface NodeShapes {
  If: { body: Statement[]; alternate: Statement[] };
  For: { iterable: Statement; body: Statement[]; defaultBlock: Statement[] };
  Set: { body: Statement[] };
  Macro: { body: Statement[] };
  CallStatement: { body: Statement[] };
  FilterStatement: { body: Statement[] };
  SelectExpression: { lhs: Statement };
  FilterExpression: { operand: Statement; filter: Statement };
  Identifier: { value: string };
  CallExpression: { callee: Statement; args: Statement[] };
  KeywordArgumentExpression: { key: { value: string }; value: Statement };
  BinaryExpression: { operator: { value: string }; left: Statement; right: Statement };
}
function isNode<K extends keyof NodeShapes>(node: Statement, type: K): node is Statement & NodeShapes[K] {
  return node.type === type;
}
function isWrapper(node: Statement): node is Statement & WrapperNode {
  return node.type === PRINT || node.type === ITERATE;
}

/** Statements whose value is not printed by the enclosing block. */
const NOT_OUTPUT = new Set([
  'Set',
  'If',
  'For',
  'Macro',
  'Break',
  'Continue',
  'Comment',
  'CallStatement',
  'FilterStatement',
]);

function pythonizeBlock(body: Statement[]): void {
  for (let i = 0; i < body.length; i++) {
    const node = body[i];
    if (node === undefined) continue;
    if (isNode(node, 'If')) {
      pythonizeBlock(node.body);
      pythonizeBlock(node.alternate);
    } else if (isNode(node, 'For')) {
      const iterable = node.iterable;
      if (isNode(iterable, 'SelectExpression')) iterable.lhs = wrap(ITERATE, iterable.lhs);
      else node.iterable = wrap(ITERATE, iterable);
      pythonizeBlock(node.body);
      pythonizeBlock(node.defaultBlock);
    } else if (
      isNode(node, 'Set') ||
      isNode(node, 'Macro') ||
      isNode(node, 'CallStatement') ||
      isNode(node, 'FilterStatement')
    ) {
      pythonizeBlock(node.body);
    } else if (!NOT_OUTPUT.has(node.type) && node.type !== 'StringLiteral') {
      // Template text is a StringLiteral and prints as itself; skip the wrapper for speed.
      body[i] = wrap(PRINT, node);
    }
  }
}

function wrap(type: WrapperNode['type'], expr: Statement): Statement {
  const node: WrapperNode = { type, expr };
  return node;
}

// ---------------------------------------------------------------------------------------------
// Interpreter

class PythonInterpreter extends Interpreter {
  override evaluate(statement: Statement | undefined, env: Environment): RV {
    if (statement === undefined) return super.evaluate(statement, env);
    if (isWrapper(statement)) {
      const value = this.evaluate(statement.expr, env);
      if (statement.type === PRINT) return new StringValue(pyStr(value));
      return iterableOf(value);
    }
    if (isNode(statement, 'FilterExpression')) {
      const filtered = this.pythonFilter(statement.operand, statement.filter, env);
      if (filtered !== undefined) return filtered;
    } else if (isNode(statement, 'BinaryExpression') && statement.operator.value === '~') {
      // jinja2 concatenates str() of both sides: `'a' ~ none` is 'aNone', `~ 2.0` is '2.0'.
      const left = this.evaluate(statement.left, env);
      const right = this.evaluate(statement.right, env);
      return new StringValue(pyStr(left) + pyStr(right));
    } else if (isNode(statement, 'BinaryExpression') && statement.operator.value === '+') {
      // Python's `+` joins two strings and raises on a string and anything else (`'a' + ['b']`,
      // `'a' + none`): text templates concatenate `message.content`, and list content must fail as it does there.
      const left = this.evaluate(statement.left, env);
      const right = this.evaluate(statement.right, env);
      const ls = left instanceof StringValue;
      const rs = right instanceof StringValue;
      if (ls && rs) return new StringValue(left.value + right.value);
      if (ls || rs) {
        const other = ls ? right : left;
        if (other instanceof UndefinedValue)
          throw new Error('UndefinedError: an undefined value in a string concatenation');
        throw new TypeError(
          ls
            ? `can only concatenate str (not "${pyTypeName(right)}") to str`
            : `unsupported operand type(s) for +: '${pyTypeName(left)}' and 'str'`,
        );
      }
      return super.evaluate(statement, env);
    }
    return super.evaluate(statement, env);
  }

  /** `tojson`, `string` and `join` with Python formatting; undefined = leave to the library. */
  private pythonFilter(operandNode: Statement, filter: Statement, env: Environment): RV | undefined {
    let name: string;
    let argNodes: Statement[] = [];
    if (isNode(filter, 'Identifier')) name = filter.value;
    else if (isNode(filter, 'CallExpression') && isNode(filter.callee, 'Identifier')) {
      name = filter.callee.value;
      argNodes = filter.args;
    } else return undefined;
    if (name !== 'tojson' && name !== 'string' && name !== 'join') return undefined;

    const operand = this.evaluate(operandNode, env);
    const positional: RV[] = [];
    const keyword = new Map<string, RV>();
    for (const arg of argNodes) {
      if (isNode(arg, 'KeywordArgumentExpression')) keyword.set(arg.key.value, this.evaluate(arg.value, env));
      else if (arg.type === 'SpreadExpression' || arg.type === 'KeywordSpreadExpression') {
        throw new Error(`argument unpacking is not supported in the ${name} filter`);
      } else positional.push(this.evaluate(arg, env));
    }
    const param = (index: number, key: string): RV | undefined => positional[index] ?? keyword.get(key);

    if (name === 'string') return new StringValue(pyStr(operand));
    if (name === 'join') {
      // jinja2 do_join: str(d).join(map(str, value)); only without `attribute=`.
      if (keyword.has('attribute')) throw new Error('join(attribute=…) is not supported');
      const sep = param(0, 'd');
      return new StringValue(
        iterate(operand)
          .map(pyStr)
          .join(sep === undefined ? '' : pyStr(sep)),
      );
    }
    // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    return new StringValue(
      pythonJsonDumps(operand, {
        ensureAscii: truthy(param(0, 'ensure_ascii')),
        indent: jsonIndent(param(1, 'indent')),
        separators: jsonSeparators(param(2, 'separators')),
        sortKeys: truthy(param(3, 'sort_keys')),
      }),
    );
  }
}

function truthy(value: RV | undefined): boolean {
  return value?.__bool__().value === true;
}

/** What a jinja2 `for` iterates: Undefined is empty, strings yield characters, dicts keys. */
function iterableOf(value: RV): RV {
  if (value instanceof UndefinedValue) return new ArrayValue([]);
  if (value instanceof StringValue) return new ArrayValue(Array.from(value.value, (c) => new StringValue(c)));
  return value; // lists and dicts are iterated by the library; anything else raises there
}

function iterate(value: RV): RV[] {
  if (value instanceof ArrayValue) return value.value;
  if (value instanceof StringValue) return Array.from(value.value, (c) => new StringValue(c));
  if (value instanceof ObjectValue) return Array.from(value.value.keys(), (k) => new StringValue(k));
  if (value instanceof UndefinedValue) return [];
  throw new TypeError(`'${pyTypeName(value)}' object is not iterable`);
}

// ---------------------------------------------------------------------------------------------
// Globals (jinja2 defaults + transformers' additions)

function installGlobals(env: Environment): void {
  // jinja2 parses these as literals; the library resolves them as variables.
  for (const [name, value] of [
    ['true', true],
    ['false', false],
    ['none', null],
    ['True', true],
    ['False', false],
    ['None', null],
  ] as const) {
    env.setVariable(name, toRuntime(value));
  }
  env.setVariable(
    'raise_exception',
    new FunctionValue((args) => {
      throw new TemplateError(args[0] === undefined ? '' : pyStr(args[0]));
    }),
  );
  env.setVariable(
    'strftime_now',
    new FunctionValue((args) => new StringValue(strftime(new Date(), args[0] ? pyStr(args[0]) : ''))),
  );
  env.setVariable('range', new FunctionValue(pythonRange));
  env.setVariable('dict', new FunctionValue(pythonDict));
}

/** Python `range`, with the sandbox's limit (jinja2.sandbox.safe_range, MAX_RANGE = 100000). */
function pythonRange(args: RV[]): RV {
  const ints = args.map((a) => {
    if (a instanceof IntegerValue) return a.value;
    if (a instanceof BooleanValue) return a.value ? 1 : 0;
    throw new TypeError(`'${pyTypeName(a)}' object cannot be interpreted as an integer`);
  });
  if (ints.length < 1 || ints.length > 3) throw new TypeError(`range expected 1 to 3 arguments, got ${ints.length}`);
  const [start, stop, step] = ints.length === 1 ? [0, ints[0] ?? 0, 1] : [ints[0] ?? 0, ints[1] ?? 0, ints[2] ?? 1];
  if (step === 0) throw new Error('range() arg 3 must not be zero');
  const length = Math.max(0, Math.ceil((stop - start) / step));
  if (length > 100_000) throw new Error('Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).');
  return new ArrayValue(Array.from({ length }, (_, i) => new IntegerValue(start + i * step)));
}

function pythonDict(args: RV[]): RV {
  const out = new Map<string, RV>();
  for (const arg of args) {
    if (!(arg instanceof ObjectValue)) throw new TypeError('dict() arguments must be mappings or keywords');
    for (const [k, v] of arg.value) out.set(k, v);
  }
  return new ObjectValue(out);
}

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/** datetime.now().strftime for the common directives, C locale (Python's default). */
function strftime(d: Date, format: string): string {
  const pad = (n: number, width = 2): string => String(n).padStart(width, '0');
  const startOfYear = new Date(d.getFullYear(), 0, 1);
  const dayOfYear =
    Math.round((new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime() - startOfYear.getTime()) / 86_400_000) +
    1;
  const hour12 = d.getHours() % 12 === 0 ? 12 : d.getHours() % 12;
  const fields: Record<string, () => string> = {
    a: () => (DAYS[d.getDay()] ?? '').slice(0, 3),
    A: () => DAYS[d.getDay()] ?? '',
    b: () => (MONTHS[d.getMonth()] ?? '').slice(0, 3),
    B: () => MONTHS[d.getMonth()] ?? '',
    d: () => pad(d.getDate()),
    e: () => String(d.getDate()).padStart(2, ' '),
    H: () => pad(d.getHours()),
    I: () => pad(hour12),
    j: () => pad(dayOfYear, 3),
    m: () => pad(d.getMonth() + 1),
    M: () => pad(d.getMinutes()),
    p: () => (d.getHours() < 12 ? 'AM' : 'PM'),
    S: () => pad(d.getSeconds()),
    y: () => pad(d.getFullYear() % 100),
    Y: () => String(d.getFullYear()),
    '%': () => '%',
  };
  return format.replace(/%(.)/gs, (all, c: string) => fields[c]?.() ?? all);
}

// ---------------------------------------------------------------------------------------------
// JS values -> runtime values

function toRuntime(value: unknown): RV {
  if (value instanceof RuntimeValueBase) return value;
  switch (typeof value) {
    case 'string':
      return new StringValue(value);
    case 'number':
      return Number.isInteger(value) ? new IntegerValue(value) : new FloatValue(value);
    case 'bigint':
      return exactInteger(value);
    case 'boolean':
      return new BooleanValue(value);
    case 'undefined':
      return new UndefinedValue();
    case 'function': {
      const fn = value as (...args: unknown[]) => unknown;
      return new FunctionValue((args) => toRuntime(fn(...args.map((a) => a.value)) ?? null));
    }
    case 'symbol':
      throw new TypeError('cannot pass a symbol to a template');
    case 'object':
      if (value === null) return new NullValue();
      if (value instanceof PyFloat) return new FloatValue(value.value);
      if (Array.isArray(value)) return new ArrayValue(value.map(toRuntime));
      if (value instanceof Map) {
        const entries = new Map<string, RV>();
        for (const [k, v] of value) {
          if (typeof k !== 'string') throw new TypeError(`dict keys must be strings, got ${typeof k}`);
          entries.set(k, toRuntime(v));
        }
        return new ObjectValue(entries);
      }
      return new ObjectValue(new Map(Object.entries(value).map(([k, v]) => [k, toRuntime(v)])));
  }
}

function exactInteger(value: bigint): RV {
  const rv = new IntegerValue(Number(value));
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) exactIntegers.set(rv, value);
  return rv;
}

// ---------------------------------------------------------------------------------------------
// Python str() / repr()

function pyTypeName(value: RV): string {
  if (value instanceof IntegerValue) return 'int';
  if (value instanceof FloatValue) return 'float';
  if (value instanceof StringValue) return 'str';
  if (value instanceof BooleanValue) return 'bool';
  if (value instanceof NullValue) return 'NoneType';
  if (value instanceof UndefinedValue) return 'Undefined';
  if (value instanceof NamespaceValue) return 'Namespace';
  if (value instanceof ObjectValue) return 'dict';
  if (value instanceof ArrayValue) return value.type === 'TupleValue' ? 'tuple' : 'list';
  return 'function';
}

function pyInt(value: NumberRV): string {
  const exact = exactIntegers.get(value);
  if (exact !== undefined) return exact.toString();
  if (Number.isSafeInteger(value.value)) return String(value.value);
  if (Number.isInteger(value.value)) return BigInt(value.value).toString();
  return pythonFloatRepr(value.value); // not produced by the library; keep it printable
}

/** Python `str(x)`, which is what `{{ x }}` prints. */
function pyStr(value: RV): string {
  if (value instanceof StringValue) return value.value;
  if (value instanceof UndefinedValue) return '';
  return pyRepr(value);
}

/** Python `repr(x)`; containers print their items with repr. */
function pyRepr(value: RV): string {
  if (value instanceof StringValue) return pythonStringRepr(value.value);
  if (value instanceof FloatValue) return pythonFloatRepr(value.value);
  if (value instanceof IntegerValue) return pyInt(value);
  if (value instanceof BooleanValue) return value.value ? 'True' : 'False';
  if (value instanceof NullValue) return 'None';
  if (value instanceof UndefinedValue) return 'Undefined';
  if (value instanceof ArrayValue) {
    const items = value.value.map(pyRepr);
    if (value.type !== 'TupleValue') return `[${items.join(', ')}]`;
    return items.length === 1 ? `(${items[0]},)` : `(${items.join(', ')})`;
  }
  if (value instanceof ObjectValue || value instanceof NamespaceValue) {
    const items = Array.from(value.value, ([k, v]) => `${pythonStringRepr(k)}: ${pyRepr(v)}`);
    const dict = `{${items.join(', ')}}`;
    return value instanceof NamespaceValue ? `<Namespace ${dict}>` : dict; // jinja2.utils.Namespace.__repr__
  }
  return '<function>';
}

/** Characters Python's str.isprintable() rejects (Unicode categories C* and Z* except space). */
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

/** Python `repr(str)` (CPython unicode_repr). */
function pythonStringRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0;
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${hex(cp, 2)}`;
    else if (cp < 0x7f || cp === 0x20 || !NON_PRINTABLE.test(ch)) out += ch;
    else if (cp <= 0xff) out += `\\x${hex(cp, 2)}`;
    else if (cp <= 0xffff) out += `\\u${hex(cp, 4)}`;
    else out += `\\U${hex(cp, 8)}`;
  }
  return out + quote;
}

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

// ---------------------------------------------------------------------------------------------
// json.dumps

interface JsonOptions {
  ensureAscii: boolean;
  /** None, or the per-level indent string (`' ' * n` for an int, Python json semantics). */
  indent: string | null;
  /** [item, key]; Python defaults to (', ', ': '), or (',', ': ') when indenting. */
  separators: [string, string] | null;
  sortKeys: boolean;
}

function jsonIndent(value: RV | undefined): string | null {
  if (value === undefined || value instanceof NullValue) return null;
  if (value instanceof IntegerValue) return ' '.repeat(Math.max(0, value.value));
  if (value instanceof BooleanValue) return value.value ? ' ' : '';
  if (value instanceof StringValue) return value.value;
  throw new TypeError(`tojson: indent must be an int or a string, got ${pyTypeName(value)}`);
}

function jsonSeparators(value: RV | undefined): [string, string] | null {
  if (value === undefined || value instanceof NullValue) return null;
  if (value instanceof ArrayValue && value.value.length === 2) {
    const [item, key] = value.value;
    if (item instanceof StringValue && key instanceof StringValue) return [item.value, key.value];
  }
  throw new TypeError('tojson: separators must be a pair of strings');
}

/** Python `json.dumps(x, ensure_ascii=…, indent=…, separators=…, sort_keys=…)` (allow_nan=True). */
function pythonJsonDumps(value: RV, options: JsonOptions): string {
  const [itemSep, keySep] = options.separators ?? (options.indent === null ? [', ', ': '] : [',', ': ']);
  const encode = (v: RV, level: number): string => {
    if (v instanceof StringValue) return pythonJsonString(v.value, options.ensureAscii);
    if (v instanceof NullValue) return 'null';
    if (v instanceof BooleanValue) return v.value ? 'true' : 'false';
    if (v instanceof FloatValue) return pythonJsonFloat(v.value);
    if (v instanceof IntegerValue) return pyInt(v);
    let items: string[];
    let open: string;
    let close: string;
    if (v instanceof ArrayValue) {
      items = v.value.map((item) => encode(item, level + 1));
      [open, close] = ['[', ']'];
    } else if (v instanceof ObjectValue) {
      let entries = Array.from(v.value);
      if (options.sortKeys) entries = entries.sort(([a], [b]) => compareCodePoints(a, b));
      items = entries.map(([k, item]) => pythonJsonString(k, options.ensureAscii) + keySep + encode(item, level + 1));
      [open, close] = ['{', '}'];
    } else {
      throw new TypeError(`Object of type ${pyTypeName(v)} is not JSON serializable`);
    }
    if (items.length === 0) return open + close;
    if (options.indent === null) return open + items.join(itemSep) + close;
    const inner = `\n${options.indent.repeat(level + 1)}`;
    return `${open + inner + items.join(itemSep + inner)}\n${options.indent.repeat(level)}${close}`;
  };
  return encode(value, 0);
}

function pythonJsonFloat(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  return pythonFloatRepr(x);
}

const JSON_SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

/**
 * Python's json string encoder: with ensure_ascii=False only `"`, `\` and C0 controls are escaped
 * (lone surrogates pass through, unlike JSON.stringify); with ensure_ascii=True everything outside
 * ' '..'~' is escaped as UTF-16 `\uXXXX` units.
 */
function pythonJsonString(s: string, ensureAscii: boolean): string {
  const pattern = ensureAscii ? /[^ -~]|["\\]/g : /[\x00-\x1f"\\]/g;
  return `"${s.replace(pattern, (c) => JSON_SHORT_ESCAPES[c] ?? `\\u${hex(c.charCodeAt(0), 4)}`)}"`;
}

/** Python compares str by code point; JavaScript `<` compares UTF-16 units. */
function compareCodePoints(a: string, b: string): number {
  const ai = a[Symbol.iterator]();
  const bi = b[Symbol.iterator]();
  for (;;) {
    const x = ai.next();
    const y = bi.next();
    if (x.done || y.done) return x.done && y.done ? 0 : x.done ? -1 : 1;
    const d = (x.value.codePointAt(0) ?? 0) - (y.value.codePointAt(0) ?? 0);
    if (d !== 0) return d;
  }
}

let dumpsTemplate: ChatTemplate | undefined;
/**
 * Python's `json.dumps(value, ensure_ascii=False)` of a value read as `json.loads` reads it
 * (`parsePythonJson`): the template engine's `tojson`, whose separators and escaping are the ones
 * transformers' templates use. The tool-call parsers write arguments with it.
 */
export function jsonDumpsLikePython(value: unknown): string {
  dumpsTemplate ??= new ChatTemplate('{{ messages[0] | tojson }}');
  return dumpsTemplate.render({ messages: [value] });
}
