// The layers of the code base, enforced (in the spirit of Perfetto's tools/check_imports.py):
// every import of every file under server/ and app/ is parsed, and the test fails on an import
// cycle (type imports included) or an import that climbs a layer. The allow-list is data, below.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Layers, lowest first, with the files each holds (a path prefix, relative to the repository). */
const LAYERS = {
  model: ['server/model/'],
  util: ['server/util/'],
  // The tokenizer and template engine every family and profile builds on (files of server/profiles/).
  tokenizers: ['server/profiles/tokenizer.ts', 'server/profiles/template.ts', 'server/profiles/python-literal.ts'],
  families: ['server/families/'],
  profiles: ['server/profiles/'],
  analysis: ['server/analysis/'],
  report: ['server/report/'],
  images: ['server/images/'],
  export: ['server/export/'],
  import: ['server/import/'],
  pipeline: ['server/pipeline.ts', 'server/pipeline/', 'server/analysis-pool.ts', 'server/analysis-worker.ts'],
  http: ['server/http/'],
  gateway: ['server/gateway/'],
  demo: ['server/demo/'],
  cli: ['server/cli/'],
  app: ['app/'],
} as const;
type Layer = keyof typeof LAYERS;

const BELOW_IMAGES: Layer[] = ['model', 'util', 'tokenizers', 'families', 'profiles', 'analysis'];
const BELOW_PIPELINE: Layer[] = [...BELOW_IMAGES, 'report', 'images', 'export', 'import'];

/** DEPS_ALLOWLIST: the layers each layer may import from (besides itself). */
const DEPS_ALLOWLIST: Record<Layer, readonly Layer[]> = {
  model: [],
  util: ['model'],
  tokenizers: ['model', 'util'],
  // A model family (server/families/<family>/) is pure: its math, grammar and words, on the tokenizer.
  families: ['model', 'util', 'tokenizers'],
  // A profile is one model: its family's ids and settings read from its tokenizer and files.
  profiles: ['model', 'util', 'tokenizers', 'families'],
  analysis: ['model', 'util', 'tokenizers', 'families', 'profiles'],
  // The report of a run (check --json) is built from analysis results, and read by every command.
  report: ['model', 'util', 'tokenizers', 'families', 'profiles', 'analysis'],
  images: BELOW_IMAGES,
  export: [...BELOW_IMAGES, 'images'],
  // An export batch is read back as input: the export-rows importer reads the row schema and
  // the Parquet reader. Never the other way round (so the two cannot form a cycle).
  import: [...BELOW_IMAGES, 'images', 'export'],
  pipeline: BELOW_PIPELINE,
  http: [...BELOW_PIPELINE, 'pipeline'],
  // The gateway reuses the server's request-body reader and loopback rule.
  gateway: [...BELOW_PIPELINE, 'pipeline', 'http'],
  demo: [...BELOW_PIPELINE, 'pipeline'],
  cli: [...BELOW_PIPELINE, 'pipeline', 'http', 'gateway', 'demo'],
  // The browser bundle: see APP_MAY_IMPORT.
  app: [],
};

/**
 * What the app may take from the server: types of the model and of the HTTP API (erased from the
 * bundle), and code from modules that import nothing at run time (pure functions the browser runs as
 * they are, such as the pad-grid geometry of analysis/image-math.ts).
 */
const APP_TYPE_SOURCES = ['server/model/', 'server/http/api.ts'];

/** Layers whose code must not touch the filesystem (what they compute is a function of their inputs). */
const NO_FILESYSTEM: Layer[] = ['families', 'analysis', 'report'];

/**
 * Known debt, to be emptied: nothing else is excused. ask.ts sizes the images of a playground
 * request by reading them (images/resolve.ts: files, sharp); the image sizers are moving to the
 * images layer, to be passed in by the CLI and the server. Remove this entry then: the test below
 * fails while an entry is no longer needed.
 */
const KNOWN_DEBT: { from: string; to: string; why: string }[] = [];

interface Edge {
  from: string;
  to: string;
  typeOnly: boolean;
  dynamic: boolean;
  line: number;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.(ts|tsx)$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

/** Every import of one file: static imports and re-exports (type-only marked), and `import('literal')`. */
function importsOf(file: string): Edge[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const sf = ts.createSourceFile(
    file,
    text,
    ts.ScriptTarget.Latest,
    true,
    file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS,
  );
  const edges: Edge[] = [];
  const add = (spec: string, typeOnly: boolean, dynamic: boolean, node: ts.Node) => {
    const line = sf.getLineAndCharacterOfPosition(node.getStart()).line + 1;
    const to = spec.startsWith('.') ? path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)) : spec;
    edges.push({ from: file, to, typeOnly, dynamic, line });
  };
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const allTypes =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            clause.namedBindings !== undefined &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      add(node.moduleSpecifier.text, allTypes, false, node);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const allTypes =
        node.isTypeOnly ||
        (node.exportClause !== undefined &&
          ts.isNamedExports(node.exportClause) &&
          node.exportClause.elements.every((e) => e.isTypeOnly));
      add(node.moduleSpecifier.text, allTypes, false, node);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      add(node.arguments[0].text, false, true, node);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return edges;
}

