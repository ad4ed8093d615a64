"""The engine stand-in's renderer (test/support/engine-standin.ts): chat messages normalized the way
vLLM's chat endpoint parses them, then rendered with Python jinja2 set up as transformers sets it up
(render_jinja2.py). Written from vLLM's own code (docs/reference/engine-protocols.md), independently
of rollscope's TypeScript renderer, so the gateway is checked against a reference and not itself.

One process serves many requests: stdin and stdout carry one JSON object a line.
  {"id": n, "op": "chat", "engine": "vllm" | "sglang", "template": str, "body": str}
      (body: the request JSON as received)
      -> {"id": n, "ok": {"prompt": str, "images": [url, ...], "conversation": [...],
                          "assistant_prefix": str | null}}
  {"id": n, "op": "smart_resize", "height": h, "width": w, "factor": f, "min_pixels": a,
   "max_pixels": b}
      -> {"id": n, "ok": [resized_height, resized_width]}
  {"id": n, "op": "hermes", "text": str}
      -> {"id": n, "ok": {"tools_called": bool, "tool_calls": [{"name", "arguments"}], "content": str | null}}
  {"id": n, "op": "qwen25", "text": str, "tool_names": [str]}   (SGLang's Qwen 2.5 detector; same answer)
  any failure -> {"id": n, "error": "ExceptionType: message"}
"""

import json
import os
import re
import sys

import jinja2.meta
import jinja2.nodes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from render_jinja2 import compile_template  # noqa: E402
from smart_resize import smart_resize  # noqa: E402

# Parts vLLM reads as text (chat_utils.py MM_PARSER_MAP: text, input_text, output_text, refusal,
# thinking) and as images (image_url, input_image; image_pil and image_embeds cannot come over HTTP).
TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal", "thinking": "thinking"}
IMAGE_PARTS = ("image_url", "input_image")
MEDIA_PARTS = ("audio_url", "input_audio", "video_url", "audio_embeds", "image_embeds")

_content_formats = {}


def _iterates_message_content(node):
    """True when a `for` loop of the template walks `<message>['content']` or `<message>.content`."""
    for loop in node.find_all(jinja2.nodes.For):
        it = loop.iter
        if isinstance(it, jinja2.nodes.Getitem) and isinstance(it.arg, jinja2.nodes.Const):
            if it.arg.value == "content":
                return True
        if isinstance(it, jinja2.nodes.Getattr) and it.attr == "content":
            return True
    return False


def content_format(source):
    """vLLM's 'auto' detection (chat_utils.py `_detect_content_format`): a template that loops over
    a message's content takes OpenAI-style part lists ("openai"), any other takes one string."""
    if source not in _content_formats:
        env = jinja2.Environment()
        _content_formats[source] = "openai" if _iterates_message_content(env.parse(source)) else "string"
    return _content_formats[source]


def template_variables(source):
    env = jinja2.Environment()
    return jinja2.meta.find_undeclared_variables(env.parse(source))


def image_url_of(part, part_type):
    if part_type == "input_image":
        return part.get("image_url")
    url = part.get("image_url")
    if isinstance(url, dict):
        return url.get("url")
    return url


