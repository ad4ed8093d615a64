// The prime-rl importer on the committed fixtures (built by test/fixtures/generate-prime-rl.ts with
// the real tokenizer and template): through the importer harness (detection, model integrity,
// file snapshot, native round trip), field by field, through the core checks with each planted
// fault found, and on broken bytes (cut short, corrupt, wrong types, shorter/longer structs).
import { fileContext } from '../server/import/importer.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { encode } from '@msgpack/msgpack';
import { Trajectory } from '../server/model/trajectory.ts';
import type { Finding } from '../server/model/finding.ts';
import { attributeRefs, importPrimeRlBytes, NO_TRAINABLE_TOKEN, primeRlImporter } from '../server/import/prime-rl.ts';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { msgpackValueEnd } from '../server/import/read/msgpack.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { geometryScript } from './support/build.ts';
import {
  buildPrimeRlFixtures,
  canonicalSample,
  textScript,
  FIXTURE_DIR,
  microBatchFields,
  trainingSampleFields,
  wire,
  type BuiltSample,
  type PrimeRlFixture,
} from './fixtures/generate-prime-rl.ts';
import { checkImporterSnapshot, importerRun } from './support/importer-harness.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const profile = loadProfile('qwen2.5-vl');
const EOS = qwenNamed(profile.ids).eos;

let fixtures: PrimeRlFixture[];
const fixture = (name: string): PrimeRlFixture => fixtures.find((f) => f.file === name)!;
const MAIN = 'rollouts/step_0/rank_0.bin';
const REFS = 'mm-refs/rollouts/step_0/rank_0.bin';
const SAMPLE_OFFSETS = 'mm-refs-sample-offsets/rollouts/step_0/rank_0.bin';
const UNCLEAR = 'mm-refs-unclear/rollouts/step_0/rank_0.bin';
const SAMPLES = 'training-samples/rank_0.bin';

beforeAll(async () => {
  fixtures = await buildPrimeRlFixtures();
});

function importBytes(bytes: Uint8Array, file = 'rollouts/step_3/rank_1.bin') {
  const r = importPrimeRlBytes(bytes, fileContext(file));
  return { errors: r.errors, trajectories: r.trajectories.map((t) => Trajectory.parse(t)) };
}

/** Byte offsets of a struct's fields: [start, end) per field, for cutting and corrupting on purpose. */
function fieldSpans(bytes: Uint8Array, structStart: number): [number, number][] {
  const t = bytes[structStart]!;
  const count = t >= 0x90 && t <= 0x9f ? t & 0x0f : (bytes[structStart + 1]! << 8) | bytes[structStart + 2]!;
  let pos = structStart + (t >= 0x90 && t <= 0x9f ? 1 : 3);
  const spans: [number, number][] = [];
  for (let i = 0; i < count; i++) {
    const end = msgpackValueEnd(bytes, pos);
    spans.push([pos, end]);
    pos = end;
  }
  return spans;
}

/** Where each element of the top-level list starts (and the end of the last). */
function elementStarts(bytes: Uint8Array): number[] {
  const t = bytes[0]!;
  const count = t & 0x0f;
  const starts = [1];
  for (let i = 0; i < count; i++) starts.push(msgpackValueEnd(bytes, starts[i]!));
  return starts;
}

function maskRuns(mask: readonly number[], n: number): [number, number][] {
  const runs: [number, number][] = [];
  for (let i = 0; i < n; i++) {
    if (mask[i] !== 1) continue;
    let j = i;
    while (j < n && mask[j] === 1) j++;
    runs.push([i, j]);
    i = j - 1;
  }
  return runs;
}

