// A torch.save file as the JSON-shaped records the importers read: the file holds one object (slime's
// `{rollout_id, samples}` debug dumps, a list of samples, …), so it becomes one record, as a whole-file
// JSON document does. Tensors become nested lists (`tensor.tolist()`), PIL images pickled by value
// become PNG data: URLs (so the image code downstream sees real image bytes with their true size),
// raw bytes that are an image become a data: URL too.
import sharp from 'sharp';
import type { RawRecord } from './record.ts';
import { PickledImage, TorchTensor, readTorchSave } from './torch-save.ts';

export async function torchSaveRecords(file: string): Promise<RawRecord[]> {
  const value = await readTorchSave(file);
  const size = (await import('node:fs')).statSync(file).size;
  return [{ line: 1, offset: 0, length: size, value: await toJsonShape(value) }];
}

async function toJsonShape(v: unknown): Promise<unknown> {
  if (v instanceof TorchTensor) return v.toList();
  if (v instanceof PickledImage) return pngDataUrl(v);
  if (v instanceof Uint8Array) return bytesValue(v);
  if (Array.isArray(v)) {
    const out: unknown[] = [];
    for (const x of v) out.push(await toJsonShape(x));
    return out;
  }
  if (v !== null && typeof v === 'object') {
    const entries: [string, unknown][] = [];
    for (const [k, x] of Object.entries(v)) entries.push([k, await toJsonShape(x)]);
    return Object.fromEntries(entries);
  }
  return v;
}

const RAW_CHANNELS: Record<string, 1 | 2 | 3 | 4> = { L: 1, LA: 2, RGB: 3, RGBA: 4 };

async function pngDataUrl(img: PickledImage): Promise<string> {
  const channels = RAW_CHANNELS[img.mode];
  if (!channels) throw new Error(`pickled ${img.mode} image: only L, LA, RGB and RGBA are converted`);
  const png = await sharp(img.pixels, { raw: { width: img.width, height: img.height, channels } })
    .png({ compressionLevel: 1 })
    .toBuffer();
  return `data:image/png;base64,${png.toString('base64')}`;
}

function bytesValue(b: Uint8Array): string {
  const mime =
    b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47
      ? 'image/png'
      : b[0] === 0xff && b[1] === 0xd8
        ? 'image/jpeg'
        : b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46
          ? 'image/webp'
          : 'application/octet-stream';
  return `data:${mime};base64,${Buffer.from(b).toString('base64')}`;
}
