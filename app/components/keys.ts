// React keys for lists whose items have no id of their own (findings, read errors): each item's
// content, with `#2`, `#3`… on repeats, so a key follows its item and never its position.
export function contentKeys<T>(items: readonly T[], keyOf: (item: T) => string): string[] {
  const seen = new Map<string, number>();
  return items.map((item) => {
    const key = keyOf(item);
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    return n === 1 ? key : `${key}#${n}`;
  });
}
