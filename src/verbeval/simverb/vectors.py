"""Verb vectors and the pair similarities of one model.

Every verb gets one vector per *representation*:

* ``static``: the mean of the model's input-embedding rows over the verb's sub-tokens, as the
  verb is tokenised in the first frame (so a byte-level BPE model embeds ``" walk"``, the
  word-initial form, not ``"walk"``);
* ``layer<k>``: the hidden state of layer ``k`` (0 = the embedding layer's output, then one per
  transformer block), averaged over the verb's sub-tokens and then over the frames (neutral
  contexts such as ``"to {verb}"``).

A pair is scored by the cosine of its two verbs' vectors. A verb is *covered* unless a sub-token is
the tokenizer's unknown token or, with ``multi_token="skip"``, it has more than one sub-token; a
pair is covered when both verbs are. Holds the encoder loading (:func:`load_encoder`), the vectors,
the similarities table (:func:`score_model`, :func:`score_loaded`) and reading it back
(:func:`split_pairs_and_sims`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.source import ModelSource
from verbeval.simverb.data import PAIR_COLUMNS
from verbeval.simverb.steps import MULTI_TOKEN, SIMVERB_SCORE

SIM_COLUMNS = ["pair", "representation", "layer", "single_token", "covered", "cosine"]
VERB_COLUMNS = ["verb", "tokens", "n_tokens", "unknown", "covered"]


def check_frames(frames: Sequence[str]) -> list[str]:
    """Frames must contain ``{verb}`` exactly once."""
    if not frames:
        raise VerbevalError("at least one frame is needed")
    for f in frames:
        if f.count("{verb}") != 1:
            raise VerbevalError(f"frame {f!r} must contain {{verb}} exactly once")
    return list(frames)


def verb_token_spans(tokenizer: Any, verbs: Sequence[str], frame: str) -> tuple[dict[str, Any], list[list[int]]]:
    """Tokenise ``frame`` with each verb (special tokens included, right-padded); return the
    encoding and, per verb, the positions of the tokens that overlap the verb's characters."""
    prefix = frame.split("{verb}")[0]
    texts = [frame.replace("{verb}", v) for v in verbs]
    # padded on the right with EOS when it has no pad token; the tokenizer is given back as it was (a
    # queue reuses a revision's tokenizer for the next revision: verbeval.core.models.model_identity)
    saved = tokenizer.pad_token, tokenizer.padding_side
    backend = getattr(tokenizer, "backend_tokenizer", None)
    unpadded = backend is not None and backend.padding is None
    try:
        if saved[0] is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "right"
        enc = tokenizer(texts, padding=True, return_offsets_mapping=True, return_tensors="np")
    finally:
        tokenizer.pad_token, tokenizer.padding_side = saved
        if unpadded and backend.padding is not None:
            backend.no_padding()
    offsets = enc.pop("offset_mapping")
    mask = enc["attention_mask"].astype(bool)
    spans: list[list[int]] = []
    for i, v in enumerate(verbs):
        start, end = len(prefix), len(prefix) + len(v)
        o = offsets[i]
        hit = mask[i] & (o[:, 1] > start) & (o[:, 0] < end) & (o[:, 1] > o[:, 0])
        pos = np.flatnonzero(hit).tolist()
        if not pos:
            raise VerbevalError(f"frame {frame!r}: no token covers the verb {v!r}")
        spans.append(pos)
    return dict(enc), spans


def load_encoder(source: ModelSource | str, device: str = "auto") -> tuple[Any, Any, Any]:
    """The base model (no LM head; an LM checkpoint loads its encoder/decoder body) of a model source
    (or a bare id or folder), its tokenizer and the device, in eval mode. A source with a GGUF file:
    that file of the folder or repository (dequantised, float32)."""
    from transformers import AutoModel

    from verbeval.core.devices import resolve_device
    from verbeval.core.models import load_errors, load_failure, load_tokenizer

    source = ModelSource.of(source)
    source.check_local()
    tok = load_tokenizer(source)
    if not getattr(tok, "is_fast", False):
        raise VerbevalError(f"model {source.id!r}: a fast tokenizer (offset mapping) is needed")
    dev = resolve_device(device)
    try:
        if source.file:  # its cached folder, dequantised once (float32)
            model = AutoModel.from_pretrained(source.gguf_folder())
        else:
            model = AutoModel.from_pretrained(source.ref.location, revision=source.revision)
    except load_errors() as exc:
        raise load_failure(source.id, exc) from None
    model.eval().to(dev)
    return model, tok, dev


