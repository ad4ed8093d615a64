// Numbers as the app shows them.

/**
 * A count with thousands separators: 138090 → "138,090". Not `toLocaleString`/`Intl`: their first
 * use in a page loads ICU's locale data, ~60 ms in chromium here (measured), on the first screen of
 * every trajectory; each later `toLocaleString` call is ~80 µs more.
 */
export function formatCount(n: number): string {
  if (!Number.isSafeInteger(n)) return String(n);
  const digits = String(Math.abs(n));
  let out = '';
  for (let i = 0; i < digits.length; i++) {
    if (i > 0 && (digits.length - i) % 3 === 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? `-${out}` : out;
}

/** A size in bytes, KB or MB. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}
