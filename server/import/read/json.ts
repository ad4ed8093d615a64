// JSON as trajectory files hold it: Python's bare NaN/Infinity accepted (json.dumps writes them by
// default), nesting and array sizes checked before JSON.parse allocates, and the field path
// (`turns.1.generatedIds.57`) of any position recovered, so an error can name the field it is in.
import { randomBytes } from 'node:crypto';
import { DEFAULT_LIMITS, type ReadLimits } from './limits.ts';

/**
 * The field path (`turns.1.generatedIds.57`) at the end of `bytes`, a prefix of a JSON text:
 * where a syntax error, a bad byte or a limit was hit. Works on bytes so it can follow a line
 * that is never decoded whole; structural characters are ASCII in UTF-8.
 */
export function fieldAt(bytes: Uint8Array | readonly Uint8Array[]): string | undefined {
  type Frame = { array: true; index: number } | { array: false; key?: string; expectingKey: boolean };
  const frames: Frame[] = [];
  let inString = false;
  let escaped = false;
  let key: number[] | undefined; // bytes of an object key being read
  const chunks = bytes instanceof Uint8Array ? [bytes] : bytes;
  for (const buf of chunks) {
    let i = 0;
    const n = buf.length;
    let nextQuote = -1;
    let nextBackslash = -1;
    while (i < n) {
      const c = buf[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === 0x5c) escaped = true;
        else if (c === 0x22) {
          inString = false;
          if (key) {
            const top = frames.length > 0 ? frames[frames.length - 1] : undefined;
            if (top && !top.array) top.key = decodeKey(key);
            key = undefined;
          }
          i++;
          continue;
        } else if (!key) {
          // Jump over string content to the next quote or backslash (positions cached, so a
          // string full of escapes stays linear).
          if (nextQuote < i) nextQuote = indexOrEnd(buf, 0x22, i);
          if (nextBackslash < i) nextBackslash = indexOrEnd(buf, 0x5c, i);
          i = Math.min(nextQuote, nextBackslash);
          continue;
        }
        if (key && key.length < 200) key.push(c);
        i++;
        continue;
      }
      if (STRUCTURAL[c] === 0) {
        i = nextStructural(buf, i + 1, n);
        continue;
      }
      // Never frames[-1]: an out-of-bounds read is a slow named-property lookup in V8.
      const top = frames.length > 0 ? frames[frames.length - 1] : undefined;
      switch (c) {
        case 0x22:
          inString = true;
          if (top && !top.array && top.expectingKey) key = [];
          break;
        case 0x5b:
          frames.push({ array: true, index: 0 });
          break;
        case 0x7b:
          frames.push({ array: false, expectingKey: true });
          break;
        case 0x5d:
        case 0x7d:
          frames.pop();
          break;
        case 0x2c:
          if (top?.array) top.index++;
          else if (top) {
            top.expectingKey = true;
            top.key = undefined;
          }
          break;
        case 0x3a:
          if (top && !top.array) top.expectingKey = false;
          break;
      }
      i++;
    }
  }
  const path: string[] = [];
  for (const f of frames) {
    if (f.array) path.push(String(f.index));
    else if (f.key !== undefined && !f.expectingKey) path.push(f.key);
    else break;
  }
  if (path.length === 0) return undefined;
  // 256 levels of `0.0.0…` say less than their count.
  return path.length > 16
    ? `${path.slice(0, 8).join('.')}.…(${path.length - 12} more levels)….${path.slice(-4).join('.')}`
    : path.join('.');
}

const STRUCTURAL = new Uint8Array(256);
for (const ch of '"[]{},:') STRUCTURAL[ch.charCodeAt(0)] = 1;

function nextStructural(buf: Uint8Array, from: number, n: number): number {
  let i = from;
  while (i < n && STRUCTURAL[buf[i]!] === 0) i++;
  return i;
}

function indexOrEnd(buf: Uint8Array, byte: number, from: number): number {
  const at = buf.indexOf(byte, from);
  return at < 0 ? buf.length : at;
}

function decodeKey(bytes: number[]): string {
  const raw = Buffer.from(bytes).toString('utf8');
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/** A JSON text over a limit of ReadLimits, with the character position where it was crossed. */
export class JsonLimitError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(message);
  }
}

