// Tool calls in generated text, as vLLM's `hermes` parser (the one Qwen models are served with)
// extracts them (docs/reference/engine-protocols.md): every `<tool_call>…</tool_call>` (or an
// unclosed one to the end) is JSON with `name` and `arguments`; the arguments go out as
// `json.dumps(arguments, ensure_ascii=False)`; the content is the text before the first
// `<tool_call>`, or null when empty. Text that does not parse leaves no tool call and the whole
// text as content (vllm-project/vllm vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py
// `extract_tool_calls`).
import { parsePythonJson } from '../../profiles/python-literal.ts';
import { ChatTemplate } from '../../profiles/template.ts';
import type { ParsedToolCalls, ToolCallParser } from '../family.ts';

const START = '<tool_call>';
const END = '</tool_call>';
const TOOL_CALL = /<tool_call>(.*?)<\/tool_call>|<tool_call>(.*)/gs;

// Python's json.dumps(x, ensure_ascii=False), from the template engine's `tojson` (the same
// separators and escaping transformers' templates use), fed with values parsed as json.loads would.
const DUMPS = new ChatTemplate('{{ messages[0] | tojson }}');
const pythonJsonDumps = (value: unknown): string => DUMPS.render({ messages: [value] });

export function parseHermesToolCalls(text: string): ParsedToolCalls {
  if (!text.includes(START)) return { content: text, calls: [] };
  try {
    const calls: ParsedToolCalls['calls'] = [];
    for (const m of text.matchAll(TOOL_CALL)) {
      const parsed = parsePythonJson((m[1] ?? m[2] ?? '').trim());
      if (!(parsed instanceof Map)) throw new Error('a tool call is not a JSON object');
      const name = parsed.get('name');
      if (typeof name !== 'string') throw new Error('a tool call has no name');
      if (!parsed.has('arguments')) throw new Error('a tool call has no arguments');
      calls.push({ name, arguments: pythonJsonDumps(parsed.get('arguments')) });
    }
    const content = text.slice(0, text.indexOf(START));
    return { content: content === '' ? null : content, calls };
  } catch {
    return { content: text, calls: [] };
  }
}

export const hermesToolCalls: ToolCallParser = { name: 'hermes', open: START, close: END, parse: parseHermesToolCalls };
