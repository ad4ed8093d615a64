"""Reference renderer for test/template.test.ts: chat templates rendered by Python jinja2, set up
exactly as transformers does it (src/transformers/utils/chat_template_utils.py,
`_compile_jinja_template`; the AssistantTracker extension only adds the `{% generation %}` tag
and is left out, none of the tested templates uses it).

stdin:  a JSON list of cases {"template": str, "input": str, "parse_arguments": bool,
        "normalize": "vllm" | "sglang" | null}; `input` is JSON text decoded here with json.loads
        (so floats, big ints and key order are Python's). With parse_arguments, string tool-call
        arguments are json.loads'ed first. With normalize, the messages (and, for vLLM, the tools)
        are first prepared as that server's chat endpoint prepares them (vllm_chat.py), in the
        content format detected from the template; a request the server refuses is reported as
        {"refused": message}.
stdout: a JSON list, per case {"ok": rendered} or {"error": "ExceptionType: message"}.
"""

import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from vllm_chat import Refused, content_format, sglang_messages, vllm_messages, vllm_tools


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


_compiled = {}


def compile_template(source):
    if source not in _compiled:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = strftime_now
        _compiled[source] = env.from_string(source)
    return _compiled[source]


def parse_tool_arguments(messages):
    for message in messages:
        for call in message.get("tool_calls") or []:
            fn = call.get("function", call)
            if isinstance(fn.get("arguments"), str):
                fn["arguments"] = json.loads(fn["arguments"])


def render(case):
    variables = json.loads(case["input"])
    if case.get("parse_arguments"):
        parse_tool_arguments(variables["messages"])
    messages = variables.pop("messages")
    tools = variables.pop("tools", None)
    server = case.get("normalize")
    if server is not None:
        fmt = content_format(case["template"])
        messages = vllm_messages(messages, fmt) if server == "vllm" else sglang_messages(messages, fmt)
        if tools is not None and server == "vllm":
            tools = vllm_tools(tools)
    documents = variables.pop("documents", None)
    add_generation_prompt = variables.pop("add_generation_prompt", False)
    return compile_template(case["template"]).render(
        messages=messages,
        tools=tools,
        documents=documents,
        add_generation_prompt=add_generation_prompt,
        **variables,
    )


def main():
    cases = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    results = []
    for case in cases:
        try:
            results.append({"ok": render(case)})
        except Refused as exc:
            results.append({"refused": str(exc)})
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the test
            results.append({"error": f"{type(exc).__name__}: {exc}"})
    # ensure_ascii keeps lone surrogates and all non-ASCII intact across the pipe.
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    main()