/**
 * Where the string whose opening quote is at `open` ends: the index of the first quote after it
 * that is not escaped (not preceded by an odd number of backslashes), or -1 when the text ends
 * first. Both passes over a text (the limit scan and the NaN marking) skip strings with it, so
 * they agree on what lies outside strings.
 */
function stringEnd(text: string, open: number): number {
  let from = open + 1;
  for (;;) {
    const q = text.indexOf('"', from);
    if (q < 0) return -1;
    let b = q - 1;
    while (text.charCodeAt(b) === 0x5c) b--;
    if ((q - 1 - b) % 2 === 0) return q;
    from = q + 1;
  }
}

/**
 * One linear pass over a JSON text before JSON.parse allocates anything: nesting depth, array
 * sizes, and whether Python's bare NaN/Infinity occur outside strings. Costs ~10% of the parse.
 */
export function scanJson(
  text: string,
  limits: Pick<ReadLimits, 'maxDepth' | 'maxArrayEntries'> = DEFAULT_LIMITS,
): { nonFinite: boolean } {
  const n = text.length;
  const entries = new Int32Array(limits.maxDepth + 2);
  const isArray = new Uint8Array(limits.maxDepth + 2);
  const opened = new Float64Array(limits.maxDepth + 2); // where each open container starts
  let depth = 0;
  let nonFinite = false;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = stringEnd(text, i);
      if (i < 0) return { nonFinite }; // unterminated string: JSON.parse will say so
    } else if (c === 0x2c) {
      if (isArray[depth] && ++entries[depth]! >= limits.maxArrayEntries) {
        // Positioned at the array's `[`, so the field named is the array itself.
        throw new JsonLimitError(
          `array has more than ${limits.maxArrayEntries} entries (the limit; no rollout list is that long)`,
          opened[depth]!,
        );
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limits.maxDepth)
        throw new JsonLimitError(
          `nested more than ${limits.maxDepth} levels deep (the limit; real records nest < 20)`,
          i,
        );
      entries[depth] = 0;
      isArray[depth] = c === 0x5b ? 1 : 0;
      opened[depth] = i;
    } else if (c === 0x5d || c === 0x7d) {
      if (depth > 0) depth--;
    } else if (c === 0x4e || c === 0x49) nonFinite = true; // N(aN), I(nfinity): no other JSON token starts so
  }
  return { nonFinite };
}

/** Replace bare NaN/Infinity/-Infinity (outside strings) by marker strings JSON.parse accepts. */
function markNonFinite(text: string, mark: string): string {
  const out: string[] = [];
  let last = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = stringEnd(text, i);
      if (i < 0) return out.join('') + text.slice(last);
      continue;
    }
    const word =
      c === 0x4e && text.startsWith('NaN', i)
        ? 'NaN'
        : c === 0x49 && text.startsWith('Infinity', i)
          ? 'Infinity'
          : undefined;
    if (!word) continue;
    const negative = i > 0 && text.charCodeAt(i - 1) === 0x2d;
    const from = negative ? i - 1 : i;
    // The marker starts with a NUL, written as its JSON escape (a raw control character is invalid JSON).
    out.push(text.slice(last, from), `"\\u0000${mark.slice(1)}${negative ? '-' : ''}${word}"`);
    last = i + word.length;
    i = last - 1;
  }
  out.push(text.slice(last));
  return out.join('');
}

/** What a marker string stands for, or the string itself. */
function unmarked(v: string, mark: string): unknown {
  const w = v.slice(mark.length);
  return w === 'NaN' || w === '-NaN' ? NaN : w === 'Infinity' ? Infinity : w === '-Infinity' ? -Infinity : v;
}

/**
 * Walk a parsed value without recursion: false when it nests deeper than `maxDepth` (the root
 * container is level 1, as in `scanJson`); with `mark`, marker strings are replaced by the
 * number they stand for on the way.
 */
