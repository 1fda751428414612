"""Summarises an scripts/interop/clients/run.sh run: OUT/summary.md (one row per
client: errors, latency and throughput figures, CPU time) and OUT/shapes.md
(every distinct request shape each client sent, from the capture proxy's
log, with the server's status and error text).

Usage: python3 summary.py OUT [client...]   (standard library only)
"""

import json
import os
import sys
from collections import Counter, OrderedDict

OUT = sys.argv[1]
CLIENTS = sys.argv[2:] or ["openai", "instructor", "guidellm", "aiperf", "afm-bench"]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def timing(client, label="run"):
    """user sys wall maxrss exit server_cpu, or None."""
    try:
        with open(os.path.join(OUT, client, f"{label}.time")) as f:
            parts = f.read().split()
    except OSError:
        return None
    if len(parts) < 6:
        return None
    u, s, wall, rss, rc, server = parts[:6]
    t = {"user": float(u), "sys": float(s), "wall": float(wall), "rss_mb": int(rss) / 1024,
         "exit": int(rc), "server_cpu": float(server)}
    if len(parts) > 6:
        # Everything else the machine ran meanwhile (other builds, the proxy).
        t["other_cpu"] = max(0.0, float(parts[6]) - t["user"] - t["sys"] - t["server_cpu"])
    return t


def pins(client):
    if client == "afm-bench":
        return "this repo's build"
    try:
        with open(os.path.join(ROOT, ".cache", "clients", f"{client}-venv", ".afm-pins")) as f:
            return f.read().strip()
    except OSError:
        return client


def command(client, label="run"):
    try:
        with open(os.path.join(OUT, client, f"{label}.cmd")) as f:
            return f.read().strip()
    except OSError:
        return ""


def fmt(x, nd=1):
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:,.{nd}f}"


# --- per-client figures -------------------------------------------------------


def guidellm_row():
    d = load(os.path.join(OUT, "guidellm", "benchmarks.json"))
    row = {"ran": "chat completions, streamed, fixed prompts (json_file), "
                  "concurrent streams, max_requests"}
    if not d or not d.get("benchmarks"):
        row["note"] = "no benchmarks.json (see guidellm/run.log)"
        return row
    m = d["benchmarks"][0]["metrics"]
    tot = m["request_totals"]
    row["requests"] = tot["total"]
    row["errors"] = tot["errored"] + tot.get("incomplete", 0)

    def stat(name, key="mean", scale=1.0):
        s = (m.get(name) or {}).get("successful") or {}
        if not s.get("count"):
            return None
        v = s["percentiles"]["p50"] if key == "p50" else s.get(key)
        return None if v is None else v * scale

    row.update(
        ttft=stat("time_to_first_token_ms"), ttft_p50=stat("time_to_first_token_ms", "p50"),
        itl=stat("inter_token_latency_ms"), tpot=stat("time_per_output_token_ms"),
        decode=stat("inter_token_latency_ms"),
        lat=stat("request_latency"), lat_p50=stat("request_latency", "p50"),
        out_tps=stat("output_tokens_per_second"), rps=stat("requests_per_second"),
        out_tokens=stat("output_token_count"), prompt_tokens=stat("prompt_token_count"),
    )
    errs = []
    for r in (d["benchmarks"][0].get("requests") or {}).get("errored") or []:
        e = (r.get("info") or {}).get("error") or r.get("error")
        if e and e not in errs:
            errs.append(e)
    row["error_examples"] = errs[:3]
    return row


def aiperf_row():
    d = load(os.path.join(OUT, "aiperf", "artifacts", "profile_export_aiperf.json"))
    row = {"ran": "chat completions, streamed, fixed prompts (single_turn input file), "
                  "--concurrency, --request-count, --no-server-metrics unless AIPERF_FLAGS says otherwise"}
    if not d:
        row["note"] = "no profile_export_aiperf.json (see aiperf/run.log)"
        return row

    def g(name, key="avg"):
        v = d.get(name)
        return v.get(key) if isinstance(v, dict) else None

    errors = sum(int(e.get("count", 0)) for e in d.get("error_summary") or [])
    ok = g("request_count") or 0
    row.update(
        requests=int(ok) + errors, errors=errors,
        ttft=g("time_to_first_token"), ttft_p50=g("time_to_first_token", "p50"),
        itl=g("inter_token_latency"), tpot=None, decode=g("inter_token_latency"),
        lat=(g("request_latency") or 0) / 1000 or None,
        lat_p50=(g("request_latency", "p50") or 0) / 1000 or None,
        out_tps=g("output_token_throughput"), rps=g("request_throughput"),
        out_tokens=g("output_sequence_length"), prompt_tokens=g("input_sequence_length"),
    )
    row["error_examples"] = [
        f"{e.get('count')}x {json.dumps(e.get('error_details') or e)[:300]}"
        for e in (d.get("error_summary") or [])[:3]
    ]
    return row


