// The overview's filters: text (id, file, message, token id) and the `where` expression
// (docs/filter.md), both in the address. A `where` the server refuses is shown under the bar with
// the offending character marked, while the table keeps the last list it could show.
import { useEffect, useState } from 'react';
import { useWhereError } from '../stores/run.ts';

/** The `where` input: applied on Enter (empty clears it); Esc puts back what applies. `/` focuses it. */
export function WhereInput({
  where,
  apply,
}: {
  where: string | undefined;
  apply: (where: string | undefined) => void;
}) {
  const [text, setText] = useState(where ?? '');
  const error = useWhereError();
  // A new address (back, a link from the run page's brush) shows its own expression.
  useEffect(() => setText(where ?? ''), [where]);
  const invalid = error !== null && error.where === where;
  return (
    <input
      type="text"
      className={`where-input${invalid ? ' invalid' : ''}`}
      placeholder="where: reward >= 1 and step >= 100"
      title="a filter expression, applied on Enter: fields reward, advantage, step, group, sample, turns, response_tokens, images, status, format, id, file; kind:…, cause:…, severity:…; and, or, not (docs/filter.md)"
      aria-label="where"
      aria-invalid={invalid ? true : undefined}
      aria-describedby={invalid ? 'where-error' : undefined}
      data-testid="where-input"
      data-key-filter=""
      spellCheck={false}
      value={text}
      onChange={(e) => setText(e.target.value)}
      onKeyDown={(e) => {
        if (e.key === 'Enter') apply(text.trim() === '' ? undefined : text);
        else if (e.key === 'Escape') {
          setText(where ?? '');
          (e.target as HTMLInputElement).blur();
        }
      }}
    />
  );
}

/** The refused expression with its character at fault marked, and the server's message. */
export function WhereError({ where }: { where: string | undefined }) {
  const error = useWhereError();
  if (!error || error.where !== where) return null;
  return (
    <div className="where-error" role="alert" id="where-error" data-testid="where-error">
      <code className="where-expr">
        {error.where.slice(0, error.offset)}
        <mark data-testid="where-error-at">{error.where.slice(error.offset, error.offset + 1) || ' '}</mark>
        {error.where.slice(error.offset + 1)}
      </code>
      <span>
        {error.message.replace(/^where: /, '')}{' '}
        <span className="muted">· the table shows the last filter that applied</span>
      </span>
    </div>
  );
}

/** The text filter: narrows as it is typed (kept in the address without a history entry per key). */
export function TextFilter({ q, apply }: { q: string | undefined; apply: (q: string | undefined) => void }) {
  const [text, setText] = useState(q ?? '');
  useEffect(() => setText(q ?? ''), [q]);
  return (
    <input
      type="search"
      className="text-filter"
      placeholder="id, file, message or token id"
      aria-label="filter by text"
      value={text}
      onChange={(e) => {
        setText(e.target.value);
        apply(e.target.value || undefined);
      }}
      onKeyDown={(e) => {
        if (e.key === 'Escape') (e.target as HTMLInputElement).blur();
      }}
    />
  );
}
