// Tool-call ids as vLLM writes them; the parsing of tool calls is the model family's
// (`ModelFamily.toolCalls`, server/families/).
import { randomUUID } from 'node:crypto';

/** An id in vLLM's form (`make_tool_call_id`: `chatcmpl-tool-` and random hex). */
export function toolCallId(): string {
  return `chatcmpl-tool-${randomUUID().replace(/-/g, '')}`;
}
