"""Assembles afm-conformance from the bundled SmolLM2-135M-Instruct GGUF.

The model is the base plus what training changed, and only that is
committed (deltas.safetensors): a LoRA pair per projection of every layer
and the embedding rows of the six tokens added for Qwen3's markers. This
script adds the tokens, folds the LoRA products into the base weights and
writes

- a GGUF (Q8_0 weights, F32 norms) with the new tokens (USER_DEFINED, as
  llama.cpp's converter types Qwen3's non-special markers) and the model's
  chat template, for afm-serve and llama.cpp-based servers, and
- with --hf, an HF safetensors folder holding the very same numbers
  (the Q8_0 values, dequantized to f32) for mlx-lm, vLLM and the rest.

Every step is plain numpy arithmetic in a fixed order, so every machine
writes the same bytes; set-up checks them against SHA256SUMS. Needs numpy,
gguf, safetensors and tokenizers (no training tools).

    python assemble.py --base SmolLM2-135M-Instruct.Q4_1.gguf \
        [--deltas deltas.safetensors] --gguf OUT.gguf [--hf DIR] [--type q8_0|f32]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import load_file, save_file

HERE = Path(__file__).resolve().parent
NAME = "afm-conformance"
# Qwen3's markers, with Qwen3's flags: not special (they survive a decode
# that skips special tokens, and print in llama.cpp), matched whole.
ADDED_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
TOKEN_TYPE_USER_DEFINED = 4
TOKEN_TYPE_CONTROL = 3
# HF projection names and the GGUF tensors they are.
PROJECTIONS = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
NORMS = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}


class Base:
    """The base GGUF: its metadata fields and its tensors as f32."""

    def __init__(self, path: Path):
        self.reader = gguf.GGUFReader(path)
        self.fields = self.reader.fields
        self.tensors = {t.name: t for t in self.reader.tensors}

    def value(self, key):
        return self.fields[key].contents()

    def f32(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        data = gguf.quants.dequantize(t.data, t.tensor_type)
        return np.ascontiguousarray(data, dtype=np.float32)


def hf_rope_order(w: np.ndarray, heads: int) -> np.ndarray:
    """GGUF stores llama's q/k rows interleaved per head for its RoPE; HF
    keeps each head's halves apart. This undoes llama.cpp's permutation."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_rope_order(w: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of hf_rope_order: HF rows to GGUF's order."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def base_tokenizer(base: Base):
    """SmolLM2's tokenizer from the GGUF: byte-level BPE over single digits
    (llama.cpp's `smollm` pre-tokenizer), control tokens matched whole."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = base.value("tokenizer.ggml.tokens")
    types = base.value("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in base.value("tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == TOKEN_TYPE_CONTROL]
    )
    return tok


def initial_rows(base: Base, embed: np.ndarray) -> np.ndarray:
    """A new token's first row: the mean of its spelling's pieces, so the
    tied head scores it like the text it stands for until trained."""
    tok = base_tokenizer(base)
    return np.stack([embed[tok.encode(t, add_special_tokens=False).ids].mean(axis=0) for t in ADDED_TOKENS])


def lora_delta(deltas: dict, key: str) -> np.ndarray | None:
    """scale * (A @ B)^T, the LoRA pair's change of an (out, in) weight,
    in float64: the products of f16 factors are exact there, so the sum
    does not depend on the BLAS that computes it."""
    a = deltas.get(f"{key}.lora_a")
    if a is None:
        return None
    b = deltas[f"{key}.lora_b"]
    scale = float(deltas[f"{key}.scale"][0])
    return scale * (a.astype(np.float64) @ b.astype(np.float64)).T


def merged_tensors(base: Base, deltas: dict | None) -> dict[str, np.ndarray]:
    """Every GGUF tensor of the new model as f32, in GGUF's layout."""
    heads = int(base.value("llama.attention.head_count"))
    kv_heads = int(base.value("llama.attention.head_count_kv"))
    out = {}
    for name in base.tensors:
        w = base.f32(name)
        if name == "token_embd.weight":
            rows = deltas["new_token_rows"].astype(np.float32) if deltas else initial_rows(base, w)
            w = np.concatenate([w, rows])
        elif deltas and name.startswith("blk."):
            _, layer, gguf_proj, _ = name.split(".")
            hf_proj = next((h for h, g in PROJECTIONS.items() if g == gguf_proj), None)
            delta = lora_delta(deltas, f"layers.{layer}.{hf_proj}") if hf_proj else None
            if delta is not None:
                if gguf_proj == "attn_q":
                    delta = gguf_rope_order(delta, heads)
                elif gguf_proj == "attn_k":
                    delta = gguf_rope_order(delta, kv_heads)
                w = (w.astype(np.float64) + delta).astype(np.float32)
        out[name] = w
    return out


def stored(name: str, w: np.ndarray, qtype: Q) -> tuple[np.ndarray, Q]:
    """How a tensor is written: norms (1-D) stay f32."""
    if w.ndim == 1 or qtype == Q.F32:
        return w, Q.F32
    return gguf.quants.quantize(w, qtype), qtype


