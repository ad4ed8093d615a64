// A record's stated processor settings are its own, in every format that can state them
// (test/fixtures/generate-settings.ts; docs/reference/image-math.md#settings-a-record-states): each
// trajectory's pads were expanded with the settings it states, not with the model's defaults, so it
// checks clean (and exports) only when the importer reads them. The same records with every stated
// setting removed get the placeholder finding at the image's pad run: the defaults' count against
// the stated one.
import { findQwenSpans } from '../server/families/qwen/spans.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { parseJson } from '../server/import/read/json.ts';
import { readProcessorKwargs } from '../server/import/processor-kwargs.ts';
import { analyzeTrajectory, defaultRoots, type CheckedTrajectory } from '../server/pipeline.ts';
import { callSettings, statedProcessor } from '../server/analysis/context.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import {
  casePads,
  SETTINGS_DIR,
  SETTINGS_FILES,
  withoutStatedSettings,
  type SettingsCase,
} from './fixtures/generate-settings.ts';
import { checkImporterSnapshot } from './support/importer-harness.ts';
import { qwenNamed, type QwenTokens } from '../server/families/qwen/ids.ts';

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-settings-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

async function checkFile(file: string): Promise<{ checked: CheckedTrajectory[]; errors: unknown[] }> {
  const loaded = await loadFile(file);
  const roots = defaultRoots([file]);
  const checked = await Promise.all(loaded.trajectories.map((t) => analyzeTrajectory(t, { workers: 0 }, roots)));
  return { checked, errors: loaded.errors };
}

/** The fixture rewritten without any stated setting, under the same name in a folder of its own. */
function stripped(rel: string): string {
  const text = fs.readFileSync(path.join(SETTINGS_DIR, rel), 'utf8');
  const out = path.join(dir, 'stripped', rel);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const body = rel.endsWith('.json')
    ? `${JSON.stringify(withoutStatedSettings(parseJson(text)))}\n`
    : text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.stringify(withoutStatedSettings(parseJson(l))))
        .join('\n');
  fs.writeFileSync(out, body);
  return out;
}

/** The first image's pad run in the stream the checks look at. */
function firstPadRun(t: Trajectory, special: QwenTokens) {
  const last = t.turns[t.turns.length - 1]!;
  const tokens = t.sample?.tokens ?? [...last.promptIds!, ...(last.generatedIds ?? [])];
  return findQwenSpans(tokens, special)[0]!;
}

describe.each(Object.entries(SETTINGS_FILES))('%s', (rel, { format, cases }) => {
  const file = path.join(SETTINGS_DIR, rel);

  it('through the importer harness', async () => {
    const { loaded } = await checkImporterSnapshot(file, { format: format as Trajectory['source']['format'] });
    expect(loaded.trajectories).toHaveLength(cases.length);
  });

  it('states its settings: every trajectory checks clean', async () => {
    const { checked, errors } = await checkFile(file);
    expect(errors).toEqual([]);
    expect(checked).toHaveLength(cases.length);
    checked.forEach((c, i) => {
      expect(c.findings, `${cases[i]}: ${c.findings.map((f) => f.message).join(' | ')}`).toEqual([]);
      // The pads are the stated settings' count, which the defaults do not give.
      const pads = casePads(cases[i]!);
      expect(pads.stated).not.toBe(pads.defaults);
      expect(
        firstPadRun(
          c.trajectory,
          qwenNamed(loadProfile(c.trajectory.model!.includes('Qwen3') ? 'qwen3-vl' : 'qwen2.5-vl').ids),
        ).padLength,
      ).toBe(pads.stated);
    });
  });

  it('without them, the same trajectories get the placeholder finding at the pad run', async () => {
    const { checked, errors } = await checkFile(stripped(rel));
    expect(errors).toEqual([]);
    expect(checked).toHaveLength(cases.length);
    checked.forEach((c, i) => {
      const name: SettingsCase = cases[i]!;
      const pads = casePads(name);
      const special = qwenNamed(loadProfile(c.trajectory.model!.includes('Qwen3') ? 'qwen3-vl' : 'qwen2.5-vl').ids);
      const f = c.findings.find((x) => x.kind === 'placeholder_count');
      expect(f, `${name}: ${c.findings.map((x) => x.message).join(' | ')}`).toMatchObject({
        image: 0,
        index: firstPadRun(c.trajectory, special).padStart,
        expected: pads.defaults,
        actual: pads.stated,
        // A stored image_grid_thw agrees with the pads: the run's settings, not a fault of the sample.
        severity: c.trajectory.sample?.imageGridThw ? 'warning' : 'error',
      });
    });
  });
});

