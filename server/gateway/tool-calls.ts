// Tool calls in generated text, read as the engine's chat endpoint reads them when the gateway
// answered from a token-in call (docs/reference/gateway-engines.md). A free ("auto") call is read
// by the model family's parser (`ModelFamily.toolCalls`, server/families/: vLLM's `hermes` parser
// and SGLang's `qwen25` detector for Qwen); forced tool calls are the engine's own reading:
// - vLLM's forced tool calls (`tool_choice` "required" or a named tool): the output is constrained
//   to JSON by `structured_outputs.json` (vllm/tool_parsers/utils.py `get_json_schema_from_tools`),
//   a list of `{name, parameters}` for "required" (each call's arguments `json.dumps(parameters,
//   ensure_ascii=False)`), the named tool's arguments for a named one (the output text as it is),
//   with content "" (vllm/entrypoints/openai/chat_completion/serving.py).
import { randomUUID } from 'node:crypto';
import { isObject } from '../import/importer.ts';
import { parsePythonJson } from '../profiles/python-literal.ts';
import { jsonDumpsLikePython } from '../profiles/template.ts';
import type { ParsedToolCalls } from '../families/family.ts';

export type { ParsedToolCalls };

/** `tool_choice: "required"`: the output is a JSON list of `{name, parameters}`; a text that is not leaves no call. */
export function parseRequiredToolCalls(text: string): ParsedToolCalls {
  try {
    const parsed = parsePythonJson(text);
    if (!Array.isArray(parsed)) return { content: '', calls: [] };
    const calls = parsed.map((c) => {
      if (!(c instanceof Map) || typeof c.get('name') !== 'string') throw new Error('not a function definition');
      return { name: c.get('name') as string, arguments: jsonDumpsLikePython(c.get('parameters') ?? null) };
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
 * Streamed text held back from the first call opening (the family's, `ToolCallParser.open`) on (or a tail that could begin one): what
 * comes before streams as content, the rest is parsed when the answer is whole. A text without a
 * tool call streams whole, one delta behind at most the length of the opening.
 */
export class ToolCallHold {
  /** `open`: the text that opens a call (the model family's, `ToolCallParser.open`). */
  constructor(private readonly open: string) {}

  private text = '';
  private sent = 0;
  private holding = false;

  /** Take a text delta; returns the content that may go out now. */
  push(delta: string): string {
    this.text += delta;
    if (this.holding) return '';
    const at = this.text.indexOf(this.open, Math.max(0, this.sent - this.open.length));
    if (at >= 0) {
      this.holding = true;
      const out = this.text.slice(this.sent, at);
      this.sent = at;
      return out;
    }
    // A tail that is the start of the opening waits for the next delta.
    let keep = 0;
    for (let k = Math.min(this.open.length - 1, this.text.length - this.sent); k > 0; k--)
      if (this.open.startsWith(this.text.slice(this.text.length - k))) {
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
