// AReaL records that wrappers extend with the rollout's `images` / `messages` (test/fixtures/areal/
// wrapped.json, written by generate-trainers.ts): the images are read (from `images`, else from the
// messages' image parts), their pads checked against the real sizes, and export writes the rows
// with the image bytes instead of rejecting them as image_unavailable.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { ExportRow } from '../server/export/row.ts';
import { jsonlRecords } from './support/jsonl.ts';

const DIR = path.join('test', 'fixtures', 'areal');
const FILE = path.join(DIR, 'wrapped.json');
let out = '';
beforeAll(() => {
  out = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-areal-images-'));
});
afterAll(() => fs.rmSync(out, { recursive: true, force: true }));

describe('AReaL records with images / messages', () => {
  it('images from `images`, else from the messages; sizes from the bytes; clean', async () => {
    const loaded = await loadFile(FILE);
    expect(loaded.errors).toEqual([]);
    expect(loaded.trajectories.map((t) => t.images.length)).toEqual([2, 1]);
    expect(loaded.trajectories[0]!.images[0]!.url).toBe('images/right-triangle.png');
    expect(loaded.trajectories[0]!.images[1]!.url).toMatch(/^data:image\/png;base64,/);
    expect(loaded.trajectories[1]!.turns[0]!.messages).toBeDefined();
    for (const t of loaded.trajectories) {
      const c = await analyzeTrajectory(t, {}, [DIR]);
      expect(c.findings, t.id).toEqual([]);
      expect(c.trajectory.images.every((img) => img.sizeFrom === 'bytes' && img.width && img.height)).toBe(true);
      expect(t.limitations.some((l) => l.includes('not the images'))).toBe(false);
    }
  });

  it('export writes both rows with the image bytes', async () => {
    const r = await exportRun([FILE], { out: path.join(out, 'rows.jsonl'), workers: 0 });
    expect(r.manifest.counts.exported).toBe(2);
    const rows = jsonlRecords(r.out).map((x) => ExportRow.parse(x));
    const triangle = createHash('sha256')
      .update(fs.readFileSync(path.join(DIR, 'images', 'right-triangle.png')))
      .digest('hex');
    for (const row of rows) expect(row.images[0]!.sha256).toBe(triangle);
    expect(rows.map((row) => row.images.length)).toEqual([2, 1]);
  });
});