function layerOf(file: string): Layer | undefined {
  for (const [layer, prefixes] of Object.entries(LAYERS) as [Layer, readonly string[]][])
    if (prefixes.some((p) => (p.endsWith('/') ? file.startsWith(p) : file === p))) return layer;
  return undefined;
}

const isProjectFile = (spec: string) => spec.startsWith('server/') || spec.startsWith('app/');

const FILES = [...sourceFiles('server'), ...sourceFiles('app')];
const EDGES = FILES.flatMap(importsOf);
const byFile = new Map<string, Edge[]>();
for (const e of EDGES) byFile.set(e.from, [...(byFile.get(e.from) ?? []), e]);

/** Strongly connected components with more than one file, or a file importing itself (Tarjan). */
function cycles(edges: readonly Edge[]): string[][] {
  const graph = new Map<string, string[]>();
  for (const e of edges) if (isProjectFile(e.to) && !e.dynamic) graph.set(e.from, [...(graph.get(e.from) ?? []), e.to]);
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const strong = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const v of new Set([...graph.keys(), ...FILES])) if (!idx.has(v)) strong(v);
  return out;
}

/** Why an import breaks the layering, or undefined when it is allowed. */
function violation(e: Edge): string | undefined {
  const from = layerOf(e.from);
  if (KNOWN_DEBT.some((d) => d.from === e.from && d.to === e.to)) return undefined;
  if (from && NO_FILESYSTEM.includes(from) && /^(node:)?fs(\/promises)?$/.test(e.to))
    return `${from} must not touch the filesystem`;
  if (!isProjectFile(e.to)) return undefined;
  const to = layerOf(e.to);
  if (!from) return `${e.from} is in no layer: add it to LAYERS`;
  if (!to) return `${e.to} is in no layer: add it to LAYERS`;
  if (from === 'app') {
    if (to === 'app') return undefined;
    if (e.typeOnly && APP_TYPE_SOURCES.some((p) => (p.endsWith('/') ? e.to.startsWith(p) : e.to === p)))
      return undefined;
    if ((byFile.get(e.to) ?? []).every((x) => x.typeOnly)) return undefined; // imports nothing at run time: pure code
    return 'the app takes only types from server/model and server/http/api.ts (or code from a module that imports nothing at run time)';
  }
  if (from === to || DEPS_ALLOWLIST[from].includes(to)) return undefined;
  return `${from} may not import ${to} (allowed: ${DEPS_ALLOWLIST[from].join(', ') || 'nothing'})`;
}

describe('layering', () => {
  it('reads the imports of every file (the parser sees what the tree holds)', () => {
    expect(FILES.length).toBeGreaterThan(80);
    expect(EDGES.some((e) => e.from === 'server/pipeline.ts' && e.to === 'server/analysis-pool.ts')).toBe(true);
    expect(EDGES.some((e) => e.typeOnly && e.from.startsWith('app/') && e.to === 'server/http/api.ts')).toBe(true);
    for (const f of FILES) expect(layerOf(f), `${f} is in no layer`).toBeDefined();
  });

  it('has no import cycle, type imports included', () => {
    expect(cycles(EDGES)).toEqual([]);
  });

  it('no import climbs a layer', () => {
    const bad = EDGES.flatMap((e) => {
      const why = violation(e);
      return why ? [`${e.from}:${e.line} imports ${e.to}: ${why}`] : [];
    });
    expect(bad).toEqual([]);
  });

  it('every known-debt entry is still needed (remove it once paid)', () => {
    for (const d of KNOWN_DEBT)
      expect(
        EDGES.some((e) => e.from === d.from && e.to === d.to),
        d.why,
      ).toBe(true);
  });

  it('loading the format registry loads neither the checks nor sharp', () => {
    const reached = new Set<string>();
    const walk = (file: string) => {
      if (reached.has(file)) return;
      reached.add(file);
      for (const e of byFile.get(file) ?? []) if (!e.typeOnly && !e.dynamic) walk(e.to);
    };
    walk('server/import/formats.ts');
    expect(reached.has('server/import/native.ts')).toBe(true);
    expect([...reached].filter((f) => f === 'sharp' || f === 'server/analysis/checks.ts')).toEqual([]);
  });

  it('the checks catch what they are for', () => {
    const edge = (from: string, to: string, typeOnly = false): Edge => ({
      from,
      to,
      typeOnly,
      dynamic: false,
      line: 1,
    });
    expect(violation(edge('server/analysis/x.ts', 'server/pipeline.ts'))).toMatch(/analysis may not import pipeline/);
    expect(violation(edge('server/export/x.ts', 'server/import/index.ts'))).toMatch(/export may not import import/);
    expect(violation(edge('server/analysis/x.ts', 'node:fs'))).toMatch(/filesystem/);
    expect(violation(edge('app/x.ts', 'server/pipeline.ts', true))).toMatch(/only types/);
    expect(violation(edge('app/x.ts', 'server/model/finding.ts'))).toMatch(/only types/);
    expect(violation(edge('app/x.ts', 'server/model/finding.ts', true))).toBeUndefined();
    expect(violation(edge('server/cli/x.ts', 'server/http/server.ts'))).toBeUndefined();
    expect(
      cycles([edge('server/model/a.ts', 'server/model/b.ts', true), edge('server/model/b.ts', 'server/model/a.ts')]),
    ).toEqual([['server/model/a.ts', 'server/model/b.ts']]);
  });
});
