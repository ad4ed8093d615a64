// The generic test every importer fixture goes through (after speedscope's checkProfileSnapshot
// and Firefox Profiler's integrity check of every imported profile):
//   1. load the fixture by its name: the expected format is detected, every error names the file;
//   2. load a copy under a neutral name (no telling name or extension): same importer, same
//      trajectories (apart from the facts the test declares the importer takes from the name);
//   3. every trajectory parses as the model's `Trajectory`, ids are unique, and whatever does not
//      line up (per-turn arrays, sample fields, pad runs against images, prompts that should
//      extend one another) is reported by a finding; findings point inside their streams;
//   4. a compact dump (ids, turn and sample lengths, image counts, findings, read errors) matches
//      the committed file snapshot in test/__snapshots__/importers/;
//   5. the trajectories written as native JSONL and read back are the same trajectories and get
//      the same findings.
// Regenerate the snapshots after an intended change: `npx vitest run -u test/import-*.test.ts`,
// then review the diff. Under CI (`CI` set) a missing snapshot fails instead of being written.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { loadFile, importerFor, type LoadedFile } from '../../server/import/index.ts';
import { analyzeTrajectory, defaultRoots, type CheckedTrajectory } from '../../server/pipeline.ts';
import { Trajectory, type FormatName, type ReadError } from '../../server/model/trajectory.ts';
import { Finding } from '../../server/model/finding.ts';
import { asNativeRecord, nativeJsonl } from '../../server/model/native-jsonl.ts';
import { padRuns } from '../../server/analysis/vision-spans.ts';
import { padCountFromGrid } from '../../server/families/qwen/image-math.ts';

const TEST_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const FIXTURES_DIR = path.join(TEST_DIR, 'fixtures');
export const SNAPSHOT_DIR = path.join(TEST_DIR, '__snapshots__', 'importers');

export interface ImporterSnapshotOptions {
  /** The format detection must pick, by name and by structure. */
  format: FormatName;
  /**
   * Trajectory fields the importer takes from the file's name or folders (dotted paths such as
   * `id` or `meta.step`): they may differ when the file is loaded under a neutral name.
   */
  fromName?: readonly string[];
  /** Snapshot name for a file outside test/fixtures (default: its path inside test/fixtures). */
  name?: string;
}

/** A fixture loaded and checked once; the format-specific tests read the same results. */
export interface ImporterRun {
  file: string;
  loaded: LoadedFile;
  checked: CheckedTrajectory[];
  /** The checked trajectory of that id (throws naming the ids there are). */
  byId(id: string): CheckedTrajectory;
}

const runs = new Map<string, Promise<ImporterRun>>();

/** Load and check a fixture (memoized per path): `loadFile`, then the pipeline's analysis. */
export function importerRun(file: string): Promise<ImporterRun> {
  let run = runs.get(file);
  if (!run) {
    run = (async () => {
      const loaded = await loadFile(file);
      const checked = await analyzeAll(loaded.trajectories, file);
      return {
        file,
        loaded,
        checked,
        byId(id: string) {
          const c = checked.find((x) => x.trajectory.id === id);
          if (!c) throw new Error(`no trajectory "${id}" in ${file}; there are ${checked.map((x) => x.trajectory.id)}`);
          return c;
        },
      };
    })();
    runs.set(file, run);
  }
  return run;
}

function analyzeAll(trajectories: readonly Trajectory[], file: string): Promise<CheckedTrajectory[]> {
  const roots = defaultRoots([file]);
  return Promise.all(trajectories.map((t) => analyzeTrajectory(t, { workers: 0 }, roots)));
}