describe('prime-rl fixtures', () => {
  it('the committed files are what the generator writes', () => {
    for (const f of fixtures) {
      const committed = fs.readFileSync(path.join(FIXTURE_DIR, f.file));
      expect(
        Buffer.compare(committed, Buffer.from(f.bytes)),
        `${f.file} is stale: run node bin/tsx.js test/fixtures/generate-prime-rl.ts`,
      ).toBe(0);
    }
  });

  // Ids, step and rank come from the path (`[<run>/rollouts/]step_<n>/rank_<r>.bin`): a neutral name changes them.
  it.each([
    [MAIN, ['id', 'step', 'meta.step', 'meta.rank']],
    [REFS, ['id', 'step', 'meta.step', 'meta.rank']],
    [SAMPLE_OFFSETS, ['id', 'step', 'meta.step', 'meta.rank']],
    [UNCLEAR, ['id', 'step', 'meta.step', 'meta.rank']],
    [SAMPLES, ['id', 'meta.rank']],
  ])('%s through the importer harness', async (name, fromName) => {
    const { loaded } = await checkImporterSnapshot(path.join(FIXTURE_DIR, name), { format: 'prime-rl', fromName });
    expect(loaded.trajectories).toHaveLength(fixture(name).samples.length);
  });

  it('are recognised by file name', async () => {
    expect(primeRlImporter.fileNamePattern!.test('rank_0.bin')).toBe(true);
    expect(primeRlImporter.fileNamePattern!.test('rank_12.bin')).toBe(true);
    expect(primeRlImporter.fileNamePattern!.test('rank_0.bin.tmp')).toBe(false);
    // Every run has a step_0/rank_0.bin: the run folder's name keeps the ids apart.
    const { loaded: main } = await importerRun(path.join(FIXTURE_DIR, MAIN));
    const { loaded: refs } = await importerRun(path.join(FIXTURE_DIR, REFS));
    expect(main.trajectories[0]!.id).toBe('prime-rl/step_0/rank_0/mb0/s0');
    expect(refs.trajectories[0]!.id).toBe('mm-refs/step_0/rank_0/mb0/s0');
  });
});

describe('field by field', () => {
  function expectSample(
    t: Trajectory,
    built: BuiltSample,
    multimodal: 'mm_kwargs' | 'mm_refs' | 'none',
    mbHasImages: boolean,
  ) {
    const s = t.sample!;
    expect(s.maskScope).toBe('full');
    expect(s.tokens).toEqual(built.tokens);
    expect(s.lossMask).toEqual(built.mask);
    expect(s.logprobs).toEqual(built.logprobs);
    expect(s.responseLength).toBeUndefined();
    // The packer materialises mm_token_type_ids for every sample once one in the micro-batch has images.
    if (mbHasImages) expect(s.mmTokenTypeIds).toEqual(built.mmTokenTypeIds);
    else expect(s.mmTokenTypeIds).toBeUndefined();
    if (multimodal === 'mm_kwargs' && built.grids.length > 0) expect(s.imageGridThw).toEqual(built.grids);
    if (multimodal === 'mm_kwargs' && built.grids.length === 0) expect(s.imageGridThw ?? []).toEqual([]);
    if (multimodal === 'mm_refs') {
      expect(s.placeholderRanges).toEqual(built.refs);
      expect(t.images.map((i) => i.url)).toEqual(built.imageUrls);
    } else {
      expect(s.placeholderRanges).toBeUndefined();
      expect(t.images).toEqual([]);
    }
    // Turns: one per run of 1s in the mask; the first prompt is everything before it.
    const runs = maskRuns(built.mask, built.tokens.length);
    expect(t.turns).toHaveLength(runs.length);
    expect(t.turns[0]!.promptIds).toEqual(built.tokens.slice(0, runs[0]![0]));
    runs.forEach(([a, b], k) => {
      expect(t.turns[k]!.generatedIds).toEqual(built.tokens.slice(a, b));
      expect(t.turns[k]!.generatedLogprobs).toEqual(built.logprobs.slice(a, b));
    });
    expect(t.meta).toMatchObject({ envName: built.envName, advantage: built.advantage });
    expect(t.limitations.join(' ')).toContain('turns are read off the loss mask');
  }

  it('MicroBatch list with mm_kwargs: unpacked by sequence_lengths, image_grid_thw handed to each sample', () => {
    const f = fixture(MAIN);
    const { errors, trajectories } = importBytes(f.bytes, f.file);
    expect(errors).toEqual([]);
    let k = 0;
    f.microBatches!.forEach((n, mb) => {
      const batch = f.samples.slice(k, k + n);
      const hasImages = batch.some((s) => s.grids.length > 0);
      batch.forEach((built, j) => {
        const t = trajectories[k + j]!;
        expect(t.id).toBe(`step_0/rank_0/mb${mb}/s${j}`);
        expect(t.source).toEqual({ file: f.file, line: k + j + 1, format: 'prime-rl' });
        expect(t.meta).toMatchObject({ step: 0, rank: 0, microBatch: mb, sampleInMicroBatch: j });
        expectSample(t, built, 'mm_kwargs', hasImages);
      });
      k += n;
    });
    // 640×480 on Qwen2.5-VL defaults: grid [1, 34, 46], 391 pads (docs/reference/image-math.md#worked-examples).
    expect(trajectories[0]!.sample!.imageGridThw).toEqual([[1, 34, 46]]);
    // The last micro-batch holds text only: no multimodal fields at all.
    expect(trajectories[6]!.sample!.imageGridThw).toBeUndefined();
  });

  // prime-rl's packer rebases each sample's refs to micro-batch positions; a packer that does not leaves
  // them in the sample's own. Either way each image lands on its own sample, its range in sample positions.
  it.each([
    [REFS, 'micro-batch'],
    [SAMPLE_OFFSETS, 'sample'],
  ])(
    'MicroBatch list with mm_refs (%s): data: URLs become images on their own samples, offsets in sample positions',
    (name, from) => {
      const f = fixture(name);
      const { errors, trajectories } = importBytes(f.bytes, f.file);
      expect(errors).toEqual([]);
      let k = 0;
      f.microBatches!.forEach((n) => {
        const batch = f.samples.slice(k, k + n);
        batch.forEach((built, j) => expectSample(trajectories[k + j]!, built, 'mm_refs', true));
        k += n;
      });
      // The image sample that follows the text sample in micro-batch 1 has its range in its own positions.
      expect(trajectories[3]!.sample!.placeholderRanges![0]!.offset).toBeLessThan(f.samples[2]!.tokens.length);
      expect(trajectories[1]!.images).toHaveLength(2);
      // Which reading the data showed, on the samples that do not start their micro-batch (both agree on those that do).
      expect(trajectories.map((t) => t.meta?.mmRefOffsetsFrom)).toEqual([undefined, from, undefined, from]);
      expect(trajectories.flatMap((t) => t.sourceFindings ?? [])).toEqual([]);
    },
  );

  it('a list of TrainingSample structs', () => {
    const f = fixture(SAMPLES);
    const { errors, trajectories } = importBytes(f.bytes, f.file);
    expect(errors).toEqual([]);
    f.samples.forEach((built, k) => {
      const t = trajectories[k]!;
      expect(t.source.line).toBe(k + 1);
      expect(t.id).toBe(`rank_0/s${k}`);
      expectSample(t, built, 'mm_kwargs', built.grids.length > 0);
    });
  });
});

