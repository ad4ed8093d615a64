"""What vLLM's and SGLang's chat endpoints hand a chat template, written in Python from their code
(docs/reference/chat-templates.md): the reference side of the differential tests of
server/analysis/chat-request.ts (test/template.test.ts, test/ask.test.ts). Written apart from the
TypeScript, from the upstream functions named below; only the template-facing behaviour is kept
(no media is fetched, no tokenizer is touched).

- vllm-project/vllm vllm/entrypoints/chat_utils.py: `_detect_content_format` (and the
  `_iter_nodes_assign_*` helpers), `_parse_chat_message_content_mm_part`,
  `_parse_chat_message_content_part`, `_parse_chat_message_content`, `_postprocess_messages`;
  vllm/entrypoints/openai/chat_completion/protocol.py `_normalize_messages_before` (the
  `reasoning_content` rename); `FunctionDefinition` / `ChatCompletionToolsParam` serialization.
- sgl-project/sglang python/sglang/srt/entrypoints/openai/serving_chat.py `_apply_jinja_template`,
  `normalize_tool_content`, `parse_tool_call_arguments`;
  python/sglang/srt/parser/jinja_template_utils.py `process_content_for_template_format`.

Requests the server would refuse raise `Refused`.
"""

import copy
import json

import jinja2
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Refused(ValueError):
    pass


# --- content format -------------------------------------------------------------------------


def _is_var_access(node, varname):
    return isinstance(node, jinja2.nodes.Name) and node.ctx == "load" and node.name == varname


def _is_attr_access(node, varname, key):
    if isinstance(node, jinja2.nodes.Getitem):
        return _is_var_access(node.node, varname) and isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == key
    if isinstance(node, jinja2.nodes.Getattr):
        return _is_var_access(node.node, varname) and node.attr == key
    return False


