// AReaL records that carry only processor outputs (`multi_modal_input` with `pixel_values` and
// `image_grid_thw`, no images): export carries the pixel values through (docs/export-format.md,
// `pixel_values`) instead of rejecting the row as image_unavailable, byte for byte, in JSONL and
// Parquet, and a batch read back exports the same values again. Pixel values that do not cover the
// grids' patches are rejected.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { ExportRow } from '../server/export/row.ts';
import { readParquetRows } from '../server/export/parquet.ts';
import { canonicalSample } from './fixtures/generate-prime-rl.ts';
import type { Script } from './support/build.ts';
import { jsonlRecords } from './support/jsonl.ts';

const profile = loadProfile('qwen2.5-vl');
/** Qwen2.5-VL patch vectors: 3 channels × temporal patch 2 × 14 × 14. */
const PATCH = 3 * 2 * 14 * 14;
let dir = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-pixels-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const script: Script = {
  id: 'pixels',
  messages: [
    {
      role: 'user',
      content: [
        { type: 'image', image: 'square.png' },
        { type: 'text', text: 'What shape is this?' },
      ],
    },
  ],
  images: [{ width: 112, height: 84 }],
  turns: [{ answer: 'A grey square.' }],
};

/** Patch values exactly representable in float32 (k/256), so the round trip is exact. */
function pixelRows(patches: number): number[][] {
  return Array.from({ length: patches }, (_, i) =>
    Array.from({ length: PATCH }, (_, j) => ((i * 31 + j * 7) % 512) / 256 - 1),
  );
}

function decode(data: string): number[] {
  const b = Buffer.from(data, 'base64');
  return Array.from(new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4));
}

describe('AReaL processor outputs (pixel_values) are carried through export', () => {
  it('JSONL and Parquet rows hold the pixel values; read back, they export again unchanged', async () => {
    const s = await canonicalSample(profile, script);
    const patches = s.grids.reduce((n, [t, h, w]) => n + t * h * w, 0);
    expect(patches).toBeGreaterThan(0);
    const rows = pixelRows(patches);
    const record = (extra: Record<string, unknown>, pixels: number[][]) => ({
      ...extra,
      input_ids: [s.tokens],
      loss_mask: [s.mask],
      logprobs: [s.logprobs],
      attention_mask: [s.tokens.map(() => 1)],
      multi_modal_input: [{ pixel_values: pixels, image_grid_thw: s.grids }],
    });
    const file = path.join(dir, 'trajectories.json');
    const records = [record({ task_id: 1 }, rows), record({ task_id: 2 }, rows.slice(1))];
    fs.writeFileSync(file, `[\n${records.map((x) => JSON.stringify(x)).join(',\n')}\n]\n`);

    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([]);
    const t = loaded.trajectories[0]!;
    expect(t.images).toEqual([]);
    expect(t.sample!.pixelValues!.shape).toEqual([patches, PATCH]);
    expect((await analyzeTrajectory(t, {}, [dir])).findings).toEqual([]);

    const flat = rows.flat();
    for (const out of ['rows.jsonl', 'rows.parquet']) {
      const r = await exportRun([file], { out: path.join(dir, out), workers: 0 });
      expect(r.manifest.counts.exported).toBe(1);
      expect(r.manifest.counts.byReason.image_unavailable).toBe(1); // the second: one patch short
      const written = out.endsWith('.parquet')
        ? (await readParquetRows(fs.readFileSync(r.out))).map((x) => ExportRow.parse(x))
        : jsonlRecords(r.out).map((x) => ExportRow.parse(x));
      expect(written).toHaveLength(1);
      const row = written[0]!;
      expect(row.images).toEqual([]);
      expect(row.image_grid_thw).toEqual(s.grids);
      expect(row.pixel_values!.shape).toEqual([patches, PATCH]);
      expect(decode(row.pixel_values!.data)).toEqual(flat);
    }
    const rejects = jsonlRecords(`${path.join(dir, 'rows.jsonl')}.rejects.jsonl`);
    expect(JSON.stringify(rejects[0]!.messages)).toContain(`pixel_values holds ${patches - 1} patches`);

    // The batch read back goes through the checks clean and exports the same pixel values.
    const back = await loadFile(path.join(dir, 'rows.jsonl'));
    expect(back.format).toBe('export');
    expect((await analyzeTrajectory(back.trajectories[0]!, {}, [dir])).findings).toEqual([]);
    const again = await exportRun([path.join(dir, 'rows.jsonl')], { out: path.join(dir, 'again.jsonl'), workers: 0 });
    const row = ExportRow.parse(jsonlRecords(again.out)[0]);
    expect(decode(row.pixel_values!.data)).toEqual(flat);
  });

  it('rows with images carry no pixel_values (null)', async () => {
    const r = await exportRun([path.join('test', 'fixtures', 'areal', 'wrapped.json')], {
      out: path.join(dir, 'wrapped.jsonl'),
      workers: 0,
    });
    for (const row of jsonlRecords(r.out).map((x) => ExportRow.parse(x))) expect(row.pixel_values).toBeNull();
  });
});