def parse_part(part, wrap_dicts, images):
    """One content part as chat_utils.py `_parse_chat_message_content_part` turns it: text kept, an
    image recorded (its data goes to the processor) and replaced by {"type": "image"}."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise ValueError(f"content part is not an object: {part!r}")
    part_type = part.get("type")
    if part_type is None:
        if "image_url" in part:
            part_type = "image_url"
        elif any(k in part for k in MEDIA_PARTS):
            raise ValueError("only text and image parts are served by this engine stand-in")
        else:
            raise ValueError("Missing 'type' field in multimodal part.")
    if part_type in TEXT_PARTS:
        text = part.get(TEXT_PARTS[part_type])
        if text is None:
            return None
        return {"type": "text", "text": text} if wrap_dicts else text
    if part_type in IMAGE_PARTS:
        url = image_url_of(part, part_type)
        if not isinstance(url, str):
            raise ValueError("image part without a URL")
        images.append(url)
        return {"type": "image"} if wrap_dicts else None
    if part_type in MEDIA_PARTS:
        raise ValueError("only text and image parts are served by this engine stand-in")
    raise NotImplementedError(f"Unknown part type: {part_type}")


QWEN_IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"


def parse_message(message, fmt, images):
    """chat_utils.py `_parse_chat_message_content`: content None -> [], a string -> one text part;
    only role, content, tool_calls (assistant), reasoning, tool_call_id (tool) and name survive."""
    role = message["role"]
    content = message.get("content")
    if content is None:
        content = []
    elif isinstance(content, str):
        content = [{"type": "text", "text": content}]
    first_image = len(images)
    parsed = [p for p in (parse_part(part, fmt == "openai", images) for part in content) if p]
    if fmt == "openai":
        out = {"role": role, "content": parsed}
    else:
        # String-format templates get the texts joined by "\n", missing image placeholders in front
        # (`_get_full_multimodal_text_prompt`), the Qwen-VL placeholder per image.
        text = "\n".join(parsed)
        missing = len(images) - first_image - text.count(QWEN_IMAGE_PLACEHOLDER)
        if missing < 0:
            raise ValueError("Found more image placeholders in input prompt than actual multimodal data items.")
        out = {"role": role, "content": "\n".join([QWEN_IMAGE_PLACEHOLDER] * missing + ([text] if text else []))}
    if role == "assistant":
        if message.get("tool_calls") is not None:
            out["tool_calls"] = list(message["tool_calls"])
        reasoning = message.get("reasoning", message.get("reasoning_content"))
        if reasoning is not None:
            out["reasoning"] = reasoning
            out["reasoning_content"] = reasoning
    elif role == "tool" and "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def postprocess(conversation):
    """chat_utils.py `_postprocess_messages`: an empty tool_calls list is dropped; string arguments
    are json.loads'ed (a failure fails the request), missing or empty ones become {}."""
    for message in conversation:
        if message["role"] != "assistant" or "tool_calls" not in message:
            continue
        calls = message["tool_calls"]
        if not isinstance(calls, list):
            continue
        if len(calls) == 0:
            message.pop("tool_calls")
            continue
        for call in calls:
            fn = call["function"]
            args = fn.get("arguments")
            if args:
                if not isinstance(args, (dict, list)):
                    fn["arguments"] = json.loads(args)
            else:
                fn["arguments"] = {}


def tool_as_vllm_dumps(tool):
    """A request tool after vLLM's pydantic model (`ChatCompletionToolsParam.model_dump()`)."""
    fn = tool.get("function") or {}
    return {
        "type": tool.get("type", "function"),
        "function": {
            "name": fn["name"],
            "description": fn.get("description"),
            "parameters": fn.get("parameters"),
        },
    }


def continue_final(rendered, conversation):
    """transformers' `apply_chat_template(continue_final_message=True)`: cut the render right after
    the final message's text, so the model continues it."""
    final = conversation[-1]["content"]
    if isinstance(final, (list, tuple)):
        for block in reversed(final):
            if isinstance(block, dict) and "text" in block:
                final = block["text"]
                break
        else:
            raise ValueError("continue_final_message is set but we could not find any text to continue")
    if final.strip() not in rendered:
        raise ValueError("continue_final_message is set but the final message does not appear in the chat")
    loc = rendered.rindex(final.strip())
    if rendered[loc : loc + len(final.lstrip())] == final:
        return rendered[: loc + len(final.lstrip())]
    return rendered[: loc + len(final.strip())]


