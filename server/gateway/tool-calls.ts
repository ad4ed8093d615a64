// Tool calls in generated text, read as the engine's chat endpoint reads them when the gateway
// answered from a token-in call (docs/reference/gateway-engines.md):
// - vLLM's `hermes` parser, the one Qwen models are served with (vllm-project/vllm
//   vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py `extract_tool_calls`): every
//   `<tool_call>…</tool_call>` (or an unclosed one to the end) is JSON with `name` and `arguments`;
//   the arguments go out as `json.dumps(arguments, ensure_ascii=False)`; the content is the text
//   before the first `<tool_call>`, or null when empty. Text that does not parse leaves no tool
//   call and the whole text as content.
// - vLLM's forced tool calls (`tool_choice` "required" or a named tool): the output is constrained
//   to JSON by `structured_outputs.json` (vllm/tool_parsers/utils.py `get_json_schema_from_tools`),
//   a list of `{name, parameters}` for "required" (each call's arguments `json.dumps(parameters,
//   ensure_ascii=False)`), the named tool's arguments for a named one (the output text as it is),
//   with content "" (vllm/entrypoints/openai/chat_completion/serving.py).
// - SGLang's Qwen 2.5 detector (python/sglang/srt/function_call/qwen25_detector.py with
//   base_format_detector.py `parse_base_json`): the text before the first `<tool_call>\n`,
//   stripped, is the content; each `<tool_call>\n{json}\n</tool_call>` block whose name is one of
//   the request's tools is a call (arguments: `parameters`, else `arguments`); a block that is not
//   JSON is skipped.
import { randomUUID } from 'node:crypto';
import { isObject } from '../import/importer.ts';
import { parsePythonJson } from '../profiles/python-literal.ts';
import { ChatTemplate } from '../profiles/template.ts';

export interface ParsedToolCalls {
  content: string | null;
  calls: { name: string; arguments: string }[];
}

const START = '<tool_call>';
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

/** `tool_choice: "required"`: the output is a JSON list of `{name, parameters}`; a text that is not leaves no call. */
export function parseRequiredToolCalls(text: string): ParsedToolCalls {
  try {
    const parsed = parsePythonJson(text);
    if (!Array.isArray(parsed)) return { content: '', calls: [] };
    const calls = parsed.map((c) => {
      if (!(c instanceof Map) || typeof c.get('name') !== 'string') throw new Error('not a function definition');
      return { name: c.get('name') as string, arguments: pythonJsonDumps(c.get('parameters') ?? null) };
    });
    return { content: '', calls };
  } catch {
    return { content: '', calls: [] };
  }
}

/** A named `tool_choice`: the output is the named tool's arguments, as generated. */
export function namedToolCall(name: string, text: string): ParsedToolCalls {
  return { content: '', calls: [{ name, arguments: text }] };
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
      calls.push({ name, arguments: pythonJsonDumps(args) });
    }
  }
  const content = text.slice(0, at).trim();
  return { content: content === '' ? null : content, calls, found: true };
}

/** The JSON schema vLLM constrains a forced tool call with (vllm/tool_parsers/utils.py `get_json_schema_from_tools`). */
export function forcedToolSchema(
  toolChoice: 'required' | { name: string },
  tools: readonly unknown[],
): { schema: unknown } | { error: string } {
  const fns = tools.flatMap((t) => (isObject(t) && isObject(t.function) ? [t.function] : []));
  if (toolChoice !== 'required') {
    const fn = fns.find((f) => f.name === toolChoice.name);
    if (!fn) return { error: `the named tool ${toolChoice.name} is not among the tools` };
    if (fn.parameters === undefined || fn.parameters === null)
      return { error: `the named tool ${toolChoice.name} has no parameters schema` };
    return { schema: fn.parameters };
  }
  const defs: Record<string, unknown> = {};
  const anyOf = fns.map((f) => {
    let params: Record<string, unknown> = isObject(f.parameters)
      ? { ...f.parameters }
      : { type: 'object', properties: {} };
    if (isObject(params.$defs)) {
      Object.assign(defs, params.$defs);
      const { $defs: _, ...rest } = params;
      params = rest;
    }
    return {
      properties: { name: { type: 'string', enum: [f.name] }, parameters: params },
      required: ['name', 'parameters'],
    };
  });
  return {
    schema: {
      type: 'array',
      minItems: 1,
      items: { type: 'object', anyOf },
      ...(Object.keys(defs).length > 0 ? { $defs: defs } : {}),
    },
  };
}

/** An id in vLLM's form (`make_tool_call_id`: `chatcmpl-tool-` and random hex). */
export function toolCallId(): string {
  return `chatcmpl-tool-${randomUUID().replace(/-/g, '')}`;
}

/**
 * Streamed text held back from the first `<tool_call>` on (or a tail that could begin one): what
 * comes before streams as content, the rest is parsed when the answer is whole. A text without a
 * tool call streams whole, one delta behind at most the length of `<tool_call>`.
 */
export class ToolCallHold {
  private text = '';
  private sent = 0;
  private holding = false;

  /** Take a text delta; returns the content that may go out now. */
  push(delta: string): string {
    this.text += delta;
    if (this.holding) return '';
    const at = this.text.indexOf(START, Math.max(0, this.sent - START.length));
    if (at >= 0) {
      this.holding = true;
      const out = this.text.slice(this.sent, at);
      this.sent = at;
      return out;
    }
    // A tail that is the start of `<tool_call>` waits for the next delta.
    let keep = 0;
    for (let k = Math.min(START.length - 1, this.text.length - this.sent); k > 0; k--)
      if (START.startsWith(this.text.slice(this.text.length - k))) {
        keep = k;
        break;
      }
    const out = this.text.slice(this.sent, this.text.length - keep);
    this.sent = this.text.length - keep;
    return out;
  }

  /** The whole text. */
  get all(): string {
    return this.text;
  }

  /** What was held back (content when the whole text turns out to have no tool call). */
  get held(): string {
    return this.text.slice(this.sent);
  }

  /** The content already sent. */
  get streamed(): string {
    return this.text.slice(0, this.sent);
  }
}
