#!/usr/bin/env node
// `npm pack` packs package.json as it is on disk. Its `prepare` script builds a checkout (npm ci
// runs it: vite and esbuild are devDependencies); an installed package has the build already
// (`files`: dist/) and no devDependencies, and npm 11 would offer to run `prepare` on a tarball
// install and warn that allowScripts does not cover it. So `prepack` takes `prepare` out of the
// manifest (keeping the original beside it) and `postpack` puts it back.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = path.join(root, 'package.json');
const kept = path.join(root, '.package.json.prepack');

if (process.argv[2] === 'strip') {
  const text = fs.readFileSync(manifest, 'utf8');
  if (!fs.existsSync(kept)) fs.writeFileSync(kept, text);
  const pkg = JSON.parse(text);
  delete pkg.scripts.prepare;
  fs.writeFileSync(manifest, `${JSON.stringify(pkg, null, 2)}\n`);
} else if (process.argv[2] === 'restore') {
  if (fs.existsSync(kept)) fs.renameSync(kept, manifest);
} else {
  console.error('usage: node bin/pack-manifest.js strip|restore');
  process.exitCode = 2;
}
