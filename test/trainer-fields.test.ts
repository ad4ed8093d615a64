// Trainer-side logprobs from formats other than slime's train dumps: a verl sample dumped after the
// actor's recompute carries `old_log_probs` and `ref_log_prob` beside `response_logprobs`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { logprobMismatch, mismatchFindings } from '../server/analysis/logprob-mismatch.ts';
import { loadFile } from '../server/import/index.ts';

const VERL = path.join(import.meta.dirname, 'fixtures', 'verl', 'agent_loop.jsonl');

describe('verl samples with the trainer side', () => {
  it('reads old_log_probs and ref_log_prob over the response, and finds a one-position shift', async () => {
    const record = JSON.parse(fs.readFileSync(VERL, 'utf8').split('\n')[0]!) as Record<string, number[]>;
    const rollout = record.response_logprobs!;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-verl-trainer-'));
    const same = { ...record, old_log_probs: rollout, ref_log_prob: rollout.map((x) => x - 0.5) };
    const shifted = { ...record, old_log_probs: [rollout[0]!, ...rollout.slice(0, -1)] };
    const file = path.join(dir, 'batch.jsonl');
    fs.writeFileSync(file, `${JSON.stringify(same)}\n${JSON.stringify(shifted)}\n`);
    const loaded = await loadFile(file);
    expect(loaded.format).toBe('verl');
    const [a, b] = loaded.trajectories;
    expect(a!.sample!.trainerLogprobs).toEqual(rollout);
    expect(a!.sample!.refLogprobs).toEqual(rollout.map((x) => x - 0.5));
    expect(mismatchFindings(logprobMismatch(a!))).toEqual([]);
    expect(mismatchFindings(logprobMismatch(b!)).map((f) => f.kind)).toEqual(['logprob_shift']);
  });
});