describe('core checks on the imported samples', () => {
  /** The committed file loaded and checked (once, shared with the harness), with what the generator built. */
  async function checked(name: string) {
    const f = fixture(name);
    const run = await importerRun(path.join(FIXTURE_DIR, f.file));
    return run.checked.map((c, k) => ({ built: f.samples[k]!, c }));
  }

  function expectPlanted(built: BuiltSample, findings: Finding[]) {
    const errors = findings.filter((x) => x.severity === 'error');
    switch (built.fault) {
      case undefined:
        expect(findings, built.name).toEqual([]);
        break;
      case 'duplicated_eos': {
        const dup = built.tokens.findIndex((t, i) => t === EOS && built.tokens[i - 1] === EOS);
        expect(
          errors.find((x) => x.kind === 'sample_mismatch'),
          built.name,
        ).toMatchObject({ cause: 'duplicated_eos', index: dup, stream: 'sample' });
        break;
      }
      case 'placeholder_count':
        expect(
          errors.find((x) => x.kind === 'placeholder_count'),
          built.name,
        ).toMatchObject({ expected: 234, actual: 391, image: 0 });
        break;
      case 'mm_token_type_ids': {
        const f = errors.find((x) => x.kind === 'placeholder_range');
        expect(f, built.name).toBeDefined();
        expect(f!.message).toContain('mm_token_type_ids run');
        expect(f!.actual).toEqual({ offset: f!.index, length: 391 });
        expect(f!.expected).toEqual({ offset: f!.index + 1, length: 391 });
        break;
      }
      case 'mask_length':
        expect(
          errors.find((x) => x.kind === 'length_mismatch'),
          built.name,
        ).toMatchObject({ expected: built.tokens.length, actual: built.tokens.length + 1 });
        break;
      case 'mm_refs_range': {
        const f = errors.find((x) => x.kind === 'placeholder_range');
        expect(f, built.name).toBeDefined();
        expect(f!.message).toContain('placeholder range');
        expect((f!.actual as { length: number }).length).toBe(390);
        break;
      }
      case 'mm_refs_unclear': {
        // The lone ref fits this sample's run read from the micro-batch's start and the next sample's
        // read from its own: a warning on the sample that keeps the image, no error (its range is exact).
        expect(errors, built.name).toEqual([]);
        expect(findings, built.name).toEqual([
          expect.objectContaining({
            kind: 'placeholder_range',
            severity: 'warning',
            index: built.refs[0]!.offset,
            image: 0,
          }),
        ]);
        expect(findings[0]!.message).toMatch(/sample 0.*sample 1; the data does not say which/);
        break;
      }
      case 'mm_refs_dropped': {
        // Its ref is missing: the pad run has no declared range (and nothing is moved here from a neighbour).
        const run = built.refs.length === 0 ? undefined : built.refs[0];
        expect(run).toBeUndefined();
        expect(findings, built.name).toEqual([
          expect.objectContaining({ kind: 'placeholder_range', severity: 'error' }),
        ]);
        expect(findings[0]!.message).toContain('has no declared placeholder range');
        break;
      }
      case 'mm_refs_neither': {
        // On text either way: kept on its own sample with a warning that says so, and the range is reported.
        const warning = findings.find((x) => x.severity === 'warning');
        expect(warning, built.name).toMatchObject({
          kind: 'placeholder_range',
          index: built.refs[0]!.offset,
          image: 0,
        });
        expect(warning!.message).toContain('is on no image run of sample 1');
        expect(errors, built.name).toEqual([
          expect.objectContaining({ kind: 'placeholder_range', index: built.refs[0]!.offset }),
        ]);
        break;
      }
    }
    // Every planted fault is found and nothing else is an error.
    if (built.fault)
      expect(errors.length, `${built.name}: ${errors.map((x) => x.message).join(' | ')}`).toBeLessThanOrEqual(1);
  }

  it('mm_kwargs layout: clean samples have no findings, each planted fault is found', async () => {
    const results = await checked(MAIN);
    expect(
      results
        .map((r) => r.built.fault)
        .filter(Boolean)
        .sort(),
    ).toEqual(['duplicated_eos', 'mask_length', 'mm_token_type_ids', 'placeholder_count']);
    for (const { built, c } of results) {
      if (built.fault === 'duplicated_eos') {
        // The sample's own turns show it too: turn 1's prompt does not extend turn 0 cleanly.
        expect(c.findings.find((x) => x.kind === 'prefix_break')).toMatchObject({ cause: 'duplicated_eos' });
        expectPlanted(
          built,
          c.findings.filter((x) => x.kind !== 'prefix_break'),
        );
      } else expectPlanted(built, c.findings);
    }
  });

  it('mm_refs layout: image sizes come from the inline PNGs, the short range is found', async () => {
    const results = await checked(REFS);
    expect(results[0]!.c.trajectory.images).toMatchObject([{ width: 640, height: 480, sizeFrom: 'bytes' }]);
    expect(results[1]!.c.trajectory.images).toMatchObject([
      { width: 640, height: 480 },
      { width: 800, height: 600 },
    ]);
    for (const { built, c } of results) expectPlanted(built, c.findings);
  });

  it('sample-relative mm_refs offsets check exactly as micro-batch ones: no finding moves to a neighbour', async () => {
    const rebased = await checked(REFS);
    const own = await checked(SAMPLE_OFFSETS);
    expect(own.map((r) => r.c.findings)).toEqual(rebased.map((r) => r.c.findings));
    for (const { built, c } of own) expectPlanted(built, c.findings);
  });

  it('refs the data does not settle: a warning on the sample that keeps the image, the planted faults found', async () => {
    const results = await checked(UNCLEAR);
    expect(results.map((r) => r.built.fault)).toEqual([
      'mm_refs_unclear',
      'mm_refs_dropped',
      undefined,
      'mm_refs_neither',
    ]);
    for (const { built, c } of results) expectPlanted(built, c.findings);
  });

  it('TrainingSample list: the mask one entry too long is found', async () => {
    for (const { built, c } of await checked(SAMPLES)) expectPlanted(built, c.findings);
  });
});

