// Files written by `torch.save` (PyTorch's zip format, the default since 1.6), read without PyTorch
// and without running any of the file's code. Layout (pytorch/pytorch: torch/serialization.py
// `_save`, `_load`; torch/_utils.py `_rebuild_tensor_v2`; docs/reference/torch-save.md):
//   <prefix>/data.pkl        the object graph, pickle protocol 2
//   <prefix>/data/<key>      one raw little-endian storage per key (entries stored, not deflated)
//   <prefix>/version, <prefix>/byteorder, <prefix>/.data/serialization_id
// A tensor in data.pkl is `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, …)` where
// `storage` is a persistent id `('storage', torch.<Type>Storage, key, location, numel)`; views into one
// storage (slime's per-sample log_probs sliced from a padded batch) share a key and differ in offset.
// PIL images pickled by value (`Image.__getstate__` = [info, mode, size, palette, bytes]) come back as
// raw pixels with their mode and size; PIL itself never runs.
import yauzl from 'yauzl';
import { PyCall, PyDict, PyGlobal, PyObject, PyPersistent, PyTuple, type PyValue, unpickle } from './pickle.ts';

export type TorchDtype =
  | 'float64'
  | 'float32'
  | 'float16'
  | 'bfloat16'
  | 'int64'
  | 'int32'
  | 'int16'
  | 'int8'
  | 'uint8'
  | 'bool';

const STORAGE_DTYPES: Record<string, TorchDtype> = {
  DoubleStorage: 'float64',
  FloatStorage: 'float32',
  HalfStorage: 'float16',
  BFloat16Storage: 'bfloat16',
  LongStorage: 'int64',
  IntStorage: 'int32',
  ShortStorage: 'int16',
  CharStorage: 'int8',
  ByteStorage: 'uint8',
  BoolStorage: 'bool',
};
const DTYPE_BYTES: Record<TorchDtype, number> = {
  float64: 8,
  float32: 4,
  float16: 2,
  bfloat16: 2,
  int64: 8,
  int32: 4,
  int16: 2,
  int8: 1,
  uint8: 1,
  bool: 1,
};

/** Every global a torch.save file of tensors, plain containers and PIL images may name. */
const ALLOWED_GLOBALS = new Set([
  'torch._utils._rebuild_tensor_v2',
  'torch._utils._rebuild_parameter',
  'torch._tensor._rebuild_from_type_v2',
  'torch.Tensor',
  'torch.nn.parameter.Parameter',
  'collections.OrderedDict',
  '_codecs.encode',
  'builtins.set',
  'builtins.frozenset',
  'builtins.bytearray',
  ...Object.keys(STORAGE_DTYPES).map((s) => `torch.${s}`),
]);

function isAllowedGlobal(module: string, name: string): boolean {
  if (ALLOWED_GLOBALS.has(`${module}.${name}`)) return true;
  // PIL.Image.Image and its file subclasses (PIL.PngImagePlugin.PngImageFile, …): state only, no code.
  return (
    (module === 'PIL.Image' && name === 'Image') ||
    (/^PIL\.\w+ImagePlugin$/.test(module) && /^\w+ImageFile$/.test(name))
  );
}

/** One tensor, materialized contiguous in row-major order. */
export class TorchTensor {
  constructor(
    readonly dtype: TorchDtype,
    readonly shape: readonly number[],
    /** Row-major values; int64 as numbers (ids and lengths fit), bool as 0/1. */
    readonly values: Float64Array | Float32Array | Int32Array | Int16Array | Int8Array | Uint8Array,
    /** torch's location tag (`cpu`, `cuda:0`): informational, nothing is moved. */
    readonly device: string,
  ) {}
  get numel(): number {
    return this.values.length;
  }
  /** Nested JavaScript arrays, as `tensor.tolist()` gives in Python. */
  toList(): unknown {
    const flat = Array.from(this.values);
    if (this.shape.length === 0) return flat[0];
    const build = (dim: number, start: number): unknown => {
      const n = this.shape[dim]!;
      if (dim === this.shape.length - 1) return flat.slice(start, start + n);
      const inner = this.shape.slice(dim + 1).reduce((a, b) => a * b, 1);
      return Array.from({ length: n }, (_, i) => build(dim + 1, start + i * inner));
    };
    return build(0, 0);
  }
}

/** A PIL image pickled by value: raw pixels, never decoded by PIL. */
export class PickledImage {
  constructor(
    readonly mode: string,
    readonly width: number,
    readonly height: number,
    readonly pixels: Uint8Array,
  ) {}
}

export class TorchSaveError extends Error {}