def write_gguf(base: Base, tensors: dict, qtype: Q, path: Path) -> dict[str, np.ndarray]:
    """Writes the GGUF; returns each tensor as the file holds it, in f32."""
    template = (HERE / "chat_template.jinja").read_text()
    w = gguf.GGUFWriter(str(path) + ".part", "llama")
    replaced = {
        "general.name": NAME,
        "general.finetune": "conformance",
        "general.file_type": int(gguf.LlamaFileType.MOSTLY_Q8_0 if qtype == Q.Q8_0 else gguf.LlamaFileType.ALL_F32),
        "llama.vocab_size": len(base.value("tokenizer.ggml.tokens")) + len(ADDED_TOKENS),
        "tokenizer.ggml.tokens": list(base.value("tokenizer.ggml.tokens")) + ADDED_TOKENS,
        "tokenizer.ggml.token_type": list(base.value("tokenizer.ggml.token_type"))
        + [TOKEN_TYPE_USER_DEFINED] * len(ADDED_TOKENS),
        "tokenizer.chat_template": template,
    }
    for key, field in base.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = replaced.get(key, field.contents())
        sub = field.types[1] if len(field.types) > 1 else None
        w.add_key_value(key, value, field.types[0], sub_type=sub)
    as_stored = {}
    for name, t in tensors.items():
        data, dtype = stored(name, t, qtype)
        w.add_tensor(name, data, raw_dtype=dtype)
        as_stored[name] = t if dtype == Q.F32 else gguf.quants.dequantize(data, dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(str(path) + ".part", path)
    return as_stored


def write_hf(base: Base, tensors: dict, folder: Path) -> None:
    """The same numbers as an HF llama folder (f32, tied embeddings)."""
    heads = int(base.value("llama.attention.head_count"))
    kv_heads = int(base.value("llama.attention.head_count_kv"))
    layers = int(base.value("llama.block_count"))
    folder.mkdir(parents=True, exist_ok=True)
    weights = {"model.embed_tokens.weight": tensors["token_embd.weight"], "model.norm.weight": tensors["output_norm.weight"]}
    for i in range(layers):
        for hf, g in PROJECTIONS.items():
            w = tensors[f"blk.{i}.{g}.weight"]
            if g == "attn_q":
                w = hf_rope_order(w, heads)
            elif g == "attn_k":
                w = hf_rope_order(w, kv_heads)
            weights[f"model.layers.{i}.{hf}.weight"] = w
        for hf, g in NORMS.items():
            weights[f"model.layers.{i}.{hf}.weight"] = tensors[f"blk.{i}.{g}.weight"]
    weights = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sorted(weights.items())}
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})

    vocab = weights["model.embed_tokens.weight"].shape[0]
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": int(base.value("llama.embedding_length")),
        "intermediate_size": int(base.value("llama.feed_forward_length")),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": int(base.value("llama.rope.dimension_count")),
        "max_position_embeddings": int(base.value("llama.context_length")),
        "rms_norm_eps": float(base.value("llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(base.value("llama.rope.freq_base")),
        "hidden_act": "silu",
        "tie_word_embeddings": True,
        "vocab_size": vocab,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 2,
        "torch_dtype": "float32",
        "attention_bias": False,
        "mlp_bias": False,
    }
    dump = lambda obj, name: (folder / name).write_text(json.dumps(obj, indent=2) + "\n")
    dump(config, "config.json")
    dump({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}, "generation_config.json")

    from tokenizers import AddedToken

    tok = base_tokenizer(base)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    assert tok.get_vocab_size() == vocab, (tok.get_vocab_size(), vocab)
    tok.save(str(folder / "tokenizer.json"))
    template = (HERE / "chat_template.jinja").read_text()
    (folder / "chat_template.jinja").write_text(template)
    added = {}
    tokens = base.value("tokenizer.ggml.tokens")
    for i, ty in enumerate(base.value("tokenizer.ggml.token_type")):
        if ty == TOKEN_TYPE_CONTROL:
            added[str(i)] = {"content": tokens[i], "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False}
    for i, t in enumerate(ADDED_TOKENS):
        added[str(len(tokens) + i)] = {"content": t, "special": False, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False}
    dump(
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<|im_start|>",
            "eos_token": "<|im_end|>",
            "pad_token": "<|im_end|>",
            "unk_token": "<|endoftext|>",
            "add_bos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": int(base.value("llama.context_length")),
            "added_tokens_decoder": added,
            "chat_template": template,
        },
        "tokenizer_config.json",
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--deltas", type=Path, help="trained deltas (none: the untrained start)")
    ap.add_argument("--gguf", type=Path, required=True, help="GGUF to write")
    ap.add_argument("--hf", type=Path, help="HF folder to write beside it")
    ap.add_argument("--type", choices=["q8_0", "f32"], default="q8_0")
    args = ap.parse_args(argv)
    base = Base(args.base)
    deltas = load_file(str(args.deltas)) if args.deltas else None
    tensors = merged_tensors(base, deltas)
    qtype = Q.Q8_0 if args.type == "q8_0" else Q.F32
    args.gguf.parent.mkdir(parents=True, exist_ok=True)
    as_stored = write_gguf(base, tensors, qtype, args.gguf)
    if args.hf:
        write_hf(base, as_stored, args.hf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
