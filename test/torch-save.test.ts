// torch.save files read without PyTorch: against the real torch.save/torch.load (Debian's
// python3-torch), on the slime rollout-dump fixture, and against hostile pickles.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { PyTuple, RefusedGlobalError, UnpicklingError, unpickle } from '../server/import/read/pickle.ts';
import { torchSaveRecords } from '../server/import/read/torch-records.ts';
import { PickledImage, TorchSaveError, TorchTensor, readTorchSave } from '../server/import/read/torch-save.ts';

const FIXTURES = path.join(import.meta.dirname, 'fixtures');
const SYSTEM_PYTHON = '/usr/bin/python3';
const hasTorch = spawnSync(SYSTEM_PYTHON, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0;
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-torch-'));

/** What torch_reference.py prints for a value read by rollscope. */
function asReference(v: unknown): unknown {
  if (v instanceof TorchTensor) {
    const clean = (x: unknown): unknown =>
      Array.isArray(x)
        ? x.map(clean)
        : x === Number.POSITIVE_INFINITY
          ? 'inf'
          : x === Number.NEGATIVE_INFINITY
            ? '-inf'
            : x;
    return { tensor: v.dtype, shape: [...v.shape], values: clean(v.toList()) };
  }
  if (v instanceof Uint8Array) return { bytes: [...v] };
  if (Array.isArray(v)) return v.map(asReference);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, asReference(x)]));
  return v;
}

