"""A tiny Llama GGUF file written with the gguf package, for tests (no download).

The tokenizer is a byte-level BPE (GGUF tokenizer model ``gpt2``, as SmolLM2's) over the 256 byte
symbols plus merges that make a few words single tokens. The weights are float32 (no quantisation),
so the model transformers reads back must equal :func:`reference_model`, a ``LlamaForCausalLM``
built here from the same arrays without GGUF. q and k are permuted the way llama.cpp's converter
does (transformers undoes it on load).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

WORDS = ["the", "dog", "dogs", "walk", "walks", "run", "runs", "cat", "cats"]
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 16, 2, 4, 2, 32


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (written out, not imported)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def vocabulary() -> tuple[list[str], list[str]]:
    """(tokens, merges): byte symbols, then each word with a leading space built by merges."""
    tokens = list(bytes_to_unicode().values())
    merges: list[str] = []
    space = bytes_to_unicode()[ord(" ")]
    for word in WORDS:
        cur = space
        for ch in word:
            merged = cur + ch
            if merged not in tokens:
                merges.append(f"{cur} {ch}")
                tokens.append(merged)
            cur = merged
    return tokens + ["<|endoftext|>"], merges


def weights(vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    """transformers-named float32 weights of the tiny Llama (tied embeddings)."""
    rng = np.random.default_rng(seed)
    head = HIDDEN // HEADS
    w: dict[str, np.ndarray] = {"model.embed_tokens.weight": rng.normal(0, 0.5, (vocab, HIDDEN)),
                                "model.norm.weight": rng.uniform(0.5, 1.5, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = rng.uniform(0.5, 1.5, HIDDEN)
        w[p + "post_attention_layernorm.weight"] = rng.uniform(0.5, 1.5, HIDDEN)
        w[p + "self_attn.q_proj.weight"] = rng.normal(0, 0.3, (HEADS * head, HIDDEN))
        w[p + "self_attn.k_proj.weight"] = rng.normal(0, 0.3, (KV_HEADS * head, HIDDEN))
        w[p + "self_attn.v_proj.weight"] = rng.normal(0, 0.3, (KV_HEADS * head, HIDDEN))
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 0.3, (HIDDEN, HEADS * head))
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, 0.3, (FFN, HIDDEN))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, 0.3, (FFN, HIDDEN))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 0.3, (HIDDEN, FFN))
    return {k: v.astype(np.float32) for k, v in w.items()}


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of q/k rows (rotary halves interleaved)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
              "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
              "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def write_tiny_gguf(path: str | Path, arch: str = "llama", seed: int = 0) -> Path:
    """Write the tiny model as GGUF (``arch`` other than llama only for refusal tests: same tensors)."""
    import gguf

    tokens, merges = vocabulary()
    w = weights(len(tokens), seed)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    wr = gguf.GGUFWriter(str(out), arch)
    wr.add_name("tiny-llama-test")
    wr.add_context_length(64)
    wr.add_embedding_length(HIDDEN)
    wr.add_block_count(LAYERS)
    wr.add_feed_forward_length(FFN)
    wr.add_head_count(HEADS)
    wr.add_head_count_kv(KV_HEADS)
    wr.add_rope_dimension_count(HIDDEN // HEADS)
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(len(tokens))
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("default")
    wr.add_token_list(tokens)
    wr.add_token_types([1] * (len(tokens) - 1) + [3])
    wr.add_token_merges(merges)
    wr.add_bos_token_id(len(tokens) - 1)
    wr.add_eos_token_id(len(tokens) - 1)
    wr.add_add_bos_token(False)
    wr.add_tensor("token_embd.weight", w["model.embed_tokens.weight"])
    wr.add_tensor("output_norm.weight", w["model.norm.weight"])
    for i in range(LAYERS):
        for hf, gg in GGUF_NAMES.items():
            t = w[f"model.layers.{i}.{hf}.weight"]
            if hf == "self_attn.q_proj":
                t = _permute(t, HEADS)
            elif hf == "self_attn.k_proj":
                t = _permute(t, KV_HEADS)
            wr.add_tensor(f"blk.{i}.{gg}.weight", t)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return out


def reference_model(seed: int = 0):  # noqa: ANN201 - a transformers model
    """The same model as a ``LlamaForCausalLM`` built from the arrays, without GGUF."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokens, _ = vocabulary()
    cfg = LlamaConfig(vocab_size=len(tokens), hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=KV_HEADS, intermediate_size=FFN, max_position_embeddings=64,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    state = {k: torch.from_numpy(v) for k, v in weights(len(tokens), seed).items()}
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    return model.eval()
