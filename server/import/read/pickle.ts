// A restricted Python unpickler that executes nothing.
//
// torch.save writes its object graph as a pickle (protocol 2 by default) whose tensors point at raw
// storages kept beside it in a zip archive (docs/reference/torch-save.md). Python's own unpickler
// imports and calls whatever a GLOBAL names, which is why `torch.load(weights_only=False)` on an
// untrusted file runs code. This one interprets the opcodes itself: a GLOBAL resolves only against
// an explicit allow-list of the names torch.save really writes (the same idea as PyTorch's
// `torch/_weights_only_unpickler.py`), and even those are never "called": REDUCE and NEWOBJ on an
// allowed global build an inert JavaScript value. Anything else is refused with an error naming the
// global and the byte offset, before anything is built from it.

/** A Python tuple; kept apart from lists so dict keys and torch's persistent ids stay recognisable. */
export class PyTuple {
  constructor(readonly items: readonly PyValue[]) {}
}

/** A Python dict in insertion order; keys may be any hashable value (converted by `toPlain`). */
export class PyDict {
  readonly entries = new Map<string | number | bigint | boolean | null, { key: PyValue; value: PyValue }>();
  set(key: PyValue, value: PyValue): void {
    this.entries.set(dictKey(key), { key, value });
  }
}

/** A global the allow-list admitted, as a name: what REDUCE/NEWOBJ/BUILD do with it is decided below. */
export class PyGlobal {
  constructor(
    readonly module: string,
    readonly name: string,
  ) {}
  get qualifiedName(): string {
    return `${this.module}.${this.name}`;
  }
}

/** An object the pickle built from an allowed global with NEWOBJ, filled by BUILD (e.g. a PIL image). */
export class PyObject {
  state: PyValue = null;
  constructor(
    readonly cls: PyGlobal,
    readonly args: readonly PyValue[],
  ) {}
}

/** The value of REDUCE on an allowed global: which function, with which arguments (never called here). */
export class PyCall {
  constructor(
    readonly fn: PyGlobal,
    readonly args: readonly PyValue[],
  ) {}
}

export type PyValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | PyValue[]
  | PyTuple
  | PyDict
  | PyGlobal
  | PyObject
  | PyCall
  | PyPersistent;

/** What BINPERSID popped: the persistent id, for the caller (torch: a storage reference) to resolve. */
export class PyPersistent {
  constructor(readonly id: PyValue) {}
}

export class UnpicklingError extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`${message} (pickle byte ${offset})`);
  }
}

/** Thrown for a GLOBAL outside the allow-list: names it, so the user knows what the file wanted to run. */
export class RefusedGlobalError extends UnpicklingError {
  constructor(
    readonly global: string,
    offset: number,
  ) {
    super(`refused to load global ${global}: it is not one torch.save writes for tensors and plain containers`, offset);
  }
}

export interface UnpickleOptions {
  /** `module.name` → true for the globals to admit. */
  allowedGlobals: (module: string, name: string) => boolean;
  /** Bounds against hostile input. */
  maxMemo?: number;
  maxStack?: number;
}

const MARK = Symbol('mark');
type StackItem = PyValue | typeof MARK;

/**
 * Interpret a pickle. Supports protocols 0–5's binary opcodes that torch.save (protocol 2) and
 * pickle.dump of plain data write; text-mode opcodes of protocol 0 other than GLOBAL are refused.
 */
