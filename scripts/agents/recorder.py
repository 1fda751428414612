#!/usr/bin/env python3
"""A recorder for a coding agent: writes every request the agent sends
(method, path, query, headers, JSON body) to a folder, one file per
request, in order, and answers it itself from a script (`--script
shell|text`), so an agent's later turns (after a tool call) are captured
whatever server or model there is. (To log what an agent sends to a real
server instead, scripts/interop/clients/capture_proxy.py forwards.)

The script answers in the protocol the request speaks (chat completions,
Anthropic Messages, OpenAI Responses), streamed or whole:
  shell: the first request that offers the agent's shell tool gets a call to
         it (`ls`); a request carrying that tool's result, and any request
         offering no shell tool (titles, quota checks), gets text.
  text:  every request gets text.
Secrets (authorization, x-api-key) are never written.
"""
import argparse
import http.server
import itertools
import json
import os
import sys
import threading
import time
import urllib.parse

SECRET_HEADERS = {"authorization", "x-api-key", "cookie"}
SHELL_TOOLS = {
    # tool name -> arguments of the scripted call
    "exec_command": {"cmd": "ls"},  # Codex
    "shell": {"command": ["ls"]},  # older Codex
    "Bash": {"command": "ls", "description": "List the files here"},  # Claude Code
    "bash": {"command": "ls", "description": "List the files here"},  # OpenCode
}
TEXT_REPLY = "Hello! How can I help you today?"
DONE_REPLY = "The folder holds the files listed above."


def tool_names(body):
    names = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        names.append(t.get("name") or (t.get("function") or {}).get("name"))
    return [n for n in names if n]


def has_tool_result(body):
    """Whether the request carries a tool's result (any protocol)."""
    for m in body.get("messages") or []:
        if m.get("role") == "tool":
            return True
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            return True
    for item in body.get("input") or [] if isinstance(body.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") in (
            "function_call_output",
            "custom_tool_call_output",
        ):
            return True
    return False


