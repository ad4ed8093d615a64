// The overview by GRPO group: each group a collapsible block (its verdict, reward mean ± std,
// the group findings) with a reward and an advantage dot per sample; degenerate groups marked.
// The rows are the overview's list sorted by group (`sort=group`), so j/k on a trajectory page
// walk the same order. Keys here: j/k within a group, J/K to the next/previous group, Enter
// opens, o folds or unfolds the group.
import { useEffect, useMemo, useRef, useState } from 'react';
import { Virtuoso, type VirtuosoHandle } from 'react-virtuoso';
import type { GroupInfo, TrajectorySummary } from '../../server/http/api.ts';
import { useExport } from '../stores/export.ts';
import { groupKeyOf, useGroupInfos, useLoadGroups, useLoadSteps, useRunSteps } from '../stores/steps.ts';
import { kindLabel } from './labels.ts';
import { ValueDot } from './plots.tsx';
import './Run.css';

interface Block {
  key: string;
  group: string | null;
  step: number | null;
  members: TrajectorySummary[];
}

/** Consecutive rows of one group make one block (the list is sorted by group). */
export function blocksOf(items: readonly TrajectorySummary[]): Block[] {
  const out: Block[] = [];
  for (const s of items) {
    const key = s.group === null ? '\u0001ungrouped' : groupKeyOf(s.step, s.group);
    const last = out.at(-1);
    if (last?.key === key) last.members.push(s);
    else out.push({ key, group: s.group, step: s.step, members: [s] });
  }
  return out;
}

const fmt = (v: number | null, digits = 2) => (v === null ? '—' : Number.isInteger(v) ? String(v) : v.toFixed(digits));

function GroupHeader({
  block,
  info,
  folded,
  toggle,
}: {
  block: Block;
  info?: GroupInfo;
  folded: boolean;
  toggle(): void;
}) {
  return (
    <button
      type="button"
      className={`group-head${info?.degenerate ? ' degenerate' : ''}`}
      aria-expanded={!folded}
      onClick={toggle}
    >
      <span className="fold">{folded ? '▸' : '▾'}</span>
      {block.group === null ? (
        <b>no group</b>
      ) : (
        <>
          <b>group {block.group}</b>
          {block.step !== null && <span className="muted"> · step {block.step}</span>}
        </>
      )}
      <span className="muted"> · {block.members.length} sample(s)</span>
      {info && (
        <span className="muted">
          {' '}
          · reward {fmt(info.reward_mean)} ± {fmt(info.reward_std)}
        </span>
      )}
      {info?.degenerate && <span className="chip degenerate">degenerate</span>}
      {info?.findings.map((f) => (
        <span key={f.field} className="chip kind kind-group" title={f.message}>
          {f.field === 'reward' ? 'equal rewards' : f.field === 'sample' ? 'identical samples' : 'mixed prompts'}
        </span>
      ))}
    </button>
  );
}

export function GroupedOverview({
  items,
  open,
  step,
}: {
  items: readonly TrajectorySummary[];
  open(id: string): void;
  step: number | undefined;
}) {
  const infos = useGroupInfos();
  const loadGroups = useLoadGroups();
  const steps = useRunSteps();
  const loadSteps = useLoadSteps();
  const blocks = useMemo(() => blocksOf(items), [items]);
  const [folded, setFolded] = useState<ReadonlySet<string>>(new Set());
  const [cursor, setCursor] = useState({ g: 0, m: 0 });
  const list = useRef<VirtuosoHandle>(null);
  // The verdicts follow the rows: reloaded whenever the list changes (the run grows).
  const shownRows = items.length;
  useEffect(() => {
    if (shownRows < 0) return;
    void loadGroups(step);
    void loadSteps();
  }, [shownRows, step, loadGroups, loadSteps]);
  const toggle = (key: string) =>
    setFolded((prev) => {
      const next = new Set(prev);
      if (next.has(key)) next.delete(key);
      else next.add(key);
      return next;
    });
  // One listener for the page's lifetime reading the latest state through refs.
  const state = useRef({ blocks, cursor, folded, open, toggle });
  state.current = { blocks, cursor, folded, open, toggle };
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.target instanceof HTMLInputElement || e.metaKey || e.ctrlKey || e.altKey || useExport.getState().open)
        return;
      const { blocks: bs, cursor: c, open: openRow, toggle: fold } = state.current;
      if (bs.length === 0) return;
      const move = (g: number, m: number) => {
        const gi = Math.max(0, Math.min(bs.length - 1, g));
        const mi = Math.max(0, Math.min(bs[gi]!.members.length - 1, m));
        setCursor({ g: gi, m: mi });
        setFolded((prev) => {
          if (!prev.has(bs[gi]!.key)) return prev;
          const next = new Set(prev);
          next.delete(bs[gi]!.key);
          return next;
        });
        list.current?.scrollIntoView({ index: gi });
      };
      if (e.key === 'j') move(c.g, c.m + 1);
      else if (e.key === 'k') move(c.g, c.m - 1);
      else if (e.key === 'J') move(c.g + 1, 0);
      else if (e.key === 'K') move(c.g - 1, 0);
      else if (e.key === 'o') fold(bs[c.g]!.key);
      else if (e.key === 'Enter') {
        const s = bs[c.g]?.members[c.m];
        if (s) openRow(s.id);
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);

  const lo = steps?.rewardRange?.min ?? 0;
  const hi = steps?.rewardRange?.max ?? 1;
  return (
    <Virtuoso
      ref={list}
      className="groups"
      data={blocks}
      computeItemKey={(_, b) => b.key}
      itemContent={(gi, b) => {
        const info = infos.get(b.key);
        const isFolded = folded.has(b.key);
        const maxAdv = Math.max(1e-9, ...b.members.map((s) => Math.abs(s.advantage ?? 0)));
        return (
          <section
            className={`group${info?.degenerate ? ' degenerate' : ''}${gi === cursor.g ? ' cursor-group' : ''}`}
            data-group={b.group ?? ''}
            data-step={b.step ?? ''}
          >
            <GroupHeader block={b} info={info} folded={isFolded} toggle={() => toggle(b.key)} />
            {!isFolded && (
              <ul className="members">
                {b.members.map((s, mi) => (
                  <li
                    key={s.id}
                    data-id={s.id}
                    className={`member health-row-${s.health}${gi === cursor.g && mi === cursor.m ? ' cursor' : ''}`}
                  >
                    <ValueDot kind="reward" value={s.reward} lo={lo} hi={hi} />
                    <ValueDot kind="advantage" value={s.advantage} lo={-maxAdv} hi={maxAdv} />
                    <a
                      className="id"
                      href={`#/t/${encodeURIComponent(s.id)}?view=stream`}
                      onClick={(e) => {
                        e.preventDefault();
                        open(s.id);
                      }}
                    >
                      {s.id}
                    </a>
                    <span className="num muted small">reward {fmt(s.reward, 3)}</span>
                    {s.advantage !== null && <span className="num muted small">adv {fmt(s.advantage, 3)}</span>}
                    <span className="num muted small">{s.responseTokens ?? '—'} tok</span>
                    <span className="findings" title={s.headline ?? ''}>
                      {Object.entries(s.findings.kind).map(([k, n]) => (
                        <span key={k} className={`chip kind kind-${k}`}>
                          {kindLabel(k)}
                          {n > 1 ? ` ×${n}` : ''}
                        </span>
                      ))}
                    </span>
                  </li>
                ))}
              </ul>
            )}
          </section>
        );
      }}
    />
  );
}