describe('AReaL: a trajectory that states mm_processor_kwargs exports', () => {
  it('is exported with its settings; without them it is rejected', async () => {
    const rel = 'areal/trajectories.json';
    const stated = await exportRun([path.join(SETTINGS_DIR, rel)], { out: path.join(dir, 'areal.jsonl'), workers: 0 });
    expect(stated.manifest.output.rows).toBe(SETTINGS_FILES[rel]!.cases.length);
    const rows = fs
      .readFileSync(stated.out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { images: { min_pixels: number; max_pixels: number }[] });
    // The row states the bounds its image was tokenized with.
    expect(rows[0]!.images[0]).toMatchObject({ max_pixels: 256 * 28 * 28 });
    expect(rows[1]!.images[0]).toMatchObject({ min_pixels: 65536, max_pixels: 131072 });
    const without = await exportRun([stripped(rel)], { out: path.join(dir, 'areal-stripped.jsonl'), workers: 0 });
    expect(without.manifest.output.rows).toBe(0);
  });
});

describe('the shared reader', () => {
  it('reads min/max_pixels over size, images_kwargs over the flat keys, and reports what it cannot apply', () => {
    expect(readProcessorKwargs({ max_pixels: 1000, size: { shortest_edge: 10, longest_edge: 2000 } }, 'k')).toEqual({
      settings: { minPixels: 10, maxPixels: 1000 },
      problems: [],
    });
    expect(readProcessorKwargs({ max_pixels: 1000, images_kwargs: { max_pixels: 500 }, fps: 2 }, 'k').settings).toEqual(
      { maxPixels: 500 },
    );
    expect(readProcessorKwargs({ fps: 2 }, 'k')).toEqual({ problems: [] });
    const bad = readProcessorKwargs({ max_pixels: '1M', min_pixels: -4, size: 7 }, 'request.mm_processor_kwargs');
    expect(bad.settings).toBeUndefined();
    expect(bad.problems.map((p) => p.field)).toEqual([
      'request.mm_processor_kwargs.min_pixels',
      'request.mm_processor_kwargs.max_pixels',
      'request.mm_processor_kwargs.size',
    ]);
    expect(readProcessorKwargs('max_pixels=1000', 'k').problems[0]!.message).toContain('expected an object');
    // Not a pixel count the model can hold (a mutated 1e30): reported, not applied.
    expect(readProcessorKwargs({ max_pixels: 1e30 }, 'k')).toMatchObject({ problems: [{ field: 'k.max_pixels' }] });
    expect(readProcessorKwargs({ max_pixels: 1e30 }, 'k').settings).toBeUndefined();
  });

  it('a vLLM call whose mm_processor_kwargs cannot be read still loads; the error names the field', async () => {
    const line = fs.readFileSync(path.join(SETTINGS_DIR, 'vllm/calls.jsonl'), 'utf8').split('\n')[0]!;
    const rec = parseJson(line) as { request: Record<string, unknown> };
    rec.request.mm_processor_kwargs = { max_pixels: 'many' };
    const out = path.join(dir, 'bad-kwargs', 'calls.jsonl');
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, `${JSON.stringify(rec)}\n`);
    const { checked, errors } = await checkFile(out);
    expect(checked).toHaveLength(1);
    expect(checked[0]!.trajectory.turns[0]!.processor).toBeUndefined();
    expect(errors).toEqual([expect.objectContaining({ line: 1, field: 'request.mm_processor_kwargs.max_pixels' })]);
  });
});

describe('which settings apply', () => {
  const base = {
    id: 't',
    source: { file: 'x', line: 1, format: 'native' as const },
    images: [],
    videos: [],
    limitations: [],
  };
  it('the checked call over the record, field by field; a call that states none takes the latest earlier one', () => {
    const t = (turns: Trajectory['turns'], processor?: Trajectory['processor']): Trajectory => ({
      ...base,
      turns,
      ...(processor ? { processor } : {}),
    });
    const p = (n: number) => [n];
    expect(
      statedProcessor(t([{ promptIds: p(1), processor: { maxPixels: 10 } }], { minPixels: 5, maxPixels: 99 })),
    ).toEqual({ minPixels: 5, maxPixels: 10 });
    // Each call re-processes its prompt's images: the last call's settings are the checked stream's.
    expect(
      callSettings(
        t([
          { promptIds: p(1), processor: { maxPixels: 10 } },
          { promptIds: p(2), processor: { maxPixels: 20 } },
        ]),
      ),
    ).toEqual({ maxPixels: 20 });
    expect(callSettings(t([{ promptIds: p(1), processor: { maxPixels: 10 } }, { promptIds: p(2) }]))).toEqual({
      maxPixels: 10,
    });
    // A last turn without prompt ids is not what the checks look at.
    expect(
      callSettings(t([{ promptIds: p(1), processor: { maxPixels: 10 } }, { processor: { maxPixels: 30 } }])),
    ).toEqual({ maxPixels: 10 });
  });
});
