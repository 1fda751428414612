"""The official `openai` Python client against a running afm-serve.

Usage: python openai_client.py BASE_URL
Exits non-zero (with the failing assertion) if any check fails.
"""

import json
import sys
import time

from openai import BadRequestError, ConflictError, OpenAI

client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused")
MODEL = client.models.list().data[0].id
ASK = [{"role": "user", "content": "What is the capital of France?"}]


def chat():
    r = client.chat.completions.create(model=MODEL, messages=ASK, temperature=0, max_tokens=20)
    choice = r.choices[0]
    assert "Paris" in choice.message.content, choice.message.content
    assert choice.finish_reason == "stop", choice.finish_reason
    assert choice.message.role == "assistant"
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.system_fingerprint
    return choice.message.content


def streaming(expected):
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            temperature=0,
            max_tokens=20,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert len({c.id for c in chunks}) == 1, "one id for all chunks"
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected, (text, expected)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"], finishes
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def json_schema():
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 20},
            "country": {"type": "string", "maxLength": 20},
        },
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Name a city and its country as JSON."}],
        max_tokens=60,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": True}},
    )
    value = json.loads(r.choices[0].message.content)
    assert set(value) == {"city", "country"}, value
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Give me a JSON object with your name."}],
        max_tokens=60,
        temperature=0,
        response_format={"type": "json_object"},
    )
    assert raw.headers.get("x-grammar-constraints") == "enforced", dict(raw.headers)
    choice = raw.parse().choices[0]
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict), choice.message.content
    else:
        # Out of tokens mid-object: reported as length, never as a stop.
        assert choice.finish_reason == "length" and choice.message.content.startswith("{")


def logprobs():
    r = client.chat.completions.create(
        model=MODEL, messages=ASK, temperature=0, max_tokens=8, logprobs=True, top_logprobs=3
    )
    content = r.choices[0].logprobs.content
    assert len(content) >= 1
    for t in content:
        assert t.logprob <= 0
        assert len(t.top_logprobs) == 3
        assert t.bytes is not None
    try:
        client.chat.completions.create(model=MODEL, messages=ASK, logprobs=True, top_logprobs=50)
        raise AssertionError("top_logprobs=50 should be rejected")
    except BadRequestError as e:
        assert e.status_code == 400


def seed():
    def once():
        return client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Tell me a story about a cat."}],
            temperature=0.9,
            seed=7,
            max_tokens=24,
        ).choices[0].message.content

    a, b = once(), once()
    assert a == b, (a, b)


def tools():
    params = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 20},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    request = dict(
        model=MODEL,
        messages=[{"role": "user", "content": "What is the weather in Oslo for the next 3 days?"}],
        tools=[{"type": "function", "function": {"name": "get_forecast", "strict": True, "parameters": params}}],
        tool_choice="required",
        max_tokens=60,
        temperature=0,
    )
    r = client.chat.completions.create(**request)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_forecast", call
    assert call.id, call
    args = json.loads(call.function.arguments)
    assert isinstance(args["city"], str) and isinstance(args["days"], int), args

    # The client's own accumulation of streamed deltas gives the same call.
    deltas = [c.choices[0].delta for c in client.chat.completions.create(stream=True, **request) if c.choices]
    pieces = [t for d in deltas for t in (d.tool_calls or [])]
    assert pieces[0].id and pieces[0].function.name == "get_forecast", pieces[0]
    assert pieces[0].function.arguments == "", pieces[0]
    streamed = "".join(p.function.arguments or "" for p in pieces)
    assert streamed == call.function.arguments, (streamed, call.function.arguments)


def completions():
    r = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=5, temperature=0)
    assert r.choices[0].text, r


def batches():
    """`client.files` and `client.batches` as their users call them: the
    SDK's own types must parse every object the server returns."""
    lines = [
        {"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": MODEL, "messages": ASK, "max_tokens": 5, "temperature": 0}}
        for i in range(2)
    ]
    content = "\n".join(json.dumps(line) for line in lines).encode()
    uploaded = client.files.create(file=("questions.jsonl", content), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == len(content), uploaded
    assert client.files.retrieve(uploaded.id).filename == "questions.jsonl"
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"from": "openai_client.py"},
    )
    for _ in range(600):
        batch = client.batches.retrieve(batch.id)
        if batch.status in ("completed", "failed", "cancelled"):
            break
        time.sleep(0.1)
    assert batch.status == "completed", batch
    assert batch.request_counts.completed == 2 and batch.request_counts.failed == 0, batch
    assert batch.metadata == {"from": "openai_client.py"}, batch
    output = [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]
    assert sorted(o["custom_id"] for o in output) == ["q0", "q1"], output
    assert all(o["response"]["body"]["object"] == "chat.completion" for o in output), output
    assert client.batches.list(limit=1).data[0].id == batch.id
    try:
        client.batches.cancel(batch.id)
        raise AssertionError("a completed batch was cancelled")
    except ConflictError:
        pass
    assert client.files.delete(uploaded.id).deleted


expected = chat()
streaming(expected)
json_schema()
logprobs()
seed()
tools()
completions()
batches()
print("openai client: all checks passed")