describe('which way an MMRef offset counts', () => {
  // A 40-token text sample, then a sample whose image run is at 15 of its own 460 tokens (55 in the micro-batch).
  const bounds: [number, number][] = [
    [0, 40],
    [40, 500],
  ];
  const runs = [{ sample: 1, start: 55, length: 391 }];
  const url = 'data:image/png;base64,';

  it("the reading that puts the range on the run it is paired with; the image stays on that run's sample", () => {
    expect(attributeRefs([[url, 55, 391]], runs, bounds, 500)).toEqual([
      { url, sample: 1, range: { offset: 15, length: 391 }, reading: 'micro-batch' },
    ]);
    expect(attributeRefs([[url, 15, 391]], runs, bounds, 500)).toEqual([
      { url, sample: 1, range: { offset: 15, length: 391 }, reading: 'sample' },
    ]);
    // Off by its length only: the reading that starts it on the run's first pad.
    expect(attributeRefs([[url, 15, 390]], runs, bounds, 500)[0]).toMatchObject({
      range: { offset: 15 },
      reading: 'sample',
    });
    expect(attributeRefs([[url, 15, 390]], runs, bounds, 500)[0]).not.toHaveProperty('doubt');
  });

  it('both readings overlapping the run equally, or neither touching it, is a doubt; none in any sample an error', () => {
    const both = attributeRefs([[url, 70, 100]], runs, bounds, 500)[0]!;
    expect(both).toMatchObject({ sample: 1, range: { offset: 30, length: 100 }, reading: 'micro-batch' });
    expect('doubt' in both && both.doubt).toMatch(
      /overlaps the image run at 15 of sample 1, and read from the sample's start it overlaps/,
    );
    const neither = attributeRefs([[url, 450, 10]], runs, bounds, 500)[0]!;
    expect(neither).toMatchObject({ sample: 1, range: { offset: 410, length: 10 }, reading: 'micro-batch' });
    expect('doubt' in neither && neither.doubt).toContain('is on no image run of sample 1');
    expect(attributeRefs([[url, 900, 10]], runs, bounds, 500)[0]).toHaveProperty('error');
  });
});

