// `serve A --against B` (docs/diff-runs.md): every pair of the two runs with what changed (findings
// gone and new, reward, length, logprob mismatch), per step, what only one side has; and one pair
// side by side at token level, the first difference marked (the diff view's DiffBody).
import { usePolledLoad } from './use-polled-load.ts';
import { useEffect, useState } from 'react';
import type { AgainstRun, DiffFinding, RunPair } from '../../server/http/api.ts';
import { useGo, useParams, useSetParams } from '../stores/route.ts';
import { useKeys, useListKeys } from '../keyboard.ts';
import {
  useAgainstError,
  useAgainstPair,
  useAgainstRun,
  useLoadAgainstPair,
  useLoadAgainstRun,
} from '../stores/against.ts';
import { DiffBody, DiffSummary } from './DiffView.tsx';
import { causeLabel, kindLabel } from './labels.ts';
import './Against.css';

type Diff = NonNullable<AgainstRun['diff']>;

const findingLabel = (f: Pick<DiffFinding, 'kind' | 'cause'>) =>
  `${kindLabel(f.kind)}${f.cause ? ` (${causeLabel(f.cause)})` : ''}`;

const signed = (n: number, digits = 0) => `${n > 0 ? '+' : n < 0 ? '−' : '±'}${Math.abs(n).toFixed(digits)}`;

function FindingChips({ p }: { p: RunPair }) {
  if (p.findings_added.length === 0 && p.findings_removed.length === 0 && persisting(p).length === 0) return null;
  return (
    <>
      {p.findings_removed.map((f, k) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: findings have no id; their order is fixed
        <span key={`r${k}`} className="chip ag-gone" title={f.message} data-testid="ag-gone">
          − {findingLabel(f)}
        </span>
      ))}
      {p.findings_added.map((f, k) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: findings have no id; their order is fixed
        <span key={`a${k}`} className="chip ag-new" title={f.message} data-testid="ag-new">
          + {findingLabel(f)}
        </span>
      ))}
      {persisting(p).map((f, k) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: findings have no id; their order is fixed
        <span key={`k${k}`} className="chip ag-kept" title={`on both sides: ${f.message}`} data-testid="ag-kept">
          = {findingLabel(f)}
        </span>
      ))}
    </>
  );
}

/** Findings on both sides: at the same token, or moved by an earlier change. */
const persisting = (p: RunPair): DiffFinding[] => [...p.findings_kept, ...p.findings_moved.map((m) => m.finding)];

/** What the pair says: broke (new findings), fixed (findings gone), persists (the same findings on both sides), changed, clean. */
const verdict = (p: RunPair): 'fixed' | 'broke' | 'changed' | 'persists' | 'same' =>
  p.findings_added.length > 0
    ? 'broke'
    : p.findings_removed.length > 0
      ? 'fixed'
      : persisting(p).length > 0
        ? 'persists'
        : p.changed
          ? 'changed'
          : 'same';

const VERDICT_LABEL = {
  fixed: '✓ fixed',
  broke: '✗ broke',
  changed: '~ changed',
  persists: '! persists',
  same: '= same, clean',
} as const;

