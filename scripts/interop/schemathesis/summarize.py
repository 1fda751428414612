#!/usr/bin/env python3
"""Summarizes schemathesis 4.x NDJSON event streams: requests per operation
(and per phase), the failing checks grouped into classes with a count and
one example request and reply each, and the number of 5xx replies.

    summarize.py [--spec PATCHED.json] [--json OUT.json] [--markdown OUT.md]
        PASS=EVENTS.ndjson...

Each PASS names one schemathesis run (run.sh has `json`, where `stream`
is as the spec allows, and `stream`, where every request streams); an
operation is reported as "POST /path" in the first pass given and
"POST /path [PASS]" in the others.

A class is the operation, the check, the reply's status and a reason: for
a refused request the server's error (its `param` and message, numbers and
quoted values blanked); for a reply that violates the schema, each
innermost violation (with --spec: the reply, or each event of a stream, is
validated again and, in a oneOf or anyOf, the branch whose `type` matches
is followed; array indices blanked), so one reply can count in several
classes; otherwise the failure's title and first line. Exit status 0; the
caller judges.
"""

import argparse
import base64
import collections
import copy
import json
import re
import sys

NUMBER = re.compile(r"\d+(\.\d+)?")


def decode(payload):
    """The body of an interaction's request or response, as text."""
    if not payload:
        return ""
    if "$base64" in payload:
        return base64.b64decode(payload["$base64"]).decode("utf-8", "replace")
    return payload.get("string", "")


def normalize(text):
    text = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'…'", text)
    return NUMBER.sub("N", text).strip()


def shorten(text, limit):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def server_reason(reply):
    try:
        error = json.loads(reply).get("error")
    except (ValueError, AttributeError):
        return normalize(reply[:120])
    if not isinstance(error, dict):
        return normalize(reply[:120])
    param = error.get("param")
    message = normalize(str(error.get("message", "")).split("\n")[0])
    if param:
        param = re.sub(r"\[\d+\]", "[N]", str(param))
        message = message.removeprefix(normalize(str(error["param"])) + ": ")
        return f"{param}: {message}"
    return message


def message_reason(message):
    """First line of a schemathesis failure message, values elided."""
    lines = message.split("\n")
    first = lines[0]
    # "<instance> is not valid under any of the schemas ..." and the like.
    first = re.sub(r"^.* (is not valid under|is not of type|is not one of|is valid under)", r"value \1", first)
    first = NUMBER.sub("N", first).strip()[:160]
    where = next((l for l in lines if l.startswith("Schema at ")), "")
    where = where.removeprefix("Schema at ").rstrip(":")
    return f"{first} ({where})" if where else first


