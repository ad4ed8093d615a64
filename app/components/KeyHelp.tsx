// `?`: the keys of the page on screen (the bindings it registered, app/keyboard.ts) and the keys
// of every page. Esc or `?` closes it.
import { useEffect, useRef } from 'react';
import { activeBindings, GLOBAL_KEYS, useKeyHelp } from '../keyboard.ts';

const keyName = (k: string) => (k === ' ' ? 'Space' : k === 'Escape' ? 'Esc' : k);

export function KeyHelp() {
  const open = useKeyHelp((s) => s.open);
  const toggle = useKeyHelp((s) => s.toggle);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (open) box.current?.focus();
  }, [open]);
  if (!open) return null;
  const rows = [
    ...activeBindings().map((b) => ({ keys: b.keys.map(keyName).join(' / '), does: b.does! })),
    ...GLOBAL_KEYS,
  ];
  return (
    // biome-ignore lint/a11y/noStaticElementInteractions: a click beside the dialog closes it (Esc does by keyboard)
    <div className="keyhelp-backdrop" onClick={() => toggle(false)} role="presentation">
      <div
        className="keyhelp"
        role="dialog"
        aria-label="keyboard shortcuts"
        tabIndex={-1}
        ref={box}
        data-testid="key-help"
        onClick={(e) => e.stopPropagation()}
        onKeyDown={(e) => {
          if (e.key === 'Escape') toggle(false);
        }}
      >
        <h2>Keys on this page</h2>
        <table>
          <tbody>
            {rows.map((r) => (
              <tr key={r.keys}>
                <th scope="row">
                  <kbd>{r.keys}</kbd>
                </th>
                <td>{r.does}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <p className="muted small">Esc or ? closes this.</p>
      </div>
    </div>
  );
}
