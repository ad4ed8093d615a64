// Streaming a run: record-local files in batches of raw lines (import/stream.ts), the same
// trajectories and errors as loading them whole; the analysis pool's wire format; checkPaths
// on worker threads against the main thread across batch boundaries.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { loadFile } from '../server/import/index.ts';
import { importLines, readFileChunks } from '../server/import/stream.ts';
import { packForWire, unpackFromWire } from '../server/analysis-pool.ts';
import { checkPaths, type RunEvent } from '../server/pipeline.ts';
import { buildTrajectory, geometryScript } from './support/build.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-stream-'));

/** A native run of `n` records (three real trajectories, renamed), with broken lines at `bad`. */
async function writeRun(name: string, n: number, bad: ReadonlySet<number>): Promise<string> {
  const profile = loadProfile('qwen2.5-vl');
  const bases = [
    await buildTrajectory(profile, geometryScript('a'), 'canonical'),
    await buildTrajectory(profile, geometryScript('b'), 'legacy'),
    await buildTrajectory(profile, geometryScript('c'), 'canonical'),
  ];
  const lines: string[] = [];
  for (let i = 1; i <= n; i++) {
    if (bad.has(i))
      lines.push(i % 2 ? '{"id": "broken", "turns": [' : JSON.stringify({ id: `t${i}`, turns: 'not a list' }));
    else lines.push(JSON.stringify({ ...bases[i % 3]!, id: `t${i}` }));
  }
  const file = path.join(dir, name);
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

describe('readFileChunks / importLines', () => {
  it('streams a native file in batches and imports exactly what loadFile does', async () => {
    const file = await writeRun('run.rollscope.jsonl', 150, new Set([7, 70, 140]));
    const whole = await loadFile(file);
    const batches: number[] = [];
    const trajectories: string[] = [];
    const errors: string[] = [];
    for await (const chunk of readFileChunks(file, { batchLines: 64 })) {
      expect(chunk.kind).toBe('lines');
      if (chunk.kind !== 'lines') continue;
      batches.push(chunk.lines.length);
      const r = importLines(chunk.file, chunk.format, chunk.lines);
      trajectories.push(...r.trajectories.map((t) => `${t.id}@${t.source.line}`));
      errors.push(...r.errors.map((e) => `${e.line}:${e.field ?? ''}:${e.message}`));
    }
    expect(batches).toEqual([64, 64, 22]);
    expect(trajectories).toEqual(whole.trajectories.map((t) => `${t.id}@${t.source.line}`));
    expect(errors.sort()).toEqual(whole.errors.map((e) => `${e.line}:${e.field ?? ''}:${e.message}`).sort());
    expect(errors).toHaveLength(whole.errors.length);
    expect(whole.errors.map((e) => e.line)).toEqual(expect.arrayContaining([7, 70, 140]));
  });

  it('loads whole what it cannot stream: a grouping format, a whole-file JSON array', async () => {
    const vllm = path.join(dir, 'calls.jsonl');
    fs.writeFileSync(
      vllm,
      `${JSON.stringify({ request: { messages: [{ role: 'user', content: 'hi' }] }, response: { choices: [{ message: { role: 'assistant', content: 'yo' } }] } })}\n`,
    );
    const array = path.join(dir, 'array.rollscope.jsonl');
    fs.writeFileSync(
      array,
      `[${fs
        .readFileSync(await writeRun('two.rollscope.jsonl', 2, new Set()), 'utf8')
        .trim()
        .split('\n')
        .join(',')}]\n`,
    );
    for (const file of [vllm, array]) {
      const kinds: string[] = [];
      for await (const chunk of readFileChunks(file)) kinds.push(chunk.kind);
      expect(kinds, file).toEqual(['loaded']);
    }
  });
});

describe('the analysis pool wire format', () => {
  it('round-trips every number exactly through a transfer, and hands back plain arrays', () => {
    const long = (f: (i: number) => number) => Array.from({ length: 200 }, (_, i) => f(i));
    const value = {
      ids: long((i) => i * 7919),
      logprobs: long((i) => (i === 3 ? Number.NaN : i === 4 ? -0 : -i / 3)),
      huge: long((i) => 2 ** 53 - i),
      short: [1, 2, 3],
      mixed: [...long((i) => i), 'x'],
      nested: [{ tokens: long((i) => i) }, [long((i) => -i)]],
      text: 'kept',
    };
    const transfer: ArrayBuffer[] = [];
    const packed = packForWire(value, transfer);
    expect(transfer.length).toBe(5);
    const back = unpackFromWire(structuredClone(packed, { transfer })) as typeof value;
    expect(Array.isArray(back.ids)).toBe(true);
    expect(back).toEqual(value);
    expect(Object.is(back.logprobs[4], -0)).toBe(true);
    expect(JSON.stringify(back)).toBe(JSON.stringify(value));
    expect({ ...back }.huge).toEqual(value.huge);
    back.ids = [1];
    expect(back.ids).toEqual([1]);
  });
});

describe('checkPaths across batches', () => {
  it('gives the same events, in the same order, on worker threads as on the main thread', async () => {
    const file = await writeRun('big.rollscope.jsonl', 140, new Set([5, 66, 131]));
    const summarize = async (workers: number) => {
      const out: string[] = [];
      for await (const ev of checkPaths([file], { workers }) as AsyncGenerator<RunEvent>) {
        if (ev.type === 'trajectory')
          out.push(
            `${ev.checked.trajectory.id}:${ev.checked.findings.map((f) => `${f.kind}/${f.cause ?? ''}@${f.index}`).join(',')}:${ev.checked.alignment.tokens.length}`,
          );
        else if (ev.type === 'error') out.push(`error@${ev.error.line}`);
        else out.push(`file:${ev.count}`);
      }
      return out;
    };
    const serial = await summarize(0);
    expect(serial.filter((s) => s.startsWith('error@')).length).toBeGreaterThanOrEqual(3);
    expect(serial.at(-1)).toBe('file:137');
    expect(await summarize(2)).toEqual(serial);
  });
});

describe('the tokenizer segment cache under a small bound', () => {
  it('stays exact when it starts over while other encodes on the same handle are waiting', async () => {
    const tok = loadProfile('qwen2.5-vl').tokenizer;
    const limit = tok.segmentCacheLimit;
    tok.segmentCacheLimit = 400; // starts over every few texts
    try {
      let seed = 7;
      const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
      const words = [
        'the',
        ' angle',
        ' is',
        ' 35',
        '°',
        '\n',
        ' x',
        '²',
        ' area',
        ' tool',
        ' call',
        ' zoom',
        ' 3.14',
        ' answer',
      ];
      const special = [
        '<|im_start|>',
        '<|im_end|>',
        '<|vision_start|><|image_pad|><|vision_end|>',
        '<tool_call>',
        '</tool_call>',
      ];
      const texts = Array.from({ length: 60 }, () =>
        Array.from(
          { length: 6 },
          () =>
            `${special[Math.floor(rand() * special.length)]}${Array.from({ length: 1 + Math.floor(rand() * 30) }, () => words[Math.floor(rand() * words.length)]).join('')}`,
        ).join(''),
      );
      // A few shared segments (a system prompt, a group's question) among distinct ones, all at once.
      const shared = '<|im_start|>system\nYou are a geometry tutor.<|im_end|>\n<|im_start|>user\nFind x.<|im_end|>\n';
      const inputs = texts.map((t, i) => (i % 3 === 0 ? shared + t : t));
      await tok.encode(shared); // cached: the calls below find these segments, then the cache starts over under them
      const cached = await Promise.all(inputs.map((t) => tok.encode(t)));
      const direct = await Promise.all(inputs.map((t) => tok.encodeDirect(t)));
      expect(cached).toEqual(direct);
    } finally {
      tok.segmentCacheLimit = limit;
    }
  });
});
