// An image the data names but rollscope cannot read (a file not shipped with the run, a remote URL
// not fetched) takes away checks that need its size; it must never add a finding. The re-render in
// particular takes the stored pad run's length for it instead of guessing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline/analyze.ts';

const FIXTURES = path.join(import.meta.dirname, 'fixtures');
const RUNS = ['slime/samples.jsonl', 'verl/agent_loop.jsonl', 'areal/wrapped.json'];

async function findingsOf(file: string): Promise<Map<string, string[]>> {
  const loaded = await loadFile(file);
  const out = new Map<string, string[]>();
  for (const t of loaded.trajectories) {
    const c = await analyzeTrajectory(t, { workers: 0 }, [path.dirname(file)]);
    out.set(
      t.id,
      c.findings.map((f) => `${f.kind}/${f.cause ?? ''}@${f.stream ?? ''}:${f.index}`),
    );
  }
  return out;
}

describe('images that cannot be read', () => {
  it.each(RUNS)('%s: without its image files, no trajectory gains a finding', async (rel) => {
    const original = path.join(FIXTURES, rel);
    const alone = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-noimages-')), path.basename(rel));
    fs.copyFileSync(original, alone);
    const withImages = await findingsOf(original);
    const without = await findingsOf(alone);
    expect([...without.keys()]).toEqual([...withImages.keys()]);
    for (const [id, findings] of without) {
      const extra = findings.filter((f) => !withImages.get(id)!.includes(f));
      expect([id, extra]).toEqual([id, []]);
    }
  });
});