/** The plain value of a torch.save file: objects, arrays, numbers, strings, TorchTensor, PickledImage. */
export async function readTorchSave(file: string): Promise<unknown> {
  const zip = await openZip(file);
  try {
    const names = await listEntries(zip);
    const pkl = [...names.keys()].find((n) => /^[^/]+\/data\.pkl$/.test(n));
    if (!pkl) {
      throw new TorchSaveError(
        names.size === 0
          ? 'not a zip archive written by torch.save'
          : 'zip archive without <name>/data.pkl: not written by torch.save',
      );
    }
    const prefix = pkl.slice(0, -'data.pkl'.length);
    const byteorder = names.has(`${prefix}byteorder`)
      ? (await readEntry(zip, names.get(`${prefix}byteorder`)!)).toString()
      : 'little';
    if (byteorder.trim() !== 'little')
      throw new TorchSaveError(`storages are ${byteorder.trim()}-endian; only little-endian is read`);
    const graph = unpickle(await readEntry(zip, names.get(pkl)!), { allowedGlobals: isAllowedGlobal });
    const storages = new Map<string, Buffer>();
    const storage = async (key: string): Promise<Buffer> => {
      let b = storages.get(key);
      if (!b) {
        const entry = names.get(`${prefix}data/${key}`);
        if (!entry)
          throw new TorchSaveError(`tensor storage ${key} is missing from the archive (${prefix}data/${key})`);
        b = await readEntry(zip, entry);
        storages.set(key, b);
      }
      return b;
    };
    // Storages are read up front (only those the graph names), so the conversion below stays synchronous.
    for (const key of storageKeys(graph)) await storage(key);
    return toPlain(graph, (key) => storages.get(key)!, 0, new Set());
  } finally {
    zip.close();
  }
}

function storageKeys(root: PyValue): Set<string> {
  const keys = new Set<string>();
  const seen = new Set<object>();
  const todo: PyValue[] = [root];
  while (todo.length) {
    const v = todo.pop()!;
    if (v === null || typeof v !== 'object' || v instanceof Uint8Array || seen.has(v)) continue;
    seen.add(v);
    if (v instanceof PyPersistent) {
      const ref = storageRef(v);
      keys.add(ref.key);
    } else if (Array.isArray(v)) todo.push(...v);
    else if (v instanceof PyTuple) todo.push(...v.items);
    else if (v instanceof PyDict) for (const { key, value } of v.entries.values()) todo.push(key, value);
    else if (v instanceof PyCall) todo.push(...v.args);
    else if (v instanceof PyObject) todo.push(...v.args, v.state);
  }
  return keys;
}

interface StorageRef {
  dtype: TorchDtype;
  key: string;
  location: string;
  numel: number;
}

function storageRef(p: PyPersistent): StorageRef {
  const id = p.id;
  const items = id instanceof PyTuple ? id.items : undefined;
  const [tag, type, key, location, numel] = items ?? [];
  if (tag !== 'storage' || !(type instanceof PyGlobal) || typeof key !== 'string' || typeof numel !== 'number') {
    throw new TorchSaveError('a persistent id that is not a torch storage reference');
  }
  const dtype = STORAGE_DTYPES[type.name];
  if (!dtype) throw new TorchSaveError(`storage type ${type.qualifiedName} is not read`);
  return { dtype, key, location: typeof location === 'string' ? location : 'cpu', numel };
}

const MAX_DEPTH = 2000;

function toPlain(v: PyValue, storage: (key: string) => Buffer, depth: number, path: Set<object>): unknown {
  if (v === null || typeof v !== 'object') return typeof v === 'bigint' ? v.toString() : v;
  if (v instanceof Uint8Array) return v;
  if (depth > MAX_DEPTH) throw new TorchSaveError(`object nested deeper than ${MAX_DEPTH} levels`);
  if (path.has(v)) throw new TorchSaveError('the object graph refers to itself (a cycle)');
  path.add(v);
  try {
    const rec = (x: PyValue) => toPlain(x, storage, depth + 1, path);
    if (Array.isArray(v)) return v.map(rec);
    if (v instanceof PyTuple) return v.items.map(rec);
    if (v instanceof PyDict)
      return dictToObject(
        [...v.entries.values()].map(({ key, value }) => [key, value]),
        rec,
      );
    if (v instanceof PyCall) return callToPlain(v, rec, storage);
    if (v instanceof PyObject) return objectToPlain(v);
    if (v instanceof PyPersistent) throw new TorchSaveError('a bare storage outside a tensor');
    if (v instanceof PyGlobal) throw new TorchSaveError(`a bare reference to ${v.qualifiedName}`);
    throw new TorchSaveError('unexpected value in the object graph');
  } finally {
    path.delete(v);
  }
}