describe('broken bytes', () => {
  it('cut short inside micro-batch 1: a ReadError names the micro-batch and field, micro-batch 0 still loads', () => {
    const f = fixture(MAIN);
    const starts = elementStarts(f.bytes);
    const spans = fieldSpans(f.bytes, starts[1]!);
    const [a, b] = spans[3]!; // inference_logprobs
    const { errors, trajectories } = importBytes(f.bytes.subarray(0, Math.floor((a + b) / 2)), f.file);
    expect(trajectories.map((t) => t.id)).toEqual(['step_0/rank_0/mb0/s0', 'step_0/rank_0/mb0/s1']);
    expect(trajectories[1]!.sample!.tokens).toEqual(f.samples[1]!.tokens);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ file: f.file, line: 3, field: 'micro_batches[1].inference_logprobs' });
    expect(errors[0]!.message).toMatch(/cut short/);
  });

  it('cut at any point: never throws, one ReadError, and every sample that loads is whole', () => {
    const f = fixture(MAIN);
    const full = importBytes(f.bytes, f.file).trajectories;
    const starts = elementStarts(f.bytes);
    let previous = 0;
    for (let i = 1; i <= 60; i++) {
      const cut = Math.floor((f.bytes.length * i) / 61);
      const { errors, trajectories } = importBytes(f.bytes.subarray(0, cut), f.file);
      expect(errors, `cut at ${cut}`).toHaveLength(1);
      expect(errors[0]!.field).toMatch(/^micro_batches\[\d\]/);
      const whole = starts.filter((s, k) => k > 0 && s <= cut).length;
      expect(trajectories.map((t) => t.id)).toEqual(full.slice(0, trajectories.length).map((t) => t.id));
      expect(trajectories.length).toBe(f.microBatches!.slice(0, whole).reduce((x, y) => x + y, 0));
      trajectories.forEach((t, k) => expect(t.sample!.tokens).toEqual(full[k]!.sample!.tokens));
      expect(trajectories.length).toBeGreaterThanOrEqual(previous);
      previous = trajectories.length;
    }
  });

  it('an invalid msgpack byte names its field; what came before loads', () => {
    const f = fixture(MAIN);
    const starts = elementStarts(f.bytes);
    const spans = fieldSpans(f.bytes, starts[2]!);
    const bytes = f.bytes.slice();
    bytes[spans[1]![0] + 3] = 0xc1; // inside loss_mask of micro-batch 2
    const { errors, trajectories } = importBytes(bytes, f.file);
    expect(trajectories).toHaveLength(4);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ line: 5, field: 'micro_batches[2].loss_mask' });
    expect(errors[0]!.message).toContain('0xc1');
  });

  it('a field of the wrong type costs only its micro-batch; later ordinals stay where they were', () => {
    const f = fixture(MAIN);
    const batches = [0, 1, 2, 3].map((mb) =>
      f.samples.slice(f.microBatches!.slice(0, mb).reduce((x, y) => x + y, 0)).slice(0, f.microBatches![mb]),
    );
    const structs = batches.map((b) => microBatchFields(b, 'mm_kwargs'));
    structs[1]![0] = wire.str('not token ids');
    const { errors, trajectories } = importBytes(wire.list(structs.map((s) => wire.struct(s))), f.file);
    expect(errors.length).toBeGreaterThanOrEqual(1);
    expect(errors[0]).toMatchObject({ line: 3, field: 'micro_batches[1].input_ids' });
    expect(errors[0]!.message).toContain('skipped');
    expect(trajectories.map((t) => t.source.line)).toEqual([1, 2, 5, 6, 7]);
  });

  it('sequence_lengths that do not add up are reported; the samples that fit load', () => {
    const f = fixture(MAIN);
    const batch = f.samples.slice(0, 2);
    const fields = microBatchFields(batch, 'mm_kwargs');
    fields[5] = wire.ints([batch[0]!.tokens.length, batch[1]!.tokens.length + 10]);
    const { errors, trajectories } = importBytes(wire.list([wire.struct(fields)]));
    expect(trajectories).toHaveLength(1);
    expect(trajectories[0]!.sample!.tokens).toEqual(batch[0]!.tokens);
    expect(errors[0]).toMatchObject({ line: 1, field: 'micro_batches[0].sequence_lengths' });
  });

  it('an mm_refs offset outside the micro-batch and an image_grid_thw whose bytes do not match its shape are ReadErrors', () => {
    const f = fixture(REFS);
    const batch = f.samples.slice(0, 2);
    const fields = microBatchFields(batch, 'mm_refs');
    const total = batch[0]!.tokens.length + batch[1]!.tokens.length;
    fields[11] = wire.struct([
      wire.list([wire.struct([wire.str(batch[0]!.imageUrls[0]!), encode(total + 5), encode(10)])]),
    ]);
    const refs = importBytes(wire.list([wire.struct(fields)]));
    expect(refs.trajectories).toHaveLength(2);
    expect(refs.errors).toEqual([expect.objectContaining({ field: 'micro_batches[0].mm_refs.images.0.offset' })]);

    const kw = microBatchFields(fixture(MAIN).samples.slice(0, 2), 'mm_kwargs');
    kw[11] = wire.map([['image_grid_thw', wire.struct([encode('int64'), encode([2, 3]), encode(new Uint8Array(40))])]]);
    const grids = importBytes(wire.list([wire.struct(kw)]));
    expect(grids.trajectories).toHaveLength(2);
    expect(grids.errors).toEqual([expect.objectContaining({ field: 'micro_batches[0].mm_kwargs.image_grid_thw' })]);
    expect(grids.errors[0]!.message).toContain('needs 48 bytes, data has 40');
  });

  it('not a list, empty file, trailing bytes', () => {
    expect(importBytes(encode({ input_ids: [1] })).errors[0]!.message).toContain('a map');
    expect(importBytes(new Uint8Array()).errors[0]!.message).toContain('empty file');
    const f = fixture(SAMPLES);
    const extra = importBytes(new Uint8Array([...f.bytes, 0xc0]), f.file);
    expect(extra.trajectories).toHaveLength(3);
    expect(extra.errors[0]!.message).toContain('1 byte(s) after the end');
  });
});

