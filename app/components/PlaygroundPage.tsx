// The playground on a page of its own (`#/playground?id=…`): the conversation beside its
// rendering, compared with any trajectory of the run picked by id.
import { useEffect, useState } from 'react';
import type { TrajectoryDetail } from '../../server/http/api.ts';
import { api } from '../api.ts';
import { useGo, useParam, useSetParams } from '../stores/route.ts';
import { useLoadList, useRunInfo, useRunItems, useRunQuery } from '../stores/run.ts';
import { Playground } from './Playground.tsx';
import { queryOf } from '../list-state.ts';

export function PlaygroundPage() {
  const setParams = useSetParams();
  const go = useGo();
  const info = useRunInfo();
  const items = useRunItems();
  const runQuery = useRunQuery();
  const loadList = useLoadList();
  const id = useParam('id') ?? null;
  const [detail, setDetail] = useState<TrajectoryDetail | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (!runQuery) void loadList(queryOf({}));
  }, [runQuery, loadList]);
  useEffect(() => {
    setDetail(null);
    setError(null);
    if (!id) return;
    let live = true;
    api.detail(id).then(
      (d) => live && setDetail(d),
      (e: unknown) => live && setError((e as Error).message),
    );
    return () => {
      live = false;
    };
  }, [id]);

  return (
    <div className="playground-page">
      <header className="topbar">
        <button type="button" className="back" onClick={() => go({ page: 'overview', id: null, params: {} })}>
          ← run
        </button>
        <h1>Playground</h1>
        <span className="muted small">
          render a conversation with {info ? `the run's profile (${info.profile.name})` : "the run's profile"}
        </span>
        <span className="spacer" />
        <label className="small">
          compare with trajectory{' '}
          <input
            list="pg-trajectories"
            defaultValue={id ?? ''}
            placeholder="trajectory id"
            aria-label="trajectory id"
            onChange={(e) => {
              const v = e.target.value.trim();
              if (v === '' || items.some((s) => s.id === v)) setParams({ id: v || undefined }, true);
            }}
          />
        </label>
        <datalist id="pg-trajectories">
          {items.slice(0, 2000).map((s) => (
            <option key={s.id} value={s.id} />
          ))}
        </datalist>
      </header>
      {error && <div className="banner error">{error}</div>}
      <main className="main">
        <Playground trajectoryId={detail ? id : null} detail={detail} split context="free" />
      </main>
    </div>
  );
}
