// GLM-4.5/4.6(V)'s tool calls as vLLM's `glm45` parser extracts them (vllm-project/vllm
// vllm/entrypoints/openai/tool_parsers/glm4_moe_tool_parser.py `extract_tool_calls`):
// `<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>…</tool_call>`; each value is
// `json.loads`'d when it parses (without the request's tool schemas no value is known to be a
// string), else `ast.literal_eval`'d, else kept; the arguments go out as `json.dumps(dict)` (ASCII,
// `", "` and `": "`); the content is the text before the first `<tool_call>`. A call that does not
// match leaves no tool call and the whole text as content.
import { parsePythonJson } from '../../profiles/python-literal.ts';
import { jsonDumpsLikePython } from '../../profiles/template.ts';
import type { ParsedToolCalls, ToolCallParser } from '../family.ts';

const OPEN = '<tool_call>';
const CLOSE = '</tool_call>';
const CALL = /<tool_call>.*?<\/tool_call>/gs;
const DETAIL = /<tool_call>([^\n]*)\n(.*)<\/tool_call>/s;
const ARG = /<arg_key>(.*?)<\/arg_key>\s*<arg_value>(.*?)<\/arg_value>/gs;

/** Python's `json.dumps(x)`: ensure_ascii off, then non-ASCII escaped as Python does. */
const jsonDumps = (value: unknown): string =>
  jsonDumpsLikePython(value).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/**
 * `json.loads`, else the Python literals `ast.literal_eval` reads that JSON does not (`True`, `False`,
 * `None`), else the text. Other Python-only literals (single-quoted strings, tuples) stay text here.
 */
function deserialize(value: string): unknown {
  try {
    return parsePythonJson(value);
  } catch {
    if (value === 'True') return true;
    if (value === 'False') return false;
    if (value === 'None') return null;
    return value;
  }
}

export function parseGlmToolCalls(text: string): ParsedToolCalls {
  const matches = text.match(CALL) ?? [];
  const calls: ParsedToolCalls['calls'] = [];
  for (const m of matches) {
    const d = DETAIL.exec(m);
    if (!d) return { content: text, calls: [] };
    const args = new Map<string, unknown>();
    for (const [, k, v] of d[2]!.matchAll(ARG)) args.set(k!.trim(), deserialize(v!.trim()));
    calls.push({ name: d[1]!, arguments: jsonDumps(args) });
  }
  if (calls.length === 0) return { content: text, calls: [] };
  return { content: text.slice(0, text.indexOf(OPEN)), calls };
}

export const glm45ToolCalls: ToolCallParser = { name: 'glm45', open: OPEN, close: CLOSE, parse: parseGlmToolCalls };
