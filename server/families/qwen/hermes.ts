// Tool calls in Qwen's generated text, read as the engines' chat endpoints read them
// (docs/reference/engine-protocols.md, docs/reference/gateway-engines.md):
// - vLLM's `hermes` parser, the one Qwen models are served with (vllm-project/vllm
//   vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py `extract_tool_calls`): every
//   `<tool_call>…</tool_call>` (or an unclosed one to the end) is JSON with `name` and `arguments`;
//   the arguments go out as `json.dumps(arguments, ensure_ascii=False)`; the content is the text
//   before the first `<tool_call>`, or null when empty. Text that does not parse leaves no tool
//   call and the whole text as content.
// - SGLang's Qwen 2.5 detector (python/sglang/srt/function_call/qwen25_detector.py with
//   base_format_detector.py `parse_base_json`): the text before the first `<tool_call>\n`,
//   stripped, is the content; each `<tool_call>\n{json}\n</tool_call>` block whose name is one of
//   the request's tools is a call (arguments: `parameters`, else `arguments`); a block that is not
//   JSON is skipped.
import { parsePythonJson } from '../../profiles/python-literal.ts';
import { jsonDumpsLikePython } from '../../profiles/template.ts';
import type { ParsedToolCalls, ToolCallParser } from '../family.ts';

const START = '<tool_call>';
const END = '</tool_call>';
const TOOL_CALL = /<tool_call>(.*?)<\/tool_call>|<tool_call>(.*)/gs;

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
      calls.push({ name, arguments: jsonDumpsLikePython(parsed.get('arguments')) });
    }
    const content = text.slice(0, text.indexOf(START));
    return { content: content === '' ? null : content, calls };
  } catch {
    return { content: text, calls: [] };
  }
}

const QWEN25_START = '<tool_call>\n';
const QWEN25_CALL = /<tool_call>\n(.*?)\n<\/tool_call>/gs;

export function parseQwen25ToolCalls(text: string, toolNames: readonly string[]): ParsedToolCalls & { found: boolean } {
  const at = text.indexOf(QWEN25_START);
  if (at < 0) return { content: text, calls: [], found: false };
  const calls: ParsedToolCalls['calls'] = [];
  for (const m of text.matchAll(QWEN25_CALL)) {
    let parsed: unknown;
    try {
      parsed = parsePythonJson(m[1]!.trim());
    } catch {
      continue;
    }
    for (const act of Array.isArray(parsed) ? parsed : [parsed]) {
      if (!(act instanceof Map)) continue;
      const name = act.get('name');
      if (typeof name !== 'string' || !name || !toolNames.includes(name)) continue;
      const args = act.get('parameters') || act.get('arguments') || new Map();
      calls.push({ name, arguments: jsonDumpsLikePython(args) });
    }
  }
  const content = text.slice(0, at).trim();
  return { content: content === '' ? null : content, calls, found: true };
}

export const hermesToolCalls: ToolCallParser = {
  name: 'hermes',
  open: START,
  close: END,
  parse: parseHermesToolCalls,
  sglang: parseQwen25ToolCalls,
};
