// `serve ROLLOUT --trained TRAINED`: every pair at a glance (ComparePage), and one rollout
// trajectory beside what the trainer was given (CompareView): each field the same or not, the
// values on both sides where it first differs, the tokens aligned with the first difference in
// words (the diff view's DiffBody), the images of both sides with their sha256, the pad runs.
import { usePolledLoad } from './use-polled-load.ts';
import { useEffect, useState } from 'react';
import type { CompareField, CompareImage, ComparePair } from '../../server/http/api.ts';
import { useGo, useParams, useSetParams } from '../stores/route.ts';
import { useListKeys } from '../keyboard.ts';
import {
  useCompareError,
  useComparePair,
  useCompareRun,
  useLoadComparePair,
  useLoadCompareRun,
} from '../stores/compare.ts';
import { DiffBody } from './DiffView.tsx';
import './Compare.css';

/** Whether the server has a trained side (serve --trained); fetched once. */
export function useCompareAvailable(): boolean {
  const run = useCompareRun();
  const load = useLoadCompareRun();
  useEffect(() => {
    if (!run) void load();
  }, [run, load]);
  return run?.available === true;
}

const FIELD_LABEL: Record<string, string> = {
  tokens: 'tokens',
  images: 'images',
  placeholders: 'placeholders',
  loss_mask: 'loss mask',
  logprobs: 'logprobs',
  position_ids: 'position ids',
};

const STATE_MARK = { same: '✓ same', differs: '✗ differs', absent: '– not stored' } as const;

function FieldWindow({ f }: { f: CompareField }) {
  const w = f.window!;
  const cols = w.pieces.map((piece, k) => ({
    at: w.from + k,
    piece,
    rollout: w.rollout[k] ?? '',
    trained: w.trained[k] ?? '',
  }));
  const cls = (at: number) => (at === f.index ? 'at' : '');
  const tokens = f.field === 'tokens';
  return (
    <div className="cmp-window-wrap">
      <table className="cmp-window">
        <tbody>
          <tr>
            <th>token</th>
            {cols.map((c) => (
              <td key={c.at} className={cls(c.at)}>
                {c.at}
              </td>
            ))}
          </tr>
          <tr>
            <th>{tokens ? 'rollout' : 'piece'}</th>
            {cols.map((c) => (
              <td key={c.at} className={cls(c.at)}>
                <code>{tokens ? c.rollout : c.piece}</code>
              </td>
            ))}
          </tr>
          {!tokens && (
            <tr>
              <th>rollout</th>
              {cols.map((c) => (
                <td key={c.at} className={cls(c.at)}>
                  {c.rollout}
                </td>
              ))}
            </tr>
          )}
          <tr>
            <th>trained</th>
            {cols.map((c) => (
              <td key={c.at} className={`${cls(c.at)}${c.trained !== c.rollout ? ' cmp-neq' : ''}`}>
                {tokens ? <code>{c.trained}</code> : c.trained}
              </td>
            ))}
          </tr>
        </tbody>
      </table>
    </div>
  );
}

function Thumb({ img, other }: { img: CompareImage; other: CompareImage | undefined }) {
  const same = other?.sha256 && img.sha256 ? other.sha256 === img.sha256 : null;
  return (
    <figure className={`cmp-thumb${same === false ? ' cmp-neq' : ''}`} data-testid="cmp-image">
      {img.preview ? (
        <img
          src={img.preview}
          alt={`${img.width ?? '?'}×${img.height ?? '?'}, sha256 ${img.sha256 ?? 'unknown'}`}
          width={128}
        />
      ) : (
        <div className="cmp-noimg">{img.unavailable ?? 'no bytes'}</div>
      )}
      <figcaption className="small">
        image {img.index}
        {img.width ? ` · ${img.width}×${img.height}` : ''}
        <br />
        <code title={img.sha256 ?? ''}>sha256 {img.sha256 ? `${img.sha256.slice(0, 16)}…` : '—'}</code>
        {same === true && <span className="ok"> ✓</span>}
        {same === false && <span className="bad"> ✗ differs</span>}
      </figcaption>
    </figure>
  );
}