/** The whole generic check of one fixture (see the top of this file). Returns its run for further tests. */
export async function checkImporterSnapshot(file: string, opts: ImporterSnapshotOptions): Promise<ImporterRun> {
  const run = await importerRun(file);
  const { loaded } = run;
  expect(loaded.format, `format detected for ${file}`).toBe(opts.format);
  for (const e of loaded.errors) expect(e.file, `read error names its file: ${e.message}`).toBe(file);

  expect(integrityViolations(run), `model integrity of ${file}`).toEqual([]);

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-harness-'));
  try {
    await expectSameUnderNeutralName(run, opts, tmp);
    const name = opts.name ?? path.relative(FIXTURES_DIR, path.resolve(file));
    if (name.startsWith('..')) throw new Error(`${file} is outside test/fixtures: give the snapshot a name`);
    const snapshot = path.join(SNAPSHOT_DIR, `${name}.snap.json`);
    // vitest writes a missing snapshot unless CI is set; say what to do rather than "mismatched".
    if (process.env.CI && !fs.existsSync(snapshot))
      throw new Error(
        `no committed snapshot ${path.relative(process.cwd(), snapshot)}: run vitest -u on this test file, commit it`,
      );
    await expect(renderDump(dumpRun(run, name))).toMatchFileSnapshot(snapshot);
    await expectNativeRoundTrip(run, tmp);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return run;
}

// ---------------------------------------------------------------------------------------------
// 2. Neutral name

async function expectSameUnderNeutralName(run: ImporterRun, opts: ImporterSnapshotOptions, tmp: string) {
  const binary = importerFor(opts.format)?.container === 'binary';
  const neutral = path.join(tmp, binary ? 'input.bin' : 'input');
  fs.copyFileSync(run.file, neutral);
  const again = await loadFile(neutral);
  expect(again.format, `format detected for ${run.file} copied to a neutral name`).toBe(run.loaded.format);
  const comparable = (ts: readonly Trajectory[], file: string) =>
    ts.map((t) => {
      const c = structuredClone(t);
      expect(c.source.file).toBe(file);
      c.source.file = '<file>';
      for (const field of opts.fromName ?? []) deletePath(c, field);
      return c;
    });
  expect(comparable(again.trajectories, neutral), 'same trajectories under a neutral name').toEqual(
    comparable(run.loaded.trajectories, run.file),
  );
  // A field declared as taken from the name must really change with it, or the declaration hides nothing.
  for (const field of opts.fromName ?? []) {
    const values = (ts: readonly Trajectory[]) => ts.map((t) => JSON.stringify(getPath(t, field)));
    expect(values(again.trajectories), `${field} is declared to come from the file name`).not.toEqual(
      values(run.loaded.trajectories),
    );
  }
  const errorsOf = (l: LoadedFile) =>
    l.errors.map((e) => ({ ...e, file: '<file>', message: scrub(e.message, l.file) }));
  expect(errorsOf(again), 'same read errors under a neutral name').toEqual(errorsOf(run.loaded));
}

function getPath(obj: unknown, dotted: string): unknown {
  let at = obj;
  for (const k of dotted.split('.')) at = (at as Record<string, unknown> | undefined)?.[k];
  return at;
}

function deletePath(obj: unknown, dotted: string) {
  const keys = dotted.split('.');
  let at = obj as Record<string, unknown> | undefined;
  for (const k of keys.slice(0, -1)) at = at?.[k] as Record<string, unknown> | undefined;
  if (at && typeof at === 'object') delete at[keys.at(-1)!];
}

// ---------------------------------------------------------------------------------------------
// 3. Integrity of the model

/**
 * What must hold of every imported trajectory, or be reported by a finding, as readable lines
 * (empty when all holds). Restated from the model, not from the checks, so a check that stops
 * reporting a fault shows here.
 */
export function integrityViolations(run: ImporterRun): string[] {
  const out: string[] = [];
  const { loaded, checked, file } = run;
  const seen = new Map<string, number>();
  for (const t of loaded.trajectories) seen.set(t.id, (seen.get(t.id) ?? 0) + 1);
  for (const [id, n] of seen) if (n > 1) out.push(`id "${id}" is used by ${n} trajectories`);

  loaded.trajectories.forEach((t, i) => {
    const at = (why: string) => out.push(`${t.id}: ${why}`);
    // The model's schema, with nothing it does not know.
    const parsed = Trajectory.safeParse(t);
    if (!parsed.success) at(`does not parse as a Trajectory: ${parsed.error.message}`);
    else expect(parsed.data, `${t.id} is exactly what the schema keeps`).toEqual(t);
    if (t.source.file !== file) at(`source.file is ${t.source.file}, not ${file}`);
    if (t.source.format !== loaded.format) at(`source.format is ${t.source.format}, the file is ${loaded.format}`);
    const lines = t.source.lines;
    if (lines && (lines[0] !== t.source.line || lines.some((l, k) => k > 0 && l <= lines[k - 1]!)))
      at(`source.lines ${JSON.stringify(lines)} do not start at line ${t.source.line} and rise`);

    const c = checked[i]!;
    if (c.trajectory.id !== t.id) at(`analysis of trajectory ${i} is of ${c.trajectory.id}`);
    out.push(...streamViolations(c).map((v) => `${t.id}: ${v}`));
    out.push(...findingViolations(c).map((v) => `${t.id}: ${v}`));
  });
  return out;
}

/** Arrays that must line up, and whether the findings report each one that does not. */
function streamViolations(c: CheckedTrajectory): string[] {
  const out: string[] = [];
  const t = c.trajectory;
  const { vision } = c.profile;
  const reported = (kinds: readonly string[], where: (f: Finding) => boolean = () => true) =>
    c.findings.some((f) => kinds.includes(f.kind) && where(f));
  const unreported = (what: string, kinds: readonly string[], where?: (f: Finding) => boolean) => {
    if (!reported(kinds, where)) out.push(`${what}, and no ${kinds.join('/')} finding says so`);
  };

  t.turns.forEach((turn, k) => {
    const gen = turn.generatedIds;
    const lps = turn.generatedLogprobs;
    if (gen && lps && gen.length !== lps.length) {
      const what = `turn ${k}: ${gen.length} generated ids, ${lps.length} logprobs`;
      // Turns split from a stored sample report it once, on the sample (docs/check-json.md).
      unreported(what, ['length_mismatch'], (f) => f.turn === k || (t.sample !== undefined && f.stream === 'sample'));
    }
    for (const [r, range] of (turn.placeholders ?? []).entries())
      if (turn.promptIds && range.offset + range.length > turn.promptIds.length)
        unreported(`turn ${k}: placeholder ${r} ends past the prompt`, ['placeholder_range'], (f) => f.turn === k);
    const next = t.turns[k + 1];
    if (turn.promptIds && next?.promptIds) {
      const context = [...turn.promptIds, ...(gen ?? [])];
      const extends_ = context.every((id, i) => next.promptIds![i] === id);
      if (!extends_)
        unreported(
          `turn ${k + 1}'s prompt does not start with turn ${k}'s prompt and generation`,
          ['prefix_break'],
          (f) => f.turn === k + 1,
        );
    }
  });

  const s = t.sample;
  if (s) {
    const total = s.tokens.length;
    const sampleLevel = (f: Finding) => f.stream === 'sample' || f.turn === -1;
    if (s.responseLength !== undefined && s.responseLength > total)
      unreported(`response_length ${s.responseLength} > ${total} tokens`, ['length_mismatch'], sampleLevel);
    else {
      const scope = s.maskScope === 'full' ? total : (s.responseLength ?? total);
      for (const [name, arr] of [
        ['loss mask', s.lossMask],
        ['logprobs', s.logprobs],
      ] as const)
        if (arr && arr.length !== scope)
          unreported(`sample ${name} has ${arr.length} entries for ${scope}`, ['length_mismatch'], sampleLevel);
    }
    if (s.mmTokenTypeIds && s.mmTokenTypeIds.length !== total)
      unreported(`mm_token_type_ids has ${s.mmTokenTypeIds.length} entries for ${total} tokens`, ['placeholder_range']);
    for (const [r, range] of (s.placeholderRanges ?? []).entries())
      if (range.offset + range.length > total)
        unreported(`sample placeholder range ${r} ends past the tokens`, ['placeholder_range'], sampleLevel);
  }

  // Images against the pad runs of the stream the data holds (the sample, else the last prompt).
  const observed = s?.tokens ?? lastPromptStream(t);
  if (observed) {
    const pads = padRuns(observed, c.profile.ids);
    const grids = s?.imageGridThw ?? [];
    const expected = t.images.length > 0 ? t.images.length : grids.length;
    if (expected > 0 && pads.length !== expected)
      unreported(`${expected} images but ${pads.length} pad runs`, ['image_count', 'image_truncated']);
    if (t.images.length > 0 && grids.length > 0 && grids.length !== t.images.length)
      unreported(`${t.images.length} images but ${grids.length} image_grid_thw rows`, ['image_count']);
    pads.forEach((run, i) => {
      const grid = grids[i];
      const fromGrid = grid ? padCountFromGrid(grid, vision.mergeSize) : undefined;
      if (grid && fromGrid !== run.length)
        unreported(
          `pad run ${i} has ${run.length} pads, its grid [${grid.join(', ')}] gives ${fromGrid}`,
          ['placeholder_count', 'image_truncated', 'image_count'],
          (f) => f.image === undefined || f.image === i,
        );
    });
  }
  return out;
}

function lastPromptStream(t: Trajectory): number[] | undefined {
  for (let k = t.turns.length - 1; k >= 0; k--) {
    const turn = t.turns[k]!;
    if (turn.promptIds) return [...turn.promptIds, ...(turn.generatedIds ?? [])];
  }
  return undefined;
}

/** Every finding is well formed and points inside the stream it names. */
function findingViolations(c: CheckedTrajectory): string[] {
  const out: string[] = [];
  const t = c.trajectory;
  const streamLength = (f: Finding): number | undefined => {
    switch (f.stream) {
      case 'sample':
        return t.sample?.tokens.length;
      case 'prompt': {
        const turn = t.turns[f.turn];
        return turn ? (turn.promptIds?.length ?? 0) + (turn.generatedIds?.length ?? 0) : undefined;
      }
      case 'canonical':
        return c.alignment.tokens.length;
      case 'rerender':
        return c.rerender?.length;
      default:
        return undefined;
    }
  };
  for (const f of c.findings) {
    const label = `finding ${f.kind} (${f.message})`;
    const parsed = Finding.safeParse(f);
    if (!parsed.success) out.push(`${label} does not parse: ${parsed.error.message}`);
    if (f.turn < -1 || f.turn >= Math.max(1, t.turns.length)) out.push(`${label} names turn ${f.turn}`);
    if (f.index < -1) out.push(`${label} has index ${f.index}`);
    if (f.stream && f.index >= 0) {
      const n = streamLength(f);
      if (n === undefined) out.push(`${label} points into a ${f.stream} stream the trajectory does not have`);
      else if (f.index > n) out.push(`${label} points at ${f.index}, past the ${n} tokens of its ${f.stream} stream`);
    }
    if (f.image !== undefined && f.image < 0) out.push(`${label} names image ${f.image}`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// 4. The dump

/** One finding in a line: severity, kind/cause, turn, stream@index, image. */
export function findingLine(f: Finding): string {
  return [
    f.severity,
    f.cause ? `${f.kind}/${f.cause}` : f.kind,
    `turn ${f.turn}`,
    `${f.stream ?? '-'}@${f.index}`,
    ...(f.image !== undefined ? [`image ${f.image}`] : []),
  ].join(' ');
}

function dumpRun(run: ImporterRun, name: string) {
  // Keys in this order; `renderDump` writes them as they come.
  return {
    fixture: name.split(path.sep).join('/'),
    format: run.loaded.format ?? null,
    errors: run.loaded.errors.map((e: ReadError) => ({
      line: e.line,
      ...(e.field !== undefined ? { field: e.field } : {}),
      message: scrub(e.message, run.file),
    })),
    trajectories: run.checked.map((c, i) => {
      const t = run.loaded.trajectories[i]!;
      return {
        id: t.id,
        format: t.source.format,
        line: t.source.line,
        // [prompt ids, generated ids] per turn; null where the data has none.
        turns: t.turns.map((turn) => [turn.promptIds?.length ?? null, turn.generatedIds?.length ?? null]),
        sample: t.sample?.tokens.length ?? null,
        images: t.images.length,
        // The GRPO group, where the format states one (or the importer builds one: n > 1 samples).
        ...(t.group !== undefined ? { group: t.group } : {}),
        findings: c.findings.map(findingLine).sort(),
      };
    }),
  };
}

/** A message without the machine's path of the file it is about. */
function scrub(message: string, file: string): string {
  return message.replaceAll(path.resolve(file), '<file>').replaceAll(file, '<file>');
}

/**
 * The dump as JSON laid out for review: one line per read error, per trajectory field and per
 * finding, so a change to one fact is a one-line diff.
 */
export function renderDump(dump: ReturnType<typeof dumpRun>): string {
  const j = (v: unknown) => JSON.stringify(v);
  const list = (items: string[], indent: string) =>
    items.length === 0 ? '[]' : `[\n${items.map((x) => `${indent}  ${x}`).join(',\n')}\n${indent}]`;
  const trajectory = (t: (typeof dump.trajectories)[number]) => {
    const fields = Object.entries(t).map(
      ([k, v]) => `      ${j(k)}: ${k === 'findings' ? list((v as string[]).map(j), '      ') : j(v)}`,
    );
    return `{\n${fields.join(',\n')}\n    }`;
  };
  return [
    '{',
    `  "fixture": ${j(dump.fixture)},`,
    `  "format": ${j(dump.format)},`,
    `  "errors": ${list(dump.errors.map(j), '  ')},`,
    `  "trajectories": ${list(dump.trajectories.map(trajectory), '  ')}`,
    '}',
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// 5. Native round trip

/** What a finding says, without its sentence. */
const findingFacts = (f: Finding) => ({
  kind: f.kind,
  cause: f.cause,
  severity: f.severity,
  turn: f.turn,
  index: f.index,
  stream: f.stream,
  image: f.image,
  expected: f.expected,
  actual: f.actual,
});

async function expectNativeRoundTrip(run: ImporterRun, tmp: string) {
  const dir = path.join(tmp, 'native');
  const file = path.join(dir, 'roundtrip.rollscope.jsonl');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(file, nativeJsonl(run.loaded.trajectories));
  copyLocalImages(run.loaded.trajectories, path.dirname(run.file), dir);
  const back = await loadFile(file);
  expect(back.format).toBe('native');
  expect(back.errors, 'the native file reads back without errors').toEqual([]);
  expect(back.trajectories.map((t) => t.source)).toEqual(
    run.loaded.trajectories.map((_, i) => ({ file, line: i + 1, format: 'native' })),
  );
  const withoutSource = (ts: readonly Trajectory[]) => ts.map(({ source: _, ...rest }) => rest);
  expect(withoutSource(back.trajectories), 'the same trajectories from native JSONL').toEqual(
    withoutSource(run.loaded.trajectories.map(asNativeRecord)),
  );
  const checked = await analyzeAll(back.trajectories, file);
  expect(
    checked.map((c) => ({ id: c.trajectory.id, findings: c.findings.map(findingFacts) })),
    'the same findings from native JSONL',
  ).toEqual(run.checked.map((c) => ({ id: c.trajectory.id, findings: c.findings.map(findingFacts) })));
}

/** Images named by a relative path travel with the data file, as when a run folder is copied. */
function copyLocalImages(trajectories: readonly Trajectory[], fromDir: string, toDir: string) {
  for (const url of new Set(trajectories.flatMap((t) => t.images.map((i) => i.url ?? '')))) {
    if (!url || /^[a-z][a-z0-9+.-]*:/i.test(url) || path.isAbsolute(url)) continue;
    const src = path.resolve(fromDir, url);
    const dst = path.resolve(toDir, url);
    if (!dst.startsWith(toDir + path.sep) || !fs.existsSync(src) || !fs.statSync(src).isFile()) continue;
    fs.mkdirSync(path.dirname(dst), { recursive: true });
    fs.copyFileSync(src, dst);
  }
}
