// The images an export reads are kept for the next rows (server/export/images.ts RecentImages):
// the samples of a GRPO group share their images, so each is read and hashed once, and only a
// bounded number of them are held.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RecentImages } from '../server/export/images.ts';
import { ImageUnavailable } from '../server/images/resolve.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-export-images-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const png = (fill: number) => Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(64, fill)]);

describe('the images the last rows read', () => {
  it('reads an image once for the rows that share it, with its hash', () => {
    fs.writeFileSync(path.join(dir, 'a.png'), png(1));
    const recent = new RecentImages();
    const first = recent.read('a.png', dir, [dir]);
    expect(first.sha256).toBe(createHash('sha256').update(png(1)).digest('hex'));
    expect(first.path).toBe(path.join(dir, 'a.png'));
    // The next sample of the group: not read again (the file is gone, the image is not).
    fs.rmSync(path.join(dir, 'a.png'));
    expect(recent.read('a.png', dir, [dir])).toBe(first);
    const url = `data:image/png;base64,${png(2).toString('base64')}`;
    expect(recent.read(url, dir, [dir]).bytes.equals(png(2))).toBe(true);
  });

  it('holds a bounded number of images, oldest out first', () => {
    for (const n of ['b', 'c']) fs.writeFileSync(path.join(dir, `${n}.png`), png(n.charCodeAt(0)));
    const recent = new RecentImages(1 << 20, 1);
    recent.read('b.png', dir, [dir]);
    recent.read('c.png', dir, [dir]);
    fs.rmSync(path.join(dir, 'b.png'));
    expect(() => recent.read('b.png', dir, [dir])).toThrow(ImageUnavailable);
    // A failed read is not kept: the image is looked for again next time.
    fs.writeFileSync(path.join(dir, 'b.png'), png(9));
    expect(recent.read('b.png', dir, [dir]).bytes.equals(png(9))).toBe(true);
  });
});