function Images({ p }: { p: ComparePair }) {
  const { rollout, trained } = p.images;
  return (
    <div className="cmp-images">
      <div>
        <h3>rollout · {rollout.length} image(s)</h3>
        <div className="cmp-thumbs">
          {rollout.map((img) => (
            <Thumb key={img.index} img={img} other={trained[img.index]} />
          ))}
        </div>
      </div>
      <div>
        <h3>trained · {trained.length} image(s)</h3>
        <div className="cmp-thumbs">
          {trained.length === 0 && (
            <span className="muted small">
              no image bytes on the trained side
              {p.placeholders.trainedGrids ? ` · ${p.placeholders.trainedGrids.length} image_grid_thw entries` : ''}
            </span>
          )}
          {trained.map((img) => (
            <Thumb key={img.index} img={img} other={rollout[img.index]} />
          ))}
        </div>
      </div>
    </div>
  );
}

function Placeholders({ p }: { p: ComparePair }) {
  const n = Math.max(p.placeholders.rollout.length, p.placeholders.trained.length);
  if (n === 0) return <p className="muted small">no image pad runs on either side</p>;
  const grid = (g: readonly number[] | null | undefined) => (g ? `[${g.join(', ')}]` : '—');
  return (
    <table className="cmp-runs">
      <thead>
        <tr>
          <th>image</th>
          <th>rollout pads (offset, length)</th>
          <th>grid</th>
          <th>trained pads (offset, length)</th>
          <th>grid</th>
        </tr>
      </thead>
      <tbody>
        {Array.from({ length: n }, (_, k) => {
          const a = p.placeholders.rollout[k];
          const b = p.placeholders.trained[k];
          const same = a && b && a.offset === b.offset && a.length === b.length;
          return (
            // biome-ignore lint/suspicious/noArrayIndexKey: one row per image index
            <tr key={k} className={same ? '' : 'cmp-neq'}>
              <td>{k}</td>
              <td>{a ? `${a.offset}, ${a.length}` : '—'}</td>
              <td>{grid(p.placeholders.rolloutGrids[k])}</td>
              <td>{b ? `${b.offset}, ${b.length}` : '—'}</td>
              <td>{grid(p.placeholders.trainedGrids?.[k])}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

export function CompareView({ id }: { id: string }) {
  const p = useComparePair(id);
  const load = useLoadComparePair();
  const error = useCompareError();
  const [token, setToken] = useState<{ t: number; side: 'a' | 'b' }>({ t: -1, side: 'b' });
  useEffect(() => {
    void load(id);
  }, [id, load]);
  if (error && !p) return <div className="banner error">{error}</div>;
  if (!p) return <p className="muted">loading the trained side…</p>;
  if (!p.trained)
    return (
      <div className="banner" data-testid="cmp-unjoined">
        {p.reason}
      </div>
    );
  const differing = p.fields.filter((f) => f.state === 'differs');
  return (
    <div className="cmp" data-testid="compare-view">
      <div className={`cmp-head ${differing.length ? 'bad' : 'ok'}`} data-testid="cmp-headline">
        <b>
          {differing.length === 0
            ? 'The trainer saw what the rollout generated.'
            : `The trainer saw something else: it differs in ${differing.map((f) => FIELD_LABEL[f.field]).join(', ')}.`}
        </b>{' '}
        <span className="muted small">
          rollout {p.rollout.id} ({p.rollout.file}:{p.rollout.line}, {p.rollout.format}) ↔ trained {p.trained.id} (
          {p.trained.file}:{p.trained.line}, {p.trained.format}), joined by{' '}
          {p.joinedBy === 'id' ? 'id' : 'sample index'}
        </span>
      </div>
      <table className="cmp-fields" data-testid="cmp-fields">
        <tbody>
          {p.fields.map((f) => (
            <tr key={f.field} className={`cmp-${f.state}`} data-field={f.field} data-state={f.state}>
              <th scope="row">{FIELD_LABEL[f.field] ?? f.field}</th>
              <td className="cmp-state">{STATE_MARK[f.state]}</td>
              <td>
                <div>
                  {f.index >= 0 && f.state === 'differs' && <b>token {f.index}: </b>}
                  {f.message}
                </div>
                {f.window && <FieldWindow f={f} />}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Tokens side by side</h3>
      {p.tokens && (
        <div className="cmp-tokens diff">
          <DiffBody d={p.tokens} token={token.t} side={token.side} onSelect={(t, side) => setToken({ t, side })} />
        </div>
      )}
      <h3>Images</h3>
      <Images p={p} />
      <h3>Placeholders</h3>
      <Placeholders p={p} />
    </div>
  );
}

/** `#/compare`: every pair of the run and the trained side, what differs, what joined nothing. */
export function ComparePage() {
  const run = useCompareRun();
  const load = useLoadCompareRun();
  const go = useGo();
  usePolledLoad(load, run?.loading);
  const params = useParams();
  const setParams = useSetParams();
  const pairs = run?.available && !run.loading ? run.pairs : [];
  // The row under the cursor is in the address (`sel`): Esc from a pair's page comes back to it.
  const selAt = pairs.findIndex((p) => p.rollout.id === params.sel);
  const cursor = selAt >= 0 ? selAt : pairs.length > 0 ? 0 : -1;
  const open = (id: string) => {
    setParams({ sel: id }, true);
    go({ page: 'trajectory', id, params: { view: 'compare', back: 'compare' } });
  };
  useListKeys({
    rows: pairs,
    cursor,
    setCursor: (i) => setParams({ sel: pairs[i]?.rollout.id }, true),
    open: (p) => open(p.rollout.id),
    notable: (p) => p.fields.length > 0,
    notableWords: 'whose trained side differs',
    noun: 'pair',
    extra: [{ keys: ['Escape'], does: 'back to the run', run: () => go({ page: 'overview', id: null, params: {} }) }],
  });
  return (
    <div className="overview cmp-page">
      <header className="topbar">
        <button type="button" className="back" onClick={() => go({ page: 'overview', id: null, params: {} })}>
          ← run
        </button>
        <h1>Rollout against trained side</h1>
        {run && <span className="muted small">{run.trainedFiles.join(', ')}</span>}
      </header>
      {!run && <p className="muted">loading…</p>}
      {run && !run.available && (
        <div className="banner">No trained side: start rollscope with `serve ROLLOUT --trained TRAINED`.</div>
      )}
      {run?.loading && <div className="banner">Reading the trained side…</div>}
      {run?.available && !run.loading && (
        <>
          <div className="banner headline" data-testid="cmp-run-summary">
            {run.pairs.length} pair(s): {run.pairs.filter((p) => p.fields.length === 0).length} the same,{' '}
            {run.pairs.filter((p) => p.fields.length > 0).length} different · {run.unmatched.rollout.length} only in the
            rollout · {run.unmatched.trained.length} only on the trained side
          </div>
          <table className="cmp-pairs">
            <thead>
              <tr>
                <th>rollout</th>
                <th>trained</th>
                <th>differs in</th>
                <th>first difference</th>
              </tr>
            </thead>
            <tbody>
              {run.pairs.map((p, i) => (
                <tr
                  key={`${p.rollout.file}:${p.rollout.line}:${p.rollout.id}`}
                  className={`trow ${p.fields.length ? 'bad' : 'ok'}${i === cursor ? ' cursor' : ''}`}
                  onClick={() => open(p.rollout.id)}
                  data-testid="cmp-pair"
                >
                  <td>
                    <button type="button" className="link" onClick={() => open(p.rollout.id)}>
                      {p.rollout.id}
                    </button>
                  </td>
                  <td>{p.trained.id}</td>
                  <td>
                    {p.fields.length === 0 ? (
                      <span className="ok">✓ same</span>
                    ) : (
                      p.fields.map((f) => (
                        <span key={f} className="chip kind kind-trained_mismatch">
                          {FIELD_LABEL[f] ?? f}
                        </span>
                      ))
                    )}
                  </td>
                  <td className="small">{p.headline ?? ''}</td>
                </tr>
              ))}
              {run.unmatched.rollout.map((s) => (
                <tr key={`r:${s.file}:${s.line}:${s.id}`} className="trow">
                  <td>{s.id}</td>
                  <td className="muted">only in the rollout</td>
                  <td />
                  <td />
                </tr>
              ))}
              {run.unmatched.trained.map((s) => (
                <tr key={`t:${s.file}:${s.line}:${s.id}`} className="trow">
                  <td className="muted">only on the trained side</td>
                  <td>{s.id}</td>
                  <td />
                  <td />
                </tr>
              ))}
            </tbody>
          </table>
          {run.errors.map((e) => (
            <div key={`${e.file}:${e.line}:${e.message}`} className="banner error small">
              {e.file}
              {e.line ? `:${e.line}` : ''}: {e.message}
            </div>
          ))}
        </>
      )}
    </div>
  );
}