function dictToObject(pairs: [PyValue, PyValue][], rec: (x: PyValue) => unknown): Record<string, unknown> {
  // Object.fromEntries defines own properties, so a key named `__proto__` stays data.
  return Object.fromEntries(pairs.map(([k, value]) => [typeof k === 'string' ? k : String(rec(k)), rec(value)]));
}

function callToPlain(c: PyCall, rec: (x: PyValue) => unknown, storage: (key: string) => Buffer): unknown {
  const fn = c.fn.qualifiedName;
  const args = c.args;
  switch (fn) {
    case 'torch._utils._rebuild_tensor_v2':
      return rebuildTensor(args, storage);
    case 'torch._utils._rebuild_parameter':
      return rec(args[0] ?? null);
    case 'torch._tensor._rebuild_from_type_v2': {
      const [inner, , innerArgs] = args;
      if (!(inner instanceof PyGlobal) || !(innerArgs instanceof PyTuple)) throw new TorchSaveError(`malformed ${fn}`);
      return rec(new PyCall(inner, innerArgs.items));
    }
    case '_codecs.encode': {
      // Protocol 2 pickles `bytes` as _codecs.encode(<latin-1 text>, 'latin1').
      const [text, encoding] = args;
      if (typeof text !== 'string' || (encoding !== 'latin1' && encoding !== 'latin-1')) {
        throw new TorchSaveError('_codecs.encode other than latin1 bytes');
      }
      const out = new Uint8Array(text.length);
      for (let i = 0; i < text.length; i++) {
        const code = text.charCodeAt(i);
        if (code > 255) throw new TorchSaveError('_codecs.encode of text outside latin1');
        out[i] = code;
      }
      return out;
    }
    case 'builtins.set':
    case 'builtins.frozenset':
      return args.length ? rec(args[0]!) : [];
    case 'builtins.bytearray': {
      const b = args[0];
      if (b === undefined) return new Uint8Array(0);
      const v = rec(b);
      if (v instanceof Uint8Array) return v;
      throw new TorchSaveError('bytearray of something that is not bytes');
    }
    default:
      throw new TorchSaveError(`${fn}(…) is not something torch.save writes for data`);
  }
}

function rebuildTensor(args: readonly PyValue[], storage: (key: string) => Buffer): TorchTensor {
  const [store, offset, size, stride] = args;
  if (
    !(store instanceof PyPersistent) ||
    typeof offset !== 'number' ||
    !(size instanceof PyTuple) ||
    !(stride instanceof PyTuple)
  ) {
    throw new TorchSaveError('malformed torch._utils._rebuild_tensor_v2 call');
  }
  const ref = storageRef(store);
  const shape = size.items.map((n) => {
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0)
      throw new TorchSaveError('tensor size is not a list of integers');
    return n;
  });
  const strides = stride.items.map((n) => {
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0)
      throw new TorchSaveError('tensor stride is not a list of integers');
    return n;
  });
  if (strides.length !== shape.length) throw new TorchSaveError('tensor size and stride differ in rank');
  const bytes = storage(ref.key);
  const width = DTYPE_BYTES[ref.dtype];
  const available = Math.floor(bytes.length / width);
  const numel = shape.reduce((a, b) => a * b, 1);
  let last = offset;
  for (let d = 0; d < shape.length; d++) if (shape[d]! > 0) last += (shape[d]! - 1) * strides[d]!;
  if (numel > 0 && (offset < 0 || last >= available)) {
    throw new TorchSaveError(`tensor reads past its storage ${ref.key} (${available} elements)`);
  }
  const read = elementReader(ref.dtype, bytes);
  const out =
    ref.dtype === 'float64' || ref.dtype === 'int64'
      ? new Float64Array(numel)
      : ref.dtype === 'float32' || ref.dtype === 'float16' || ref.dtype === 'bfloat16'
        ? new Float32Array(numel)
        : ref.dtype === 'int32'
          ? new Int32Array(numel)
          : ref.dtype === 'int16'
            ? new Int16Array(numel)
            : ref.dtype === 'int8'
              ? new Int8Array(numel)
              : new Uint8Array(numel);
  // Walk the index space row-major, following the strides (views and transposes come out contiguous).
  const index = new Array<number>(shape.length).fill(0);
  let at = offset;
  for (let i = 0; i < numel; i++) {
    out[i] = read(at);
    for (let d = shape.length - 1; d >= 0; d--) {
      index[d]!++;
      at += strides[d]!;
      if (index[d]! < shape[d]!) break;
      at -= index[d]! * strides[d]!;
      index[d] = 0;
    }
  }
  return new TorchTensor(ref.dtype, shape, out, ref.location);
}

