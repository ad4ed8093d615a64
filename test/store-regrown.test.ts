// A trajectory read again grown (a call log's session took another turn while `serve` watched
// it): its full analysis is read again, not the one cached from when it held fewer turns.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openRunStore } from '../server/http/store.ts';

const LOG = path.resolve('test/fixtures/vllm/chat-by-id.jsonl');
const SESSION = 'sess-dup-eos';

describe('a trajectory that grows while served', () => {
  it('answers its grown analysis: the turn and the findings it gained', async () => {
    const lines = fs.readFileSync(LOG, 'utf8').trim().split('\n');
    const calls = lines.filter((l) => l.includes(`"${SESSION}"`));
    expect(calls.length).toBe(2);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-regrown-'));
    const file = path.join(dir, 'calls.jsonl');
    fs.writeFileSync(file, `${calls[0]}\n`);
    // On a worker, as a big run is read: the trajectory comes back without its streams (pipeline/wire.ts forStore).
    const store = openRunStore([file], { pollMs: 0, workers: 1, poolFromBytes: 0 });
    try {
      await store.ready;
      const before = await store.get(SESSION);
      expect(before?.trajectory.turns.length).toBe(1);
      expect(before?.findings.some((f) => f.kind === 'prefix_break')).toBe(false);
      fs.appendFileSync(file, `${calls[1]}\n`);
      await store.refresh();
      expect(store.summary(SESSION)?.turns).toBe(2);
      const after = await store.get(SESSION);
      expect(after?.trajectory.turns.length).toBe(2);
      expect(after?.findings.some((f) => f.kind === 'prefix_break')).toBe(true);
    } finally {
      store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
