import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { checkPaths, type RunEvent } from '../server/pipeline.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';

async function collect(it: AsyncGenerator<RunEvent>) {
  const out: RunEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

describe('checkPaths', () => {
  it('gives the same findings, in the same order, on worker threads as on the main thread', async () => {
    const profile = loadProfile('qwen2.5-vl');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-pipeline-'));
    const file = path.join(dir, 'run.rollscope.jsonl');
    const lines: string[] = [];
    let eosAt = -1;
    for (let i = 0; i < 12; i++) {
      const t = await buildTrajectory(profile, geometryScript(`t${i}`), i % 3 === 0 ? 'legacy' : 'canonical');
      if (i === 0) eosAt = t.turns[0]!.promptIds!.length + t.turns[0]!.generatedIds!.length;
      lines.push(JSON.stringify(t));
    }
    fs.writeFileSync(file, `${lines.join('\n')}\nnot json\n`);
    const summarize = (evs: RunEvent[]) =>
      evs.map((e) =>
        e.type === 'trajectory'
          ? [e.checked.trajectory.id, e.checked.findings.map((f) => `${f.kind}/${f.cause}@${f.index}`)]
          : e.type === 'error'
            ? ['error', e.error.line]
            : ['file', e.count],
      );
    const serial = summarize(await collect(checkPaths([file], { workers: 0 })));
    const parallel = summarize(await collect(checkPaths([file], { workers: 2 })));
    expect(parallel).toEqual(serial);
    expect(serial.filter((s) => s[0] === 't0')[0]![1]).toContain(`prefix_break/duplicated_eos@${eosAt}`);
    expect(serial).toContainEqual(['error', 13]);
  });
});
