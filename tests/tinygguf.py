"""A tiny Llama GGUF file written with the gguf package, for tests (no download); and tiny GGUF
files of other architectures transformers reads (:func:`write_arch_gguf`, :data:`ARCHS`).

The tokenizer is a byte-level BPE (GGUF tokenizer model ``gpt2``, as SmolLM2's) over the 256 byte
symbols plus merges that make a few words single tokens. The weights are float32 (no quantisation),
so the model transformers reads back must equal :func:`reference_model`, a ``LlamaForCausalLM``
built here from the same arrays without GGUF. q and k are permuted the way llama.cpp's converter
does (transformers undoes it on load).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

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
    w: dict[str, np.ndarray] = {
        "model.embed_tokens.weight": rng.normal(0, 0.5, (vocab, HIDDEN)),
        "model.norm.weight": rng.uniform(0.5, 1.5, HIDDEN),
    }
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


GGUF_NAMES = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def _add_tokenizer(wr: Any, tokens: list[str], merges: list[str]) -> None:
    """The byte-level BPE of :func:`vocabulary` as GGUF tokenizer fields (GGUF model ``gpt2``, as
    SmolLM2's): the last token is BOS and EOS, and the tokenizer adds no BOS."""
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("default")
    wr.add_token_list(tokens)
    wr.add_token_types([1] * (len(tokens) - 1) + [3])
    wr.add_token_merges(merges)
    wr.add_bos_token_id(len(tokens) - 1)
    wr.add_eos_token_id(len(tokens) - 1)
    wr.add_add_bos_token(False)


#: the header values :func:`write_tiny_gguf` writes, by GGUFWriter method (``add_<key>``); its
#: ``header`` argument replaces any of them (hand-edited headers for refusal tests)
HEADER: dict[str, int] = {
    "context_length": 64,
    "embedding_length": HIDDEN,
    "block_count": LAYERS,
    "feed_forward_length": FFN,
    "head_count": HEADS,
    "head_count_kv": KV_HEADS,
    "rope_dimension_count": HIDDEN // HEADS,
    "vocab_size": len(vocabulary()[0]),
}


def write_tiny_gguf(
    path: str | Path, arch: str = "llama", seed: int = 0, *, header: dict[str, int] | None = None
) -> Path:
    """Write the tiny model as GGUF (``arch`` other than llama only for refusal tests: same tensors).
    ``header`` replaces values of :data:`HEADER` in the file's metadata (the tensors stay those of the
    tiny model), e.g. ``{"block_count": 1000000}``."""
    import gguf

    unknown = set(header or {}) - set(HEADER)
    if unknown:
        raise KeyError(f"not a header value of the tiny model: {sorted(unknown)}")
    values = {**HEADER, **(header or {})}
    tokens, merges = vocabulary()
    w = weights(len(tokens), seed)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    wr = gguf.GGUFWriter(str(out), arch)
    wr.add_name("tiny-llama-test")
    for key in (
        "context_length",
        "embedding_length",
        "block_count",
        "feed_forward_length",
        "head_count",
        "head_count_kv",
        "rope_dimension_count",
    ):
        getattr(wr, f"add_{key}")(values[key])
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(values["vocab_size"])
    _add_tokenizer(wr, tokens, merges)
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


# ---------------------------------------------------------------------------------------------
# Hand edits of a written GGUF file's bytes (refusal tests): the GGUFWriter cannot write a count or
# length that disagrees with what follows it, so these overwrite one little-endian field in place.


def _string_at(data: bytes, text: str) -> int:
    """Offset of the GGUF string ``text`` (u64 length + bytes) in ``data``; its first occurrence."""
    raw = text.encode()
    at = data.find(struct.pack("<Q", len(raw)) + raw)
    if at < 0:
        raise KeyError(f"{text!r} is not in the file")
    return at


def _poke_u64(path: str | Path, offset: int, value: int) -> Path:
    p = Path(path)
    data = bytearray(p.read_bytes())
    data[offset : offset + 8] = struct.pack("<Q", value)
    p.write_bytes(bytes(data))
    return p


def set_header_count(path: str | Path, which: str, value: int) -> Path:
    """Overwrite the file's ``tensor_count`` or ``kv_count`` (the u64s after magic and version)."""
    return _poke_u64(path, {"tensor_count": 8, "kv_count": 16}[which], value)


def set_array_count(path: str | Path, key: str, value: int) -> Path:
    """Overwrite the item count of the metadata array ``key`` (e.g. ``tokenizer.ggml.tokens``)."""
    at = _string_at(Path(path).read_bytes(), key) + 8 + len(key.encode())
    return _poke_u64(path, at + 4 + 4, value)  # value type (array), item type, then the count


def set_string_length(path: str | Path, key: str, value: int) -> Path:
    """Overwrite the byte length of the string value of metadata ``key`` (e.g. ``general.name``)."""
    at = _string_at(Path(path).read_bytes(), key) + 8 + len(key.encode())
    return _poke_u64(path, at + 4, value)  # value type (string), then the length


def set_tensor_dim(path: str | Path, tensor: str, dim: int, value: int) -> Path:
    """Overwrite dimension ``dim`` (GGUF order: the row width first) of tensor ``tensor``'s info."""
    at = _string_at(Path(path).read_bytes(), tensor) + 8 + len(tensor.encode())
    return _poke_u64(path, at + 4 + 8 * dim, value)  # n_dims (u32), then the u64 dimensions


def reference_model(seed: int = 0):
    """The same model as a ``LlamaForCausalLM`` built from the arrays, without GGUF."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokens, _ = vocabulary()
    cfg = LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        intermediate_size=FFN,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg)
    state = {k: torch.from_numpy(v) for k, v in weights(len(tokens), seed).items()}
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    return model.eval()


# ---------------------------------------------------------------------------------------------
# Other architectures: the transformers model is built first (tiny config, every parameter drawn
# from a seeded generator), then written to GGUF the way llama.cpp's convert_hf_to_gguf.py writes
# it: tensor names from the gguf package's TensorNameMap (the converter's own table) and the
# per-architecture value changes the converter makes (q/k permutation for llama, norm weight + 1
# for gemma2/gemma3, Conv1D weights transposed for gpt2).

#: arch -> (transformers config class, causal LM class, config kwargs beyond the shared ones)
ARCHS: dict[str, tuple[str, str, dict]] = {
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    # transformers reads no head_dim for qwen3: Qwen3Config's default (128) must be the model's
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {}),
    # Phi3Config's default pad_token_id (32000) is past this vocabulary: the file states the pad token
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": len(vocabulary()[0]) - 1}),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": HIDDEN // HEADS}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": HIDDEN // HEADS}),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", {}),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {}),
    "nemotron": ("NemotronConfig", "NemotronForCausalLM", {"head_dim": HIDDEN // HEADS}),
    # Falcon-7B's layout: one shared k/v head (multi_query), attention and MLP in parallel
    "falcon": ("FalconConfig", "FalconForCausalLM", {}),
    "bloom": ("BloomConfig", "BloomForCausalLM", {}),
}
CONTEXT = 64
#: transformers reads gpt2's context_length as n_ctx only: n_positions (the position table) stays 1024
GPT2_CONTEXT = 1024


def arch_config(arch: str):
    """The tiny transformers config of ``arch`` (hidden 16, 2 layers); values a GGUF file cannot
    state are left at the config class's defaults, as transformers leaves them on load."""
    import transformers

    cfg_name, _, extra = ARCHS[arch]
    vocab = len(vocabulary()[0])
    if arch == "gpt2":  # GPT2Config's own names; the position table is n_positions long
        kw = dict(
            vocab_size=vocab,
            n_embd=HIDDEN,
            n_layer=LAYERS,
            n_head=HEADS,
            n_positions=GPT2_CONTEXT,
            n_ctx=GPT2_CONTEXT,
            layer_norm_epsilon=1e-5,
        )
    elif arch == "falcon":
        kw = dict(
            vocab_size=vocab,
            hidden_size=HIDDEN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            max_position_embeddings=CONTEXT,
            rope_theta=10000.0,
            layer_norm_epsilon=1e-5,
        )
    elif arch == "bloom":
        kw = dict(vocab_size=vocab, hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS, layer_norm_epsilon=1e-5)
    else:
        kw = dict(
            vocab_size=vocab,
            hidden_size=HIDDEN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            num_key_value_heads=KV_HEADS,
            intermediate_size=FFN,
            max_position_embeddings=CONTEXT,
            tie_word_embeddings=True,
        )
        kw.update(
            {
                "stablelm": {"layer_norm_eps": 1e-5},
                "starcoder2": {"norm_epsilon": 1e-5},
                "nemotron": {"norm_eps": 1e-5, "rope_theta": 10000.0},
            }.get(arch, {"rms_norm_eps": 1e-5, "rope_theta": 10000.0})
        )
    kw.update(extra)
    return getattr(transformers, cfg_name)(**kw)


def arch_weights(arch: str, seed: int = 0) -> dict[str, np.ndarray]:
    """transformers-named float32 weights of the tiny ``arch`` model (tied head left out)."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = getattr(transformers, ARCHS[arch][1])(arch_config(arch))
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        if t.ndim == 1 and name.endswith("weight") and ("norm" in name or ".ln_" in name or name.startswith("ln_")):
            a = rng.uniform(0.5, 1.5, t.shape)
        elif t.ndim == 1:
            a = rng.normal(0, 0.1, t.shape)
        else:
            a = rng.normal(0, 0.3, t.shape)
        if arch in ("gemma2", "gemma3", "nemotron") and "norm.weight" in name:
            a = a - 1.0  # Gemma's RMSNorm and Nemotron's LayerNorm1P scale by 1 + w
        out[name] = a.astype(np.float32)
    return out


def arch_reference_model(arch: str, seed: int = 0):
    """The tiny ``arch`` model built from :func:`arch_weights`, without GGUF."""
    import torch
    import transformers

    model = getattr(transformers, ARCHS[arch][1])(arch_config(arch))
    state = {k: torch.from_numpy(v) for k, v in arch_weights(arch, seed).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    model.tie_weights()
    return model.eval()


def _gguf_tensor(arch: str, name: str, a: np.ndarray) -> np.ndarray:
    """What llama.cpp's converter does to the values of one tensor of ``arch``."""
    if arch == "mistral" and name.endswith("self_attn.q_proj.weight"):
        return _permute(a, HEADS)
    if arch == "mistral" and name.endswith("self_attn.k_proj.weight"):
        return _permute(a, KV_HEADS)
    if arch in ("gemma2", "gemma3", "nemotron") and name.endswith("norm.weight"):
        return a + 1.0
    if arch == "bloom" and name.endswith("query_key_value.weight"):  # per-head q,k,v -> all q, all k, all v
        w = a.reshape(HEADS, 3, HIDDEN // HEADS, HIDDEN)
        return np.concatenate([w[:, i].reshape(-1, HIDDEN) for i in range(3)])
    if arch == "bloom" and name.endswith("query_key_value.bias"):
        b = a.reshape(HEADS, 3, HIDDEN // HEADS)
        return np.concatenate([b[:, i].reshape(-1) for i in range(3)])
    if arch == "gpt2" and name.endswith(
        ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    ):
        return np.ascontiguousarray(a.T)
    return a


def write_arch_gguf(path: str | Path, arch: str, seed: int = 0, name: str | None = None) -> Path:
    """Write the tiny ``arch`` model (:data:`ARCHS`) as a float32 GGUF file with the byte-level BPE
    tokenizer of :func:`write_tiny_gguf`; ``name`` is ``general.name`` (transformers reads an
    architecture ``llama`` named exactly ``mistral`` as Mistral)."""
    import gguf

    cfg = arch_config(arch)
    gguf_arch = "llama" if arch == "mistral" else arch  # llama.cpp writes Mistral as llama
    tokens, merges = vocabulary()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    wr = gguf.GGUFWriter(str(out), gguf_arch)
    wr.add_name(name or f"tiny-{arch}-test")
    wr.add_context_length(GPT2_CONTEXT if arch == "gpt2" else CONTEXT)
    wr.add_embedding_length(HIDDEN)
    wr.add_block_count(LAYERS)
    wr.add_head_count(HEADS)
    if arch in ("gpt2", "bloom"):
        wr.add_feed_forward_length(4 * HIDDEN)
        wr.add_layer_norm_eps(1e-5)
    elif arch == "falcon":
        wr.add_feed_forward_length(4 * HIDDEN)
        wr.add_head_count_kv(1)
        wr.add_layer_norm_eps(1e-5)
        wr.add_rope_freq_base(10000.0)
    else:
        wr.add_feed_forward_length(FFN)
        wr.add_head_count_kv(KV_HEADS)
        wr.add_rope_dimension_count(int((HIDDEN // HEADS) * getattr(cfg, "partial_rotary_factor", 1.0)))
        if arch in ("stablelm", "starcoder2"):
            wr.add_layer_norm_eps(1e-5)
        else:
            wr.add_layer_norm_rms_eps(1e-5)
            wr.add_rope_freq_base(10000.0)
        wr.add_vocab_size(len(tokens))
    if arch in ("gemma2", "gemma3"):
        wr.add_key_length(HIDDEN // HEADS)
        wr.add_value_length(HIDDEN // HEADS)
        wr.add_sliding_window(cfg.sliding_window)
    _add_tokenizer(wr, tokens, merges)
    if cfg.pad_token_id is not None and cfg.pad_token_id < len(tokens):
        wr.add_pad_token_id(cfg.pad_token_id)
    names = gguf.get_tensor_name_map(next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == gguf_arch), LAYERS)
    for name, a in arch_weights(arch, seed).items():
        stem, suffix = name.rsplit(".", 1)
        gg = names.get_name(stem) or names.get_name(stem.removeprefix("transformer."))  # bloom's converter strips it
        if gg is None:
            raise KeyError(f"{arch}: no GGUF name for {name}")
        wr.add_tensor(f"{gg}.{suffix}", _gguf_tensor(arch, name, a))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return out