function elementReader(dtype: TorchDtype, b: Buffer): (i: number) => number {
  switch (dtype) {
    case 'float64':
      return (i) => b.readDoubleLE(i * 8);
    case 'float32':
      return (i) => b.readFloatLE(i * 4);
    case 'float16':
      return (i) => halfToFloat(b.readUInt16LE(i * 2));
    case 'bfloat16': {
      const f = new Float32Array(1);
      const u = new Uint32Array(f.buffer);
      return (i) => {
        u[0] = b.readUInt16LE(i * 2) << 16;
        return f[0]!;
      };
    }
    case 'int64':
      return (i) => {
        const v = b.readBigInt64LE(i * 8);
        if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
          throw new TorchSaveError('int64 tensor value outside the safe integer range');
        }
        return Number(v);
      };
    case 'int32':
      return (i) => b.readInt32LE(i * 4);
    case 'int16':
      return (i) => b.readInt16LE(i * 2);
    case 'int8':
      return (i) => b.readInt8(i);
    case 'uint8':
      return (i) => b[i]!;
    case 'bool':
      return (i) => (b[i]! ? 1 : 0);
  }
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 0x1f) return frac ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

const PIL_CHANNELS: Record<string, number> = { L: 1, LA: 2, RGB: 3, RGBA: 4, '1': 1, P: 1 };

function objectToPlain(o: PyObject): PickledImage {
  if (!o.cls.module.startsWith('PIL.')) throw new TorchSaveError(`cannot rebuild an object of ${o.cls.qualifiedName}`);
  const state = Array.isArray(o.state) ? o.state : o.state instanceof PyTuple ? o.state.items : undefined;
  // Pillow's Image.__getstate__: [info, mode, size, palette, data] (older releases: [info, mode, size, data]).
  const mode = state?.[1];
  const size = state?.[2];
  const data = state?.[state.length - 1];
  const dims = size instanceof PyTuple ? size.items : Array.isArray(size) ? size : undefined;
  const [width, height] = dims ?? [];
  if (
    typeof mode !== 'string' ||
    typeof width !== 'number' ||
    typeof height !== 'number' ||
    !(data instanceof Uint8Array || data instanceof PyCall)
  ) {
    throw new TorchSaveError(
      `a pickled ${o.cls.qualifiedName} without the [info, mode, size, …, bytes] state PIL writes`,
    );
  }
  const pixels =
    data instanceof Uint8Array
      ? data
      : callToPlain(
          data,
          () => null,
          () => Buffer.alloc(0),
        );
  if (!(pixels instanceof Uint8Array)) throw new TorchSaveError('pickled image pixels are not bytes');
  const channels = PIL_CHANNELS[mode];
  if (channels === undefined) throw new TorchSaveError(`pickled image mode ${mode} is not read (L, LA, RGB, RGBA, P)`);
  const expected = mode === '1' ? Math.ceil(width / 8) * height : width * height * channels;
  if (pixels.length !== expected) {
    throw new TorchSaveError(
      `pickled ${mode} image of ${width}×${height} holds ${pixels.length} bytes, expected ${expected}`,
    );
  }
  return new PickledImage(mode, width, height, pixels);
}

// --- zip access (yauzl: random access through the central directory, zip64-aware) ---

function openZip(file: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) =>
    yauzl.open(file, { lazyEntries: true, autoClose: false, validateEntrySizes: true }, (err, zip) => {
      if (err || !zip) reject(new TorchSaveError(`not a torch.save zip archive: ${err?.message ?? 'unreadable'}`));
      else resolve(zip);
    }),
  );
}

function listEntries(zip: yauzl.ZipFile): Promise<Map<string, yauzl.Entry>> {
  return new Promise((resolve, reject) => {
    const out = new Map<string, yauzl.Entry>();
    zip.on('entry', (e: yauzl.Entry) => {
      out.set(e.fileName, e);
      zip.readEntry();
    });
    zip.on('end', () => resolve(out));
    zip.on('error', (e: Error) => reject(new TorchSaveError(`corrupt zip archive: ${e.message}`)));
    zip.readEntry();
  });
}

function readEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) return reject(new TorchSaveError(`cannot read ${entry.fileName}: ${err?.message}`));
      const parts: Buffer[] = [];
      stream.on('data', (c: Buffer) => parts.push(c));
      stream.on('end', () => resolve(Buffer.concat(parts)));
      stream.on('error', (e: Error) => reject(new TorchSaveError(`cannot read ${entry.fileName}: ${e.message}`)));
    }),
  );
}