export function unpickle(bytes: Uint8Array, opts: UnpickleOptions): PyValue {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const maxMemo = opts.maxMemo ?? 10_000_000;
  const maxStack = opts.maxStack ?? 10_000_000;
  const stack: StackItem[] = [];
  const marks: number[] = [];
  const memo = new Map<number, PyValue>();
  let pos = 0;
  let op = 0;
  let opAt = 0;

  const fail = (message: string): never => {
    throw new UnpicklingError(message, opAt);
  };
  const need = (n: number): void => {
    if (pos + n > bytes.length) fail(`truncated pickle: opcode 0x${op.toString(16)} needs ${n} more bytes`);
  };
  const u8 = (): number => {
    need(1);
    return bytes[pos++]!;
  };
  const u16 = (): number => {
    need(2);
    const v = view.getUint16(pos, true);
    pos += 2;
    return v;
  };
  const u32 = (): number => {
    need(4);
    const v = view.getUint32(pos, true);
    pos += 4;
    return v;
  };
  const i32 = (): number => {
    need(4);
    const v = view.getInt32(pos, true);
    pos += 4;
    return v;
  };
  const u64 = (): number => {
    need(8);
    const v = view.getBigUint64(pos, true);
    pos += 8;
    if (v > BigInt(bytes.length)) fail('length past the end of the pickle');
    return Number(v);
  };
  const take = (n: number): Uint8Array => {
    need(n);
    const out = bytes.subarray(pos, pos + n);
    pos += n;
    return out;
  };
  const line = (): string => {
    const end = bytes.indexOf(0x0a, pos);
    if (end < 0) fail('truncated pickle: a text argument has no newline');
    const s = latin1(bytes.subarray(pos, end));
    pos = end + 1;
    return s;
  };
  const push = (v: PyValue): void => {
    if (stack.length >= maxStack) fail('pickle stack too deep');
    stack.push(v);
  };
  const pop = (): PyValue => {
    const v = stack.pop();
    if (v === undefined) fail('pickle stack underflow');
    if (v === MARK) fail('unexpected MARK on the pickle stack');
    return v as PyValue;
  };
  const top = (): PyValue => {
    const v = stack[stack.length - 1];
    if (v === undefined || v === MARK) fail('pickle stack underflow');
    return v as PyValue;
  };
  const popMark = (): PyValue[] => {
    const at = marks.pop();
    if (at === undefined) fail('no MARK on the pickle stack');
    const items = stack.splice(at as number);
    stack.pop(); // the MARK itself
    for (const it of items) if (it === MARK) fail('unexpected MARK on the pickle stack');
    return items as PyValue[];
  };
  const memoPut = (i: number): void => {
    if (memo.size >= maxMemo && !memo.has(i)) fail('pickle memo too large');
    memo.set(i, top());
  };
  const memoGet = (i: number): void => {
    if (!memo.has(i)) fail(`pickle memo has no entry ${i}`);
    push(memo.get(i)!);
  };
  const global = (pickled: string, name: string): PyGlobal => {
    // Protocols 0–2 write Python 2 module names; Python's unpickler maps them back (fix_imports).
    const module = PYTHON2_MODULES[pickled] ?? pickled;
    if (!opts.allowedGlobals(module, name)) throw new RefusedGlobalError(`${module}.${name}`, opAt);
    return new PyGlobal(module, name);
  };
  const setItems = (target: PyValue, items: PyValue[]): void => {
    if (!(target instanceof PyDict)) fail('SETITEM(S) on something that is not a dict');
    if (items.length % 2 !== 0) fail('SETITEMS with an odd number of items');
    for (let i = 0; i < items.length; i += 2) (target as PyDict).set(items[i]!, items[i + 1]!);
  };
  const appendItems = (target: PyValue, items: PyValue[]): void => {
    if (!Array.isArray(target)) fail('APPEND(S) on something that is not a list');
    for (const it of items) (target as PyValue[]).push(it);
  };

  while (true) {
    opAt = pos;
    op = u8();
    switch (op) {
      case 0x80: // PROTO
        if (u8() > 5) fail('pickle protocol above 5');
        break;
      case 0x95: // FRAME: a length hint only
        u64();
        break;
      case 0x2e: {
        // STOP
        const result = pop();
        return result;
      }
      case 0x28: // MARK
        marks.push(stack.length + 1);
        stack.push(MARK);
        break;
      case 0x30: // POP
        if (stack[stack.length - 1] === MARK) {
          stack.pop();
          marks.pop();
        } else pop();
        break;
      case 0x31: // POP_MARK
        popMark();
        break;
      case 0x32: // DUP
        push(top());
        break;
      case 0x4e: // NONE
        push(null);
        break;
      case 0x88: // NEWTRUE
        push(true);
        break;
      case 0x89: // NEWFALSE
        push(false);
        break;
      case 0x4a: // BININT
        push(i32());
        break;
      case 0x4b: // BININT1
        push(u8());
        break;
      case 0x4d: // BININT2
        push(u16());
        break;
      case 0x8a: // LONG1
        push(decodeLong(take(u8())));
        break;
      case 0x8b: {
        // LONG4
        const n = i32();
        if (n < 0 || n > 1024) fail('LONG4 integer too large');
        push(decodeLong(take(n)));
        break;
      }
      case 0x47: // BINFLOAT: big-endian double
        need(8);
        push(view.getFloat64(pos, false));
        pos += 8;
        break;
      case 0x58: // BINUNICODE
        push(utf8(take(u32())));
        break;
      case 0x8c: // SHORT_BINUNICODE
        push(utf8(take(u8())));
        break;
      case 0x8d: // BINUNICODE8
        push(utf8(take(u64())));
        break;
      case 0x55: // SHORT_BINSTRING (Python 2 str; read as latin-1 text like pickle's default encoding='ASCII' would refuse)
        push(latin1(take(u8())));
        break;
      case 0x54: {
        // BINSTRING
        const n = i32();
        if (n < 0) fail('negative BINSTRING length');
        push(latin1(take(n)));
        break;
      }
      case 0x43: // SHORT_BINBYTES
        push(take(u8()).slice());
        break;
      case 0x42: // BINBYTES
        push(take(u32()).slice());
        break;
      case 0x8e: // BINBYTES8
      case 0x96: // BYTEARRAY8
        push(take(u64()).slice());
        break;
      case 0x29: // EMPTY_TUPLE
        push(new PyTuple([]));
        break;
      case 0x74: // TUPLE
        push(new PyTuple(popMark()));
        break;
      case 0x85: // TUPLE1
        push(new PyTuple([pop()]));
        break;
      case 0x86: {
        // TUPLE2
        const b = pop();
        const a = pop();
        push(new PyTuple([a, b]));
        break;
      }
      case 0x87: {
        // TUPLE3
        const c = pop();
        const b = pop();
        const a = pop();
        push(new PyTuple([a, b, c]));
        break;
      }
      case 0x5d: // EMPTY_LIST
        push([]);
        break;
      case 0x6c: // LIST
        push(popMark());
        break;
      case 0x61: {
        // APPEND
        const v = pop();
        appendItems(top(), [v]);
        break;
      }
      case 0x65: {
        // APPENDS
        const items = popMark();
        appendItems(top(), items);
        break;
      }
      case 0x7d: // EMPTY_DICT
        push(new PyDict());
        break;
      case 0x64: {
        // DICT
        const d = new PyDict();
        setItems(d, popMark());
        push(d);
        break;
      }
      case 0x73: {
        // SETITEM
        const v = pop();
        const k = pop();
        setItems(top(), [k, v]);
        break;
      }
      case 0x75: {
        // SETITEMS
        const items = popMark();
        setItems(top(), items);
        break;
      }
      case 0x8f: // EMPTY_SET: sets become lists (order of insertion)
        push([]);
        break;
      case 0x90: {
        // ADDITEMS
        const items = popMark();
        appendItems(top(), items);
        break;
      }
      case 0x91: // FROZENSET
        push(popMark());
        break;
      case 0x63: {
        // GLOBAL: "module\nname\n"
        const module = line();
        const name = line();
        push(global(module, name));
        break;
      }
      case 0x93: {
        // STACK_GLOBAL
        const name = pop();
        const module = pop();
        if (typeof module !== 'string' || typeof name !== 'string') fail('STACK_GLOBAL needs two strings');
        push(global(module as string, name as string));
        break;
      }
      case 0x52: {
        // REDUCE: callable(*args), never executed: recorded as a call for the caller to interpret
        const args = pop();
        const fn = pop();
        if (!(fn instanceof PyGlobal)) fail('REDUCE on something that is not an allowed global');
        if (!(args instanceof PyTuple)) fail('REDUCE arguments are not a tuple');
        const call = new PyCall(fn as PyGlobal, (args as PyTuple).items);
        // An OrderedDict is rebuilt empty and then filled by SETITEMS, as a dict is.
        push(call.fn.qualifiedName === 'collections.OrderedDict' ? orderedDict(call, fail) : call);
        break;
      }
      case 0x81: {
        // NEWOBJ: cls.__new__(cls, *args)
        const args = pop();
        const cls = pop();
        if (!(cls instanceof PyGlobal)) fail('NEWOBJ on something that is not an allowed global');
        if (!(args instanceof PyTuple)) fail('NEWOBJ arguments are not a tuple');
        push(new PyObject(cls as PyGlobal, (args as PyTuple).items));
        break;
      }
      case 0x92: {
        // NEWOBJ_EX: keyword arguments are ignored (no allowed class takes any)
        pop();
        const args = pop();
        const cls = pop();
        if (!(cls instanceof PyGlobal)) fail('NEWOBJ_EX on something that is not an allowed global');
        if (!(args instanceof PyTuple)) fail('NEWOBJ_EX arguments are not a tuple');
        push(new PyObject(cls as PyGlobal, (args as PyTuple).items));
        break;
      }
      case 0x62: {
        // BUILD: obj.__setstate__(state) / obj.__dict__.update(state)
        const state = pop();
        const obj = top();
        if (obj instanceof PyObject) obj.state = state;
        else if (obj instanceof PyCall || obj instanceof PyDict) {
          // torch's `_rebuild_tensor_v2` results and OrderedDict may get an (empty) state: nothing to keep.
        } else fail('BUILD on a value that takes no state');
        break;
      }
      case 0x51: // BINPERSID
        push(new PyPersistent(pop()));
        break;
      case 0x50: // PERSID (text id)
        push(new PyPersistent(line()));
        break;
      case 0x71: // BINPUT
        memoPut(u8());
        break;
      case 0x72: // LONG_BINPUT
        memoPut(u32());
        break;
      case 0x94: // MEMOIZE
        memoPut(memo.size);
        break;
      case 0x68: // BINGET
        memoGet(u8());
        break;
      case 0x6a: // LONG_BINGET
        memoGet(u32());
        break;
      case 0x70: // PUT (text index)
        memoPut(Number.parseInt(line(), 10));
        break;
      case 0x67: // GET (text index)
        memoGet(Number.parseInt(line(), 10));
        break;
      default:
        fail(`unsupported pickle opcode 0x${op.toString(16).padStart(2, '0')}`);
    }
  }
}

