// Every finding of the trajectory; a click moves the stream or the diff to where the server says
// the finding is seen (its target).
import { useMemo } from 'react';
import type { LocatedFinding } from '../../server/http/api.ts';
import { contentKeys } from './keys.ts';
import { causeLabel, kindLabel } from './labels.ts';

const findingKey = (f: LocatedFinding) => `${f.kind}:${f.stream}:${f.turn}:${f.index}:${f.image}:${f.message}`;

export function FindingsPanel(props: {
  findings: LocatedFinding[];
  active: number;
  onOpen(index: number): void;
  limitations: string[];
  notes: string[];
}) {
  const { findings, active, onOpen } = props;
  const keys = useMemo(() => contentKeys(findings, findingKey), [findings]);
  return (
    <section className="panel findings" aria-label="findings">
      <h2>
        Findings <span className="muted">({findings.length})</span>
      </h2>
      {findings.length === 0 && <p className="muted">none</p>}
      <ol>
        {findings.map((f, i) => (
          <li
            key={keys[i]}
            className={`finding ${f.severity} ${i === active ? 'active' : ''}`}
            data-kind={f.kind}
            aria-current={i === active ? 'true' : undefined}
          >
            <button type="button" className="finding-open" onClick={() => onOpen(i)}>
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
            </button>
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
