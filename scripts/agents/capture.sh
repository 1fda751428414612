#!/usr/bin/env bash
# Re-captures the agents' real requests: each pinned client (install.sh) runs
# headless, as shipped, against the recorder (recorder.py), which answers
# from a script (a shell-tool call, then text), so every turn is captured
# whatever server or model there is. The requests land in
# fixtures/agents/AGENT/TASK/ (this machine's scratch paths replaced by
# /home/user), and make_suite.py turns them into suites/25_agents.toml.
# A client's new release: bump install.sh, run this, read the diff.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/scripts/agents"
OUT="$ROOT/fixtures/agents"
PY="${PYTHON:-python3}"
export AFM_AGENTS_BIN="$(bash "$HERE/install.sh")"
declare -A PROMPTS=([text]="Say hello." [shell]="List the files here.")
port=18931
for agent in codex claude opencode; do
    for task in text shell; do
        scratch="$(mktemp -d)"
        rm -rf "$OUT/$agent/$task" && mkdir -p "$OUT/$agent/$task"
        "$PY" "$HERE/recorder.py" --port "$port" --out "$scratch/requests" --script "$task" --model afm &
        rec=$!
        sleep 1
        echo "[capture] $agent / $task" >&2
        timeout 300 bash "$HERE/run_agent.sh" "$agent" "http://127.0.0.1:$port" afm \
            "${PROMPTS[$task]}" "$scratch/run" >"$scratch/output.txt" 2>&1 || {
            echo "[capture] $agent / $task failed:" >&2; tail -20 "$scratch/output.txt" >&2; }
        kill "$rec" 2>/dev/null || true
        wait "$rec" 2>/dev/null || true
        "$PY" - "$scratch" "$OUT/$agent/$task" <<'PYEOF'
import json, os, sys
scratch, out = sys.argv[1], sys.argv[2]
swap = [(scratch + "/run/work", "/home/user/project"), (scratch + "/run/home", "/home/user"),
        (scratch, "/home/user")]
for name in sorted(os.listdir(os.path.join(scratch, "requests"))):
    text = open(os.path.join(scratch, "requests", name)).read()
    for old, new in swap:
        text = text.replace(old, new)
    entry = json.loads(text)
    entry["headers"].pop("host", None)
    with open(os.path.join(out, name), "w") as f:
        json.dump(entry, f, indent=1, ensure_ascii=False)
        f.write("\n")
PYEOF
        rm -rf "$scratch"
        port=$((port + 1))
    done
done
"$PY" "$HERE/make_suite.py" "$OUT" > "$ROOT/suites/25_agents.toml"
"$PY" "$HERE/make_sessions.py" "$OUT" > "$OUT/sessions.json"
echo "[capture] wrote $OUT, $OUT/sessions.json and suites/25_agents.toml" >&2
