// The Messages view reads the chat through the model family (server/http/views-messages.ts): turns
// cut where the family's turns open, the role word from the family's header, the end of turn and
// what the template writes after it kept out of the text, a duplicated end of turn shown as a
// fragment with its markup. On Gemma 3's fixtures (test/fixtures/gemma3, the real tokenizer and
// template) and Qwen's demo run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeDemoRun } from '../server/demo/write.ts';
import { conversation } from '../server/http/views-messages.ts';
import { type CheckedTrajectory, checkPaths } from '../server/pipeline.ts';

async function checked(paths: string[]): Promise<Map<string, CheckedTrajectory>> {
  const out = new Map<string, CheckedTrajectory>();
  for await (const ev of checkPaths(paths, {}))
    if (ev.type === 'trajectory') out.set(ev.checked.trajectory.id, ev.checked);
  return out;
}

const shape = (c: CheckedTrajectory) =>
  conversation(c, {}).messages.map((m) => ({
    role: m.role,
    generated: m.generated,
    fragment: m.fragment,
    parts: m.parts.map((p) => (p.type === 'text' ? `text:${p.text.trim()}` : p.type)),
  }));

describe('Gemma 3', () => {
  let run: Map<string, CheckedTrajectory>;
  beforeAll(async () => {
    run = await checked([path.join('test', 'fixtures', 'gemma3', 'vllm.jsonl')]);
  }, 120_000);

  it('cuts at <start_of_turn>, names user and model turns, and leaves out the BOS and the end of turn', () => {
    const c = run.get('gemma3-clean-multi')!;
    expect(c, [...run.keys()].join(', ')).toBeDefined();
    expect(shape(c)).toEqual([
      {
        role: 'user',
        generated: false,
        fragment: false,
        parts: ['image', 'text:In the figure, the legs are 6 and 8. Find the hypotenuse.'],
      },
      { role: 'assistant', generated: true, fragment: false, parts: ['text:The hypotenuse is 10.'] },
      { role: 'user', generated: false, fragment: false, parts: ['text:Why?'] },
      {
        role: 'assistant',
        generated: true,
        fragment: false,
        parts: ['text:Because 6² + 8² = 100, and its square root is 10.'],
      },
    ]);
  });

  it('shows a re-rendered history’s second <end_of_turn> as a fragment with its markup', () => {
    const messages = shape(run.get('gemma3-duplicated-eot')!);
    const fragments = messages.filter((m) => m.fragment);
    expect(fragments).toEqual([{ role: 'assistant', generated: false, fragment: true, parts: ['text:<end_of_turn>'] }]);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'assistant', 'user', 'assistant']);
  });
});

describe('Qwen (the demo run)', () => {
  let dir: string;
  let run: Map<string, CheckedTrajectory>;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-messages-'));
    await writeDemoRun(dir);
    run = await checked([dir]);
  }, 120_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('reads the system, user, tool-call and tool-response turns of a clean conversation', () => {
    const c = run.get('geo-001-clean')!;
    const messages = shape(c);
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant']);
    expect(messages[2]!.parts).toContain('tool_call');
    expect(messages.every((m) => m.parts.every((p) => !p.includes('<|im_end|>') && !p.includes('<|im_start|>')))).toBe(
      true,
    );
  });
});
