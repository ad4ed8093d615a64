// The recipes of docs/distributed.md, copied out of the page so that a test runs what the page says:
// each is the fenced block after a `<!-- recipe: NAME [FILE] -->` marker, FILE the name the page
// saves it under (the submit scripts name the others by it).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DISTRIBUTED_DOC = path.join(ROOT, 'docs', 'distributed.md');

export interface Recipe {
  name: string;
  /** The file name the page gives it (undefined when it names none). */
  file?: string;
  /** The block's language (`sh`, `yaml`, `python`). */
  lang: string;
  text: string;
}

/** Every recipe of the page, in page order. */
export function recipes(doc = fs.readFileSync(DISTRIBUTED_DOC, 'utf8')): Recipe[] {
  const out: Recipe[] = [];
  const re = /<!-- recipe: ([a-z0-9-]+)(?: ([^ ]+))? -->\n```([a-z]*)\n([\s\S]*?)```/g;
  for (let m = re.exec(doc); m; m = re.exec(doc))
    out.push({ name: m[1]!, ...(m[2] ? { file: m[2] } : {}), lang: m[3]!, text: m[4]! });
  return out;
}

/** The recipe named `name` (throws when the page has none). */
export function recipe(name: string): Recipe {
  const r = recipes().find((x) => x.name === name);
  if (!r) throw new Error(`docs/distributed.md has no recipe ${name}`);
  return r;
}

/** Write the recipes named `names` into `dir` under the file names the page gives them (executable). */
export function writeRecipes(dir: string, names: readonly string[]): Record<string, string> {
  const written: Record<string, string> = {};
  for (const name of names) {
    const r = recipe(name);
    if (!r.file) throw new Error(`docs/distributed.md gives recipe ${name} no file name`);
    const file = path.join(dir, r.file);
    fs.writeFileSync(file, r.text, { mode: 0o755 });
    written[name] = file;
  }
  return written;
}
