"""The official `openai` Python SDK against a running OpenAI-compatible
server, the way SDK users write a tool loop.

Usage: python openai_sdk.py BASE_URL [--model M] [--json FILE]

Checks (each one request or a loop of them; temperature 0, seed 7, small
max_tokens, so the run is deterministic and takes seconds):
  tool_loop             tools + tool_choice "required" -> the SDK's assistant
                        message appended as is (the SDK serializes
                        `content: null` and `tool_calls`) -> a role "tool"
                        result -> a final request, tool_choice "none", that
                        must answer 200 with text
  tool_loop_auto        the same history, final request with tool_choice
                        "auto": 200, and text or a well-formed tool call
  tool_loop_stream      tool_choice naming the function, streamed; the
                        tool-call deltas accumulated into a message dict as
                        SDK users do (`content: None` when no text), appended,
                        the result sent, the final answer streamed
  tool_loop_stream_helper  client.chat.completions.stream(...) and its
                        get_final_completion() message appended as is
  content_parts         user content as an array of one text part: same
                        answer as the plain string
  content_parts_multi   system and user content as arrays of text parts
  developer_role        a `developer` message instead of `system`
Prints each check and a closing "N passed, N failed" line; exits 1 if any
check failed. --json writes the results (name, ok, status, error).
"""

import argparse
import json
import sys
import traceback

import openai
from openai import OpenAI

SEED = 7
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city name, e.g. Paris"},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]
ASK_WEATHER = [
    {"role": "system", "content": "You are a helpful assistant. Use the tools when needed."},
    {"role": "user", "content": "What is the weather like in Paris right now?"},
]
RESULT = json.dumps({"city": "Paris", "temperature_c": 18, "sky": "sunny"})


class Check:
    def __init__(self, client, model):
        self.client, self.model, self.results = client, model, []

    def create(self, **kw):
        kw.setdefault("temperature", 0)
        kw.setdefault("seed", SEED)
        kw.setdefault("max_tokens", 48)
        return self.client.chat.completions.create(model=self.model, **kw)

    def run(self, name, fn):
        entry = {"name": name, "ok": False, "status": None, "error": None}
        try:
            fn()
            entry["ok"] = True
            print(f"PASS {name}", flush=True)
        except openai.APIStatusError as e:
            entry["status"] = e.status_code
            entry["error"] = f"HTTP {e.status_code}: {error_text(e)}"
            print(f"FAIL {name}: {entry['error']}", flush=True)
        except AssertionError as e:
            entry["error"] = f"assertion: {e}"
            print(f"FAIL {name}: {entry['error']}", flush=True)
            traceback.print_exc(limit=2)
        except Exception as e:  # noqa: BLE001 - any client-side failure is a failed check
            entry["error"] = f"{type(e).__name__}: {e}"
            print(f"FAIL {name}: {entry['error']}", flush=True)
            traceback.print_exc(limit=3)
        self.results.append(entry)


def error_text(e):
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return err.get("message") or json.dumps(err)
        return str(err)
    return str(getattr(e, "message", e))


def first_tool_call(msg):
    assert msg.tool_calls, f"no tool_calls in {msg}"
    call = msg.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather", call
    assert call.id, f"tool call without id: {call}"
    args = json.loads(call.function.arguments)
    assert isinstance(args, dict) and isinstance(args.get("city"), str), args
    return call


def final_text(msg, finish):
    assert msg.role == "assistant", msg
    assert not msg.tool_calls, f"tool_choice none answered with tool calls: {msg.tool_calls}"
    assert isinstance(msg.content, str) and msg.content.strip(), f"no text: {msg!r}"
    assert finish in ("stop", "length"), finish


