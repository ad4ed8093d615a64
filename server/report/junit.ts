// `check --junit FILE` (docs/junit.md): a check report as JUnit XML, the test-report format GitLab,
// Jenkins and GitHub's test reporters read. One <testsuite> per input file, one <testcase> per
// trajectory (findings of severity error as <failure>, warnings and limitations in <system-out>),
// one <testcase> with an <error> per record that could not be read. Pure: CheckReport → XML text,
// valid against Jenkins' junit-10.xsd (test/support/junit-10.xsd).
import type { CheckReport, ReportEntry, ReportError } from './check-report.ts';

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
  /** The <testsuites> name. */
  name?: string;
}

/** A run of consecutive cases of one file: one <testsuite> (a file read in one go is one). */
interface Segment {
  file: string;
  tests: number;
  failures: number;
  errors: ReportError[];
  /** Seconds from the previous file's end to this one's, when measured. */
  seconds?: number;
}

const hasError = (e: Pick<ReportEntry, 'findings'>) =>
  (e.findings as JunitFinding[]).some((f) => f.severity === 'error');

/**
 * The suites of a report and their counts, tallied as the run's entries and errors come (in read
 * order): what a <testsuite> tag states before its cases are written. One small record per file.
 */
export class JunitLayout {
  readonly segments: Segment[] = [];
  private readonly lastOf = new Map<string, Segment>();

  private segmentFor(file: string): Segment {
    const last = this.segments.at(-1);
    if (last?.file === file) return last;
    const s: Segment = { file, tests: 0, failures: 0, errors: [] };
    this.segments.push(s);
    this.lastOf.set(file, s);
    return s;
  }

  /** A trajectory's entry (its own findings suffice: a group's findings are warnings). */
  addEntry(e: Pick<ReportEntry, 'source' | 'findings'>): void {
    const s = this.segmentFor(e.source.file);
    s.tests++;
    if (hasError(e)) s.failures++;
  }

  /** An unreadable record or file: a case of its file's suite. */
  addError(e: ReportError): void {
    const s =
      this.segments.at(-1)?.file === e.file
        ? this.segments.at(-1)!
        : (this.lastOf.get(e.file) ?? this.segmentFor(e.file));
    s.tests++;
    s.errors.push(e);
  }

  /** The file is read: the time since the previous file was. */
  fileDone(file: string, seconds: number): void {
    const s = this.lastOf.get(file);
    if (s) s.seconds = (s.seconds ?? 0) + seconds;
  }
}

function entryCase(t: ReportEntry): string {
  const findings = t.findings as JunitFinding[];
  const body: string[] = [];
  for (const f of findings.filter((x) => x.severity === 'error'))
    body.push(
      `<failure${attrs({ type: label(f), message: firstLine(f.message) })}>${xmlText(`${t.source.file}:${t.source.line}${where(f) ? ` ${where(f)}` : ''}\n${f.message}`)}</failure>`,
    );
  const facts = [
    t.model ? `model ${t.model}` : '',
    t.step !== null ? `step ${t.step}` : '',
    t.group !== null ? `group ${t.group}` : '',
    t.reward !== null ? `reward ${t.reward}` : '',
    t.status !== null ? `status ${t.status}` : '',
  ].filter(Boolean);
  const out = [
    `${t.source.file}:${t.source.line} ${t.format}, profile ${t.profile}${facts.length ? `, ${facts.join(', ')}` : ''}`,
    ...findings
      .filter((x) => x.severity !== 'error')
      .map((f) => `warning ${label(f)}${where(f) ? ` (${where(f)})` : ''}: ${f.message}`),
    ...t.limitations.map((l) => `note: ${l}`),
  ];
  body.push(`<system-out>${xmlText(out.join('\n'))}</system-out>`);
  return `    <testcase${attrs({ name: t.id, classname: junitClassName(t.format, t.source.file) })}>\n      ${body.join('\n      ')}\n    </testcase>\n`;
}

function errorCase(e: ReportError): string {
  const name = e.line > 0 ? `${e.file}:${e.line}` : e.file;
  const text = `${name}${e.field ? ` ${e.field}` : ''}: ${e.message}`;
  return `    <testcase${attrs({ name, classname: junitClassName('unreadable', e.file) })}>\n      <error${attrs({ type: e.line > 0 ? 'unreadable_record' : 'unreadable_file', message: firstLine(e.message) })}>${xmlText(text)}</error>\n    </testcase>\n`;
}

const seconds = (s: number | undefined) => (s === undefined ? undefined : s.toFixed(3));

/**
 * Writes the document of a `layout` as its entries come again, in the order the layout saw them
 * (`check` reads them back from its spool): suites open and close as the entries cross files, a
 * suite's unreadable records after its trajectories.
 */
export class JunitStream {
  private segment = 0;
  private written = 0;
  private open = false;

  constructor(
    private readonly layout: JunitLayout,
    private readonly write: (text: string) => void,
    opts: JunitOptions = {},
  ) {
    const segs = layout.segments;
    const sum = (f: (s: Segment) => number) => segs.reduce((n, s) => n + f(s), 0);
    write(
      `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites${attrs({ name: opts.name ?? 'rollscope check', tests: sum((s) => s.tests), failures: sum((s) => s.failures), errors: sum((s) => s.errors.length), time: seconds(opts.seconds) })}>\n`,
    );
  }

  private close(): void {
    const s = this.layout.segments[this.segment]!;
    if (!this.open) this.openSuite(s);
    for (const e of s.errors) this.write(errorCase(e));
    this.write('  </testsuite>\n');
    this.open = false;
    this.segment++;
    this.written = 0;
  }

  private openSuite(s: Segment): void {
    this.write(
      `  <testsuite${attrs({ name: s.file, tests: s.tests, failures: s.failures, errors: s.errors.length, skipped: 0, time: seconds(s.seconds) })}>\n`,
    );
    this.open = true;
  }

  /** The next trajectory's entry (with its group's findings). */
  entry(t: ReportEntry): void {
    for (;;) {
      const s = this.layout.segments[this.segment];
      if (!s) throw new Error(`junit: more entries than the layout counted (${t.id})`);
      if (this.written < s.tests - s.errors.length) break;
      this.close();
    }
    const s = this.layout.segments[this.segment]!;
    if (s.file !== t.source.file)
      throw new Error(`junit: ${t.id} of ${t.source.file} comes where ${s.file}'s cases were counted`);
    if (!this.open) this.openSuite(s);
    this.write(entryCase(t));
    this.written++;
  }

  end(): void {
    while (this.segment < this.layout.segments.length) this.close();
    this.write('</testsuites>\n');
  }
}

/** A whole report as JUnit XML (one suite per file; its unreadable records after its trajectories). */
export function junitXml(report: CheckReport, opts: JunitOptions = {}): string {
  const layout = new JunitLayout();
  for (const t of report.trajectories) layout.addEntry(t);
  for (const e of report.errors) layout.addError(e);
  const parts: string[] = [];
  const stream = new JunitStream(layout, (t) => parts.push(t), opts);
  for (const t of report.trajectories) stream.entry(t);
  stream.end();
  return parts.join('');
}