describe('struct lengths across prime-rl versions', () => {
  it('shorter arrays: missing trailing fields are unset', () => {
    const f = fixture(MAIN);
    const batch = f.samples.slice(0, 2);
    // Only input_ids … sequence_lengths (an older MicroBatch): no multimodal fields, no env names.
    const short = importBytes(wire.list([wire.struct(microBatchFields(batch, 'mm_kwargs').slice(0, 6))]));
    expect(short.errors).toEqual([]);
    expect(short.trajectories.map((t) => t.sample!.tokens)).toEqual(batch.map((s) => s.tokens));
    expect(short.trajectories[0]!.sample!.imageGridThw).toBeUndefined();
    expect(short.trajectories[0]!.meta!.envName).toBeUndefined();
    // Without sequence_lengths the samples are found where position_ids restart at 0.
    const noLengths = importBytes(wire.list([wire.struct(microBatchFields(batch, 'mm_kwargs').slice(0, 5))]));
    expect(noLengths.trajectories.map((t) => t.sample!.tokens)).toEqual(batch.map((s) => s.tokens));
    // A TrainingSample that stops after env_name.
    const ts = importBytes(wire.list([wire.struct(trainingSampleFields(batch[0]!).slice(0, 5))]));
    expect(ts.errors).toEqual([]);
    expect(ts.trajectories[0]!.sample!.lossMask).toEqual(batch[0]!.mask);
    expect(ts.trajectories[0]!.meta!.envName).toBe(batch[0]!.envName);
  });

  it('longer arrays: fields appended by newer versions are ignored', () => {
    const f = fixture(MAIN);
    const batch = f.samples.slice(0, 2);
    const longer = [
      ...microBatchFields(batch, 'mm_kwargs'),
      wire.nil(),
      wire.strs(['trace-a', 'trace-b']),
      wire.ints([0, 1]),
      wire.nil(),
    ];
    const { errors, trajectories } = importBytes(wire.list([wire.struct(longer)]));
    expect(errors).toEqual([]);
    expect(trajectories.map((t) => t.sample!.imageGridThw)).toEqual(batch.map((s) => s.grids));
  });

  it('a required field missing is a ReadError, not a crash', () => {
    const f = fixture(MAIN);
    const { errors, trajectories } = importBytes(
      wire.list([wire.struct(microBatchFields(f.samples.slice(0, 1), 'mm_kwargs').slice(0, 2))]),
    );
    expect(trajectories).toEqual([]);
    expect(errors[0]).toMatchObject({ field: 'micro_batches[0].inference_logprobs' });
  });
});

