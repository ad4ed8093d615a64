// The overview by GRPO group: each group a foldable block (its verdict, reward mean ± std, the
// group findings) with a reward and an advantage dot per sample; degenerate groups and groups of
// one sample marked. Each trajectory is in exactly one block, whatever order the rows arrive in
// (the list is asked for in group order; a stale list in another order still groups right).
// Keys (app/keyboard.ts): j/k through the samples, J/K to the next/previous group, n/N to the next
// sample with findings, Enter opens, o folds the group.
import { useEffect, useMemo, useRef, useState } from 'react';
import { Virtuoso, type VirtuosoHandle } from 'react-virtuoso';
import type { GroupInfo, TrajectorySummary } from '../../server/http/api.ts';
import { groupKeyOf, useGroupInfos, useLoadGroups, useLoadSteps, useRunSteps } from '../stores/steps.ts';
import { kindLabel } from './labels.ts';
import { ValueDot } from './plots.tsx';
import type { ListParams } from '../list-state.ts';
import { trajectoryHash } from '../navigate.ts';
import { useListKeys } from '../keyboard.ts';
import { formatCount } from '../format.ts';
import './Run.css';

interface Block {
  key: string;
  group: string | null;
  step: number | null;
  members: TrajectorySummary[];
}

const UNGROUPED = '\u0001ungrouped';

/** The rows by group, each group once, in the order its first row comes; the ungrouped last, as one block. */
export function blocksOf(items: readonly TrajectorySummary[]): Block[] {
  const byKey = new Map<string, Block>();
  for (const s of items) {
    const key = s.group === null ? UNGROUPED : groupKeyOf(s.step, s.group);
    let b = byKey.get(key);
    if (!b) {
      b = { key, group: s.group, step: s.group === null ? null : s.step, members: [] };
      byKey.set(key, b);
    }
    b.members.push(s);
  }
  const blocks = [...byKey.values()];
  const ungrouped = byKey.get(UNGROUPED);
  return ungrouped ? [...blocks.filter((b) => b !== ungrouped), ungrouped] : blocks;
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
  const alone = block.group !== null && (info?.size ?? block.members.length) === 1;
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
      <span className="muted">
        {' '}
        · {block.members.length} {block.members.length === 1 ? 'sample' : 'samples'}
        {info && info.size !== block.members.length ? ` shown of ${info.size}` : ''}
      </span>
      {info && info.reward_mean !== null && (
        <span className="muted">
          {' '}
          · reward {fmt(info.reward_mean)} ± {fmt(info.reward_std)}
        </span>
      )}
      {info?.degenerate && <span className="chip degenerate">degenerate</span>}
      {alone && (
        <span
          className="chip kind kind-group alone"
          data-testid="group-alone"
          title="a group of one sample: its reward is compared with nothing (verl's GRPO passes it through as its advantage: mean 0, std 1; docs/reference/frameworks.md#grpo-advantages)"
        >
          one sample
        </span>
      )}
      {info?.findings.map((f) => (
        <span key={f.field} className="chip kind kind-group" title={f.message}>
          {f.field === 'reward' ? 'equal rewards' : f.field === 'sample' ? 'identical samples' : 'mixed prompts'}
        </span>
      ))}
    </button>
  );
}

/** What the two dots of a sample mean. */
function DotLegend() {
  return (
    <div className="group-legend muted small" data-testid="group-legend">
      <span>
        <span className="vdot reward" style={{ background: 'hsl(0 65% 45%)' }} />
        <span className="vdot reward" style={{ background: 'hsl(120 65% 45%)' }} /> reward, red (lowest of the run) to
        green (highest)
      </span>
      <span>
        <span className="vdot advantage" style={{ background: 'hsl(0 65% 45%)' }} />
        <span className="vdot advantage" style={{ background: 'hsl(120 65% 45%)' }} /> advantage, red (most negative in
        its group) to green (most positive)
      </span>
      <span>hollow: not stated</span>
    </div>
  );
}

export function GroupedOverview({
  items,
  lp,
  openPage,
  sel,
  setSel,
}: {
  items: readonly TrajectorySummary[];
  lp: ListParams;
  openPage(id: string): void;
  sel: string | undefined;
  setSel(id: string): void;
}) {
  const infos = useGroupInfos();
  const loadGroups = useLoadGroups();
  const steps = useRunSteps();
  const loadSteps = useLoadSteps();
  const blocks = useMemo(() => blocksOf(items), [items]);
  const rows = useMemo(() => blocks.flatMap((b) => b.members), [blocks]);
  const blockOfRow = useMemo(() => {
    const m = new Map<string, number>();
    blocks.forEach((b, gi) => {
      for (const s of b.members) m.set(s.id, gi);
    });
    return m;
  }, [blocks]);
  const [folded, setFolded] = useState<ReadonlySet<string>>(new Set());
  const list = useRef<VirtuosoHandle>(null);
  const step = lp.step !== undefined && /^\d+$/.test(lp.step) ? Number(lp.step) : undefined;
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
  const cursor = sel === undefined ? (rows.length > 0 ? 0 : -1) : rows.findIndex((s) => s.id === sel);
  const cursorGroup = cursor >= 0 ? (blockOfRow.get(rows[cursor]!.id) ?? -1) : -1;

  useListKeys<TrajectorySummary>({
    rows,
    cursor,
    noun: 'sample',
    setCursor: (i) => {
      const s = rows[i];
      if (!s) return;
      const gi = blockOfRow.get(s.id) ?? 0;
      const key = blocks[gi]!.key;
      setFolded((prev) => {
        if (!prev.has(key)) return prev;
        const next = new Set(prev);
        next.delete(key);
        return next;
      });
      setSel(s.id);
      list.current?.scrollIntoView({ index: gi });
    },
    open: (s) => openPage(s.id),
    notable: (s) => s.health !== 'ok',
    blockOf: (s) => String(blockOfRow.get(s.id)),
    withinBlock: true,
    extra: [
      {
        keys: ['o'],
        does: 'fold or unfold the group',
        run: () => {
          const b = blocks[cursorGroup];
          if (b) toggle(b.key);
        },
      },
    ],
  });

  const lo = steps?.rewardRange?.min ?? 0;
  const hi = steps?.rewardRange?.max ?? 1;
  return (
    <div className="grouped">
      <DotLegend />
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
              className={`group${info?.degenerate ? ' degenerate' : ''}${gi === cursorGroup ? ' cursor-group' : ''}`}
              data-group={b.group ?? ''}
              data-step={b.step ?? ''}
            >
              <GroupHeader block={b} info={info} folded={isFolded} toggle={() => toggle(b.key)} />
              {!isFolded && (
                <ul className="members">
                  {b.members.map((s) => (
                    <li
                      key={s.id}
                      data-id={s.id}
                      className={`member health-row-${s.health}${rows[cursor]?.id === s.id ? ' cursor' : ''}`}
                    >
                      <ValueDot kind="reward" value={s.reward} lo={lo} hi={hi} />
                      <ValueDot kind="advantage" value={s.advantage} lo={-maxAdv} hi={maxAdv} />
                      <a
                        className="id"
                        href={trajectoryHash(s.id, lp)}
                        onClick={(e) => {
                          e.preventDefault();
                          openPage(s.id);
                        }}
                      >
                        {s.id}
                      </a>
                      <span className="num muted small">reward {fmt(s.reward, 3)}</span>
                      {s.advantage !== null && <span className="num muted small">adv {fmt(s.advantage, 3)}</span>}
                      <span className="num muted small">
                        {s.responseTokens === null ? '—' : formatCount(s.responseTokens)} response tokens
                      </span>
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
    </div>
  );
}
