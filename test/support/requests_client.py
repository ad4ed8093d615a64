"""A user's script driving the gateway with Python `requests` (test/gateway-clients.test.ts): a
multi-turn chat session with tools, streamed and not, every field a script sends, and the answers
checked the way a script reads them. Prints one JSON line per call: {"turn", "status", "content",
"tool_calls", "finish_reason", "top_logprobs"}.

Usage: requests_client.py BASE_URL MODEL SESSION
"""

import json
import sys

import requests

base, model, session = sys.argv[1], sys.argv[2], sys.argv[3]
headers = {"x-session-id": session, "Authorization": "Bearer EMPTY"}
tools = [{"type": "function", "function": {"name": "add", "description": "add",
          "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]
messages = [{"role": "system", "content": "You add numbers."}, {"role": "user", "content": "Add 2 and 3."}]
fields = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "seed": 11, "max_tokens": 256, "stop": ["\n\n\n"],
          "logprobs": True, "top_logprobs": 2, "presence_penalty": 0.1, "min_tokens": 1,
          "chat_template_kwargs": {"enable_thinking": False}, "tools": tools, "tool_choice": "auto"}

with requests.Session() as http:
    for turn in range(4):
        stream = turn % 2 == 1
        body = {"model": model, "messages": messages, **fields}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        r = http.post(f"{base}/v1/chat/completions", json=body, headers=headers, stream=stream, timeout=120)
        out = {"turn": turn, "status": r.status_code}
        if r.status_code != 200:
            out["error"] = r.text
            print(json.dumps(out), flush=True)
            sys.exit(1)
        if stream:
            content, calls, finish, tops, usage = "", {}, None, [], None
            for line in r.iter_lines(decode_unicode=True):
                if not line or not line.startswith("data: "):
                    continue
                data = line[len("data: "):]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for c in chunk["choices"]:
                    delta = c.get("delta") or {}
                    content += delta.get("content") or ""
                    for t in delta.get("tool_calls") or []:
                        call = calls.setdefault(t["index"], {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                        call["id"] = t.get("id") or call["id"]
                        call["function"]["name"] += (t.get("function") or {}).get("name") or ""
                        call["function"]["arguments"] += (t.get("function") or {}).get("arguments") or ""
                    for lp in (c.get("logprobs") or {}).get("content") or []:
                        tops.append(len(lp["top_logprobs"]))
                    finish = c.get("finish_reason") or finish
            message = {"role": "assistant", "content": content or None, "tool_calls": [calls[k] for k in sorted(calls)]}
            out["usage"] = usage
        else:
            answer = r.json()
            choice = answer["choices"][0]
            message = choice["message"]
            finish = choice["finish_reason"]
            tops = [len(lp["top_logprobs"]) for lp in (choice.get("logprobs") or {}).get("content") or []]
        out.update({"content": message.get("content"), "tool_calls": message.get("tool_calls") or [],
                    "finish_reason": finish, "top_logprobs": sorted(set(tops))})
        print(json.dumps(out), flush=True)
        messages.append({"role": "assistant", "content": message.get("content"),
                         **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {})})
        if message.get("tool_calls"):
            for call in message["tool_calls"]:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "5"})
        else:
            messages.append({"role": "user", "content": f"And now turn {turn + 1}?"})