describe("prime-rl's zero-loss dummy micro-batches", () => {
  // trainer/batch.py `_pad_group_for_distribution` pads each modality's micro-batches to a multiple
  // of the data ranks with `_make_dummy_batch(group[0])`: a deep copy with every loss_mask False and
  // advantages 0.0, written to the rank files like any other. Nothing of it is trained on purpose.
  it('a dummy copy checks clean with its limitation; a mask zeroed inside a trained sample is still found', async () => {
    const g = await canonicalSample(profile, geometryScript('dummy-geometry'), { advantage: 0.5 });
    const t = await canonicalSample(profile, textScript('dummy-text'), { envName: 'arith', advantage: -0.25 });
    const dummy = microBatchFields([g, t], 'mm_kwargs');
    const n = g.tokens.length + t.tokens.length;
    dummy[1] = wire.bools(new Array(n).fill(0)); // loss_mask
    dummy[2] = wire.floats(new Array(n).fill(0)); // advantages
    // The control: the text sample trained on its first generated token only.
    const first = t.mask.indexOf(1);
    const cut = { ...t, mask: t.mask.map((_, i) => (i === first ? 1 : 0)) };
    const bytes = wire.list([
      wire.struct(microBatchFields([g, t], 'mm_kwargs')),
      wire.struct(dummy),
      wire.struct(microBatchFields([cut], 'mm_kwargs')),
    ]);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-prime-dummy-'));
    const file = path.join(dir, 'rollouts', 'step_2', 'rank_1.bin');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, bytes);
    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([]);
    expect(loaded.trajectories.map((x) => x.meta?.microBatch)).toEqual([0, 0, 1, 1, 2]);
    const findings = await Promise.all(
      loaded.trajectories.map(async (x) => (await analyzeTrajectory(x, { workers: 0 }, [dir])).findings),
    );
    for (const k of [0, 1, 2, 3]) expect(findings[k], loaded.trajectories[k]!.id).toEqual([]);
    for (const k of [2, 3]) expect(loaded.trajectories[k]!.limitations).toContain(NO_TRAINABLE_TOKEN);
    expect(loaded.trajectories[0]!.limitations).not.toContain(NO_TRAINABLE_TOKEN);
    expect(findings[4]).toContainEqual(
      expect.objectContaining({ kind: 'mask_mismatch', severity: 'error', index: first + 1, expected: 1, actual: 0 }),
    );
  });
});

