#!/usr/bin/env bash
# Makes .cache/peers/smollm2-f32-tools: the bundled model's f32 export
# (.cache/peers/smollm2-f32, made here by `afm-serve convert` when missing)
# with fixtures/templates/chatml-tools.jinja as its chat template, for the
# MLX servers that take no template option and read the template from the
# model's folder (vllm-mlx, mlx-omni-server). The weights and tokenizer are
# links to the export; only tokenizer_config.json differs. Prints the folder.
# Idempotent (remade when the template or the export changes).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
SRC=.cache/peers/smollm2-f32
DEST=.cache/peers/smollm2-f32-tools
TEMPLATE=fixtures/templates/chatml-tools.jinja
# AFM_SERVE: a prebuilt afm-serve to use instead of `cargo run`.
afm_serve() { if [ -n "${AFM_SERVE:-}" ]; then "$AFM_SERVE" "$@"; else cargo run -q -p afm-engine --bin afm-serve -- "$@"; fi; }
if [ ! -f "$SRC/model.safetensors" ]; then
    GGUF="$(ls .cache/models/smollm2/*.gguf | head -1)"
    afm_serve convert --model "$GGUF" --out "$SRC" --dtype f32 >&2
fi
if [ ! -f "$DEST/tokenizer_config.json" ] || [ "$TEMPLATE" -nt "$DEST/tokenizer_config.json" ] ||
    [ "$SRC/tokenizer_config.json" -nt "$DEST/tokenizer_config.json" ]; then
    rm -rf "$DEST"
    mkdir -p "$DEST"
    for f in "$SRC"/*; do
        case "$(basename "$f")" in
        tokenizer_config.json | chat_template.jinja) ;;
        *) ln -s "../smollm2-f32/$(basename "$f")" "$DEST/" ;;
        esac
    done
    python3 - "$SRC/tokenizer_config.json" "$TEMPLATE" "$DEST/tokenizer_config.json" <<'EOF'
import json, sys
src, template, dest = sys.argv[1:]
config = json.load(open(src))
config["chat_template"] = open(template).read()
json.dump(config, open(dest, "w"), indent=2, ensure_ascii=False)
EOF
fi
echo "$DEST"
