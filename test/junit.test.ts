// check --junit: the XML validates against Jenkins' JUnit schema (test/support/junit-10.xsd, read
// by Debian's xmllint), and a real XML parser (Python's ElementTree) reads back every id and message.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CheckReport } from '../server/report/check-report.ts';
import { sideReport } from '../server/cli/diff-runs.ts';
import { junitClassName, junitXml, xmlText } from '../server/report/junit.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const XSD = path.join(ROOT, 'test/support/junit-10.xsd');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-junit-'));
/** Files written for xmllint and ElementTree, numbered in order. */
let written = 0;

function validate(xml: string): { status: number | null; stderr: string } {
  const file = path.join(tmp, `r${++written}.xml`);
  fs.writeFileSync(file, xml);
  const r = spawnSync('xmllint', ['--noout', '--schema', XSD, file], { encoding: 'utf8' });
  if (r.error) throw r.error;
  return { status: r.status, stderr: r.stderr };
}

/** The test cases as ElementTree reads them: suite name, case name, classname, failures (type, message), error, system-out. */
function parsed(xml: string) {
  const file = path.join(tmp, `p${++written}.xml`);
  fs.writeFileSync(file, xml);
  const py = `
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
out = {"attrs": root.attrib, "suites": []}
for s in root.findall("testsuite"):
    cases = []
    for c in s.findall("testcase"):
        cases.append({"name": c.get("name"), "classname": c.get("classname"),
            "failures": [{"type": f.get("type"), "message": f.get("message"), "text": f.text} for f in c.findall("failure")],
            "errors": [{"type": e.get("type"), "message": e.get("message"), "text": e.text} for e in c.findall("error")],
            "out": (c.find("system-out").text if c.find("system-out") is not None else None)})
    out["suites"].append({"attrs": s.attrib, "cases": cases})
print(json.dumps(out))
`;
  const r = spawnSync('python3', ['-c', py, file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as {
    attrs: Record<string, string>;
    suites: {
      attrs: Record<string, string>;
      cases: {
        name: string;
        classname: string;
        failures: { type: string; message: string; text: string }[];
        errors: { type: string; message: string; text: string }[];
        out: string | null;
      }[];
    }[];
  };
}

describe('check --junit', async () => {
  const runs = {
    vllm: await sideReport(path.join(ROOT, 'test/fixtures/vllm/chat-by-id.jsonl'), { workers: 0 }),
    malformed: await sideReport(path.join(ROOT, 'test/fixtures/vllm/malformed.jsonl'), { workers: 0 }),
    groups: await sideReport(path.join(ROOT, 'test/fixtures/groups/verl'), { workers: 0 }),
  };

  it.each(Object.keys(runs) as (keyof typeof runs)[])(
    '%s: validates against junit-10.xsd, one case per trajectory and unreadable record',
    (name) => {
      const report = runs[name];
      const xml = junitXml(report, { seconds: 1.5 });
      const v = validate(xml);
      expect(v.stderr).toContain('validates');
      expect(v.status).toBe(0);
      const doc = parsed(xml);
      const cases = doc.suites.flatMap((s) => s.cases);
      expect(cases).toHaveLength(report.trajectories.length + report.errors.length);
      expect(Number(doc.attrs.tests)).toBe(cases.length);
      expect(Number(doc.attrs.failures)).toBe(report.summary.withErrors);
      expect(Number(doc.attrs.errors)).toBe(report.errors.length);
      expect(doc.attrs.time).toBe('1.500');
      // One suite per file, its counts its own.
      expect(doc.suites.map((s) => s.attrs.name)).toEqual([
        ...new Set([...report.trajectories.map((t) => t.source.file), ...report.errors.map((e) => e.file)]),
      ]);
      for (const s of doc.suites) {
        expect(Number(s.attrs.tests)).toBe(s.cases.length);
        expect(Number(s.attrs.failures)).toBe(s.cases.filter((c) => c.failures.length > 0).length);
        expect(Number(s.attrs.errors)).toBe(s.cases.filter((c) => c.errors.length > 0).length);
      }
      for (const t of report.trajectories) {
        const c = cases.find((x) => x.name === t.id)!;
        expect(c.classname).toBe(junitClassName(t.format, t.source.file));
        const findings = t.findings as { kind: string; cause?: string; severity: string; message: string }[];
        const errors = findings.filter((f) => f.severity === 'error');
        expect(c.failures.map((f) => f.type)).toEqual(errors.map((f) => (f.cause ? `${f.kind}/${f.cause}` : f.kind)));
        for (const [i, f] of errors.entries()) expect(c.failures[i]!.text).toContain(f.message);
        // Warnings (a group's included) are read in the case's output, never failures.
        for (const f of findings.filter((x) => x.severity !== 'error')) expect(c.out).toContain(f.message);
      }
    },
  );

  it('the fixtures hold what the cases show: error findings, warnings only, unreadable records, group findings', () => {
    expect(runs.vllm.summary.withErrors).toBeGreaterThan(0);
    expect(runs.malformed.errors.length).toBeGreaterThan(0);
    const groupFindings = runs.groups.groups.flatMap((g) => g.findings);
    expect(groupFindings.length).toBeGreaterThan(0);
    const doc = parsed(junitXml(runs.groups));
    const message = (groupFindings[0] as { message: string }).message;
    const members = doc.suites.flatMap((s) => s.cases).filter((c) => c.out?.includes(message));
    expect(members.length).toBeGreaterThanOrEqual(2);
    const malformed = parsed(junitXml(runs.malformed));
    const bad = malformed.suites.flatMap((s) => s.cases).filter((c) => c.errors.length > 0);
    expect(bad.map((c) => c.name)).toEqual(runs.malformed.errors.map((e) => `${e.file}:${e.line}`));
    expect(bad.every((c) => c.errors[0]!.type === 'unreadable_record')).toBe(true);
  });

  it('escapes ids, files and messages that hold markup, quotes, newlines and characters XML 1.0 forbids', () => {
    const hostile = 'a<b>&"c\'d]]>\u0000\u0001\u001b\u007f\uFFFE\uFFFF\uD800x\tq\r\nz 😀';
    const report: CheckReport = {
      version: 1,
      trajectories: [
        {
          id: hostile,
          source: { file: `run/${hostile}.jsonl`, line: 3 },
          format: 'native',
          model: null,
          profile: 'qwen2.5-vl',
          findings: [
            {
              kind: 'prefix_break',
              cause: 'duplicated_eos',
              severity: 'error',
              turn: 1,
              index: 4,
              stream: 'prompt',
              message: hostile,
            },
            { kind: 'group', field: 'reward', severity: 'warning', turn: -1, index: -1, message: `w ${hostile}` },
          ],
          limitations: [hostile],
          group: hostile,
          step: null,
          sample: null,
          reward: null,
          turns: 2,
          images: 0,
          response_tokens: null,
          status: hostile,
          prompt_hash: null,
        },
      ],
      groups: [],
      models: [],
      errors: [{ file: `run/${hostile}.jsonl`, line: 9, field: 'x<y', message: hostile }],
      summary: {
        trajectories: 1,
        clean: 0,
        withErrors: 1,
        withWarningsOnly: 0,
        notCheckable: 0,
        unreadableRecords: 1,
        findingsByKind: {},
      },
    };
    const xml = junitXml(report);
    const v = validate(xml);
    expect(v.status, v.stderr).toBe(0);
    const visible = 'a<b>&"c\'d]]>\\u0000\\u0001\\u001B\u007f\\uFFFE\\uFFFF\\uD800x\tq\r\nz 😀';
    expect(xmlText(hostile).includes('\u0000')).toBe(false);
    const doc = parsed(xml);
    const [c, e] = doc.suites[0]!.cases;
    // Attribute values keep their tab, CR and LF (written as character references).
    expect(c!.name).toBe(visible);
    expect(doc.suites[0]!.attrs.name).toBe(`run/${visible}.jsonl`);
    expect(c!.failures[0]!.message).toBe(visible.split('\n')[0]);
    // Character data: XML parsers read a CR LF as LF.
    expect(c!.failures[0]!.text).toContain(visible.replace('\r\n', '\n'));
    expect(c!.out).toContain(`w ${visible.replace('\r\n', '\n')}`);
    expect(c!.out).toContain(`note: ${visible.replace('\r\n', '\n')}`);
    expect(e!.name).toBe(`run/${visible}.jsonl:9`);
    expect(e!.errors[0]!.text).toContain('x<y');
  });

  it('an empty report is a valid document with no suites', () => {
    const empty: CheckReport = { ...runs.vllm, trajectories: [], errors: [], groups: [] };
    expect(validate(junitXml(empty)).status).toBe(0);
  });

  it('class names keep the path readable when readers split them at the last dot', () => {
    expect(junitClassName('vllm', 'runs/step_3/calls.jsonl')).toBe('vllm.runs.step_3.calls_jsonl');
    expect(junitClassName('slime', './a\\b.c/d.jsonl')).toBe('slime.a.b_c.d_jsonl');
  });
});

describe('check --junit FILE', () => {
  const RUN = [
    'test/fixtures/vllm/malformed.jsonl',
    'test/fixtures/vllm/chat-by-id.jsonl',
    'test/fixtures/groups/verl',
  ];
  const check = (...args: string[]) =>
    spawnSync(process.execPath, ['bin/rollscope.js', 'check', ...RUN, '--workers', '0', ...args], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, NO_COLOR: '1' },
    });
  const untimed = (xml: string) => xml.replace(/ time="[0-9.]+"/g, '');

  it('writes the document junitXml gives for the report check --json writes, beside the JSON or the text', () => {
    const plain = check('--json');
    const xmlFile = path.join(tmp, 'check.xml');
    const both = check('--json', '--junit', xmlFile);
    expect(both.status).toBe(plain.status);
    expect(both.stdout).toBe(plain.stdout);
    const xml = fs.readFileSync(xmlFile, 'utf8');
    expect(validate(xml).status).toBe(0);
    const report = CheckReport.parse(JSON.parse(plain.stdout));
    expect(untimed(xml)).toBe(untimed(junitXml(report)));
    // Each input file's suite has the time it took.
    expect(xml).toMatch(/<testsuite name="test\/fixtures\/vllm\/chat-by-id.jsonl"[^>]* time="\d+\.\d{3}"/);

    const textFile = path.join(tmp, 'text.xml');
    const text = check('--junit', textFile);
    expect(text.status).toBe(plain.status);
    expect(text.stdout).toContain('trajectories:');
    expect(untimed(fs.readFileSync(textFile, 'utf8'))).toBe(untimed(xml));
  });

  it('with --shard, the shards together hold every case once', () => {
    const names: string[] = [];
    for (const k of [0, 1]) {
      const file = path.join(tmp, `shard-${k}.xml`);
      const r = check('--shard', `${k}/2`, '--junit', file);
      expect(r.status).not.toBe(2);
      const xml = fs.readFileSync(file, 'utf8');
      expect(validate(xml).status).toBe(0);
      names.push(...parsed(xml).suites.flatMap((s) => s.cases.map((c) => `${c.classname} ${c.name}`)));
    }
    const whole = parsed(fs.readFileSync(path.join(tmp, 'check.xml'), 'utf8'));
    expect(names.sort()).toEqual(whole.suites.flatMap((s) => s.cases.map((c) => `${c.classname} ${c.name}`)).sort());
  });

  it('refuses --junit and --out on the same file', () => {
    const file = path.join(tmp, 'same.out');
    const r = check('--json', '--out', file, '--junit', file);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--junit and --out name the same file');
  });
});
