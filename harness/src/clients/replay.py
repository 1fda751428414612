"""Replays recorded exchanges through the official Python clients.

afm-test writes one JSON line per exchange (its path, request, status,
headers, body or stream chunks) to stdin; this script serves that reply
from a loopback HTTP server, makes the call a user of `openai` or
`anthropic` makes for it (the same path, the SDK's own response type and
stream class, the SDK's stream accumulators), and writes one JSON line:
what the client raised, or what its user reads from the value it returned
(content, reasoning, tool calls, finish reason, usage), plus where the
SDK's own types reject the reply. The first line it writes names the
clients and their versions.
"""

import http.server
import json
import sys
import threading

import anthropic
import openai
import pydantic
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, MessageTokensCount, RawMessageStreamEvent
from openai.lib.streaming.chat import ChatCompletionStreamManager, ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.pagination import SyncPage
from openai.types import Completion, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

CURRENT = {}
VERSIONS = {"openai": openai.__version__, "anthropic": anthropic.__version__}


class Recorded(http.server.BaseHTTPRequestHandler):
    """Answers every request with the exchange being replayed."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def serve(self):
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        status, ctype, payload = render(CURRENT["exchange"])
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_DELETE = serve


def render(ex):
    """The recorded reply as bytes on the wire: SSE for a stream that
    sent chunks, else the body (JSON, or verbatim text)."""
    status = ex.get("status") or 200
    headers = ex.get("headers") or {}
    chunks = ex.get("chunks") or []
    if ex.get("streamed") and chunks:
        lines = []
        events = ex.get("events") or []
        for i, chunk in enumerate(chunks):
            name = events[i] if i < len(events) else ""
            if name:
                lines.append(f"event: {name}")
            lines.append("data: " + json.dumps(chunk))
            lines.append("")
        for bad in ex.get("malformed_lines") or []:
            lines.extend([bad, ""])
        if ex.get("done_marker"):
            lines.extend(["data: [DONE]", ""])
        return status, "text/event-stream", ("\n".join(lines) + "\n").encode()
    body = ex.get("body")
    ctype = headers.get("content-type", "application/json")
    if isinstance(body, str) and "json" not in ctype:
        return status, ctype, body.encode()
    return status, "application/json", json.dumps(body).encode()


def text(value, limit=300):
    s = value if isinstance(value, str) else json.dumps(value, default=str)
    return s if len(s) <= limit else s[:limit] + "..."


def rejected(objects):
    """Where the values the SDK hands its user (its objects as built,
    after its own coercions: it builds them without validating) break the
    type it declares for each (pydantic, strict): a required field
    missing, a string where an integer is declared, a value off a
    literal."""
    found = []
    for obj in objects:
        as_built = obj.model_dump_json(exclude_unset=True, warnings=False)
        try:
            type(obj).model_validate_json(as_built, strict=True)
        except pydantic.ValidationError as e:
            for err in e.errors():
                loc = ".".join(str(p) for p in err["loc"])
                found.append(f"{loc}: {err['msg']}")
        if len(found) >= 4:
            break
    return found[:4]


def extra(obj, *names):
    for name in names:
        value = getattr(obj, name, None)
        if value:
            return value
    return None


def chat_view(c):
    choice = c.choices[0]
    m = choice.message
    return {
        "content": m.content,
        "reasoning": extra(m, "reasoning_content", "reasoning"),
        "tool_calls": [
            {"name": t.function.name, "arguments": t.function.arguments}
            for t in (m.tool_calls or [])
        ],
        "finish_reason": choice.finish_reason,
        "usage": c.usage.to_dict() if c.usage else None,
    }


def responses_view(r):
    calls = [o for o in r.output if o.type == "function_call"]
    reasoning = []
    for o in r.output:
        if o.type == "reasoning":
            reasoning += [p.text for p in (o.content or []) + (o.summary or [])]
    return {
        "content": r.output_text,
        "reasoning": "".join(reasoning) or None,
        "tool_calls": [{"name": o.name, "arguments": o.arguments} for o in calls],
        "finish_reason": r.status
        + (f" ({r.incomplete_details.reason})" if r.incomplete_details else ""),
        "usage": r.usage.to_dict() if r.usage else None,
    }


def messages_view(m):
    return {
        "content": "".join(b.text for b in m.content if b.type == "text"),
        "reasoning": "".join(b.thinking for b in m.content if b.type == "thinking")
        or None,
        "tool_calls": [
            {"name": b.name, "arguments": json.dumps(b.input)}
            for b in m.content
            if b.type == "tool_use"
        ],
        "finish_reason": m.stop_reason,
        "usage": m.usage.to_dict() if m.usage else None,
    }


def openai_call(client, ex):
    path, req, stream = ex["path"], ex.get("request"), bool(ex.get("streamed"))
    if path == "/v1/models":
        page = client.get_api_list(path, model=Model, page=SyncPage[Model])
        return "models.list", {"ids": [m.id for m in page.data]}, []
    if path.startswith("/v1/models/"):
        m = client.get(path, cast_to=Model)
        return "models.retrieve", {"id": m.id, "object": m.object}, []
    if path == "/v1/chat/completions":
        if not stream:
            c = client.post(path, body=req, cast_to=ChatCompletion)
            return "chat.completions.create", chat_view(c), rejected([c])
        def request():
            return client.post(
                path,
                body=req,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.Stream[ChatCompletionChunk],
            )

        tools = (req or {}).get("tools") if isinstance(req, dict) else None
        tools = tools or openai.omit
        # create(stream=True): its user reads every chunk.
        chunks = list(request())
        state = ChatCompletionStreamState(input_tools=tools)
        for chunk in chunks:
            state.handle_chunk(chunk)
        every = chat_view(state.current_completion_snapshot)
        # .stream(), the helper the SDK's docs recommend, as it builds
        # itself: it skips every chunk whose `object` is not
        # "chat.completion.chunk" (_is_valid_chat_completion_chunk_weak),
        # so what such a chunk carried never reaches its user. Its
        # snapshot, not get_final_completion(): that one parses for
        # .parse() users and raises LengthFinishReasonError on every reply
        # cut at its max_tokens, whatever the server.
        helper = {}
        with ChatCompletionStreamManager(
            request, response_format=openai.omit, input_tools=tools
        ) as stream:
            stream.until_done()
            if any(c.object == "chat.completion.chunk" for c in chunks):
                helper = chat_view(stream.current_completion_snapshot)
        lost = [k for k, v in every.items() if v and helper.get(k) != v]
        if lost:
            return "chat.completions.stream() helper", helper, rejected(chunks), lost
        return "chat.completions.create(stream) and .stream()", every, rejected(chunks)
    if path == "/v1/completions":
        if not stream:
            c = client.post(path, body=req, cast_to=Completion)
            view = {"content": c.choices[0].text, "finish_reason": c.choices[0].finish_reason,
                    "usage": c.usage.to_dict() if c.usage else None}
            return "completions.create", view, rejected([c])
        parts, finish, usage = [], None, None
        chunks = list(client.post(path, body=req, cast_to=Completion, stream=True,
                                  stream_cls=openai.Stream[Completion]))
        for c in chunks:
            for choice in c.choices:
                parts.append(choice.text)
                finish = choice.finish_reason or finish
            usage = c.usage.to_dict() if c.usage else usage
        view = {"content": "".join(parts), "finish_reason": finish, "usage": usage}
        # No type check of the chunks: the SDK streams completions in its
        # whole-reply type, whose finish_reason is not nullable, so every
        # chunk but the last would fail it.
        return "completions.create(stream)", view, []
    if path == "/v1/responses":
        if not stream:
            r = client.post(path, body=req, cast_to=Response)
            return "responses.create", responses_view(r), rejected([r])
        tools = (req or {}).get("tools") if isinstance(req, dict) else None
        state = ResponseStreamState(input_tools=tools or openai.omit, text_format=openai.omit)
        final = None
        events = list(client.post(path, body=req, cast_to=Response, stream=True,
                                  stream_cls=openai.Stream[ResponseStreamEvent]))
        for event in events:
            state.handle_event(event)
            if event.type in ("response.completed", "response.incomplete"):
                final = event.response
        if final is None:
            raise RuntimeError("the stream ended without response.completed")
        return "responses.stream", responses_view(final), rejected(events)
    return None


def anthropic_call(client, ex):
    path, req, stream = ex["path"], ex.get("request"), bool(ex.get("streamed"))
    if path == "/v1/messages/count_tokens":
        n = client.post(path, body=req, cast_to=MessageTokensCount)
        return "messages.count_tokens", {"input_tokens": n.input_tokens}, []
    if path != "/v1/messages":
        return None
    if not stream:
        m = client.post(path, body=req, cast_to=Message)
        return "messages.create", messages_view(m), rejected([m])
    snapshot, bufs = None, {}
    events = list(client.post(path, body=req, cast_to=Message, stream=True,
                              stream_cls=anthropic.Stream[RawMessageStreamEvent]))
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    if snapshot is None:
        raise RuntimeError("the stream ended without message_start")
    return "messages.stream", messages_view(snapshot), rejected(events)


def raised(e, sdk):
    out = {"class": type(e).__name__, "message": text(str(e))}
    if isinstance(e, (openai.APIStatusError, anthropic.APIStatusError)):
        out["status"] = e.status_code
        body = e.body if isinstance(e.body, dict) else {}
        err = body.get("error") if isinstance(body.get("error"), dict) else body
        out["fields"] = {k: err.get(k) for k in ("message", "type", "param", "code")}
    return out


def replay(ex, base):
    is_messages = ex["path"].startswith("/v1/messages")
    sdk = "anthropic" if is_messages else "openai"
    name = f"{sdk}-python {VERSIONS[sdk]}"
    try:
        if is_messages:
            client = anthropic.Anthropic(base_url=base, api_key="replay", max_retries=0, timeout=30)
            done = anthropic_call(client, ex)
        else:
            client = openai.OpenAI(base_url=base, api_key="replay", max_retries=0, timeout=30)
            done = openai_call(client, ex)
    except Exception as e:  # what the user's code would see
        return {"client": name, "raised": raised(e, sdk)}
    if done is None:
        return None
    call, view, invalid, *lost = done
    out = {"client": name, "call": call, "value": view, "rejected": invalid}
    if lost and lost[0]:
        out["lost"] = lost[0]
    return out


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    print(json.dumps({"ready": VERSIONS}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        CURRENT["exchange"] = json.loads(line)
        print(json.dumps(replay(CURRENT["exchange"], base), default=str), flush=True)


if __name__ == "__main__":
    main()
