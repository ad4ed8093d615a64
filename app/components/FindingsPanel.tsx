// Every finding of the trajectory; a click moves the stream or the diff to its token.
import type { Finding } from '../../server/model/finding.ts';
import type { TrajectoryDetail } from '../../server/http/api.ts';
import { causeLabel, kindLabel } from './labels.ts';

/** Where a finding is best seen: the diff for divergences, else its stream at its token. */
export function findingTarget(
  f: Finding,
  diffs: TrajectoryDetail['diffs'],
): Record<string, string | number | undefined> {
  if (f.kind === 'prefix_break' && diffs.some((d) => d.a === 'prompt' && d.turn === f.turn)) {
    return { view: 'diff', a: 'prompt', b: 'prompt', dturn: f.turn, side: 'b', token: f.index };
  }
  if (f.kind === 'rerender_mismatch')
    return { view: 'diff', a: 'canonical', b: 'rerender', dturn: undefined, side: 'a', token: f.index };
  if (f.kind === 'sample_mismatch')
    return { view: 'diff', a: 'canonical', b: 'sample', dturn: undefined, side: 'b', token: f.index };
  return {
    view: 'stream',
    stream: f.stream ?? 'canonical',
    turn: f.stream === 'prompt' ? f.turn : undefined,
    token: f.index >= 0 ? f.index : undefined,
  };
}

export function FindingsPanel(props: {
  findings: Finding[];
  active: number;
  onOpen(f: Finding, i: number): void;
  limitations: string[];
  notes: string[];
}) {
  const { findings, active, onOpen } = props;
  return (
    <section className="panel findings" aria-label="findings">
      <h2>
        Findings <span className="muted">({findings.length})</span>
      </h2>
      {findings.length === 0 && <p className="muted">none</p>}
      <ol>
        {findings.map((f, i) => (
          <li
            key={i}
            className={`finding ${f.severity} ${i === active ? 'active' : ''}`}
            data-kind={f.kind}
            onClick={() => onOpen(f, i)}
          >
            <div className="finding-head">
              <span className={`chip kind kind-${f.kind}`}>{kindLabel(f.kind)}</span>
              {f.cause && <span className="chip cause">{causeLabel(f.cause)}</span>}
              <span className="muted small">
                {f.turn >= 0 ? `turn ${f.turn}` : 'whole'}
                {f.index >= 0 ? ` · token ${f.index}` : ''}
                {f.stream ? ` · ${f.stream}` : ''}
              </span>
            </div>
            <div className="finding-msg">{f.message}</div>
          </li>
        ))}
      </ol>
      {props.limitations.length > 0 && (
        <div className="small muted">
          <b>What this format cannot tell:</b> {props.limitations.join('; ')}
        </div>
      )}
      {props.notes.length > 0 && (
        <div className="small muted">
          <b>Re-alignment notes:</b> {props.notes.join('; ')}
        </div>
      )}
    </section>
  );
}