def to_json_schema(node):
    """OpenAPI 3.0's `nullable` (which this spec still uses) as JSON Schema."""
    if isinstance(node, list):
        return [to_json_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    node = {k: to_json_schema(v) for k, v in node.items()}
    if node.pop("nullable", False):
        if isinstance(node.get("type"), str) and not any(k in node for k in ("oneOf", "anyOf", "$ref", "allOf")):
            node["type"] = [node["type"], "null"]
            if "enum" in node:
                node["enum"] = list(node["enum"]) + [None]
        else:
            node = {"anyOf": [node, {"type": "null"}]}
    return node


class Explainer:
    """Validates a reply again to name its innermost violations."""

    def __init__(self, spec_path):
        import jsonschema_rs

        self.rs = jsonschema_rs
        with open(spec_path, encoding="utf-8") as f:
            spec = json.load(f)
        self.components = to_json_schema(spec.get("components", {}))
        self.paths = spec["paths"]
        self.validators = {}

    def validator(self, label, stream=False):
        if (label, stream) not in self.validators:
            method, path = label.split(" ", 1)
            ok = self.paths[path][method.lower()]["responses"]["200"]["content"]
            if stream:
                item = ok["text/event-stream"]["itemSchema"]
                root = copy.deepcopy(item["else"]["properties"]["data"]["contentSchema"])
            else:
                root = copy.deepcopy(ok["application/json"]["schema"])
            root["components"] = self.components
            self.validators[(label, stream)] = self.rs.Draft202012Validator(root, validate_formats=False)
        return self.validators[(label, stream)]

    def leaves(self, error, depth=0):
        context = getattr(error.kind, "context", None)
        if not context or depth > 20:
            return [error]
        base = list(error.instance_path)

        def score(branch):
            wrong_type = any(
                list(e.instance_path) == base + ["type"] for e in branch
            )
            return (wrong_type, len(branch), -max(len(e.instance_path) for e in branch))

        best = min(context, key=score)
        out = []
        for e in best:
            out.extend(self.leaves(e, depth + 1))
        return out

    def explain(self, label, reply, stream=False):
        """The innermost violations of a JSON reply, or of each event of a
        stream (prefixed with the event's `type`), or None."""
        try:
            if stream:
                events = []
                for block in re.split(r"\r?\n\r?\n", reply):
                    data = "\n".join(
                        line[5:].removeprefix(" ") for line in block.splitlines() if line.startswith("data:")
                    )
                    if data and data != "[DONE]":
                        events.append(json.loads(data))
            else:
                events = [json.loads(reply)]
            validator = self.validator(label, stream)
        except Exception:  # not JSON, or a schema this cannot read
            return None
        reasons = set()
        for data in events:
            prefix = ""
            if stream:
                kind = data.get("type") or data.get("object") if isinstance(data, dict) else None
                prefix = f"event {kind}: "
            try:
                errors = list(validator.iter_errors(data))
            except Exception:
                return None
            for error in errors:
                for leaf in self.leaves(error):
                    path = ".".join("N" if isinstance(p, int) else str(p) for p in leaf.instance_path)
                    message = leaf.message
                    if len(message) > 120:
                        message = re.sub(r"^.* (is not valid under|is not of type|is not one of)", r"value \1", message)
                    reasons.add(f"{prefix}{path or '(root)'}: {shorten(message, 120)}")
        return sorted(reasons) or None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("passes", nargs="+", metavar="PASS=EVENTS")
    parser.add_argument("--spec")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    explainer = Explainer(args.spec) if args.spec else None

    requests = collections.Counter()
    per_phase = collections.Counter()
    statuses = collections.Counter()
    server_errors = collections.Counter()
    classes = {}
    errors = []
    seeds = {}
    def record(label, check, status, reason, failure, case_id, phase, request_body, reply, message):
        entry = classes.setdefault(
            (label, check, status, reason),
            {
                "operation": label,
                "check": check,
                "code": failure.get("code"),
                "title": failure.get("title"),
                "status": status,
                "reason": reason,
                "count": 0,
                "phases": collections.Counter(),
                "example": {
                    "case": case_id,
                    "phase": phase,
                    "request": request_body,
                    "status": status,
                    "reply": reply,
                    "message": message,
                },
            },
        )
        entry["count"] += 1
        entry["phases"][phase] += 1

    for index, item in enumerate(args.passes):
        name, _, events = item.partition("=")
        suffix = "" if index == 0 else f" [{name}]"
        with open(events, encoding="utf-8") as f:
            for line in f:
                event = json.loads(line)
                ((kind, body),) = event.items()
                if kind == "Initialize":
                    seeds[name] = body.get("seed")
                if kind in ("NonFatalError", "FatalError"):
                    errors.append(f"{name}: " + shorten(json.dumps(body.get("info", body)), 300))
                if kind != "ScenarioFinished":
                    continue
                recorder = body.get("recorder") or {}
                operation = recorder.get("label", "?")
                label = operation + suffix
                phase = body.get("phase", "?")
                interactions = recorder.get("interactions", {})
                for interaction in interactions.values():
                    requests[label] += 1
                    per_phase[(label, phase)] += 1
                    status = (interaction.get("response") or {}).get("status_code")
                    statuses[(label, status)] += 1
                    if status is not None and status >= 500:
                        server_errors[label] += 1
                for case_id, checks in recorder.get("checks", {}).items():
                    interaction = interactions.get(case_id, {})
                    request_body = decode(interaction.get("request", {}).get("body"))
                    response = interaction.get("response") or {}
                    reply = decode(response.get("content"))
                    status = response.get("status_code")
                    content_type = (response.get("headers") or {}).get("content-type", [""])[0]
                    for check in checks:
                        if check.get("status") != "failure":
                            continue
                        failure = check["failure_info"]["failure"]
                        name_ = check["name"]
                        message = failure.get("message", "")
                        reasons = None
                        if name_ == "response_schema_conformance" and explainer:
                            if content_type.startswith("application/json"):
                                reasons = explainer.explain(operation, reply)
                            elif content_type.startswith("text/event-stream"):
                                reasons = explainer.explain(operation, reply, stream=True)
                        elif status is not None and status >= 400 and name_ == "positive_data_acceptance":
                            reasons = [server_reason(reply)]
                        if not reasons:
                            reasons = [f"{failure.get('title')}: {message_reason(message)}"]
                        for reason in reasons:
                            record(label, name_, status, reason, failure, case_id, phase, request_body, reply, message)

    ordered = sorted(classes.values(), key=lambda c: (c["operation"], -c["count"], c["check"], c["reason"]))
    out = [f"schemathesis summary (seeds {seeds})", ""]
    out.append("| operation | requests | by phase | statuses | 5xx |")
    out.append("| --- | ---: | --- | --- | ---: |")
    for label in sorted(requests):
        phases = ", ".join(f"{p} {n}" for (l, p), n in sorted(per_phase.items()) if l == label)
        codes = ", ".join(
            f"{s}: {n}" for (l, s), n in sorted(statuses.items(), key=lambda x: str(x[0][1])) if l == label
        )
        out.append(f"| {label} | {requests[label]} | {phases} | {codes} | {server_errors[label]} |")
    out.append(f"| total | {sum(requests.values())} | | | {sum(server_errors.values())} |")
    out.append("")
    out.append("| # | operation | check | status | class | count |")
    out.append("| ---: | --- | --- | --- | --- | ---: |")
    for i, c in enumerate(ordered, 1):
        reason = shorten(c["reason"], 160).replace("|", "\\|")
        out.append(f"| {i} | {c['operation']} | {c['check']} | {c['status']} | {reason} | {c['count']} |")
    out.append(f"| | total | | | {len(ordered)} classes | {sum(c['count'] for c in ordered)} |")
    if errors:
        out.append("")
        out.append(f"errors ({len(errors)}):")
        out.extend(f"  {e}" for e in errors[:20])
    out.append("")
    out.append("examples (one per class):")
    for i, c in enumerate(ordered, 1):
        ex = c["example"]
        out.append(f"{i}. {c['operation']} {c['check']} [{c['status']}] {shorten(c['reason'], 160)}")
        out.append(f"   request: {shorten(ex['request'], 400)}")
        out.append(f"   reply:   {shorten(ex['reply'], 300)}")
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if args.json:
        summary = {
            "seeds": seeds,
            "requests": dict(requests),
            "server_errors": dict(server_errors),
            "statuses": {f"{l} {s}": n for (l, s), n in statuses.items()},
            "classes": [dict(c, phases=dict(c["phases"])) for c in ordered],
            "errors": errors,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
