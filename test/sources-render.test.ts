// `rollscope render --as transformers|vllm`: transformers renders the messages as given (string
// tool-call arguments verbatim, a call without its "function" object rendered); vllm normalizes
// them first as vLLM's chat endpoint does (arguments json.loads-ed, so tojson re-serializes them; a
// call without "function" refused). vLLM logs are checked with vLLM's semantics.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadFile } from '../server/import/index.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { normalizeMessagesLikeVllm, renderText } from '../server/analysis/render.ts';
import type { Message } from '../server/model/trajectory.ts';
import { FIXTURES } from './fixtures/generate-vllm.ts';

const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const run = promisify(execFile);

async function render(args: string[], doc: unknown): Promise<{ status: number; stdout: string; stderr: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-render-'));
  const file = path.join(dir, 'conversation.json');
  fs.writeFileSync(file, JSON.stringify(doc));
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      [path.join(REPO, 'bin/rollscope.js'), 'render', ...args, file],
      {
        env: { ...process.env, NO_COLOR: '1' },
      },
    );
    return { status: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { status: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const user: Message = { role: 'user', content: 'What is 2+2?' };
const stringArgs = {
  messages: [
    user,
    {
      role: 'assistant',
      content: '',
      tool_calls: [{ type: 'function', function: { name: 'calc', arguments: '{"expr":"2+2"}' } }],
    },
  ],
};
const unwrapped = {
  messages: [user, { role: 'assistant', content: '', tool_calls: [{ name: 'calc', arguments: { expr: '2+2' } }] }],
};

describe('render --as', () => {
  it('transformers (the default) prints string arguments verbatim; vllm decodes and re-serializes them', async () => {
    const [dflt, asTransformers, asVllm] = await Promise.all([
      render(['--model', 'qwen3-vl', '--json'], stringArgs),
      render(['--model', 'qwen3-vl', '--as', 'transformers', '--json'], stringArgs),
      render(['--model', 'qwen3-vl', '--as', 'vllm', '--json'], stringArgs),
    ]);
    for (const r of [dflt, asTransformers, asVllm]) expect(r.status, r.stderr).toBe(0);
    const text = (r: { stdout: string }) => (JSON.parse(r.stdout) as { text: string }).text;
    expect(text(dflt)).toBe(text(asTransformers));
    expect(text(dflt)).toContain('"arguments": {"expr":"2+2"}}');
    expect(text(asVllm)).toContain('"arguments": {"expr": "2+2"}}');
  });

  it('a tool call without its "function" object: transformers renders it, vllm refuses it as vLLM does', async () => {
    const [t, v] = await Promise.all([
      render(['--model', 'qwen3-vl', '--json'], unwrapped),
      render(['--model', 'qwen3-vl', '--as', 'vllm', '--json'], unwrapped),
    ]);
    expect(t.status, t.stderr).toBe(0);
    expect((JSON.parse(t.stdout) as { text: string }).text).toContain(
      '<tool_call>\n{"name": "calc", "arguments": {"expr": "2+2"}}',
    );
    expect(v.status).toBe(2);
    expect(v.stderr).toMatch(/"function" object \(vLLM rejects the request\)/);
  });

  it('an unknown --as is a usage error', async () => {
    const r = await render(['--model', 'qwen3-vl', '--as', 'tgi'], stringArgs);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--as takes transformers, vllm or sglang/);
  });

  it("the analysis render follows the same semantics (renderText's `as`)", () => {
    const profile = loadProfile('qwen3-vl');
    const messages = stringArgs.messages as Message[];
    expect(renderText(profile, messages)).toContain('{"expr":"2+2"}');
    expect(renderText(profile, messages, { as: 'vllm' })).toContain('{"expr": "2+2"}');
    // Empty tool_calls dropped, empty arguments become {}, string content a one-part list, the input left alone.
    const input: Message[] = [
      { role: 'assistant', content: 'x', tool_calls: [] },
      { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'f', arguments: '' } }] },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ type: 'function', function: { name: 'g', arguments: '{}' } }],
      },
    ];
    const before = structuredClone(input);
    const normalized = normalizeMessagesLikeVllm(input);
    expect(normalized[0]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'x' }] });
    expect(normalized[1]!.content).toEqual([{ type: 'text', text: '' }]);
    expect(normalized[1]!.tool_calls).toEqual([{ type: 'function', function: { name: 'f', arguments: {} } }]);
    expect(normalized[2]!.content).toEqual([]);
    expect(input).toEqual(before);
    // vLLM renders the empty string (a one-part list, truthy) with a "\n" before the call, null without.
    const rendered = renderText(profile, [{ role: 'user', content: 'q' }, ...input.slice(1)], { as: 'vllm' });
    expect(rendered).toContain('<|im_start|>assistant\n\n<tool_call>\n{"name": "f"');
    expect(rendered).toContain('<|im_start|>assistant\n<tool_call>\n{"name": "g"');
  });
});

describe('vLLM logs are checked with vLLM semantics', () => {
  it('string arguments in the history, rendered by vLLM as decoded JSON: no re-render mismatch', async () => {
    const loaded = await loadFile(path.join(FIXTURES, 'vllm/tool-arguments.jsonl'));
    expect(loaded.errors).toEqual([]);
    const [t] = loaded.trajectories;
    expect(t!.turns).toHaveLength(2);
    const checked = await analyzeTrajectory(t!, {}, [path.join(FIXTURES, 'vllm')]);
    expect(checked.findings).toEqual([]);
  });
});
