// rollscope's native JSONL: the writer (server/model/native-jsonl.ts) and the native importer read
// each other's non-finite logprobs; the demo run, written as native JSONL and as a vLLM call log,
// goes through the importer harness like every framework's fixtures.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { Trajectory } from '../server/model/trajectory.ts';
import { nativeJsonl, nativeJsonLine } from '../server/model/native-jsonl.ts';
import { renderSemanticsFor } from '../server/analysis/render.ts';
import { DEMO_FILE, DEMO_VLLM_FILE, writeDemoRun } from '../server/demo/write.ts';
import { checkImporterSnapshot } from './support/importer-harness.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-native-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('native JSONL writer', () => {
  const trajectory = Trajectory.parse({
    id: 'odd "values"',
    source: { file: 'elsewhere.jsonl', line: 3, format: 'vllm', lines: [3, 9] },
    turns: [{ promptIds: [1, 2], generatedIds: [3, 4, 5], generatedLogprobs: [Number.NaN, Infinity, -Infinity] }],
    sample: { tokens: [1, 2, 3, 4, 5], responseLength: 3, logprobs: [-0.5, Number.NaN, -Infinity] },
    // Strings that spell the words or the marker the writer would use.
    meta: { note: 'NaN Infinity', marker: '~non-finite-0~NaN' },
  });

  it("writes NaN and ±Infinity bare, as Python's json does, and nothing else changes", () => {
    const line = nativeJsonLine(trajectory);
    expect(line).toContain('"generatedLogprobs":[NaN,Infinity,-Infinity]');
    expect(line).toContain('"logprobs":[-0.5,NaN,-Infinity]');
    expect(line).toContain('"meta":{"note":"NaN Infinity","marker":"~non-finite-0~NaN"}');
    expect(line).not.toContain('\n');
    expect(nativeJsonl([trajectory, trajectory])).toBe(`${line}\n${line}\n`);
  });

  it('reads back as the same trajectory, with the source of where it was read and the request handling of its format', async () => {
    const file = path.join(tmp, 'odd.rollscope.jsonl');
    fs.writeFileSync(file, nativeJsonl([trajectory]));
    const loaded = await loadFile(file);
    expect(loaded.errors).toEqual([]);
    expect(loaded.format).toBe('native');
    // Read from a vLLM log: its prompts are re-rendered as vLLM renders them, in the native file too.
    expect(loaded.trajectories).toEqual([
      { ...trajectory, source: { file, line: 1, format: 'native' }, renderedWith: 'vllm' },
    ]);
    expect(renderSemanticsFor(loaded.trajectories[0]!)).toBe('vllm');
  });
});

describe('the demo run through the importer harness', () => {
  let dir = '';
  beforeAll(async () => {
    dir = path.join(tmp, 'demo');
    await writeDemoRun(dir);
  }, 60_000);

  it.each([
    [DEMO_FILE, 'native'],
    [DEMO_VLLM_FILE, 'vllm'],
  ] as const)('%s', async (name, format) => {
    await checkImporterSnapshot(path.join(dir, name), { format, name: `demo/${name}` });
  });
});