function Pairs({ diff, open }: { diff: Diff; open(p: RunPair): void }) {
  const s = diff.summary;
  const params = useParams();
  const setParams = useSetParams();
  const go = useGo();
  const key = (p: RunPair) => `${p.a.id}\u0000${p.b.id}`;
  // The row under the cursor is in the address (`sel=A`): Esc from a pair comes back to it.
  const selAt = diff.pairs.findIndex((p) => p.a.id === params.sel);
  const cursor = selAt >= 0 ? selAt : diff.pairs.length > 0 ? 0 : -1;
  useListKeys({
    rows: diff.pairs,
    cursor,
    setCursor: (i) => setParams({ sel: diff.pairs[i]?.a.id }, true),
    open,
    notable: (p) => verdict(p) !== 'same',
    notableWords: 'that changed or keeps a finding',
    noun: 'pair',
    extra: [{ keys: ['Escape'], does: 'back to the run', run: () => go({ page: 'overview', id: null, params: {} }) }],
  });
  return (
    <>
      <div className="banner headline" data-testid="ag-summary">
        {s.pairs} pair(s) ({s.paired_by_id} by id, {s.paired_by_prompt} by prompt): {s.fixed} fixed, {s.broke} broke,{' '}
        {s.changed - s.fixed - s.broke} changed otherwise, {s.pairs - s.changed} the same · {s.only_a} only in A ·{' '}
        {s.only_b} only in B
        {s.new_error_kinds.length > 0 && (
          <span className="bad"> · errors of a kind A did not have: {s.new_error_kinds.join(', ')}</span>
        )}
      </div>
      <table className="ag-pairs">
        <thead>
          <tr>
            <th />
            <th>A</th>
            <th>B</th>
            <th>step</th>
            <th>findings</th>
            <th>reward</th>
            <th>response tokens</th>
            <th>mean |Δ logprob|</th>
          </tr>
        </thead>
        <tbody>
          {diff.pairs.map((p, i) => {
            const v = verdict(p);
            return (
              <tr
                key={key(p)}
                className={`trow ag-${v}${i === cursor ? ' cursor' : ''}`}
                data-testid="ag-pair"
                data-verdict={v}
                onClick={() => open(p)}
              >
                <td className="ag-verdict">{VERDICT_LABEL[v]}</td>
                <td>
                  <button type="button" className="link" onClick={() => open(p)}>
                    {p.a.id}
                  </button>
                </td>
                <td>
                  {p.b.id}
                  {p.paired_by === 'prompt' && <span className="muted small"> (by prompt)</span>}
                </td>
                <td>{p.b.step ?? p.a.step ?? ''}</td>
                <td>
                  <FindingChips p={p} />
                </td>
                <td>
                  {p.reward_a === p.reward_b ? (p.reward_a ?? '') : `${p.reward_a ?? '–'} → ${p.reward_b ?? '–'}`}
                </td>
                <td>
                  {p.length_delta ? `${p.response_tokens_a} → ${p.response_tokens_b}` : (p.response_tokens_a ?? '')}
                </td>
                <td>{p.mean_abs_delta_change ? signed(p.mean_abs_delta_change, 4) : ''}</td>
              </tr>
            );
          })}
          {diff.only_a.map((e) => (
            <tr key={`a:${e.file}:${e.line}:${e.id}`} className="trow" data-testid="ag-only-a">
              <td className="muted">only in A</td>
              <td>{e.id}</td>
              <td />
              <td>{e.step ?? ''}</td>
              <td className="small">{e.findings ? `${e.findings} finding(s), ${e.errors} error(s)` : ''}</td>
              <td colSpan={3} />
            </tr>
          ))}
          {diff.only_b.map((e) => (
            <tr key={`b:${e.file}:${e.line}:${e.id}`} className="trow" data-testid="ag-only-b">
              <td className="muted">only in B</td>
              <td />
              <td>{e.id}</td>
              <td>{e.step ?? ''}</td>
              <td className="small">{e.findings ? `${e.findings} finding(s), ${e.errors} error(s)` : ''}</td>
              <td colSpan={3} />
            </tr>
          ))}
        </tbody>
      </table>
      {s.steps.some((x) => x.step !== null) && (
        <>
          <h3>Per step</h3>
          <table className="ag-steps" data-testid="ag-steps">
            <thead>
              <tr>
                <th>step</th>
                <th>pairs</th>
                <th>fixed</th>
                <th>broke</th>
                <th>findings gone</th>
                <th>findings new</th>
                <th>reward Δ (mean)</th>
                <th>only A</th>
                <th>only B</th>
              </tr>
            </thead>
            <tbody>
              {s.steps.map((x) => (
                <tr key={String(x.step)}>
                  <td>{x.step ?? 'no step'}</td>
                  <td>{x.pairs}</td>
                  <td>{x.fixed}</td>
                  <td>{x.broke}</td>
                  <td>{x.findings_removed}</td>
                  <td>{x.findings_added}</td>
                  <td>{x.reward_delta_mean === null ? '' : signed(x.reward_delta_mean, 3)}</td>
                  <td>{x.only_a}</td>
                  <td>{x.only_b}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}

function PairView({ a, b, stream, turn }: { a: string; b: string; stream?: string; turn?: number }) {
  const pair = useAgainstPair(a, b, stream, turn);
  const load = useLoadAgainstPair();
  const error = useAgainstError();
  const setParams = useSetParams();
  const [token, setToken] = useState<{ t: number; side: 'a' | 'b' }>({ t: -1, side: 'b' });
  useEffect(() => {
    void load(a, b, stream, turn);
  }, [a, b, stream, turn, load]);
  if (error && !pair) return <div className="banner error">{error}</div>;
  if (!pair) return <p className="muted">loading the pair…</p>;
  const p = pair.pair;
  const v = verdict(p);
  return (
    <div className="ag-pair diff" data-testid="ag-pair-view">
      <div className={`cmp-head ag-head ag-${v}`} data-testid="ag-pair-headline">
        <b>
          {v === 'fixed' && `Fixed in B: ${p.findings_removed.map(findingLabel).join(', ')}.`}
          {v === 'broke' && `New in B: ${p.findings_added.map(findingLabel).join(', ')}.`}
          {v === 'changed' && 'No finding on either side; something else changed.'}
          {v === 'persists' &&
            `Not fixed in B: ${persisting(p).map(findingLabel).join(', ')} on both sides${p.changed ? '; something else changed' : ''}.`}
          {v === 'same' && 'No finding on either side, and nothing else changed.'}
        </b>{' '}
        <span className="muted small">
          A {p.a.id} ({p.a.file}:{p.a.line}, {p.a.format}) ↔ B {p.b.id} ({p.b.file}:{p.b.line}, {p.b.format}), paired by{' '}
          {p.paired_by === 'id' ? 'id' : 'prompt'}
        </span>
      </div>
      <div className="toolbar">
        <label>
          tokens of{' '}
          <select
            data-testid="ag-stream"
            value={pair.stream === null ? '' : `${pair.stream}:${pair.turn}`}
            onChange={(e) => {
              const [s, t] = e.target.value.split(':');
              setToken({ t: -1, side: 'b' });
              setParams({ stream: s, turn: t });
            }}
          >
            {pair.streams.map((s) => (
              <option key={`${s.name}:${s.turn}`} value={`${s.name}:${s.turn}`}>
                {s.diverges ? '● ' : ''}
                {s.label}
              </option>
            ))}
          </select>
        </label>
        {pair.tokens && <DiffSummary d={pair.tokens} />}
      </div>
      {!pair.tokens && <div className="banner">The two sides share no token stream.</div>}
      {pair.tokens && (
        <DiffBody
          d={pair.tokens}
          token={token.t}
          side={token.side}
          onSelect={(t, side) => setToken({ t, side })}
          agree={
            persisting(p).length > 0
              ? `A and B hold the same tokens in this stream: the ${persisting(p).length === 1 ? 'finding' : 'findings'} above ${persisting(p).length === 1 ? 'is' : 'are'} in both.`
              : undefined
          }
        />
      )}
    </div>
  );
}

/** `#/against`: the pairs of A and B; `#/against?a=ID&b=ID` one pair side by side. */
export function AgainstPage() {
  const run = useAgainstRun();
  const load = useLoadAgainstRun();
  const params = useParams();
  const go = useGo();
  usePolledLoad(load, run?.loading);
  const open = (p: RunPair) => go({ page: 'against', id: null, params: { a: p.a.id, b: p.b.id } });
  const pairOpen = params.a !== undefined && params.b !== undefined;
  const backToPairs = () => go({ page: 'against', id: null, params: params.a ? { sel: params.a } : {} });
  useKeys(pairOpen ? [{ keys: ['Escape'], does: 'back to the pairs', run: backToPairs }] : []);
  return (
    <div className="overview ag-page">
      <header className="topbar">
        {pairOpen ? (
          <button type="button" className="back" onClick={backToPairs}>
            ← pairs
          </button>
        ) : (
          <button type="button" className="back" onClick={() => go({ page: 'overview', id: null, params: {} })}>
            ← run
          </button>
        )}
        <h1>Run against run</h1>
        {run?.available && (
          <span className="muted small">
            A: {run.aFiles.join(', ')} · B: {run.bFiles.join(', ')}
          </span>
        )}
      </header>
      {!run && <p className="muted">loading…</p>}
      {run && !run.available && <div className="banner">No other run: start rollscope with `serve A --against B`.</div>}
      {run?.loading && <div className="banner">Checking both runs…</div>}
      {run?.error && <div className="banner error">{run.error}</div>}
      {run?.diff && !pairOpen && <Pairs diff={run.diff} open={open} />}
      {run?.diff && pairOpen && (
        <PairView
          a={params.a!}
          b={params.b!}
          stream={params.stream}
          turn={params.turn !== undefined ? Number(params.turn) : undefined}
        />
      )}
    </div>
  );
}