def scripted(body, script):
    """(text, call) the script answers `body` with; call = (name, args)."""
    if script == "shell" and not has_tool_result(body):
        for name in tool_names(body):
            if name in SHELL_TOOLS:
                return None, (name, SHELL_TOOLS[name])
    return (DONE_REPLY if has_tool_result(body) else TEXT_REPLY), None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counter = itertools.count(1)
    lock = threading.Lock()

    def log_message(self, fmt, *args):  # quiet
        pass

    def record(self, body_bytes):
        url = urllib.parse.urlsplit(self.path)
        try:
            body = json.loads(body_bytes) if body_bytes else None
        except ValueError:
            body = body_bytes.decode("utf-8", "replace")
        headers = {
            k.lower(): ("<redacted>" if k.lower() in SECRET_HEADERS else v)
            for k, v in self.headers.items()
        }
        with self.lock:
            n = next(self.counter)
        name = f"{n:03d}-{self.command.lower()}{url.path.replace('/', '_')}.json"
        entry = {
            "method": self.command,
            "path": url.path,
            "query": url.query,
            "headers": headers,
            "body": body,
        }
        with open(os.path.join(self.server.out, name), "w") as f:
            json.dump(entry, f, indent=1, ensure_ascii=False)
            f.write("\n")
        return body

    def read_body(self):
        n = int(self.headers.get("content-length") or 0)
        if n:
            return self.rfile.read(n)
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def handle_any(self):
        raw = self.read_body()
        body = self.record(raw)
        self.answer(body if isinstance(body, dict) else {})

    do_GET = do_POST = do_PUT = do_DELETE = handle_any

    # --- scripted replies -------------------------------------------------
    def answer(self, body):
        path = urllib.parse.urlsplit(self.path).path
        if self.command == "GET" and path.endswith("/models"):
            return self.json(200, {"object": "list", "data": [
                {"id": self.server.model, "object": "model", "created": 0, "owned_by": "recorder"}]})
        if path.endswith("/count_tokens"):
            return self.json(200, {"input_tokens": len(json.dumps(body)) // 4})
        text, call = scripted(body, self.server.script)
        stream = bool(body.get("stream"))
        if path.endswith("/chat/completions"):
            events, whole = chat_reply(body, text, call)
        elif path.endswith("/messages"):
            events, whole = messages_reply(body, text, call)
        elif path.endswith("/responses"):
            events, whole = responses_reply(body, text, call)
        else:
            return self.json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
        if not stream:
            return self.json(200, whole)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for name, data in events:
            frame = (f"event: {name}\n" if name else "") + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
            frame = frame.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


def chat_reply(body, text, call):
    base = {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model", "")}
    chunks = [dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    if call:
        name, args = call
        tc = {"index": 0, "id": "call_rec_1", "type": "function",
              "function": {"name": name, "arguments": json.dumps(args)}}
        chunks.append(dict(base, choices=[{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": None}]))
        finish, message = "tool_calls", {"role": "assistant", "content": None, "tool_calls": [
            {k: v for k, v in tc.items() if k != "index"}]}
    else:
        chunks.append(dict(base, choices=[{"index": 0, "delta": {"content": text}, "finish_reason": None}]))
        finish, message = "stop", {"role": "assistant", "content": text}
    chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
    chunks.append(dict(base, choices=[], usage=USAGE))
    whole = {"id": "chatcmpl-rec", "object": "chat.completion", "created": base["created"],
             "model": base["model"], "usage": USAGE,
             "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    return [(None, c) for c in chunks] + [(None, "[DONE]")], whole


def messages_reply(body, text, call):
    usage = {"input_tokens": 100, "output_tokens": 10}
    msg = {"id": "msg_rec", "type": "message", "role": "assistant", "model": body.get("model", ""),
           "content": [], "stop_reason": None, "stop_sequence": None, "usage": dict(usage, output_tokens=1)}
    ev = [("message_start", {"type": "message_start", "message": msg})]
    if call:
        name, args = call
        block = {"type": "tool_use", "id": "toolu_rec_1", "name": name, "input": {}}
        ev += [("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
               ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)}})]
        stop, content = "tool_use", [dict(block, input=args)]
    else:
        ev += [("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}}),
               ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": text}})]
        stop, content = "end_turn", [{"type": "text", "text": text}]
    ev += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
           ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                              "usage": {"output_tokens": 10}}),
           ("message_stop", {"type": "message_stop"})]
    return ev, dict(msg, content=content, stop_reason=stop, usage=usage)


def responses_reply(body, text, call):
    resp = {"id": "resp_rec", "object": "response", "created_at": int(time.time()), "status": "in_progress",
            "model": body.get("model", ""), "output": [], "error": None, "incomplete_details": None}
    if call:
        name, args = call
        item = {"type": "function_call", "id": "fc_rec_1", "call_id": "call_rec_1", "name": name,
                "arguments": json.dumps(args), "status": "completed"}
    else:
        item = {"type": "message", "id": "msg_rec_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}
    seq = itertools.count()
    ev = [{"type": "response.created", "response": resp},
          {"type": "response.in_progress", "response": resp},
          {"type": "response.output_item.added", "output_index": 0,
           "item": dict(item, status="in_progress", **({"arguments": ""} if call else {"content": []}))}]
    if call:
        ev += [{"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0,
                "delta": item["arguments"]},
               {"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": 0,
                "arguments": item["arguments"]}]
    else:
        part = {"type": "output_text", "text": "", "annotations": []}
        ev += [{"type": "response.content_part.added", "item_id": item["id"], "output_index": 0,
                "content_index": 0, "part": part},
               {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
                "content_index": 0, "delta": text},
               {"type": "response.output_text.done", "item_id": item["id"], "output_index": 0,
                "content_index": 0, "text": text},
               {"type": "response.content_part.done", "item_id": item["id"], "output_index": 0,
                "content_index": 0, "part": dict(part, text=text)}]
    done = dict(resp, status="completed", output=[item], usage=usage)
    ev += [{"type": "response.output_item.done", "output_index": 0, "item": item},
           {"type": "response.completed", "response": done}]
    for e in ev:
        e["sequence_number"] = next(seq)
    return [(e["type"], e) for e in ev], done


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True, help="folder the requests are written to")
    ap.add_argument("--script", choices=["shell", "text"], required=True, help="how to answer")
    ap.add_argument("--model", default="recorded")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.out, server.script, server.model = args.out, args.script, args.model
    print(f"recorder on 127.0.0.1:{args.port}, answering by script '{args.script}'", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
