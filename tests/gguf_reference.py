"""An independent float64 reference for a Llama-architecture GGUF checkpoint (tests only).

Nothing here uses verbeval or transformers' model code: the tensors are read with the ``gguf``
package (``GGUFReader`` + ``gguf.quants.dequantize``), the forward pass is written out in numpy
float64, the tokenizer is built from the GGUF's own vocabulary and merges with the ``tokenizers``
library, and the ranking of the vocabulary is a plain stable sort. ``tests/test_real_model.py``
compares verbeval's shards against it.

RoPE layout: llama.cpp's converter (``convert_hf_to_gguf.py``, ``LlamaModel.permute``) stores the
Q and K projections of a Hugging Face Llama with the rows of each head reordered from the
"rotate half" layout (dimension i paired with i + d/2) to the interleaved one (dimension 2i paired
with 2i + 1), which its ``LLAMA_ROPE_TYPE_NORM`` rotation expects. The reference therefore
rotates adjacent pairs of the raw GGUF rows, as llama.cpp does; :meth:`LlamaGGUF.text_log_likelihood`
lets a test check on sample sentences that this layout, not the other, makes English likely.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


def _field(reader, key: str):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


@dataclass
class LlamaGGUF:
    """Dequantised float64 weights and hyper-parameters of a ``general.architecture = llama`` GGUF."""

    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rope_base: float
    eps: float
    emb: np.ndarray  # [V, H]
    out: np.ndarray  # [V, H] (the embedding when the GGUF has no output.weight: tied)
    out_norm: np.ndarray
    layers: list[dict[str, np.ndarray]]
    tokens: list[str]
    merges: list[str]
    bos_id: int | None
    add_bos: bool

    @classmethod
    def read(cls, path: str | Path) -> LlamaGGUF:
        from gguf import GGUFReader
        from gguf.quants import dequantize

        r = GGUFReader(str(path))
        arch = _field(r, "general.architecture")
        if arch != "llama":
            raise ValueError(f"{path}: architecture {arch!r}, the reference implements llama only")
        t = {x.name: x for x in r.tensors}

        def w(name: str) -> np.ndarray:
            x = t[name]
            return (
                dequantize(x.data, x.tensor_type).reshape(tuple(reversed([int(d) for d in x.shape]))).astype(np.float64)
            )

        n_layers = int(_field(r, "llama.block_count"))
        hidden = int(_field(r, "llama.embedding_length"))
        n_heads = int(_field(r, "llama.attention.head_count"))
        head_dim = int(_field(r, "llama.rope.dimension_count") or hidden // n_heads)
        assert head_dim == hidden // n_heads, "partial rotary dimensions are not implemented"
        emb = w("token_embd.weight")
        layers = [
            {
                k: w(f"blk.{i}.{k}.weight")
                for k in (
                    "attn_norm",
                    "attn_q",
                    "attn_k",
                    "attn_v",
                    "attn_output",
                    "ffn_norm",
                    "ffn_gate",
                    "ffn_up",
                    "ffn_down",
                )
            }
            for i in range(n_layers)
        ]
        bos = _field(r, "tokenizer.ggml.bos_token_id")
        return cls(
            n_layers=n_layers,
            n_heads=n_heads,
            n_kv_heads=int(_field(r, "llama.attention.head_count_kv") or n_heads),
            head_dim=head_dim,
            rope_base=float(_field(r, "llama.rope.freq_base") or 10000.0),
            eps=float(_field(r, "llama.attention.layer_norm_rms_epsilon")),
            emb=emb,
            out=w("output.weight") if "output.weight" in t else emb,
            out_norm=w("output_norm.weight"),
            layers=layers,
            tokens=list(_field(r, "tokenizer.ggml.tokens")),
            merges=list(_field(r, "tokenizer.ggml.merges")),
            bos_id=None if bos is None else int(bos),
            add_bos=bool(_field(r, "tokenizer.ggml.add_bos_token")),
        )

    # ------------------------------------------------------------------ tokenizer
    def tokenizer(self):
        """A byte-level BPE from the GGUF's tokens and merges, with the ``smollm`` / GPT-2 pre-tokenisation
        (llama.cpp's ``LLAMA_VOCAB_PRE_TYPE_SMOLLM``: every digit alone, then the GPT-2 regex)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers

        vocab = {tok: i for i, tok in enumerate(self.tokens)}
        merges = [tuple(m.split(" ", 1)) for m in self.merges]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        return tok

    # ------------------------------------------------------------------ forward
    def rope(self, x: np.ndarray, interleaved: bool = True) -> np.ndarray:
        """Rotate ``[T, heads, D]`` by position: adjacent pairs (GGUF layout) or halves (Hugging Face layout)."""
        d = self.head_dim
        inv = self.rope_base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # [D/2]
        ang = np.arange(x.shape[0], dtype=np.float64)[:, None] * inv[None, :]  # [T, D/2]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        if interleaved:
            a, b = x[..., 0::2], x[..., 1::2]
            out = np.empty_like(x)
            out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
            return out
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    def _rms(self, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * g

    def last_logits(self, ids: list[int]) -> np.ndarray:
        """float64 logits ``[V]`` of the next token after ``ids``."""
        return self.out @ self._rms(self._hidden(ids)[-1], self.out_norm)

    def _hidden(self, ids: list[int], interleaved: bool = True) -> np.ndarray:
        """The residual stream ``[T, H]`` after the last layer."""
        t = len(ids)
        h = self.emb[np.asarray(ids)]
        group = self.n_heads // self.n_kv_heads
        causal = np.triu(np.full((t, t), -np.inf), k=1)
        for lay in self.layers:
            x = self._rms(h, lay["attn_norm"])
            q = (x @ lay["attn_q"].T).reshape(t, self.n_heads, self.head_dim)
            k = (x @ lay["attn_k"].T).reshape(t, self.n_kv_heads, self.head_dim)
            v = (x @ lay["attn_v"].T).reshape(t, self.n_kv_heads, self.head_dim)
            q, k = self.rope(q, interleaved), self.rope(k, interleaved)
            k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # head j reads kv head j // group
            s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(self.head_dim) + causal
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            h = h + np.einsum("hqk,khd->qhd", s, v).reshape(t, -1) @ lay["attn_output"].T
            x = self._rms(h, lay["ffn_norm"])
            gate = x @ lay["ffn_gate"].T
            h = h + ((gate / (1.0 + np.exp(-gate))) * (x @ lay["ffn_up"].T)) @ lay["ffn_down"].T
        return h

    def text_log_likelihood(self, ids: list[int], interleaved: bool = True) -> float:
        """Mean log-probability of each token of ``ids`` after the previous ones, with RoPE applied to
        adjacent pairs of the GGUF rows (``interleaved``, llama.cpp's layout) or to their halves (Hugging
        Face's layout, wrong for GGUF rows): the right layout makes ordinary English far more likely."""
        h = self._hidden(ids, interleaved)
        logits = self._rms(h[:-1], self.out_norm) @ self.out.T
        logits -= logits.max(axis=-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        return float(np.mean(logp[np.arange(len(ids) - 1), np.asarray(ids[1:])]))


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max())
    return e / e.sum()


def ranked_masses(probs: np.ndarray, form_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mass ranked strictly above and below each of ``form_ids`` in ``probs`` (descending probability,
    ties broken by token id: the lower id ranks higher), from one stable sort of the vocabulary."""
    order = np.lexsort((np.arange(len(probs)), -probs))  # primary key -p, then id
    rank = np.empty(len(probs), dtype=np.int64)
    rank[order] = np.arange(len(probs))
    cum = np.concatenate([[0.0], np.cumsum(probs[order])])
    r = rank[form_ids]
    above = cum[r]
    below = cum[-1] - cum[r + 1]
    return above, below


def near_tie_mass(probs: np.ndarray, form_ids: np.ndarray, rel: float) -> np.ndarray:
    """Mass of the other tokens whose probability is within ``rel`` (relative) of each form's: the
    tokens that a computation accurate to ``rel`` may rank on either side of the form."""
    asc = np.sort(probs)
    cum = np.concatenate([[0.0], np.cumsum(asc)])
    p = probs[form_ids]
    lo = np.searchsorted(asc, p * (1 - rel), side="left")
    hi = np.searchsorted(asc, p * (1 + rel), side="right")
    return np.maximum(cum[hi] - cum[lo] - p, 0.0)