const PYTHON2_MODULES: Record<string, string> = { __builtin__: 'builtins', copy_reg: 'copyreg' };

function orderedDict(call: PyCall, fail: (message: string) => never): PyDict {
  const d = new PyDict();
  const items = call.args[0];
  if (items === undefined || items === null) return d;
  const list = Array.isArray(items)
    ? items
    : items instanceof PyTuple
      ? items.items
      : fail('OrderedDict of something that is not a list of pairs');
  for (const p of list) {
    const pair = p instanceof PyTuple ? p.items : Array.isArray(p) ? p : fail('OrderedDict item is not a pair');
    d.set(pair[0] ?? null, pair[1] ?? null);
  }
  return d;
}

function dictKey(key: PyValue): string | number | bigint | boolean | null {
  if (key === null || typeof key === 'string' || typeof key === 'number' || typeof key === 'bigint') return key;
  if (typeof key === 'boolean') return key;
  if (key instanceof PyTuple) return `\u0000tuple:${JSON.stringify(key.items.map((k) => String(dictKey(k))))}`;
  throw new Error('unhashable dict key in pickle');
}

/** Little-endian two's complement, as pickle's LONG1/LONG4 store integers. */
function decodeLong(b: Uint8Array): number | bigint {
  if (b.length === 0) return 0;
  let v = 0n;
  for (let i = b.length - 1; i >= 0; i--) v = (v << 8n) | BigInt(b[i]!);
  if (b[b.length - 1]! & 0x80) v -= 1n << BigInt(8 * b.length);
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: false });
function utf8(b: Uint8Array): string {
  // Python writes surrogates with 'surrogatepass'; replacement characters are the honest reading here.
  return utf8Decoder.decode(b);
}

function latin1(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode(...b.subarray(i, i + 8192));
  return s;
}