def sglang_message(message, fmt, images):
    """SGLang's serving_chat.py `_apply_jinja_template`: the pydantic message dumped (content None
    becomes ""), then jinja_template_utils.py `process_content_for_template_format`: keys whose value
    is None dropped, string content kept as a string, image_url parts recorded and replaced by
    {"type": "image"}, other parts kept as dumped; string arguments of tool calls orjson-loaded."""
    role = message["role"].lower() if isinstance(message.get("role"), str) else message.get("role")
    if role == "user":
        dumped = {"role": role, "content": message.get("content")}
    else:
        dumped = {
            "role": role,
            "content": message.get("content") if message.get("content") is not None else "",
            "tool_call_id": message.get("tool_call_id"),
            "name": message.get("name"),
            "reasoning_content": message.get("reasoning_content"),
            "tool_calls": sglang_tool_calls(message.get("tool_calls")),
        }
    content = dumped["content"]
    if not isinstance(content, list):
        out = {k: v for k, v in dumped.items() if v is not None}
    elif fmt == "openai":
        parts = []
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "image_url":
                images.append(part["image_url"]["url"])
                parts.append({"type": "image"})
            elif part.get("type") == "text":
                parts.append({"type": "text", "text": part["text"]})
            else:
                raise ValueError(f"content part type {part.get('type')!r} is not served by this engine stand-in")
        out = {k: v for k, v in dumped.items() if v is not None and k != "content"}
        out["content"] = parts
    else:
        texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text"]
        out = {k: v for k, v in dumped.items() if v is not None and k != "content"}
        out["content"] = " ".join(texts) if texts else ""
    if out["role"] == "assistant" and isinstance(out.get("tool_calls"), list):
        for call in out["tool_calls"]:
            if isinstance(call["function"].get("arguments"), str):
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def sglang_tool_calls(calls):
    """ToolCall{id, index, type, function{name, arguments}} as pydantic dumps it."""
    if calls is None:
        return None
    return [
        {
            "id": c.get("id"),
            "index": c.get("index"),
            "type": c.get("type", "function"),
            "function": {"name": (c.get("function") or {}).get("name"), "arguments": (c.get("function") or {}).get("arguments")},
        }
        for c in calls
    ]


def sglang_chat(req, body):
    """SGLang's chat endpoint: `apply_chat_template(messages, add_generation_prompt=True, tools=...)`
    with tools as their `function` objects only (`Function.model_dump()`: description, name,
    parameters, strict), given unless tool_choice is "none"; `continue_final_message` drops a final
    assistant message and tokenizes its content after the render."""
    source = req["template"]
    fmt = content_format(source)
    images = []
    conversation = [sglang_message(m, fmt, images) for m in body["messages"]]
    assistant_prefix = None
    if conversation and conversation[-1]["role"] == "assistant" and body.get("continue_final_message"):
        assistant_prefix = conversation[-1]["content"]
        conversation = conversation[:-1]
    tools = None
    tool_choice = body.get("tool_choice")
    if tool_choice is None:
        tool_choice = "none" if body.get("tools") is None else "auto"
    if body.get("tools") and tool_choice != "none":
        wanted_name = tool_choice["function"]["name"] if isinstance(tool_choice, dict) else None
        tools = [
            {
                "description": t["function"].get("description"),
                "name": t["function"].get("name"),
                "parameters": t["function"].get("parameters"),
                "strict": t["function"].get("strict", False),
            }
            for t in body["tools"]
            if wanted_name is None or t["function"].get("name") == wanted_name
        ]
    kwargs = dict(body.get("chat_template_kwargs") or {})
    kwargs.pop("reasoning_effort", None)
    for reserved in ("messages", "tools", "add_generation_prompt"):
        kwargs.pop(reserved, None)
    rendered = compile_template(source).render(
        messages=conversation,
        tools=tools,
        documents=None,
        add_generation_prompt=True,
        reasoning_effort=body.get("reasoning_effort"),
        **kwargs,
    )
    return {"prompt": rendered, "images": images, "conversation": conversation, "assistant_prefix": assistant_prefix}


