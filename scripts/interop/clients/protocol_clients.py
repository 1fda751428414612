"""The official `openai` (Responses) and `anthropic` (Messages) Python
clients against a running afm-serve: plain, streamed, tools and structured
output on each.

Usage: python protocol_clients.py BASE_URL
Exits non-zero (with the failing assertion) if any check fails.
"""

import json
import sys

import anthropic
import openai

BASE = sys.argv[1]
oa = openai.OpenAI(base_url=BASE + "/v1", api_key="unused")
an = anthropic.Anthropic(base_url=BASE, api_key="unused")
MODEL = oa.models.list().data[0].id
# This client has no `temperature` parameter; the field still exists on
# the wire, and greedy replies make streamed and whole ones comparable.
GREEDY = {"temperature": 0}
QUESTION = "The capital of France is Paris. What is the capital of France?"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}},
    "required": ["city"],
    "additionalProperties": False,
}
PLACE_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "country": {"type": "string", "maxLength": 20},
    },
    "required": ["city", "country"],
    "additionalProperties": False,
}


def responses_plain():
    r = oa.responses.create(model=MODEL, input=QUESTION, max_output_tokens=30, temperature=0)
    assert r.status == "completed", r.status
    assert "Paris" in r.output_text, r.output_text
    assert r.usage.input_tokens > 0 and r.usage.output_tokens > 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    return r.output_text


def responses_streamed(expected):
    events = list(oa.responses.create(model=MODEL, input=QUESTION, max_output_tokens=30, temperature=0, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(set(numbers)), numbers
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == expected, (text, expected)
    assert events[-1].response.output_text == expected


def responses_tools():
    tools = [{"type": "function", "name": "get_weather", "description": "Current weather in a city",
              "parameters": WEATHER_SCHEMA, "strict": True}]
    r = oa.responses.create(model=MODEL, input="What is the weather in Oslo?", tools=tools,
                            tool_choice="required", max_output_tokens=60, temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather", r.output
    args = json.loads(calls[0].arguments)
    assert isinstance(args.get("city"), str), args
    follow = oa.responses.create(
        model=MODEL, tools=tools, max_output_tokens=30, temperature=0,
        input=[{"role": "user", "content": "What is the weather in Oslo?"},
               {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather",
                "arguments": calls[0].arguments},
               {"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny, 18 C."}])
    assert follow.status in ("completed", "incomplete") and follow.output, follow
    streamed = list(oa.responses.create(model=MODEL, input="What is the weather in Oslo?", tools=tools,
                                        tool_choice="required", max_output_tokens=60, temperature=0, stream=True))
    done = [e for e in streamed if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and json.loads(done[0].arguments) == args, done


def responses_structured():
    r = oa.responses.create(
        model=MODEL, input="Name a city and its country as JSON.", max_output_tokens=60, temperature=0,
        text={"format": {"type": "json_schema", "name": "place", "schema": PLACE_SCHEMA, "strict": True}})
    assert set(json.loads(r.output_text)) == {"city", "country"}, r.output_text


def messages_plain():
    m = an.messages.create(model=MODEL, max_tokens=30, extra_body=GREEDY,
                           messages=[{"role": "user", "content": QUESTION}])
    assert m.type == "message" and m.role == "assistant"
    assert m.stop_reason in ("end_turn", "max_tokens"), m.stop_reason
    text = "".join(b.text for b in m.content if b.type == "text")
    assert "Paris" in text, text
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0
    count = an.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": QUESTION}])
    assert count.input_tokens == m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0), count
    return text


def messages_streamed(expected):
    with an.messages.stream(model=MODEL, max_tokens=30, extra_body=GREEDY,
                            messages=[{"role": "user", "content": QUESTION}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == expected, (text, expected)
    assert final.stop_reason in ("end_turn", "max_tokens") and final.usage.output_tokens > 0
    raw = list(an.messages.create(model=MODEL, max_tokens=30, extra_body=GREEDY, stream=True,
                                  messages=[{"role": "user", "content": QUESTION}]))
    kinds = [e.type for e in raw]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds


def messages_tools():
    tools = [{"name": "get_weather", "description": "Current weather in a city", "input_schema": WEATHER_SCHEMA}]
    m = an.messages.create(model=MODEL, max_tokens=60, extra_body=GREEDY, tools=tools,
                           tool_choice={"type": "tool", "name": "get_weather"},
                           messages=[{"role": "user", "content": "What is the weather in Oslo?"}])
    uses = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and len(uses) == 1, m
    assert isinstance(uses[0].input.get("city"), str), uses[0].input
    follow = an.messages.create(
        model=MODEL, max_tokens=30, extra_body=GREEDY, tools=tools,
        messages=[{"role": "user", "content": "What is the weather in Oslo?"},
                  {"role": "assistant", "content": m.content},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                                "content": "Sunny, 18 C."}]}])
    assert follow.content, follow
    with an.messages.stream(model=MODEL, max_tokens=60, extra_body=GREEDY, tools=tools,
                            tool_choice={"type": "tool", "name": "get_weather"},
                            messages=[{"role": "user", "content": "What is the weather in Oslo?"}]) as stream:
        final = stream.get_final_message()
    streamed = [b for b in final.content if b.type == "tool_use"]
    assert len(streamed) == 1 and streamed[0].input == uses[0].input, (streamed, uses)


def messages_structured():
    m = an.messages.create(model=MODEL, max_tokens=60, extra_body=GREEDY,
                           messages=[{"role": "user", "content": "Name a city and its country as JSON."}],
                           output_config={"format": {"type": "json_schema", "schema": PLACE_SCHEMA}})
    text = "".join(b.text for b in m.content if b.type == "text")
    assert set(json.loads(text)) == {"city", "country"}, text


def errors():
    try:
        an.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "system", "content": "x"}])
        raise AssertionError("a system role in messages was accepted")
    except anthropic.BadRequestError as e:
        assert e.body["type"] == "error", e.body
    try:
        oa.responses.create(model=MODEL, input="hi", max_output_tokens=0)
        raise AssertionError("max_output_tokens 0 was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "max_output_tokens", e.body


responses_streamed(responses_plain())
responses_tools()
responses_structured()
messages_streamed(messages_plain())
messages_tools()
messages_structured()
errors()
print("all checks passed")
