// `serve DIR` follows a live capture: a session's trajectory is read again when its file grows by
// another turn, keeps its key and its place in the list, and the run's revision says it changed (the
// app reloads the list on it). The browser test (e2e/gateway.e2e.ts) watches the same in chromium.
import { afterEach, describe, expect, it } from 'vitest';
import { ListQuery } from '../server/http/api.ts';
import { openRunStore, type RunStore } from '../server/http/store.ts';
import { REFERENCE_IDS } from './support/engine-reference.ts';
import { MODEL, post, type Rig, startRig } from './support/gateway-harness.ts';

let rig: Rig | undefined;
let store: RunStore | undefined;
afterEach(async () => {
  store?.close();
  await rig?.close();
  rig = store = undefined;
});

describe('serve on a growing capture', () => {
  it('replaces a session that took another turn in place', async () => {
    rig = await startRig(
      {
        engine: 'vllm',
        script: (_c, i) =>
          i === 0 ? { ids: [40, 289, 483, 990, 432, 13, REFERENCE_IDS.imEnd] } : { text: `Answer ${i}.` },
      },
      { mode: 'guard' },
    );
    const url = `${rig.url}/v1/chat/completions`;
    const m = (s: string) => [{ role: 'user', content: s }];
    const a = await post(url, { model: MODEL, messages: m('first') }, { 'x-session-id': 'grows' });
    await post(url, { model: MODEL, messages: m('other') }, { 'x-session-id': 'other' });
    store = openRunStore([rig.out], { pollMs: 0 });
    await store.ready;
    const before = store.info();
    expect(store.summary('grows')).toMatchObject({ turns: 1, health: 'warning' });
    const order = store.list(ListQuery.parse({})).items.map((s) => s.id);

    await post(
      url,
      {
        model: MODEL,
        messages: [...m('first'), { role: 'assistant', content: a.json.choices[0].message.content }, ...m('next')],
      },
      { 'x-session-id': 'grows' },
    );
    await store.refresh();
    expect(store.summary('grows')).toMatchObject({ id: 'grows', turns: 2, health: 'error' });
    expect(store.summary('grows')!.findings.kind.prefix_break).toBe(1);
    expect(store.info().revision).toBeGreaterThan(before.revision);
    expect(store.info().trajectories).toBe(2);
    expect(store.list(ListQuery.parse({})).items.map((s) => s.id)).toEqual(order);
    const detail = await store.get('grows');
    expect(detail!.trajectory.turns).toHaveLength(2);
    // Nothing new: nothing read again.
    const revision = store.info().revision;
    await store.refresh();
    expect(store.info().revision).toBe(revision);
  });
});
