#!/usr/bin/env python3
"""Writes fixtures/agents/sessions.json, afm-bench's agent sessions
(`--prompts agents`), from the captured first requests of the coding agents
(fixtures/agents/AGENT/shell/001-*.json, made by capture.sh).

Each session keeps what its agent sends on every turn, whole: its
instructions (Codex's instructions and developer messages, Claude Code's
system blocks and reminders, OpenCode's system prompt) and its tools, in
the chat-completions shape (Codex's namespace tools flattened as
`NS__NAME`, hosted tools left out: no chat server can run them; Claude
Code's `input_schema` as `parameters`). Its shell tool's name and argument
let afm-bench grow the session turn by turn with calls of that tool and
their results.
"""
import json
import os
import sys


def text_of(content):
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))


def function(name, description, parameters):
    return {"type": "function", "function": {
        "name": name, "description": description or "",
        "parameters": parameters or {"type": "object", "properties": {}}}}


def codex(body):
    system = [body.get("instructions") or ""]
    context = []
    for item in body.get("input", []):
        if item.get("type") != "message":
            continue
        if item.get("role") == "developer":
            system.append(text_of(item["content"]))
        elif item.get("role") == "user":
            context.append(text_of(item["content"]))
    tools = []
    for t in body.get("tools", []):
        if t.get("type") == "function":
            tools.append(function(t["name"], t.get("description"), t.get("parameters")))
        elif t.get("type") == "namespace":
            for inner in t.get("tools", []):
                tools.append(function(f'{t["name"]}__{inner["name"]}', inner.get("description"),
                                      inner.get("parameters")))
    # The last user message is the task; those before it are context.
    return system, context[:-1], tools, "exec_command", "cmd"


def claude(body):
    system = [text_of(body.get("system", []))]
    context = []
    for m in body.get("messages", []):
        if m.get("role") == "system":
            system.append(text_of(m["content"]))
        elif m.get("role") == "user" and isinstance(m["content"], str):
            context.append(m["content"])
        elif m.get("role") == "user":
            # Its reminders come as text blocks before the task's.
            context.extend(p.get("text", "") for p in m["content"] if p.get("type") == "text")
    tools = [function(t["name"], t.get("description"), t.get("input_schema"))
             for t in body.get("tools", []) if "input_schema" in t and not t.get("defer_loading")]
    return system, context[:-1], tools, "Bash", "command"


def opencode(body):
    system = [text_of(m["content"]) for m in body["messages"] if m["role"] == "system"]
    context = [text_of(m["content"]) for m in body["messages"] if m["role"] == "user"]
    return system, context[:-1], body.get("tools", []), "bash", "command"


def main(root):
    sessions = []
    for agent, convert in (("codex", codex), ("claude", claude), ("opencode", opencode)):
        folder = os.path.join(root, agent, "shell")
        first = sorted(f for f in os.listdir(folder) if f.endswith(".json"))
        # OpenCode's first request names the session (no tools): take the
        # first one that offers tools.
        for name in first:
            body = json.load(open(os.path.join(folder, name)))["body"]
            if body.get("tools"):
                break
        system, context, tools, shell, arg = convert(body)
        sessions.append({
            "agent": agent,
            "system": "\n\n".join(s for s in system if s),
            "context": context,
            "tools": tools,
            "shell_tool": shell,
            "shell_argument": arg,
        })
    json.dump({"sessions": sessions}, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fixtures/agents")
