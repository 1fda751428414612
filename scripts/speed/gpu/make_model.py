"""Writes a llama checkpoint of random weights for speed runs (no model hub
needed): safetensors in bf16 (or --dtype), config.json, and the tokenizer
files of an existing folder, so afm-serve and mlx-lm load the same bytes.

The default shape is Llama 3.2 1B's (16 layers, 2,048 wide, 32 heads of
64, 8 KV heads, 8,192-wide MLP) with the given tokenizer's vocabulary and
tied embeddings: 1.07B parameters, 2.15 GB in bf16. Text from random
weights is noise, so speed runs using it do not check replies.

    python make_model.py --tokenizer-from DIR --out DIR [--layers 16 --hidden 2048 ...]
"""

import argparse
import json
import shutil
from pathlib import Path

import mlx.core as mx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-from", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--intermediate", type=int, default=8192)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    tok = json.load(open(a.tokenizer_from / "tokenizer.json"))
    vocab = max(
        [max(tok["model"]["vocab"].values())] + [t["id"] for t in tok.get("added_tokens", [])]
    ) + 1
    head_dim = a.hidden // a.heads
    dtype = getattr(mx, a.dtype)
    mx.random.seed(a.seed)

    def rand(*shape):
        return (mx.random.normal(shape) * 0.02).astype(dtype)

    w = {"model.embed_tokens.weight": rand(vocab, a.hidden), "model.norm.weight": mx.ones((a.hidden,), dtype)}
    for i in range(a.layers):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = mx.ones((a.hidden,), dtype)
        w[p + "post_attention_layernorm.weight"] = mx.ones((a.hidden,), dtype)
        w[p + "self_attn.q_proj.weight"] = rand(a.heads * head_dim, a.hidden)
        w[p + "self_attn.k_proj.weight"] = rand(a.kv_heads * head_dim, a.hidden)
        w[p + "self_attn.v_proj.weight"] = rand(a.kv_heads * head_dim, a.hidden)
        w[p + "self_attn.o_proj.weight"] = rand(a.hidden, a.heads * head_dim)
        w[p + "mlp.gate_proj.weight"] = rand(a.intermediate, a.hidden)
        w[p + "mlp.up_proj.weight"] = rand(a.intermediate, a.hidden)
        w[p + "mlp.down_proj.weight"] = rand(a.hidden, a.intermediate)
        mx.eval(list(w.values()))
    a.out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(a.out / "model.safetensors"), w, metadata={"format": "mlx"})
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": head_dim,
        "intermediate_size": a.intermediate,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
        "torch_dtype": a.dtype,
    }
    for key in ("bos_token_id", "eos_token_id"):
        src = json.load(open(a.tokenizer_from / "config.json")).get(key) if (a.tokenizer_from / "config.json").exists() else None
        if src is not None:
            config[key] = src
    json.dump(config, open(a.out / "config.json", "w"), indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "generation_config.json"):
        if (a.tokenizer_from / name).exists():
            shutil.copy(a.tokenizer_from / name, a.out / name)
    params = sum(v.size for v in w.values())
    print(f"{a.out}: {params / 1e9:.2f}B parameters, {sum(v.nbytes for v in w.values()) / 1e9:.2f} GB ({a.dtype})")


if __name__ == "__main__":
    main()
