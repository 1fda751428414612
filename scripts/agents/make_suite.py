#!/usr/bin/env python3
"""Writes suites/25_agents.toml from the captured requests of the coding
agents (fixtures/agents/AGENT/TASK/NNN-*.json, made by capture.sh).

Each case is one real request, as the client sent it, with long texts
shortened so a small model can take it (instructions, system prompts, tool
and schema descriptions: the head of each, marked as cut); every structural
field is kept: tools and their schemas, namespaces, hosted tools, thinking,
effort, context management, cache_control, metadata, max_tokens, ids and
headers. `model` is dropped (the run names its own). A case that needs the
shell tool called forces it with the protocol's tool_choice, so a small
model's choice is not what is graded.
"""
import json
import os
import sys

# Characters of one text kept; past it the text is cut and marked.
TEXT_LIMIT = 500
# Of a description inside a tool schema.
SCHEMA_LIMIT = 60
CUT = " [...]"
HEADERS_KEPT = {
    "anthropic-beta", "anthropic-version", "x-app", "originator", "accept",
    "openai-beta", "x-stainless-timeout",
}


def shorten(value, limit=TEXT_LIMIT, in_schema=False):
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit].rstrip() + CUT
    if isinstance(value, list):
        return [shorten(v, limit, in_schema) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            schema = in_schema or k in ("parameters", "input_schema")
            if schema and k == "description":
                out[k] = shorten(v, SCHEMA_LIMIT, True)
            elif schema and isinstance(v, str):
                out[k] = v  # enum values, patterns, types: structure
            elif k in ("id", "call_id", "tool_use_id", "type", "role", "name", "signature",
                       "encrypted_content", "prompt_cache_key", "namespace"):
                out[k] = v
            elif k == "description":
                out[k] = shorten(v, 160, in_schema)
            else:
                out[k] = shorten(v, limit, schema)
        return out
    return value


def load(root, agent, task):
    folder = os.path.join(root, agent, task)
    files = sorted(f for f in os.listdir(folder) if f.endswith(".json"))
    out = []
    for f in files:
        entry = json.load(open(os.path.join(folder, f)))
        body = shorten(entry["body"])
        body.pop("model", None)
        body.pop("stream", None)  # the case's mode streams it
        path = entry["path"] + (("?" + entry["query"]) if entry.get("query") else "")
        headers = {k: v for k, v in entry["headers"].items() if k in HEADERS_KEPT}
        out.append({"file": f"{agent}/{task}/{f}", "path": path, "body": body, "headers": headers})
    return out


def turn(requests, endpoint, with_tools=True, index=0):
    """The `index`-th request to `endpoint` (with tools, or without)."""
    found = [r for r in requests if r["path"].split("?")[0].endswith(endpoint)
             and bool(r["body"].get("tools")) == with_tools]
    if len(found) <= index:
        sys.exit(f"make_suite: no request {index} to {endpoint} (tools: {with_tools}) in "
                 + ", ".join(r["file"] for r in requests))
    return found[index]


def toml_str(s):
    return json.dumps(s, ensure_ascii=False)


def case(cid, name, req, checks, requires, tier="standard", body=None, comment=None,
         then=None):
    body = body if body is not None else req["body"]
    lines = []
    if comment:
        lines += [f"# {c}" for c in comment.split("\n")]
    lines += ["[[case]]", f"id = {toml_str(cid)}", f"name = {toml_str(name)}",
              f"tier = {toml_str(tier)}", f"requires = {json.dumps(requires)}",
              'mode = "stream"', f"path = {toml_str(req['path'])}",
              f"# Captured: fixtures/agents/{req['file']}"]
    if req["headers"]:
        lines.append("headers = { " + ", ".join(f"{toml_str(k)} = {toml_str(v)}"
                                                  for k, v in sorted(req["headers"].items())) + " }")
    if then:
        lines.append('scenario = { kind = "sequence", then = [] }')
    text = json.dumps(body, ensure_ascii=False, indent=1)
    assert "'''" not in text
    lines.append(f"request_json = '''\n{text}\n'''")
    if then:
        lines.append(f"then_json = '''\n{json.dumps(then, ensure_ascii=False, indent=1)}\n'''")
    lines.append("check = [\n" + "".join(f"  {c},\n" for c in checks) + "]")
    return "\n".join(lines) + "\n"


def with_fields(body, **fields):
    b = json.loads(json.dumps(body))
    b.update(fields)
    return b


def main():
    root = sys.argv[1]
    codex = {t: load(root, "codex", t) for t in ("text", "shell")}
    claude = {t: load(root, "claude", t) for t in ("text", "shell")}
    opencode = {t: load(root, "opencode", t) for t in ("text", "shell")}
    sse, ok = '{ kind = "sse" }', '{ kind = "no_error" }'
    answered, ids = '{ kind = "turn_taken" }', '{ kind = "item_ids" }'
    out = ['''section = "agents"
title = "Coding agents"
description = "The requests Codex CLI 0.171.0 (Responses), Claude Code 2.1.332 (Messages) and OpenCode 1.18.33 (chat completions) really send, captured from the clients by scripts/agents/capture.sh: long texts shortened, every structural field kept. Each case checks what that client needs of the reply."
# Generated by scripts/agents/make_suite.py from fixtures/agents; do not edit.
''']
    c1, c2 = turn(codex["shell"], "/responses"), turn(codex["shell"], "/responses", index=1)
    ct = turn(codex["text"], "/responses")
    out.append(case("agents.codex_text", "Codex's first turn gets a completed response it can match item by item",
                    ct, [ok, sse, ids, answered, '{ kind = "finish_reason", one_of = ["completed", "max_output_tokens"] }'],
                    ["responses", "streaming"]))
    out.append(case("agents.codex_shell_call", "Codex's turn, its shell tool forced, gets an exec_command call with consistent ids",
                    c1, [ok, sse, ids, '{ kind = "tool_call", name = "exec_command" }', '{ kind = "tool_args" }'],
                    ["responses", "streaming", "tools"],
                    body=with_fields(c1["body"], tool_choice={"type": "function", "name": "exec_command"}),
                    comment="tool_choice forces the shell tool (Codex sends \"auto\"): the server's call path is graded, not a small model's choice."))
    out.append(case("agents.codex_tool_result", "Codex's turn after its shell call (function_call and its output as items) is answered",
                    c2, [ok, sse, ids, answered], ["responses", "streaming"]))
    out.append(case("agents.codex_cached_turn", "Codex's second turn reuses the cached prefix of its first",
                    c2, [ok, '{ kind = "cached_tokens", min_fraction = 0.5 }'], ["responses", "streaming", "prefix_cache"],
                    then=[c2["body"]], body=c1["body"]))
    m1, m2 = turn(claude["shell"], "/messages"), turn(claude["shell"], "/messages", index=1)
    mt = turn(claude["text"], "/messages")
    out.append(case("agents.claude_text", "Claude Code's first turn (adaptive thinking, effort, context management) is answered",
                    mt, [ok, sse, answered, '{ kind = "finish_reason", one_of = ["end_turn", "max_tokens", "tool_use"] }'],
                    ["messages", "streaming"]))
    out.append(case("agents.claude_shell_call", "Claude Code's turn, its Bash tool forced, gets a tool_use block and stop reason tool_use",
                    m1, [ok, sse, '{ kind = "tool_call", name = "Bash" }', '{ kind = "tool_args" }',
                         '{ kind = "finish_reason", one_of = ["tool_use"] }'],
                    ["messages", "streaming", "tools"],
                    body=with_fields(m1["body"], tool_choice={"type": "tool", "name": "Bash"}, thinking={"type": "disabled"}),
                    comment="tool_choice forces Bash (Claude Code lets the model choose); Anthropic refuses a forced\ntool with thinking on, so thinking is disabled here."))
    out.append(case("agents.claude_tool_result", "Claude Code's turn after its Bash call (tool_use, tool_result with cache_control) is answered",
                    m2, [ok, sse, answered], ["messages", "streaming"], tier="full",
                    comment="Full tier: its turn is free (no tool_choice, temperature 1, max_tokens 32000),\nso it ends only when the model ends its turn: a small model that rambles\nruns to the request's time limit (the conformance model did on afm-serve,\n2026-12-02, after answering in one sentence the run before)."))
    o_title = turn(opencode["shell"], "/chat/completions", with_tools=False)
    o1 = turn(opencode["shell"], "/chat/completions")
    o2 = turn(opencode["shell"], "/chat/completions", index=1)
    ot = turn(opencode["text"], "/chat/completions")
    out.append(case("agents.opencode_title", "OpenCode's title request (max_tokens 32000, past any small context) is answered",
                    o_title, [ok, sse, answered], ["chat", "streaming"], tier="full",
                    comment="Full tier: it ends only when the model ends its turn (a base model that rambles\nruns to the request's time limit on any server that does not refuse max_tokens 32000)."))
    out.append(case("agents.opencode_text", "OpenCode's first turn (10 tools, max_tokens 32000) is answered",
                    ot, [ok, sse, answered], ["chat", "streaming"]))
    out.append(case("agents.opencode_shell_call", "OpenCode's turn, its bash tool forced, streams tool_calls deltas it can assemble",
                    o1, [ok, sse, '{ kind = "tool_call", name = "bash" }', '{ kind = "tool_call_ids" }',
                         '{ kind = "arguments_are_strings" }', '{ kind = "tool_args" }'],
                    ["chat", "streaming", "tools"],
                    body=with_fields(o1["body"], tool_choice={"type": "function", "function": {"name": "bash"}}),
                    comment="tool_choice forces bash (OpenCode sends \"auto\")."))
    out.append(case("agents.opencode_tool_result", "OpenCode's turn after its bash call is answered",
                    o2, [ok, sse, answered], ["chat", "streaming"]))
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
