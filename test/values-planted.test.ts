// The bad-value fixtures (test/fixtures/values/, written by test/fixtures/generate-values.ts with
// planted.json beside them): every planted fault is found at exactly its token (kind, cause,
// stream, index, field) and nothing else is reported; the clean copy of each format has no
// finding; nothing is a read error; export rejects the unrepairable ones for their finding and
// writes the repairable ones (a length or mask fault) as the canonical row.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { RejectEntry } from '../server/export/manifest.ts';
import type { Planted } from './fixtures/generate-values.ts';
import { jsonlRecords } from './support/jsonl.ts';

const DIR = path.join('test', 'fixtures', 'values');
const planted = JSON.parse(fs.readFileSync(path.join(DIR, 'planted.json'), 'utf8')) as Planted;
let out = '';
beforeAll(() => {
  out = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-planted-'));
});
afterAll(() => fs.rmSync(out, { recursive: true, force: true }));

describe('planted bad values are found at their exact token, in every format', () => {
  for (const [file, byId] of Object.entries(planted)) {
    it(file, async () => {
      const loaded = await loadFile(path.join(DIR, file));
      expect(loaded.errors).toEqual([]);
      expect(loaded.trajectories.map((t) => t.id).sort()).toEqual(Object.keys(byId).sort());
      for (const t of loaded.trajectories) {
        const { findings } = await analyzeTrajectory(t, {}, [DIR]);
        const got = findings.map((f) => ({
          kind: f.kind,
          index: f.index,
          stream: f.stream,
          turn: f.turn,
          ...(f.cause ? { cause: f.cause } : {}),
          ...(f.field ? { field: f.field } : {}),
        }));
        expect(got, `${file} ${t.id}`).toEqual(byId[t.id]);
      }
    });
  }

  it('export: unrepairable values rejected for their finding, repairable ones written', async () => {
    const r = await exportRun([DIR], { out: path.join(out, 'values.jsonl'), workers: 0 });
    const rejects = jsonlRecords(r.rejectsFile).map((x) => RejectEntry.parse(x));
    const byId = new Map(rejects.map((x) => [x.id, x]));
    for (const [, ids] of Object.entries(planted))
      for (const [id, want] of Object.entries(ids)) {
        if (!want.some((f) => f.kind === 'invalid_value')) continue;
        expect(byId.get(id)?.reasons, id).toContain('unfixable_finding');
      }
    expect(r.manifest.counts.read).toBe(r.manifest.counts.exported + r.manifest.counts.rejected);
  });
});