def _is_var_or_elems_access(node, varname, key=None):
    if isinstance(node, jinja2.nodes.Filter):
        return node.node is not None and _is_var_or_elems_access(node.node, varname, key)
    if isinstance(node, jinja2.nodes.Test):
        return _is_var_or_elems_access(node.node, varname, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _is_var_or_elems_access(node.node, varname, key)
    return _is_attr_access(node, varname, key) if key else _is_var_access(node, varname)


def content_format(template_source):
    """'openai' when a loop over `messages` (or a variable set from it) has an inner loop over the
    message's content, else 'string'."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    ast = env.parse(template_source)
    lists = ["messages"]
    queue = ["messages"]
    while queue:
        name = queue.pop(0)
        for assign in ast.find_all(jinja2.nodes.Assign):
            if _is_var_or_elems_access(assign.node, name) and isinstance(assign.target, jinja2.nodes.Name):
                if assign.target.name not in lists:
                    lists.append(assign.target.name)
                    queue.append(assign.target.name)
    message_vars = [
        loop.target.name
        for loop in ast.find_all(jinja2.nodes.For)
        if isinstance(loop.target, jinja2.nodes.Name) and any(_is_var_or_elems_access(loop.iter, v) for v in lists)
    ]
    for loop in ast.find_all(jinja2.nodes.For):
        if any(_is_var_or_elems_access(loop.iter, v, "content") for v in message_vars):
            return "openai"
    return "string"


# --- vLLM -----------------------------------------------------------------------------------

TEXT_KEYS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal", "thinking": "thinking"}
MODALITY = {
    "image_url": "image",
    "input_image": "image",
    "image_pil": "image",
    "image_embeds": "image",
    "audio_url": "audio",
    "input_audio": "audio",
    "audio_embeds": "audio",
    "video_url": "video",
}


def _url_of(part, key):
    value = part.get(key)
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        raise Refused(f"{key} must be {{'url': ...}}")
    return value["url"]


def _vllm_part_type(part):
    part_type = part.get("type")
    uuid = part.get("uuid")
    known = set(TEXT_KEYS) | set(MODALITY) | {"prompt_embeds", "tool_reference"}
    if isinstance(part_type, str) and part_type in known and uuid is None:
        if part_type in TEXT_KEYS:
            return part_type, part.get(TEXT_KEYS[part_type])
        if part_type in ("image_url", "audio_url", "video_url"):
            return part_type, _url_of(part, part_type)
        if part_type == "input_image":
            return part_type, part.get("image_url")
        if part_type == "prompt_embeds":
            return part_type, part.get("data")
        if part_type == "tool_reference":
            return part_type, part.get("name")
        return part_type, part.get(part_type)
    if part_type is None or uuid is not None:
        for key in ("image_url", "image_pil", "image_embeds", "audio_embeds", "prompt_embeds", "audio_url"):
            if key in part:
                if key == "prompt_embeds":
                    return key, part.get("data")
                value = part.get(key)
                return key, value.get("url") if isinstance(value, dict) else value
        if part.get("input_audio") is not None:
            return "input_audio", part["input_audio"]
        if "video_url" in part:
            value = part["video_url"]
            return "video_url", value.get("url") if isinstance(value, dict) else value
        if "tool_reference" in part:
            return "tool_reference", part.get("name")
        raise Refused("Missing 'type' field in multimodal part.")
    if not isinstance(part_type, str):
        raise Refused("Invalid 'type' field in multimodal part.")
    return part_type, None


def _vllm_part(part, wrap):
    if isinstance(part, str):
        return {"type": "text", "text": part} if wrap else part
    if not isinstance(part, dict):
        raise Refused("content parts are strings or objects")
    part_type, content = _vllm_part_type(part)
    if part_type in ("text", "refusal") and content is None:
        return None
    if part_type in TEXT_KEYS:
        return {"type": "text", "text": content} if wrap else content
    if part_type in ("image_embeds", "audio_embeds"):
        raise Refused("embeds need --enable-mm-embeds")
    if part_type == "prompt_embeds":
        raise Refused("prompt_embeds need --enable-prompt-embeds")
    if part_type == "tool_reference":
        return {"type": "tool_reference", "name": content} if wrap else content
    if part_type in MODALITY:
        if not wrap:
            raise Refused("media with a string-content template")
        return {"type": MODALITY[part_type]}
    raise Refused(f"Unsupported chat content part type: {part_type!r}")


def _vllm_message(message, fmt):
    message = dict(message)
    # The request model: `reasoning_content` is renamed `reasoning` unless that is set.
    reasoning_content = message.pop("reasoning_content", None)
    if reasoning_content is not None and message.get("reasoning") is None:
        message["reasoning"] = reasoning_content
    role = message["role"]
    content = message.get("content")
    if content is None:
        content = []
    elif isinstance(content, str):
        content = [{"type": "text", "text": content}]
    elif not isinstance(content, list):
        raise Refused("content must be a string, a list or null")
    parsed = [p for p in (_vllm_part(p, fmt == "openai") for p in content) if p is not None]
    out = {"role": role, "content": parsed if fmt == "openai" else "\n".join(parsed)}
    if role == "assistant":
        if message.get("tool_calls") is not None:
            out["tool_calls"] = list(message["tool_calls"])
        if message.get("reasoning") is not None:
            out["reasoning"] = message["reasoning"]
            out["reasoning_content"] = message["reasoning"]
    elif role == "tool":
        if "tool_call_id" in message:
            out["tool_call_id"] = message["tool_call_id"]
        body = out["content"]
        if isinstance(body, list) and not any(isinstance(i, dict) and i.get("type") != "text" for i in body):
            texts = [i.get("text", "") for i in body if isinstance(i, dict) and i.get("type") == "text"]
            out["content"] = "\n".join(texts) if texts else ""
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    if isinstance(message.get("task"), str):
        out["task"] = message["task"]
    if role == "developer":
        out["tools"] = message.get("tools")
    return out


def _vllm_arguments(value):
    if not value:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


def vllm_messages(messages, fmt="openai"):
    conversation = [_vllm_message(m, fmt) for m in copy.deepcopy(messages)]
    for message in conversation:
        if message["role"] != "assistant" or "tool_calls" not in message:
            continue
        calls = message["tool_calls"]
        if not isinstance(calls, list):
            continue
        if not calls:
            del message["tool_calls"]
            continue
        for call in calls:
            if not isinstance(call, dict):
                raise Refused("assistant tool_calls entries must be objects.")
            function = call.get("function")
            if call.get("type", "function") != "function" or not isinstance(function, dict):
                raise Refused("chat completions only support assistant tool_calls of type 'function'.")
            function["arguments"] = _vllm_arguments(function.get("arguments"))
    return conversation


def vllm_tools(tools):
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            raise Refused("tools are function objects")
        fn = tool.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise Refused("a tool needs function.name")
        description, parameters = fn.get("description"), fn.get("parameters")
        if description is not None and not isinstance(description, str):
            raise Refused("description")
        if parameters is not None and not isinstance(parameters, dict):
            raise Refused("parameters")
        defer = tool.get("defer_loading")
        function = {"name": fn["name"], "description": description, "parameters": parameters}
        if fn.get("strict") is not None:
            function["strict"] = fn["strict"]
        fn_defer = fn.get("defer_loading")
        if fn_defer is None:
            fn_defer = defer
        if fn_defer is not None:
            function["defer_loading"] = fn_defer
        item = {"type": "function", "function": function}
        if defer is not None:
            item["defer_loading"] = defer
        out.append(item)
    return out


# --- SGLang ---------------------------------------------------------------------------------


def _sglang_message(msg, fmt):
    if msg.get("content") is None:
        msg["content"] = ""
    content = msg["content"]
    if not isinstance(content, list):
        out = {k: v for k, v in msg.items() if v is not None}
    elif fmt == "openai":
        parts = []
        for chunk in content:
            if not isinstance(chunk, dict):
                continue
            kind = chunk.get("type")
            if kind in ("image_url", "input_image"):
                parts.append({"type": "image"})
            elif kind == "video_url":
                parts.append({"type": "video"})
            elif kind == "audio_url":
                parts.append({"type": "audio"})
            elif kind in ("text", "input_text"):
                parts.append({"type": "text", "text": chunk["text"]})
            elif kind == "tool_reference":
                parts.append(chunk)
        out = {k: v for k, v in msg.items() if v is not None and k != "content"}
        out["content"] = parts
    else:
        texts = [c["text"] for c in content if isinstance(c, dict) and c.get("type") in ("text", "input_text")]
        out = dict(msg)
        out["content"] = " ".join(texts) if texts else ""
        out = {k: v for k, v in out.items() if v is not None}
    body = out.get("content")
    if out["role"] == "tool" and isinstance(body, list):
        if all((isinstance(p, dict) and p.get("type") == "text") or isinstance(p, str) for p in body):
            out["content"] = " ".join(p.get("text", "") if isinstance(p, dict) else p for p in body)
    return out


def sglang_messages(messages, fmt="openai"):
    messages = copy.deepcopy(messages)
    for message in messages:
        if message.get("role") != "assistant" or not isinstance(message.get("tool_calls"), list):
            continue
        for call in message["tool_calls"]:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                try:
                    parsed = json.loads(function["arguments"])
                except json.JSONDecodeError as exc:
                    raise Refused("Assistant tool call function.arguments must be valid JSON.") from exc
                if not isinstance(parsed, dict):
                    raise Refused("Assistant tool call function.arguments must be a JSON object.")
                function["arguments"] = parsed
    return [_sglang_message(m, fmt) for m in messages]