def fit_verbs(
    model: Any, tokenizer: Any, verbs: Sequence[str], frames: Sequence[str], batch_size: int, device: Any, model_id: str
) -> int:
    """``batch_size`` cut to the number of verbs and to what fits in the free memory of ``device``
    (:func:`verbeval.core.memory.fit_batch_size`). A verb's sequence (its longest frame, in tokens)
    needs its forward pass, every layer's hidden states in the model's dtype and as the float64
    copy :func:`verb_vectors` averages, and its float64 input embeddings."""
    from verbeval.core.memory import fit_batch_size, forward_bytes, free_memory, model_shape

    if not verbs:
        return max(1, batch_size)
    texts = [f.replace("{verb}", v) for f in frames for v in verbs]
    width = max(len(ids) for ids in tokenizer(texts)["input_ids"])
    shape = model_shape(model)
    states = (shape.layers + 1) * width * shape.hidden
    per = forward_bytes(shape, width) + states * (shape.act_bytes + 8) + width * shape.hidden * 8
    return fit_batch_size(
        batch_size,
        len(verbs),
        per,
        free_memory(device),
        what=model_id,
        unit="verb",
        detail=f"{width} tokens, {shape.layers + 1} hidden states of {shape.hidden}",
    )


def verb_vectors(
    model: Any,
    tokenizer: Any,
    verbs: Sequence[str],
    frames: Sequence[str],
    batch_size: int | None = None,
    device: Any = "cpu",
    progress: bool = False,
    *,
    model_id: str | None = None,
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Per-verb token information and vectors.

    Returns the verb table (``verb``, ``tokens`` joined by spaces, ``n_tokens``, ``unknown``; in
    the first frame) and ``{representation: float64 array [V, H]}`` with ``static`` and
    ``layer0`` ... ``layer<L>``. ``batch_size`` verbs per forward pass at most, cut to the number
    of verbs and to what fits in the device's free memory (:func:`fit_verbs`); ``model_id`` names
    the model in that warning or stop (default: its config's name or path); ``batch_size`` None:
    ``simverb.batch_size``'s default.
    """
    import torch
    from tqdm import tqdm

    frames = check_frames(frames)
    batch_size = SIMVERB_SCORE.default("batch_size") if batch_size is None else batch_size
    batch_size = fit_verbs(
        model,
        tokenizer,
        verbs,
        frames,
        batch_size,
        device,
        model_id or str(getattr(getattr(model, "config", None), "_name_or_path", "") or "model"),
    )
    emb = model.get_input_embeddings().weight.detach().to(torch.float64).cpu().numpy()
    unk = getattr(tokenizer, "unk_token_id", None)
    sums: np.ndarray | None = None
    static = np.zeros((len(verbs), emb.shape[1]))
    info: list[tuple[str, str, int, bool]] = []
    steps = [(f, s) for f in range(len(frames)) for s in range(0, len(verbs), batch_size)]
    with torch.inference_mode():
        for fi, start in tqdm(steps, desc="simverb", disable=not progress, leave=False):
            batch = list(verbs[start : start + batch_size])
            enc, spans = verb_token_spans(tokenizer, batch, frames[fi])
            ids = enc["input_ids"]
            inputs = {k: torch.as_tensor(v).to(device) for k, v in enc.items()}
            hidden = model(**inputs, output_hidden_states=True).hidden_states
            states = torch.stack([h.to(torch.float64) for h in hidden]).cpu().numpy()  # [L+1, B, T, H]
            if sums is None:
                sums = np.zeros((states.shape[0], len(verbs), states.shape[3]))
            # weights [B, T]: 1/n on the verb's n sub-tokens, 0 elsewhere (mean over sub-tokens)
            weights = np.zeros(ids.shape)
            for j, pos in enumerate(spans):
                weights[j, pos] = 1.0 / len(pos)
            sums[:, start : start + len(batch)] += np.einsum("lbth,bt->lbh", states, weights)
            if fi == 0:
                static[start : start + len(batch)] = np.einsum("bth,bt->bh", emb[ids], weights)
                for j, pos in enumerate(spans):
                    tid = ids[j, pos]
                    toks = tokenizer.convert_ids_to_tokens(tid.tolist())
                    info.append((batch[j], " ".join(toks), len(pos), bool(unk is not None and (tid == unk).any())))
    assert sums is not None
    reps = {"static": static}
    for k in range(sums.shape[0]):
        reps[f"layer{k}"] = sums[k] / len(frames)
    table = pd.DataFrame(info, columns=["verb", "tokens", "n_tokens", "unknown"])
    return table, reps


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity (NaN where a vector is zero)."""
    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def pair_similarities(
    pairs: pd.DataFrame, verbs: pd.DataFrame, reps: Mapping[str, np.ndarray], multi_token: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cosine of every pair under every representation (long table, :data:`SIM_COLUMNS`) and the
    verb table with its ``covered`` column; ``multi_token`` None: ``simverb.multi_token``'s default."""
    multi_token = SIMVERB_SCORE.default("multi_token") if multi_token is None else multi_token
    if multi_token not in (MULTI_TOKEN.choices or ()):
        raise VerbevalError(f"multi_token must be 'mean' or 'skip', got {multi_token!r}")
    verbs = verbs.copy()
    verbs["covered"] = ~verbs["unknown"] & ((verbs["n_tokens"] == 1) | (multi_token == "mean"))
    row = {v: i for i, v in enumerate(verbs["verb"])}
    i1 = pairs["verb1"].map(row).to_numpy()
    i2 = pairs["verb2"].map(row).to_numpy()
    if np.isnan(i1.astype(float)).any() or np.isnan(i2.astype(float)).any():
        raise VerbevalError("a pair's verb has no vector")
    cov = verbs["covered"].to_numpy()
    covered = cov[i1] & cov[i2]
    one = (verbs["n_tokens"] == 1).to_numpy()
    single = one[i1] & one[i2]
    parts = []
    for name, mat in reps.items():
        cos = cosine_rows(mat[i1], mat[i2])
        parts.append(
            pd.DataFrame(
                {
                    "pair": pairs["pair"].to_numpy(),
                    "representation": name,
                    "layer": -1 if name == "static" else int(name.removeprefix("layer")),
                    "single_token": single,
                    "covered": covered & ~np.isnan(cos),
                    "cosine": cos,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)[SIM_COLUMNS], verbs[VERB_COLUMNS]


def check_finite_vectors(model_id: str, verbs: Sequence[str], reps: dict[str, np.ndarray]) -> None:
    """Stop when a representation holds NaN or inf (damaged weights): the similarities, and every
    correlation, would otherwise be computed from them silently."""
    bad = {name: int((~np.isfinite(v).all(axis=1)).sum()) for name, v in reps.items()}
    bad = {k: n for k, n in bad.items() if n}
    if bad:
        first = next(iter(bad))
        raise VerbevalError(
            f"model {model_id!r}: non-finite verb vectors (NaN or inf: are the model's weights "
            f"damaged?) in {len(bad)} representation(s), first {first}: {bad[first]} of "
            f"{len(verbs)} verbs; nothing written"
        )


def score_model(
    pairs: pd.DataFrame,
    source: ModelSource | str,
    *,
    frames: Sequence[str] = ("to {verb}",),
    multi_token: str | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Load the model of ``source`` (base model, no head; a bare id or folder is a source) and return
    the similarities table (pair columns plus :data:`SIM_COLUMNS`, sorted by representation order
    then pair) and the verb table. ``multi_token``, ``batch_size``, ``device`` None: the defaults of
    ``simverb.multi_token``, ``simverb.batch_size`` and ``inference.device``
    (:data:`verbeval.simverb.steps.SIMVERB_SCORE`)."""
    source = ModelSource.of(source)
    device = SIMVERB_SCORE.default("device") if device is None else device
    model, tok, dev = load_encoder(source, device)
    return score_loaded(
        pairs,
        model,
        tok,
        dev,
        model_id=source.id,
        frames=frames,
        multi_token=multi_token,
        batch_size=batch_size,
        progress=progress,
    )


def score_loaded(
    pairs: pd.DataFrame,
    model: Any,
    tok: Any,
    dev: Any,
    *,
    model_id: str,
    frames: Sequence[str] = ("to {verb}",),
    multi_token: str | None = None,
    batch_size: int | None = None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`score_model` on a model already loaded (its base model, no head), e.g. the body of the
    LM an agreement job loaded (``verbeval run-model``)."""
    if not getattr(tok, "is_fast", False):
        raise VerbevalError("SimVerb-3500 needs a fast tokenizer (offset mapping)")
    verbs = sorted(set(pairs["verb1"]) | set(pairs["verb2"]))
    vt, reps = verb_vectors(model, tok, verbs, frames, batch_size, dev, progress, model_id=model_id)
    check_finite_vectors(model_id, verbs, reps)
    sims, vt = pair_similarities(pairs, vt, reps, multi_token)
    sims = pairs.merge(sims, on="pair", how="right", validate="one_to_many")
    return sims[PAIR_COLUMNS + SIM_COLUMNS[1:]], vt


def split_pairs_and_sims(sims: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pairs table and the long similarities table back from ``similarities.parquet``."""
    missing = [c for c in PAIR_COLUMNS + SIM_COLUMNS if c not in sims.columns]
    if missing:
        raise VerbevalError(f"similarities table lacks column(s) {missing}")
    pairs = sims[PAIR_COLUMNS].drop_duplicates("pair").sort_values("pair").reset_index(drop=True)
    return pairs, sims[SIM_COLUMNS].reset_index(drop=True)