describe('torch.save reader', () => {
  it.skipIf(!hasTorch && !process.env.CI)(
    'reads what the real torch.save wrote exactly as torch.load does',
    async () => {
      const file = path.join(tmp(), 'reference.pt');
      const r = spawnSync(SYSTEM_PYTHON, [path.join(import.meta.dirname, 'support', 'torch_reference.py'), file], {
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
      const expected = JSON.parse(r.stdout);
      const actual = asReference(await readTorchSave(file));
      expect(actual).toEqual(expected);
    },
  );

  it('reads the slime rollout dump: every sample, and the PIL image pickled by value with its real pixels', async () => {
    const value = (await readTorchSave(path.join(FIXTURES, 'torch', 'rollout_data_0.pt'))) as {
      rollout_id: number;
      samples: { tokens: number[]; multimodal_inputs?: { images: unknown[] } }[];
    };
    const jsonl = fs
      .readFileSync(path.join(FIXTURES, 'slime', 'samples.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(value.rollout_id).toBe(0);
    expect(value.samples.map((s) => s.tokens)).toEqual(jsonl.map((s) => s.tokens));
    const image = value.samples[0]!.multimodal_inputs!.images[0];
    expect(image).toBeInstanceOf(PickledImage);
    const png = await sharp(path.join(FIXTURES, 'slime', 'images', 'right-triangle.png'))
      .raw()
      .toBuffer({ resolveWithObject: true });
    const img = image as PickledImage;
    expect([img.mode, img.width, img.height]).toEqual(['RGB', png.info.width, png.info.height]);
    expect(Buffer.from(img.pixels).equals(png.data)).toBe(true);
  });

  it('turns the dump into one JSON-shaped record: tensors as lists, the pickled image as a PNG data: URL', async () => {
    const [record] = await torchSaveRecords(path.join(FIXTURES, 'torch', 'rollout_data_0.pt'));
    const samples = (record!.value as { samples: { multimodal_inputs: { images: string[] } }[] }).samples;
    const url = samples[0]!.multimodal_inputs.images[0]!;
    expect(url.startsWith('data:image/png;base64,')).toBe(true);
    const meta = await sharp(Buffer.from(url.split(',')[1]!, 'base64')).metadata();
    expect([meta.width, meta.height]).toEqual([640, 480]);
    expect(samples[1]!.multimodal_inputs.images[0]).toBe('images/right-triangle.png');
  });
});

describe('hostile pickles', () => {
  it('refuses a pickle that reduces to os.system, naming the global, and runs nothing', async () => {
    const cwd = tmp();
    const before = process.cwd();
    process.chdir(cwd);
    try {
      const err = await readTorchSave(path.join(FIXTURES, 'torch', 'hostile.pt')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RefusedGlobalError);
      expect((err as RefusedGlobalError).global).toMatch(/^(posix|os)\.system$/);
      expect((err as Error).message).toContain('refused to load global');
      expect(fs.readdirSync(cwd)).toEqual([]);
    } finally {
      process.chdir(before);
    }
  });

  // Pickles written by Python's pickle module for each way a file may try to reach code.
  const python = (src: string): Uint8Array => {
    const r = spawnSync('python3', ['-c', src], { encoding: null });
    if (r.status !== 0) throw new Error(r.stderr.toString());
    return new Uint8Array(r.stdout);
  };
  const allowNothing = { allowedGlobals: () => false };
  it.each([
    [
      'builtins.eval',
      'import pickle,sys\nclass X:\n  def __reduce__(self): return (eval, ("1+1",))\nsys.stdout.buffer.write(pickle.dumps(X(), protocol=2))',
    ],
    [
      'subprocess.Popen',
      'import pickle,sys,subprocess\nclass X:\n  def __reduce__(self): return (subprocess.Popen, (["true"],))\nsys.stdout.buffer.write(pickle.dumps(X(), protocol=4))',
    ],
    [
      'builtins.getattr',
      'import pickle,sys\nclass X:\n  def __reduce__(self): return (getattr, ("x", "upper"))\nsys.stdout.buffer.write(pickle.dumps(X(), protocol=0))',
    ],
  ])('refuses %s (whatever the protocol)', (global, src) => {
    expect(() => unpickle(python(src), allowNothing)).toThrowError(
      new RegExp(`refused to load global ${global.replace('.', '\\.')}`),
    );
  });

  it('refuses a torch global that is allowed as a name but used as something it is not', async () => {
    // REDUCE on torch.FloatStorage (a storage type, not a rebuild function) must not be interpreted.
    const dir = tmp();
    const pkl = python(
      'import pickle,sys,types\nt=types.ModuleType("torch");sys.modules["torch"]=t\nclass FloatStorage:\n  __module__="torch"\n  def __reduce__(self): return (FloatStorage, ())\nt.FloatStorage=FloatStorage\nclass X:\n  def __reduce__(self): return (FloatStorage, (1,))\nsys.stdout.buffer.write(pickle.dumps({"x": X()}, protocol=2))',
    );
    const file = path.join(dir, 'odd.pt');
    fs.writeFileSync(file, zipStored({ 'archive/data.pkl': pkl, 'archive/byteorder': Buffer.from('little') }));
    await expect(readTorchSave(file)).rejects.toThrow(TorchSaveError);
  });

  it('stops on truncated, cyclic or malformed pickles with the byte offset', () => {
    const good = python('import pickle,sys\nsys.stdout.buffer.write(pickle.dumps({"a": [1, 2.5, "x"]}, protocol=2))');
    expect(() => unpickle(good.subarray(0, good.length - 3), allowNothing)).toThrow(UnpicklingError);
    expect(() => unpickle(Uint8Array.from([0x80, 0x02, 0x68, 0x07, 0x2e]), allowNothing)).toThrow(
      /memo has no entry 7/,
    );
    expect(() => unpickle(Uint8Array.from([0x80, 0x02, 0xff]), allowNothing)).toThrow(
      /unsupported pickle opcode 0xff \(pickle byte 2\)/,
    );
    const tuple = unpickle(
      python('import pickle,sys\nsys.stdout.buffer.write(pickle.dumps((1, "a"), protocol=2))'),
      allowNothing,
    );
    expect(tuple).toBeInstanceOf(PyTuple);
  });

  it('rejects a self-referencing object graph instead of looping', async () => {
    const dir = tmp();
    const pkl = python(
      'import pickle,sys\na=[]\na.append(a)\nsys.stdout.buffer.write(pickle.dumps({"samples": a}, protocol=2))',
    );
    const file = path.join(dir, 'cycle.pt');
    fs.writeFileSync(file, zipStored({ 'archive/data.pkl': pkl }));
    await expect(readTorchSave(file)).rejects.toThrow(/refers to itself/);
  });

  it('says what a file is when it is not a torch.save archive', async () => {
    const dir = tmp();
    const text = path.join(dir, 'text.pt');
    fs.writeFileSync(text, '{"samples": []}\n');
    await expect(readTorchSave(text)).rejects.toThrow(/not a torch.save zip archive/);
    const otherZip = path.join(dir, 'other.pt');
    fs.writeFileSync(otherZip, zipStored({ 'readme.txt': Buffer.from('hi') }));
    await expect(readTorchSave(otherZip)).rejects.toThrow(/without <name>\/data.pkl/);
  });
});

/** A minimal stored (uncompressed) zip, as Python's zipfile writes with ZIP_STORED. */
function zipStored(entries: Record<string, Uint8Array>): Buffer {
  const r = spawnSync(
    'python3',
    [
      '-c',
      'import io,json,sys,zipfile,base64\nd=json.load(sys.stdin)\nb=io.BytesIO()\nwith zipfile.ZipFile(b,"w") as z:\n  [z.writestr(k, base64.b64decode(v)) for k,v in d.items()]\nsys.stdout.buffer.write(b.getvalue())',
    ],
    {
      input: JSON.stringify(
        Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
      ),
      encoding: null,
    },
  );
  if (r.status !== 0) throw new Error(r.stderr.toString());
  return r.stdout;
}