describe("prime-rl's pad_micro_batch padding", () => {
  // trainer/batch.py `pad_micro_batch` (pad_to_multiple_of > 1) extends the micro-batch by pad tokens
  // and adds them to the last sample's sequence_lengths/seq_lens: input_ids 1, loss_mask False,
  // advantages and inference_logprobs 0.0, position_ids range(pad), env_names "".
  function padded(samples: BuiltSample[], pad: number): Uint8Array {
    const f = microBatchFields(samples, 'mm_kwargs');
    const lengths = samples.map((s) => s.tokens.length);
    lengths[lengths.length - 1]! += pad;
    const zeros = new Array(pad).fill(0);
    const per = <T>(pick: (s: BuiltSample, i: number) => T) =>
      samples.flatMap((s) => s.tokens.map((_, i) => pick(s, i)));
    f[0] = wire.ints([...samples.flatMap((s) => s.tokens), ...zeros.map(() => 1)]);
    f[1] = wire.bools([...samples.flatMap((s) => s.mask), ...zeros]);
    f[2] = wire.floats([...per((s, i) => (s.mask[i] === 1 ? s.advantage : 0)), ...zeros]);
    f[3] = wire.floats([...samples.flatMap((s) => s.logprobs), ...zeros]);
    f[4] = wire.ints([...per((_, i) => i), ...zeros.map((_, i) => i)]);
    f[5] = wire.ints(lengths);
    f[6] = wire.floats([...per(() => 1), ...zeros.map(() => 1)]);
    f[7] = wire.strs([...per((s) => s.envName), ...zeros.map(() => '')]);
    f[8] = wire.ints(lengths);
    return wire.struct(f);
  }

  it('the padding is left out of the last sample, said so, and the samples check clean', async () => {
    const t = await canonicalSample(profile, textScript('pad-text'), { envName: 'arith', advantage: -0.25 });
    const u = await canonicalSample(profile, textScript('pad-other'), { envName: 'arith', advantage: 0.75 });
    const { errors, trajectories } = importBytes(wire.list([padded([t, u], 7), padded([u], 3)]));
    expect(errors).toEqual([]);
    expect(trajectories.map((x) => x.sample!.tokens)).toEqual([t.tokens, u.tokens, u.tokens]);
    expect(trajectories.map((x) => x.sample!.lossMask)).toEqual([t.mask, u.mask, u.mask]);
    expect(trajectories.map((x) => x.sample!.logprobs)).toEqual([t.logprobs, u.logprobs, u.logprobs]);
    expect(trajectories[0]!.limitations.some((l) => l.includes('pad_micro_batch'))).toBe(false);
    expect(trajectories[1]!.limitations).toContain(
      "the 7 pad tokens prime-rl's pad_micro_batch appended to this sample (untrained) are left out",
    );
    for (const x of trajectories) expect((await analyzeTrajectory(x, { workers: 0 }, [])).findings, x.id).toEqual([]);
  });

  it('a restart of position_ids with a trained token after it is no padding: the sample keeps it', async () => {
    const t = await canonicalSample(profile, textScript('pad-trained'), { envName: 'arith', advantage: 0.5 });
    const f = microBatchFields([t], 'mm_kwargs');
    const n = t.tokens.length;
    const at = n - 3; // a made-up restart over the last 3 tokens, which are trained
    expect(t.mask.slice(at).includes(1)).toBe(true);
    f[4] = wire.ints(t.tokens.map((_, i) => (i < at ? i : i - at)));
    const { trajectories } = importBytes(wire.list([wire.struct(f)]));
    expect(trajectories[0]!.sample!.tokens).toEqual(t.tokens);
  });
});

describe('non-finite floats on the wire', () => {
  // msgspec writes Python floats as float64, NaN and ±inf included: a reference logprob of -inf, an
  // advantage gone NaN. Each loads; none costs the micro-batch its other samples.
  it('-inf ref_logprobs load; a NaN or infinite advantage is a ReadError at its index, not applied', async () => {
    const t = await canonicalSample(profile, textScript('nonfinite'), { envName: 'arith', advantage: -0.25 });
    const n = t.tokens.length;
    const first = t.mask.indexOf(1);
    const f = microBatchFields([t, t], 'mm_kwargs');
    f[9] = wire.floats([...t.logprobs.map((x, i) => (i === 3 ? -Infinity : x)), ...t.logprobs]); // ref_logprobs
    const adv = (bad: number) => t.tokens.map((_, i) => (i === first ? bad : t.mask[i] === 1 ? -0.25 : 0));
    f[2] = wire.floats([...adv(NaN), ...adv(Infinity)]); // advantages
    const { errors, trajectories } = importBytes(wire.list([wire.struct(f)]), 'rollouts/step_1/rank_0.bin');
    expect(trajectories.map((x) => x.source.line)).toEqual([1, 2]);
    expect(trajectories[0]!.sample!.refLogprobs![3]).toBe(-Infinity);
    expect(trajectories.map((x) => x.advantage)).toEqual([undefined, undefined]);
    expect(errors).toEqual([
      {
        file: 'rollouts/step_1/rank_0.bin',
        line: 1,
        field: `micro_batches[0].advantages.${first}`,
        message: `micro_batches[0].advantages.${first}: advantage NaN is not a finite number; not applied`,
      },
      {
        file: 'rollouts/step_1/rank_0.bin',
        line: 2,
        field: `micro_batches[0].advantages.${n + first}`,
        message: `micro_batches[0].advantages.${n + first}: advantage Infinity is not a finite number; not applied`,
      },
    ]);
  });
});