function withinDepth(root: unknown, maxDepth: number, mark?: string): boolean {
  if (typeof root !== 'object' || root === null) return true;
  const stack: object[] = [root];
  const levels: number[] = [1];
  while (stack.length > 0) {
    const v = stack.pop()!;
    const level = levels.pop()!;
    if (level > maxDepth) return false;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const c: unknown = v[i];
        if (typeof c === 'object') {
          if (c !== null) {
            stack.push(c);
            levels.push(level + 1);
          }
        } else if (mark !== undefined && typeof c === 'string' && c.startsWith(mark)) v[i] = unmarked(c, mark);
      }
    } else {
      const o = v as Record<string, unknown>;
      // for-in, not Object.keys: no key array per object (JSON.parse objects inherit no enumerable keys).
      for (const k in o) {
        const c = o[k];
        if (typeof c === 'object') {
          if (c !== null) {
            stack.push(c);
            levels.push(level + 1);
          }
        } else if (mark !== undefined && typeof c === 'string' && c.startsWith(mark)) o[k] = unmarked(c, mark);
      }
    }
  }
  return true;
}

/**
 * JSON.parse that also takes Python's `NaN`, `Infinity`, `-Infinity` (json.dumps writes them by
 * default), refuses nesting and arrays over the limits (JsonLimitError with the position), and
 * never recurses on the input (V8's JSON.parse is iterative, and so are the walks here).
 *
 * A text too short to hold an array over the entry limit (an entry takes at least two
 * characters) is parsed first and its depth checked on the value: nothing it allocates can
 * exceed a few times its length, and that skips a character-by-character pass over every
 * record. Longer texts (whole-file documents) are scanned before JSON.parse allocates.
 */
export function parseJson(
  text: string,
  limits: Pick<ReadLimits, 'maxDepth' | 'maxArrayEntries'> = DEFAULT_LIMITS,
): unknown {
  if (text.length < 2 * limits.maxArrayEntries) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (first) {
      return parseMarked(text, limits, first);
    }
    if (!withinDepth(value, limits.maxDepth)) {
      scanJson(text, limits); // throws the limit error, positioned where the text crosses it
      throw new JsonLimitError(
        `nested more than ${limits.maxDepth} levels deep (the limit; real records nest < 20)`,
        0,
      );
    }
    return value;
  }
  const { nonFinite } = scanJson(text, limits);
  if (!nonFinite) return JSON.parse(text);
  try {
    return JSON.parse(text);
  } catch (first) {
    return parseMarked(text, limits, first);
  }
}

/**
 * A text JSON.parse refused (`first`): over a limit (thrown as such, as a scan before parsing
 * would), else read again with Python's non-finite numbers replaced by marker strings, which
 * are turned back into numbers on the parsed value; else `first` is thrown.
 */
function parseMarked(text: string, limits: Pick<ReadLimits, 'maxDepth' | 'maxArrayEntries'>, first: unknown): unknown {
  const { nonFinite } = scanJson(text, limits);
  if (!nonFinite) throw first;
  // A per-parse random marker: no string in the data can collide with it.
  const mark = `\u0000rollscope-${randomBytes(6).toString('hex')}:`;
  let replaced: string;
  try {
    replaced = markNonFinite(text, mark);
  } catch {
    throw first;
  }
  let value: unknown;
  try {
    value = JSON.parse(replaced);
  } catch {
    throw first; // its position is in the text as written, not in the marked copy
  }
  withinDepth(value, limits.maxDepth, mark); // the scan checked the depth; this restores the numbers
  return value;
}

/**
 * The character position of a JSON.parse SyntaxError. V8 names it ("... in JSON at position 12"),
 * except for "Unexpected token": then it quotes 10 characters either side of it (V8
 * src/json/json-parser.cc, kMinOriginalSourceLengthForContext), found back in the text here.
 */
export function syntaxErrorPosition(e: unknown, text: string): number | undefined {
  const message = (e as Error).message;
  const at = /at position (\d+)/.exec(message);
  if (at) return Number(at[1]);
  if (/Unexpected end of JSON input/.test(message)) return text.length;
  const m = /^Unexpected token '[\s\S]*?', (\.\.\.)?"([\s\S]*)"(\.\.\.)? is not valid JSON$/.exec(message);
  if (!m) return undefined;
  const [, before, snippet = '', after] = m;
  const context = 10;
  if (before && after) {
    const found = text.indexOf(snippet);
    return found >= 0 && found === text.lastIndexOf(snippet) ? found + context : undefined;
  }
  if (before) return text.length - snippet.length + context;
  if (after) return snippet.length - context;
  return undefined;
}