def afm_bench_row():
    d = load(os.path.join(OUT, "afm-bench", "bench.json"))
    row = {"ran": "chat completions, streamed (include_usage), temperature 0, same prompts file, "
                  "closed loop"}
    if not d:
        row["note"] = "no bench.json (see afm-bench/run.log)"
        return row
    lv = d["variants"][0]["levels"][0]

    def dist(k, key="mean", scale=1.0):
        v = lv.get(k)
        return v[key] * scale if v else None

    ok = lv["requests"] - lv["errors"]
    row.update(
        requests=lv["requests"], errors=lv["errors"],
        ttft=dist("ttft"), ttft_p50=dist("ttft", "p50"), itl=dist("itl"), tpot=dist("tpot"),
        decode=dist("tpot"),
        lat=dist("e2e", scale=1e-3), lat_p50=dist("e2e", "p50", 1e-3),
        out_tps=lv["output_tokens_per_s"], rps=lv["requests_per_s"],
        out_tokens=lv["output_tokens"] / ok if ok else None,
        prompt_tokens=lv["prompt_tokens"] / ok if ok else None,
        error_examples=lv.get("error_examples", []),
    )
    return row


def checks_row(client):
    d = load(os.path.join(OUT, client, "results.json"))
    row = {}
    if not d:
        row["note"] = f"no results.json (see {client}/run.log)"
        return row
    names = [c["name"] for c in d["checks"]]
    row["ran"] = f"{len(names)} checks: " + ", ".join(names)
    row["requests"] = len(names)
    row["errors"] = d["failed"]
    row["checks"] = d["checks"]
    return row


# --- request shapes ------------------------------------------------------------


def lit(v):
    return json.dumps(v) if isinstance(v, (bool, type(None))) else type(v).__name__