def main():
    p = argparse.ArgumentParser()
    p.add_argument("base_url")
    p.add_argument("--model")
    p.add_argument("--json")
    a = p.parse_args()
    client = OpenAI(base_url=a.base_url.rstrip("/") + "/v1", api_key="unused", max_retries=0, timeout=120)
    model = a.model or client.models.list().data[0].id
    c = Check(client, model)

    def tool_loop():
        messages = list(ASK_WEATHER)
        r = c.create(messages=messages, tools=TOOLS, tool_choice="required")
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0].finish_reason
        msg = r.choices[0].message
        call = first_tool_call(msg)
        messages.append(msg)  # as is: the SDK sends content null + tool_calls
        messages.append({"role": "tool", "tool_call_id": call.id, "content": RESULT})
        r2 = c.create(messages=messages, tools=TOOLS, tool_choice="none")
        final_text(r2.choices[0].message, r2.choices[0].finish_reason)

    def tool_loop_auto():
        messages = list(ASK_WEATHER)
        msg = c.create(messages=messages, tools=TOOLS, tool_choice="required").choices[0].message
        call = first_tool_call(msg)
        messages += [msg, {"role": "tool", "tool_call_id": call.id, "content": RESULT}]
        r2 = c.create(messages=messages, tools=TOOLS, tool_choice="auto")
        out = r2.choices[0].message
        if out.tool_calls:
            first_tool_call(out)
        else:
            final_text(out, r2.choices[0].finish_reason)

    def tool_loop_stream():
        messages = list(ASK_WEATHER)
        named = {"type": "function", "function": {"name": "get_weather"}}
        content, calls, finish = "", {}, None
        for chunk in c.create(messages=messages, tools=TOOLS, tool_choice=named, stream=True):
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            finish = choice.finish_reason or finish
            delta = choice.delta
            content += delta.content or ""
            for tc in delta.tool_calls or []:
                acc = calls.setdefault(
                    tc.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if tc.id:
                    acc["id"] = tc.id
                if tc.function and tc.function.name:
                    acc["function"]["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    acc["function"]["arguments"] += tc.function.arguments
        assert finish == "tool_calls", finish
        assert calls, "no tool-call deltas"
        call = calls[min(calls)]
        assert call["id"] and call["function"]["name"] == "get_weather", call
        assert isinstance(json.loads(call["function"]["arguments"]).get("city"), str), call
        messages.append(
            {"role": "assistant", "content": content or None, "tool_calls": [calls[i] for i in sorted(calls)]}
        )
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": RESULT})
        text, finish = "", None
        for chunk in c.create(messages=messages, tools=TOOLS, tool_choice="none", stream=True):
            if chunk.choices:
                assert not chunk.choices[0].delta.tool_calls, chunk
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        assert text.strip(), "streamed final answer is empty"
        assert finish in ("stop", "length"), finish

    def tool_loop_stream_helper():
        messages = list(ASK_WEATHER)
        with client.chat.completions.stream(
            model=model, messages=messages, tools=TOOLS, tool_choice="required",
            temperature=0, seed=SEED, max_tokens=48,
        ) as stream:
            for _ in stream:
                pass
            done = stream.get_final_completion()
        msg = done.choices[0].message
        call = first_tool_call(msg)
        messages += [msg, {"role": "tool", "tool_call_id": call.id, "content": RESULT}]
        r2 = c.create(messages=messages, tools=TOOLS, tool_choice="none")
        final_text(r2.choices[0].message, r2.choices[0].finish_reason)

    question = "What is the capital of France?"

    def content_parts():
        plain = c.create(messages=[{"role": "user", "content": question}], max_tokens=16)
        parts = c.create(
            messages=[{"role": "user", "content": [{"type": "text", "text": question}]}], max_tokens=16
        )
        a_, b_ = plain.choices[0].message.content, parts.choices[0].message.content
        assert a_ == b_, f"one text part answered {b_!r}, the plain string {a_!r}"

    def content_parts_multi():
        r = c.create(
            messages=[
                {"role": "system", "content": [{"type": "text", "text": "You are a geography teacher."}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": question},
                        {"type": "text", "text": "Answer in one short sentence."},
                    ],
                },
            ],
            max_tokens=24,
        )
        final_text(r.choices[0].message, r.choices[0].finish_reason)

    def developer_role():
        r = c.create(
            messages=[
                {"role": "developer", "content": "You answer in one short sentence."},
                {"role": "user", "content": question},
            ],
            max_tokens=24,
        )
        final_text(r.choices[0].message, r.choices[0].finish_reason)

    for name, fn in [
        ("tool_loop", tool_loop),
        ("tool_loop_auto", tool_loop_auto),
        ("tool_loop_stream", tool_loop_stream),
        ("tool_loop_stream_helper", tool_loop_stream_helper),
        ("content_parts", content_parts),
        ("content_parts_multi", content_parts_multi),
        ("developer_role", developer_role),
    ]:
        c.run(name, fn)

    passed = sum(r["ok"] for r in c.results)
    failed = len(c.results) - passed
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"client": "openai", "version": openai.__version__, "model": model,
                       "checks": c.results, "passed": passed, "failed": failed}, f, indent=2)
    if not failed:
        print("all checks passed")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
