// `check --junit FILE` (docs/junit.md): a check report as JUnit XML, the test-report format GitLab,
// Jenkins and GitHub's test reporters read. One <testsuite> per input file, one <testcase> per
// trajectory (findings of severity error as <failure>, warnings and limitations in <system-out>),
// one <testcase> with an <error> per record that could not be read. Pure: CheckReport → XML text,
// valid against Jenkins' junit-10.xsd (test/support/junit-10.xsd).
import type { CheckReport } from './check-report.ts';

interface JunitFinding {
  kind: string;
  cause?: string;
  severity: string;
  turn: number;
  index: number;
  stream?: string;
  image?: number;
  field?: string;
  message: string;
}

/** XML 1.0 allows tab, LF, CR, U+0020–U+D7FF, U+E000–U+FFFD and U+10000–U+10FFFF, nothing else. */
function allowedInXml(cp: number): boolean {
  return (
    cp === 0x9 ||
    cp === 0xa ||
    cp === 0xd ||
    (cp >= 0x20 && cp <= 0xd7ff) ||
    (cp >= 0xe000 && cp <= 0xfffd) ||
    (cp >= 0x10000 && cp <= 0x10ffff)
  );
}

/**
 * Text as XML character data: markup characters escaped, and each character XML 1.0 cannot hold
 * at all (control characters, a lone surrogate, U+FFFE/U+FFFF) written as the six characters
 * `\uXXXX`, so an id or message keeps every character visible and the document stays well formed.
 */
export function xmlText(s: string): string {
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (!allowedInXml(cp)) out += `\\u${cp.toString(16).toUpperCase().padStart(4, '0')}`;
    else if (ch === '&') out += '&amp;';
    else if (ch === '<') out += '&lt;';
    else if (ch === '>') out += '&gt;';
    else out += ch;
  }
  return out;
}

/** An attribute value: as text, plus quotes and the whitespace an attribute would otherwise normalise to spaces. */
export function xmlAttr(s: string): string {
  return xmlText(s).replace(/["\t\n\r]/g, (c) => ({ '"': '&quot;', '\t': '&#9;', '\n': '&#10;', '\r': '&#13;' })[c]!);
}

const attrs = (o: Record<string, string | number | undefined>) =>
  Object.entries(o)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => ` ${k}="${xmlAttr(String(v))}"`)
    .join('');

/**
 * The test class of a file's trajectories: `FORMAT.` and the file's path with `/` as `.` and each
 * `.` of a name as `_`, since readers split the class name at its last dot (Jenkins shows
 * `vllm.run.step_3` / `calls_jsonl`).
 */
export function junitClassName(format: string, file: string): string {
  const parts = file
    .split(/[\\/]+/)
    .filter((p) => p !== '' && p !== '.')
    .map((p) => p.replace(/\./g, '_'));
  return [format, ...parts].join('.');
}

function label(f: JunitFinding): string {
  return f.cause ? `${f.kind}/${f.cause}` : f.kind;
}

function where(f: JunitFinding): string {
  return [
    f.turn >= 0 ? `turn ${f.turn}` : '',
    f.index >= 0 ? `${f.stream ?? ''} token ${f.index}`.trim() : '',
    f.image !== undefined ? `image ${f.image}` : '',
    f.field ? `field ${f.field}` : '',
  ]
    .filter(Boolean)
    .join(', ');
}

const firstLine = (s: string) => s.split('\n', 1)[0]!;

export interface JunitOptions {
  /** The whole check's wall time in seconds, on <testsuites>. */
  seconds?: number;
  /** Seconds per input file (the time from its first record to the next file's), on its <testsuite>. */
  fileSeconds?: ReadonlyMap<string, number>;
  /** The <testsuites> name. */
  name?: string;
}

interface Suite {
  file: string;
  cases: string[];
  failures: number;
  errors: number;
}

const seconds = (s: number | undefined) => (s === undefined ? undefined : s.toFixed(3));

export function junitXml(report: CheckReport, opts: JunitOptions = {}): string {
  const suites = new Map<string, Suite>();
  const suite = (file: string) => {
    let s = suites.get(file);
    if (!s) {
      s = { file, cases: [], failures: 0, errors: 0 };
      suites.set(file, s);
    }
    return s;
  };
  // Suites in the order the run read its files: a file's first trajectory or error places it.
  const order: { file: string; line: number; write: () => void }[] = [];
  for (const t of report.trajectories) {
    order.push({
      file: t.source.file,
      line: t.source.line,
      write: () => {
        const s = suite(t.source.file);
        const findings = t.findings as JunitFinding[];
        const errors = findings.filter((f) => f.severity === 'error');
        const warnings = findings.filter((f) => f.severity !== 'error');
        const body: string[] = [];
        for (const f of errors)
          body.push(
            `<failure${attrs({ type: label(f), message: firstLine(f.message) })}>${xmlText(`${t.source.file}:${t.source.line}${where(f) ? ` ${where(f)}` : ''}\n${f.message}`)}</failure>`,
          );
        const out = [
          `${t.source.file}:${t.source.line} ${t.format}, profile ${t.profile}${t.model ? `, model ${t.model}` : ''}${t.step !== null ? `, step ${t.step}` : ''}${t.group !== null ? `, group ${t.group}` : ''}`,
          ...warnings.map((f) => `warning ${label(f)}${where(f) ? ` (${where(f)})` : ''}: ${f.message}`),
          ...t.limitations.map((l) => `note: ${l}`),
        ];
        body.push(`<system-out>${xmlText(out.join('\n'))}</system-out>`);
        if (errors.length > 0) s.failures++;
        s.cases.push(
          `    <testcase${attrs({ name: t.id, classname: junitClassName(t.format, t.source.file) })}>\n      ${body.join('\n      ')}\n    </testcase>`,
        );
      },
    });
  }
  for (const e of report.errors) {
    order.push({
      file: e.file,
      line: e.line,
      write: () => {
        const s = suite(e.file);
        s.errors++;
        const name = e.line > 0 ? `${e.file}:${e.line}` : e.file;
        const text = `${name}${e.field ? ` ${e.field}` : ''}: ${e.message}`;
        s.cases.push(
          `    <testcase${attrs({ name, classname: junitClassName('unreadable', e.file) })}>\n      <error${attrs({ type: e.line > 0 ? 'unreadable_record' : 'unreadable_file', message: firstLine(e.message) })}>${xmlText(text)}</error>\n    </testcase>`,
        );
      },
    });
  }
  // Files in first-seen order; within a file, by line (an unreadable record between its neighbours).
  const fileOrder = new Map<string, number>();
  for (const o of [...report.trajectories.map((t) => t.source.file), ...report.errors.map((e) => e.file)])
    if (!fileOrder.has(o)) fileOrder.set(o, fileOrder.size);
  order.sort((x, y) => fileOrder.get(x.file)! - fileOrder.get(y.file)! || x.line - y.line);
  for (const o of order) o.write();
  let tests = 0;
  let failures = 0;
  let errors = 0;
  const body: string[] = [];
  for (const s of suites.values()) {
    tests += s.cases.length;
    failures += s.failures;
    errors += s.errors;
    body.push(
      `  <testsuite${attrs({ name: s.file, tests: s.cases.length, failures: s.failures, errors: s.errors, skipped: 0, time: seconds(opts.fileSeconds?.get(s.file)) })}>\n${s.cases.join('\n')}\n  </testsuite>`,
    );
  }
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites${attrs({ name: opts.name ?? 'rollscope check', tests, failures, errors, time: seconds(opts.seconds) })}>\n${body.join('\n')}${body.length ? '\n' : ''}</testsuites>\n`;
}
