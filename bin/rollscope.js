#!/usr/bin/env node
// Entry point. Runs the bundle bin/bundle.js wrote (dist/server/, made by `npm ci`/`npm run
// build`) when it is newer than every source file under server/; otherwise registers tsx so the
// TypeScript sources run as they are. ROLLSCOPE_FROM_SOURCE=1 always runs the sources.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bundle = path.join(root, 'dist', 'server');

/** Newest modification time of a .ts file under `dir`. */
function newestSource(dir) {
  let newest = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (e.name.endsWith('.ts')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
  }
  return newest;
}

function bundleIsFresh() {
  if (process.env.ROLLSCOPE_FROM_SOURCE === '1') return false;
  try {
    return fs.statSync(path.join(bundle, 'built.json')).mtimeMs > newestSource(path.join(root, 'server'));
  } catch {
    return false;
  }
}

let main;
if (bundleIsFresh()) {
  // Analysis workers load the bundled worker too (server/analysis-pool.ts reads this).
  globalThis.rollscopeWorkerEntry = pathToFileURL(path.join(bundle, 'analysis-worker.js')).href;
  ({ main } = await import(pathToFileURL(path.join(bundle, 'rollscope.js')).href));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../server/cli/main.ts'));
}
process.exitCode = await main(process.argv.slice(2));