def chat(req):
    source = req["template"]
    # The body as the engine decodes it (floats, big ints and key order are Python's).
    body = json.loads(req["body"])
    if req.get("engine") == "sglang":
        return sglang_chat(req, body)
    fmt = content_format(source)
    images = []
    conversation = [parse_message(m, fmt, images) for m in body["messages"]]
    postprocess(conversation)
    tools = body.get("tools")
    tools = [tool_as_vllm_dumps(t) for t in tools] if tools else None
    # Only the kwargs the template reads reach it (vLLM `resolve_chat_template_kwargs`).
    wanted = template_variables(source)
    kwargs = {k: v for k, v in (body.get("chat_template_kwargs") or {}).items() if k in wanted}
    for reserved in ("messages", "tools", "documents", "add_generation_prompt"):
        kwargs.pop(reserved, None)
    rendered = compile_template(source).render(
        messages=conversation,
        tools=tools,
        documents=body.get("documents"),
        add_generation_prompt=body.get("add_generation_prompt", True),
        **kwargs,
    )
    if body.get("continue_final_message"):
        rendered = continue_final(rendered, conversation)
    return {"prompt": rendered, "images": images, "conversation": conversation, "assistant_prefix": None}


HERMES_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def hermes(text):
    """vLLM's hermes tool parser, non-streamed (hermes_tool_parser.py `extract_tool_calls`): each
    `<tool_call>` block (or an unclosed last one) is JSON; arguments go back out through
    json.dumps(ensure_ascii=False); the content is the text before the first block, None if empty.
    Any failure leaves the whole text as content."""
    if "<tool_call>" not in text:
        return {"tools_called": False, "tool_calls": [], "content": text}
    try:
        calls = [json.loads(a if a else b) for a, b in HERMES_TOOL_CALL.findall(text)]
        tool_calls = [{"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)} for c in calls]
        content = text[: text.find("<tool_call>")]
        return {"tools_called": True, "tool_calls": tool_calls, "content": content if content else None}
    except Exception:  # noqa: BLE001 - the parser's own fallback
        return {"tools_called": False, "tool_calls": [], "content": text}


QWEN25_BOT = "<tool_call>\n"
QWEN25_TOOL_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)


def qwen25(text, tool_names):
    """SGLang's Qwen 2.5 detector (function_call/qwen25_detector.py `detect_and_parse`, with
    base_format_detector.py `parse_base_json`): the text before the first `<tool_call>\n`, stripped,
    is the content; each `<tool_call>\n{json}\n</tool_call>` block is a call when its name is one of
    the request's tools, arguments json.dumps(parameters or arguments, ensure_ascii=False); a block
    that is not JSON is skipped."""
    idx = text.find(QWEN25_BOT)
    if idx == -1:
        return {"tools_called": False, "tool_calls": [], "content": text}
    normal = text[:idx].strip()
    calls = []
    for block in QWEN25_TOOL_CALL.findall(text):
        try:
            obj = json.loads(block.strip())
        except json.JSONDecodeError:
            continue
        for act in obj if isinstance(obj, list) else [obj]:
            name = act.get("name")
            if name and name in tool_names:
                args = act.get("parameters") or act.get("arguments", {})
                calls.append({"name": name, "arguments": json.dumps(args, ensure_ascii=False)})
    return {"tools_called": bool(calls), "tool_calls": calls, "content": normal}


def tool_schema(tool_choice, tools):
    """vllm/tool_parsers/utils.py `get_json_schema_from_tools` for chat tools: a named tool's
    parameters, or for "required" an array of {name, parameters} objects (any of the tools), the
    tools' `$defs` moved to the top."""
    if tool_choice in ("none", "auto", None) or tools is None:
        return None
    if isinstance(tool_choice, dict):
        name = tool_choice["function"]["name"]
        for tool in tools:
            if tool["function"]["name"] == name:
                return tool["function"].get("parameters")
        raise ValueError(f"Tool '{name}' has not been passed in `tools`.")
    defs = {}
    any_of = []
    for tool in tools:
        params = tool["function"].get("parameters")
        params = dict(params) if params else {"type": "object", "properties": {}}
        for k, v in params.pop("$defs", {}).items():
            defs[k] = v
        any_of.append({"properties": {"name": {"type": "string", "enum": [tool["function"]["name"]]}, "parameters": params}, "required": ["name", "parameters"]})
    schema = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": any_of}}
    if defs:
        schema["$defs"] = defs
    return schema


def structured_from_response_format(rf):
    """`structured_outputs_from_response_format` (the parts a Qwen agent uses)."""
    if not rf or rf.get("type") == "text":
        return None
    if rf.get("type") == "json_schema":
        return {"json": (rf.get("json_schema") or {}).get("schema")}
    if rf.get("type") == "json_object":
        return {"json_object": True}
    return {"structural_tag": json.dumps(rf)}


SAMPLING_DEFAULTS = {"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                     "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0}


def sampling(req):
    """`ChatCompletionRequest.to_sampling_params` / `CompletionRequest.to_sampling_params`
    (vllm/entrypoints/openai/chat_completion/protocol.py, completion/protocol.py) as a dict of the
    SamplingParams fields that shape the generation and its logprobs."""
    body = json.loads(req["body"])
    chat = req["kind"] == "chat"
    out = {name: body.get(name) if body.get(name) is not None else d for name, d in SAMPLING_DEFAULTS.items()}
    out.update({
        "n": body.get("n") if body.get("n") is not None else 1,
        "seed": body.get("seed"),
        "stop": body.get("stop") or [],
        "stop_token_ids": body.get("stop_token_ids") or [],
        "ignore_eos": body.get("ignore_eos", False),
        "max_tokens": req["max_tokens"],
        "min_tokens": body.get("min_tokens", 0),
        "skip_special_tokens": body.get("skip_special_tokens", True),
        "spaces_between_special_tokens": body.get("spaces_between_special_tokens", True),
        "include_stop_str_in_output": body.get("include_stop_str_in_output", False),
        "logit_bias": body.get("logit_bias"),
        "bad_words": body.get("bad_words") or [],
        "allowed_token_ids": body.get("allowed_token_ids"),
        "thinking_token_budget": body.get("thinking_token_budget"),
        "truncate_prompt_tokens": body.get("truncate_prompt_tokens"),
        "use_beam_search": body.get("use_beam_search", False),
    })
    if chat:
        out["logprobs"] = body.get("top_logprobs", 0) if body.get("logprobs") else None
        forced = tool_schema(body.get("tool_choice"), body.get("tools"))
        out["structured_outputs"] = {"json": forced} if forced is not None else (
            body.get("structured_outputs") or structured_from_response_format(body.get("response_format")))
    else:
        out["logprobs"] = body.get("logprobs")
        out["structured_outputs"] = body.get("structured_outputs") or structured_from_response_format(body.get("response_format"))
    return out


def forced_tools(text, tool_choice):
    """serving_chat.py for a forced tool choice: "required" reads the output as a JSON list of
    {name, parameters} (arguments json.dumps(parameters, ensure_ascii=False)); a named tool takes
    the output text as its arguments; content is ""."""
    if isinstance(tool_choice, dict):
        return {"tools_called": True, "tool_calls": [{"name": tool_choice["function"]["name"], "arguments": text}], "content": ""}
    try:
        calls = json.loads(text)
        tool_calls = [{"name": c["name"], "arguments": json.dumps(c.get("parameters"), ensure_ascii=False)} for c in calls]
    except Exception:  # noqa: BLE001 - vLLM logs and answers no call
        tool_calls = []
    return {"tools_called": bool(tool_calls), "tool_calls": tool_calls, "content": ""}


def handle(req):
    op = req.get("op")
    if op == "sampling":
        return sampling(req)
    if op == "forced_tools":
        return forced_tools(req["text"], req["tool_choice"])
    if op == "chat":
        return chat(req)
    if op == "hermes":
        return hermes(req["text"])
    if op == "qwen25":
        return qwen25(req["text"], req.get("tool_names") or [])
    if op == "smart_resize":
        return list(
            smart_resize(req["height"], req["width"], req["factor"], req["min_pixels"], req["max_pixels"])
        )
    raise ValueError(f"unknown op {op!r}")


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            out = {"id": req.get("id"), "ok": handle(req)}
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
            out = {"id": req.get("id"), "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
