import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { trajectoryJsonSchema } from '../server/model/write-json-schema.ts';
import { readLines } from '../server/import/read/lines.ts';
import { parseJson } from '../server/import/read/json.ts';
import { parseRecordLine } from '../server/import/read/record.ts';
import os from 'node:os';
import path from 'node:path';

describe('native format schema', () => {
  it('docs/trajectory.schema.json is what the zod model generates (run `npm run schema` after changing the model)', () => {
    expect(fs.readFileSync('docs/trajectory.schema.json', 'utf8')).toBe(trajectoryJsonSchema());
  });
});

describe('record reading', () => {
  it("accepts Python's NaN/Infinity outside strings and leaves them alone inside strings", () => {
    const v = parseJson('{"a": NaN, "b": [-Infinity, Infinity], "s": "NaN Infinity"}') as {
      a: number;
      b: number[];
      s: string;
    };
    expect(Number.isNaN(v.a)).toBe(true);
    expect(v.b).toEqual([-Infinity, Infinity]);
    expect(v.s).toBe('NaN Infinity');
  });

  it('numbers lines from 1, skips blank lines, reports over-long and unterminated last lines', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-lines-'));
    const f = path.join(dir, 'x.jsonl');
    fs.writeFileSync(f, `{"a":1}\n\n${`{"long":"${'x'.repeat(2000)}"}`}\r\n{"b":2}\n{"c":`);
    const lines = [];
    for await (const l of readLines(f, { maxLineBytes: 1000 })) lines.push(l);
    expect(lines.map((l) => [l.line, l.problem ?? 'ok'])).toEqual([
      [1, 'ok'],
      [3, 'too_long'],
      [4, 'ok'],
      [5, 'unterminated'],
    ]);
    expect(lines[2]!.offset).toBe(fs.readFileSync(f, 'utf8').indexOf('{"b":2}'));
    const last = parseRecordLine(f, lines[3]!);
    expect('message' in last && last.message).toMatch(/incomplete/);
  });
});