def value_shape(v, depth=0):
    """A compact, value-free shape: keys and types; short strings, booleans
    and null literally (they are the choices a client makes)."""
    if isinstance(v, dict):
        if depth >= 2:
            return "{...}"
        return "{" + ", ".join(f"{k}: {value_shape(x, depth + 1)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        if not v:
            return "[]"
        shapes = list(OrderedDict.fromkeys(value_shape(x, depth + 1) for x in v))
        return "[" + " | ".join(shapes) + "]"
    if isinstance(v, str):
        return json.dumps(v) if len(v) <= 24 and "\n" not in v else "str"
    return lit(v) if isinstance(v, (bool, type(None))) else type(v).__name__


def content_shape(c):
    if isinstance(c, str):
        return "str"
    if c is None:
        return "null"
    if isinstance(c, list):
        return "[" + ", ".join(
            (p.get("type", "?") + ("+" + "+".join(k for k in p if k not in ("type", "text")) if set(p) - {"type", "text"} else ""))
            if isinstance(p, dict) else type(p).__name__ for p in c) + "]"
    return type(c).__name__


def call_shape(call):
    """A tool call or a tool definition: its keys, the function's keys."""
    if not isinstance(call, dict):
        return type(call).__name__
    items = []
    for k, v in call.items():
        if k == "function" and isinstance(v, dict):
            items.append("function: {" + ", ".join(v.keys()) + "}")
        else:
            items.append(f"{k}: {value_shape(v, 2)}")
    return "{" + ", ".join(items) + "}"


def message_shape(m):
    if not isinstance(m, dict):
        return type(m).__name__
    s = f"{m.get('role', '?')}:" + (content_shape(m["content"]) if "content" in m else "<no content>")
    for k, v in m.items():
        if k in ("role", "content"):
            continue
        if k == "tool_calls" and isinstance(v, list):
            s += f" +tool_calls[{len(v)}× " + call_shape(v[0] if v else {}) + "]"
        elif isinstance(v, (bool, type(None))):
            s += f" +{k}={json.dumps(v)}"
        else:
            s += f" +{k}"
    return s


def body_shape(b):
    parts = []
    for k, v in b.items():
        if k == "messages" and isinstance(v, list):
            parts.append("messages=[" + ", ".join(message_shape(m) for m in v) + "]")
        elif k == "tools" and isinstance(v, list):
            parts.append(f"tools=[{len(v)}× " + " | ".join(OrderedDict.fromkeys(call_shape(t) for t in v)) + "]")
        elif k in ("model",):
            parts.append(f"{k}=str")
        elif k == "response_format" and isinstance(v, dict):
            js = v.get("json_schema")
            inner = ""
            if isinstance(js, dict):
                inner = ", json_schema: {" + ", ".join(
                    f"{k2}: {value_shape(x) if k2 != 'schema' else 'schema'}" for k2, x in js.items()) + "}"
            parts.append(f"response_format={{type: {json.dumps(v.get('type'))}{inner}}}")
        elif isinstance(v, (dict, list)):
            parts.append(f"{k}={value_shape(v)}")
        elif isinstance(v, str):
            parts.append(f"{k}={json.dumps(v) if len(v) <= 24 else 'str'}")
        else:
            parts.append(f"{k}={lit(v)}")
    return "{" + ", ".join(parts) + "}"


def error_text(e):
    if "error" in e:
        return e["error"]
    r = e.get("response")
    if isinstance(r, dict):
        err = r.get("error", r)
        if isinstance(err, dict):
            return err.get("message") or json.dumps(err)[:400]
        return str(err)[:400]
    if e.get("response_text"):
        return e["response_text"][:400]
    if e.get("sse_errors"):
        return "in stream: " + e["sse_errors"][0][:400]
    return ""


NOTED_HEADERS = ("user-agent", "content-type", "accept", "x-stainless-lang", "x-stainless-package-version",
                 "x-stainless-retry-count", "x-stainless-helper-method")


def shapes():
    path = os.path.join(OUT, "capture.jsonl")
    if not os.path.exists(path):
        return {}, {}
    by_tag, headers = OrderedDict(), OrderedDict()
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            tag = e.get("tag", "")
            key = (f"{e['method']} {e['path'].split('?')[0]}",
                   body_shape(e["body"]) if isinstance(e.get("body"), dict) else ("<no body>" if "body_text" not in e else "text"))
            d = by_tag.setdefault(tag, OrderedDict()).setdefault(key, {"n": 0, "status": Counter(), "errors": []})
            d["n"] += 1
            status = e.get("status")
            if e.get("sse_errors") and status == 200:
                status = "200 (error in stream)"
            d["status"][status] += 1
            t = error_text(e)
            if t and t not in d["errors"] and (e.get("status", 0) >= 400 or e.get("sse_errors")):
                d["errors"].append(t)
            h = headers.setdefault(tag, OrderedDict())
            for k, v in e.get("headers", {}).items():
                kl = k.lower()
                if kl in ("host", "content-length"):
                    continue
                vals = h.setdefault(kl, [])
                shown = v if kl in NOTED_HEADERS else "…"
                if shown not in vals and len(vals) < 3:
                    vals.append(shown)
    return by_tag, headers


def shapes_md(by_tag, headers):
    out = ["# Request shapes sent by each client", "",
           "From the capture proxy's log (`capture.jsonl`). A shape lists the body's fields in the",
           "order sent, with types; short strings, booleans and null literally. Messages:",
           "`role:content-form` (`str`, `null`, `[text, ...]` for an array of parts) and any other",
           "fields (`+tool_calls[...]`, `+tool_call_id`, `+refusal=null`, ...).", ""]
    for tag, shp in by_tag.items():
        out.append(f"## {tag}")
        out.append("")
        out.append("| # | endpoint | n | status | body shape | server error |")
        out.append("|---|---|---|---|---|---|")
        for i, ((ep, body), d) in enumerate(shp.items(), 1):
            status = ", ".join(f"{k}×{v}" for k, v in d["status"].items())
            err = "<br>".join(x.replace("|", "\\|").replace("\n", " ") for x in d["errors"][:2])
            out.append(f"| {i} | `{ep}` | {d['n']} | {status} | `{body.replace('|', '¦')}` | {err} |")
        out.append("")
        out.append("Headers: " + "; ".join(
            f"`{k}`" + (f" = {', '.join('`' + v + '`' for v in vals)}" if vals != ["…"] else "")
            for k, vals in headers.get(tag, {}).items()))
        out.append("")
    return "\n".join(out)


# --- summary -------------------------------------------------------------------


def main():
    rows = OrderedDict()
    for c in CLIENTS:
        if c == "guidellm":
            rows[c] = guidellm_row()
        elif c == "aiperf":
            rows[c] = aiperf_row()
        elif c == "afm-bench":
            rows[c] = afm_bench_row()
        else:
            rows[c] = checks_row(c)
        rows[c]["time"] = timing(c)
    by_tag, headers = shapes()

    server_cmd = ""
    try:
        with open(os.path.join(OUT, "server_command.txt")) as f:
            server_cmd = f.read().strip()
    except OSError:
        pass
    binary = ""
    try:
        with open(os.path.join(OUT, "binary.txt")) as f:
            binary = "; ".join(line.strip() for line in f if line.strip())
    except OSError:
        pass
    md = ["# Real clients against afm-serve", "",
          f"Server: `{server_cmd}` ({binary})", "",
          "CPU = the client process and its children, user+sys seconds (`/usr/bin/time`); "
          "server CPU = afm-serve's user+sys over the same interval; other CPU = every other "
          "process's over that interval (from /proc/stat: other builds, the capture proxy), "
          "the measure of how quiet the machine was. Client and server share the machine's cores. Latencies: mean (p50). ITL and TPOT are each tool's own figure, "
          "defined differently: GuideLLM ITL = (e2e − TTFT) / (tokens − 1) and TPOT = e2e / tokens; "
          "AIPerf ITL = (e2e − TTFT) / (tokens − 1); afm-bench ITL = the gaps between streamed "
          "chunks and TPOT = (e2e − TTFT) / (tokens − 1). *decode* is (e2e − TTFT) / (tokens − 1), "
          "per request, mean, the one figure all three report.", "",
          "| client | pinned | requests | errors | TTFT ms | decode ms/tok | ITL ms | TPOT ms | latency s "
          "| out tok/s | req/s | prompt / output tok per req | client CPU s | server CPU s | other CPU s "
          "| wall s | exit |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c, r in rows.items():
        t = r.get("time") or {}
        cpu = (t["user"] + t["sys"]) if t else None
        md.append("| " + " | ".join([
            c, pins(c).replace("==", " ").replace(" openai ", ", openai "), fmt(r.get("requests"), 0), fmt(r.get("errors"), 0),
            f"{fmt(r.get('ttft'))} ({fmt(r.get('ttft_p50'))})" if r.get("ttft") is not None else "—",
            fmt(r.get("decode"), 2), fmt(r.get("itl"), 2), fmt(r.get("tpot"), 2),
            f"{fmt(r.get('lat'), 3)} ({fmt(r.get('lat_p50'), 3)})" if r.get("lat") is not None else "—",
            fmt(r.get("out_tps")), fmt(r.get("rps"), 2),
            f"{fmt(r.get('prompt_tokens'), 0)} / {fmt(r.get('out_tokens'), 1)}" if r.get("prompt_tokens") else "—",
            fmt(cpu, 2), fmt(t.get("server_cpu"), 2), fmt(t.get("other_cpu"), 1),
            fmt(t.get("wall"), 1), fmt(t.get("exit"), 0),
        ]) + " |")
    md.append("")
    md.append("## What each client ran")
    md.append("")
    for c, r in rows.items():
        md.append(f"- **{c}** ({pins(c)}): {r.get('ran', '')}. {r.get('note', '')}")
        md.append(f"  - command: `{command(c)}`")
        for label in ("capture-file", "capture-synthetic"):
            ct = timing(c, label)
            if ct:
                md.append(f"  - capture pass `{label}` (through the proxy): exit {ct['exit']}, "
                          f"{ct['wall']:.1f} s wall, {ct['user'] + ct['sys']:.2f} s CPU; command: `{command(c, label)}`")
    md.append("")
    md.append("## Failures")
    md.append("")
    any_fail = False
    for c, r in rows.items():
        for ch in r.get("checks") or []:
            if not ch["ok"]:
                any_fail = True
                md.append(f"- {c} `{ch['name']}`: {ch['error']}")
        for e in r.get("error_examples") or []:
            any_fail = True
            md.append(f"- {c}: {str(e)[:500]}")
    if not any_fail:
        md.append("None.")
    md.append("")
    md.append("## Failing request shapes (captured)")
    md.append("")
    failing = False
    for tag, shp in by_tag.items():
        for (ep, body), d in shp.items():
            bad = {k: v for k, v in d["status"].items() if k != 200}
            if bad:
                failing = True
                md.append(f"- **{tag}** `{ep}` ×{sum(bad.values())} ({', '.join(f'{k}' for k in bad)}): "
                          f"`{body}` → {'; '.join(d['errors'][:2])}")
    if not failing:
        md.append("None." if by_tag else "No capture (run without --no-capture).")
    md.append("")
    md.append("All captured shapes: `shapes.md`.")
    with open(os.path.join(OUT, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    if by_tag:
        with open(os.path.join(OUT, "shapes.md"), "w") as f:
            f.write(shapes_md(by_tag, headers) + "\n")
    print("\n".join(md))
    # Non-zero when a client failed a check, had an error, or exited badly.
    bad = [c for c, r in rows.items()
           if r.get("errors") or r.get("note") or (r.get("time") or {}).get("exit")]
    if bad:
        print(f"failed: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
