#!/usr/bin/env node
// Bundles the command line and the analysis worker into dist/server/ with esbuild, so a run
// starts without compiling TypeScript on the fly (tsx's loader costs ~1 s per process and per
// worker thread). bin/rollscope.js uses the bundle only while it is newer than every source file.
// Each module's `import.meta.url` is rewritten to its source file's URL, relative to the bundle,
// so files found next to the sources (templates, the app, package.json) are found as before.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outdir = path.join(root, 'dist', 'server');

const sourceUrls = {
  name: 'source-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /[\\/]server[\\/].*\.ts$/ }, async (args) => {
      const text = await fs.promises.readFile(args.path, 'utf8');
      const rel = path.relative(outdir, args.path).split(path.sep).join('/');
      return {
        contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`),
        loader: 'ts',
      };
    });
  },
};

const started = Date.now();
await build({
  entryPoints: {
    rollscope: path.join(root, 'server/cli/main.ts'),
    'analysis-worker': path.join(root, 'server/analysis-worker.ts'),
  },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  sourcemap: 'linked',
  logLevel: 'warning',
  plugins: [sourceUrls],
});
fs.writeFileSync(path.join(outdir, 'built.json'), JSON.stringify({ builtAt: new Date().toISOString() }));
if (process.argv.includes('--verbose'))
  console.log(`bundled into ${path.relative(root, outdir)} in ${Date.now() - started} ms`);
