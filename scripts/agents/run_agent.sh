#!/usr/bin/env bash
# Runs one coding agent headless, as shipped, in a scratch folder, with only
# its provider pointed at BASE (the server's base address), on one prompt:
#   run_agent.sh AGENT BASE MODEL PROMPT SCRATCH
# AGENT: codex | claude | opencode. The agents come from npm at the pinned
# versions (scripts/agents/install.sh puts them under .cache/agents). Prints
# the agent's output; its exit code is the agent's.
set -uo pipefail
AGENT="$1" BASE="$2" MODEL="$3" PROMPT="$4" SCRATCH="$5"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${AFM_AGENTS_BIN:-$ROOT/.cache/agents/node_modules/.bin}"
mkdir -p "$SCRATCH/home" "$SCRATCH/work"
# A few files for the shell task to find.
printf 'afm\n' > "$SCRATCH/work/README.md"
printf 'print("hi")\n' > "$SCRATCH/work/main.py"
export HOME="$SCRATCH/home" NO_COLOR=1
cd "$SCRATCH/work"
case "$AGENT" in
    codex)
        export CODEX_HOME="$SCRATCH/home/.codex"
        mkdir -p "$CODEX_HOME"
        cat > "$CODEX_HOME/config.toml" <<TOML
model = "$MODEL"
model_provider = "local"
approval_policy = "never"
sandbox_mode = "read-only"
[model_providers.local]
name = "local"
base_url = "$BASE/v1"
wire_api = "responses"
TOML
        exec "$BIN/codex" exec --skip-git-repo-check "$PROMPT" </dev/null
        ;;
    claude)
        export ANTHROPIC_BASE_URL="$BASE" ANTHROPIC_API_KEY="sk-local" \
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1
        exec "$BIN/claude" -p "$PROMPT" --model "$MODEL" --allowedTools "Bash(ls)" </dev/null
        ;;
    opencode)
        cat > opencode.json <<JSON
{"provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "local",
   "options": {"baseURL": "$BASE/v1", "apiKey": "sk-local"},
   "models": {"$MODEL": {"name": "$MODEL"}}}},
 "model": "local/$MODEL", "autoupdate": false, "share": "disabled"}
JSON
        exec "$BIN/opencode" run "$PROMPT" </dev/null
        ;;
    *) echo "unknown agent '$AGENT' (codex, claude, opencode)" >&2; exit 2 ;;
esac
