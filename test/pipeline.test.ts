import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProfile, visionIdsOf } from '../server/profiles/profile.ts';
import { analyzeInputs, checkPaths, fileInputs, type RunEvent } from '../server/pipeline.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';
import { groupMember, promptHash } from '../server/analysis/groups.ts';
import { responseTokens } from '../server/analysis/report-facts.ts';
import { logprobMismatch } from '../server/analysis/logprob-mismatch.ts';

async function collect(it: AsyncGenerator<RunEvent>) {
  const out: RunEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

/** Events as where they were read: `t@LINE`, `error@LINE`, `file:COUNT`. */
const byLine = (evs: RunEvent[]) =>
  evs.map((e) =>
    e.type === 'trajectory'
      ? `t@${e.checked.trajectory.source.line}`
      : e.type === 'error'
        ? `error@${e.error.line}`
        : `file:${e.count}`,
  );

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

  it('hands out events in line order whatever the batch size and the thread: an unreadable record among the trajectories', async () => {
    const profile = loadProfile('qwen2.5-vl');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-pipeline-'));
    const file = path.join(dir, 'run.rollscope.jsonl');
    const lines: string[] = [];
    for (let i = 0; i < 6; i++)
      lines.push(JSON.stringify(await buildTrajectory(profile, geometryScript(`t${i}`), 'canonical')));
    // Unreadable records on lines 3, 6 and 7, between trajectories.
    lines.splice(2, 0, 'not json');
    lines.splice(5, 0, '{"id": "broken", "turns": "not a list"}', '{"turns": [');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const inLineOrder = ['t@1', 't@2', 'error@3', 't@4', 't@5', 'error@6', 'error@7', 't@8', 't@9', 'file:6'];
    for (const batchLines of [1, 2, 3, 64]) {
      const inputs = fileInputs([file], {}, { batchLines, batchBytes: 1 << 20 });
      expect(byLine(await collect(analyzeInputs(inputs, {}, [dir]))), `batches of ${batchLines}`).toEqual(inLineOrder);
    }
    expect(byLine(await collect(checkPaths([file], { workers: 0 })))).toEqual(inLineOrder);
    expect(byLine(await collect(checkPaths([file], { workers: 2 })))).toEqual(inLineOrder);
  });

  it("hands out a whole-loaded file's unreadable records among its trajectories by line too (a vLLM log)", async () => {
    const file = path.join(import.meta.dirname, 'fixtures/vllm/malformed.jsonl');
    const inLineOrder = ['t@1', 'error@2', 't@3', 'error@4', 't@5', 'file:3'];
    expect(byLine(await collect(checkPaths([file], { workers: 0 })))).toEqual(inLineOrder);
    expect(byLine(await collect(checkPaths([file], { workers: 2 })))).toEqual(inLineOrder);
  });

  it('with noStreams, hands out each main-thread result as a report-only worker sends it: the same findings, no token streams', async () => {
    const profile = loadProfile('qwen2.5-vl');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-pipeline-'));
    const file = path.join(dir, 'run.rollscope.jsonl');
    const lines: string[] = [];
    for (let i = 0; i < 6; i++) {
      const t = await buildTrajectory(profile, geometryScript(`t${i}`), i % 2 === 0 ? 'legacy' : 'canonical');
      lines.push(JSON.stringify({ ...t, group: `g${Math.floor(i / 3)}` }));
    }
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const checked = (evs: RunEvent[]) => evs.flatMap((e) => (e.type === 'trajectory' ? [e.checked] : []));
    const full = checked(await collect(checkPaths([file], { workers: 0 })));
    const lean = checked(await collect(checkPaths([file], { workers: 0, reportOnly: true, noStreams: true })));
    expect(lean.map((c) => [c.trajectory.id, c.findings])).toEqual(full.map((c) => [c.trajectory.id, c.findings]));
    for (const [i, c] of lean.entries()) {
      expect(c.report).toEqual({
        member: groupMember(full[i]!.trajectory, visionIdsOf(full[i]!.profile)) ?? null,
        logprobs: logprobMismatch(full[i]!.trajectory) ?? null,
        responseTokens: responseTokens(full[i]!.trajectory),
        promptHash: promptHash(full[i]!.trajectory, visionIdsOf(full[i]!.profile)) ?? null,
      });
      expect(c.report!.responseTokens).toBeGreaterThan(0);
      expect(full[i]!.trajectory.turns[0]!.promptIds!.length).toBeGreaterThan(0);
      expect(c.trajectory.turns[0]!.promptIds).toEqual([]);
      expect(c.alignment.tokens).toEqual([]);
      expect(c.rerender).toBeUndefined();
    }
    // On workers the result is cut once, from the full trajectory: the same report as without noStreams.
    const pooled = checked(await collect(checkPaths([file], { workers: 2, reportOnly: true, noStreams: true })));
    expect(pooled.map((c) => c.report)).toEqual(lean.map((c) => c.report));
    // reportOnly alone (check's text output reads the tokens around a finding) keeps them on this thread.
    const text = checked(await collect(checkPaths([file], { workers: 0, reportOnly: true })));
    expect(text[0]!.alignment.tokens).toEqual(full[0]!.alignment.tokens);
  });
});
