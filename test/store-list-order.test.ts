// The overview's sorts: every numeric sort orders as a stable sort by its key would, ties in load
// order, ascending and descending (the store computes each key once per summary).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListQuery, type TrajectorySummary } from '../server/http/api.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { writeDemoRun } from '../server/demo/write.ts';

let store: RunStore;

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-order-'));
  await writeDemoRun(dir);
  store = openRunStore([dir], { pollMs: 0 });
  await store.ready;
});

afterAll(() => store?.close());

const RANK = { ok: 0, warning: 1, error: 2 } as const;
const total = (s: TrajectorySummary) => Object.values(s.findings.kind).reduce((a, b) => a + b, 0);
const KEYS = {
  findings: (s: TrajectorySummary) => [RANK[s.health], total(s)],
  reward: (s: TrajectorySummary) => [s.reward ?? Number.NEGATIVE_INFINITY],
  tokens: (s: TrajectorySummary) => [s.tokens],
  turns: (s: TrajectorySummary) => [s.turns],
  images: (s: TrajectorySummary) => [s.images],
} as const;

describe('list order', () => {
  it('orders by each numeric key both ways, ties always in the same (load) order', () => {
    /** `a|b`: a came before b among equal keys in some answer. */
    const before = new Set<string>();
    let ties = 0;
    for (const [sort, key] of Object.entries(KEYS)) {
      for (const order of ['asc', 'desc'] as const) {
        const got = store.list(ListQuery.parse({ sort, order, limit: 100_000 })).items;
        expect(got.length).toBeGreaterThan(10);
        const dir = order === 'asc' ? 1 : -1;
        for (let i = 1; i < got.length; i++) {
          const [x, y] = [key(got[i - 1]!), key(got[i]!)];
          const c = x.findIndex((v, k) => v !== y[k]);
          if (c >= 0) expect(dir * (y[c]! - x[c]!), `${sort} ${order} at ${i}`).toBeGreaterThan(0);
          else {
            ties++;
            for (let j = 0; j < i; j++) {
              if (key(got[j]!).some((v, k) => v !== y[k])) continue;
              expect(before.has(`${got[i]!.id}|${got[j]!.id}`), `${sort} ${order}: tie order`).toBe(false);
              before.add(`${got[j]!.id}|${got[i]!.id}`);
            }
          }
        }
      }
    }
    // Ties exist, or the tie order is not tested.
    expect(ties).toBeGreaterThan(5);
  });
});
