// Python literals as `json.loads` reads them and `repr` prints them. JSON `2.0` is a float in
// Python and an int-looking number in JavaScript, `{"2": 1, "1": 2}` keeps its key order in a dict,
// and integers have no size limit; the chat-template renderer and the `render` command both need
// those values as Python has them, to print them as Python would.

/**
 * A Python float. JSON `2.0` is a float in Python and prints `2.0`; in JavaScript it is the number
 * 2, indistinguishable from the int 2, so `parsePythonJson` wraps every float in this class.
 */
export class PyFloat {
  constructor(readonly value: number) {}
  valueOf(): number {
    return this.value;
  }
  toString(): string {
    return pythonFloatRepr(this.value);
  }
}

/**
 * Python `repr(float)`: the shortest round-trip digits (the same digits JavaScript prints), in
 * fixed notation when the decimal exponent is in [-4, 16), else `d.ddde±XX` (CPython pystrtod.c,
 * format_float_short with mode 'r': exponent form when decpt <= -4 or decpt > 16).
 */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const text = String(Math.abs(x));
  const [mantissa = '', exponent] = text.split('e');
  const dot = mantissa.indexOf('.');
  const intPart = dot < 0 ? mantissa : mantissa.slice(0, dot);
  let digits = intPart + (dot < 0 ? '' : mantissa.slice(dot + 1));
  let decpt = intPart.length + (exponent === undefined ? 0 : Number(exponent));
  const leadingZeros = /^0*/.exec(digits)?.[0].length ?? 0;
  digits = digits.slice(leadingZeros).replace(/0+$/, '');
  decpt -= leadingZeros;
  if (decpt <= -4 || decpt > 16) {
    const e = decpt - 1;
    const frac = digits.length > 1 ? `.${digits.slice(1)}` : '';
    return `${sign}${digits[0]}${frac}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  if (decpt <= 0) return `${sign}0.${'0'.repeat(-decpt)}${digits}`;
  if (decpt >= digits.length) return `${sign}${digits}${'0'.repeat(decpt - digits.length)}.0`;
  return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
}

/**
 * Python's `f"{x:.{digits}f}"`: the exact binary value of `x` rounded half to even at `digits`
 * decimals (CPython formats from the exact value; JavaScript's `toFixed` rounds an exact tie up:
 * `(0.25).toFixed(1)` is `0.3`, Python's `f"{0.25:.1f}"` is `0.2`).
 */
export function pythonFormatFixed(x: number, digits: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? 'nan' : x > 0 ? 'inf' : '-inf';
  const negative = x < 0 || Object.is(x, -0);
  // x = mantissa · 2^exponent exactly, then x · 10^digits as a fraction num / den.
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  const mantissa = biased === 0 ? fraction : fraction | (1n << 52n);
  const exponent = (biased === 0 ? 1 : biased) - 1075;
  let num = mantissa * 10n ** BigInt(digits);
  let den = 1n;
  if (exponent >= 0) num <<= BigInt(exponent);
  else den <<= BigInt(-exponent);
  let q = num / den;
  const r2 = (num % den) * 2n;
  if (r2 > den || (r2 === den && q % 2n === 1n)) q += 1n;
  const text = q.toString().padStart(digits + 1, '0');
  const body = digits > 0 ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text;
  return negative ? `-${body}` : body;
}

/**
 * Parses JSON text as Python's `json.loads` does, into values that re-print as Python would:
 * objects become `Map`s (insertion order, so `{"2": 1, "1": 2}` keeps its order; a repeated key
 * keeps its first position and last value, like a dict), numbers with a fraction or exponent
 * become `PyFloat`, integers are `number` when exact in a double and `bigint` beyond, and
 * `NaN`/`Infinity`/`-Infinity` are accepted. Invalid input throws where Python raises
 * (including CPython 3.11's 4300-digit limit on integer literals).
 */
export function parsePythonJson(text: string): unknown {
  return new PythonJsonParser(text).parseDocument();
}

type PyJson = null | boolean | number | bigint | string | PyFloat | PyJson[] | Map<string, PyJson>;

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
const MAX_INT_DIGITS = 4300; // sys.get_int_max_str_digits() default since CPython 3.11

class PythonJsonParser {
  private i = 0;
  constructor(private readonly s: string) {}

  parseDocument(): PyJson {
    if (this.s.startsWith('\ufeff')) this.fail('Unexpected UTF-8 BOM (decode using utf-8-sig)');
    this.ws();
    const value = this.value();
    this.ws();
    if (this.i < this.s.length) this.fail('Extra data');
    return value;
  }

  private fail(message: string): never {
    throw new SyntaxError(`${message}: char ${this.i}`);
  }

  private ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.i++;
    }
  }

  private literal(word: string, value: PyJson): PyJson {
    if (!this.s.startsWith(word, this.i)) this.fail('Expecting value');
    this.i += word.length;
    return value;
  }

  private value(): PyJson {
    const c = this.s[this.i];
    switch (c) {
      case '{':
        return this.object();
      case '[':
        return this.array();
      case '"':
        return this.string();
      case 'n':
        return this.literal('null', null);
      case 't':
        return this.literal('true', true);
      case 'f':
        return this.literal('false', false);
      case 'N':
        return this.literal('NaN', new PyFloat(NaN));
      case 'I':
        return this.literal('Infinity', new PyFloat(Infinity));
      default:
        if (c === '-' && this.s.startsWith('-Infinity', this.i))
          return this.literal('-Infinity', new PyFloat(-Infinity));
        return this.number();
    }
  }

  private number(): PyJson {
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.s);
    if (m === null) this.fail('Expecting value');
    const text = m[0];
    this.i += text.length;
    if (m[1] !== undefined || m[2] !== undefined) return new PyFloat(Number(text));
    if (text.replace('-', '').length > MAX_INT_DIGITS)
      this.fail(`Exceeds the limit (${MAX_INT_DIGITS} digits) for integer string conversion`);
    const n = Number(text);
    if (Number.isSafeInteger(n)) return n === 0 ? 0 : n; // Python has no int -0
    return BigInt(text);
  }

  private string(): string {
    const s = this.s;
    const start = this.i;
    let j = start + 1;
    let escaped = false;
    for (;;) {
      if (j >= s.length) {
        this.i = start;
        this.fail('Unterminated string starting at');
      }
      const c = s.charCodeAt(j);
      if (c === 0x22) break;
      if (c === 0x5c) {
        escaped = true;
        j += 2;
        continue;
      }
      if (c < 0x20) {
        this.i = j;
        this.fail('Invalid control character at');
      }
      j++;
    }
    this.i = j + 1;
    if (!escaped) return s.slice(start + 1, j);
    // Escapes (\uXXXX incl. lone surrogates, \/ …) decode the same in JSON.parse and Python.
    try {
      return JSON.parse(s.slice(start, j + 1)) as string;
    } catch {
      this.i = start;
      return this.fail('Invalid \\escape in string starting at');
    }
  }

  private array(): PyJson[] {
    const out: PyJson[] = [];
    this.i++;
    this.ws();
    if (this.s[this.i] === ']') {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      out.push(this.value());
      this.ws();
      const c = this.s[this.i++];
      if (c === ']') return out;
      if (c !== ',') {
        this.i--;
        this.fail("Expecting ',' delimiter");
      }
    }
  }

  private object(): Map<string, PyJson> {
    const out = new Map<string, PyJson>();
    this.i++;
    this.ws();
    if (this.s[this.i] === '}') {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail('Expecting property name enclosed in double quotes');
      const key = this.string();
      this.ws();
      if (this.s[this.i] !== ':') this.fail("Expecting ':' delimiter");
      this.i++;
      this.ws();
      out.set(key, this.value());
      this.ws();
      const c = this.s[this.i++];
      if (c === '}') return out;
      if (c !== ',') {
        this.i--;
        this.fail("Expecting ',' delimiter");
      }
    }
  }
}
