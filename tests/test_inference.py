"""Tests for verbeval.agreement.engine.inference, encoding and forward_pass with tiny in-process models on
the real tokenizers.

The key test runs the whole shard path (``infer_chunk`` -> ``read_shards`` -> ``context_scores`` /
``row_tse``) and compares it with :func:`verbeval.agreement.score_logits` applied to logits that
the test computes itself, one context at a time and without padding.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from tiny_cache import tiny_model
from verbeval.agreement.data.eligibility import eligible_lemmas, single_token_ids, tokenizer_fingerprint
from verbeval.agreement.engine.encoding import encode_contexts
from verbeval.agreement.engine.forward_pass import run_contexts
from verbeval.agreement.engine.inference import infer_chunk
from verbeval.agreement.engine.shards import (
    SHARD_SCHEMA_VERSION,
    ChunkResult,
    build_contexts,
    chunk_range,
    lemma_set_hash,
    read_shard_meta,
)
from verbeval.agreement.engine.shardstore import chunk_label, manifest_shards
from verbeval.agreement.scores.aggregate import context_scores, read_shards, row_tse
from verbeval.agreement.scores.metrics import PAPER_BOTTOM_CUTOFFS, PAPER_TOP_CUTOFFS, score_logits
from verbeval.core.errors import VerbevalError
from verbeval.core.models import LoadedModel, load_model

GPT2_BOS = 50256  # <|endoftext|> in the real GPT-2 vocabulary

# (left, right, correct, incorrect, plural). Every verb form is one token in the BERT-cased, the
# BERT-uncased and the GPT-2 vocabulary except "swims" (two tokens in each: TSE is undefined for those rows).
ROWS: list[tuple[str, str, str, str, bool]] = [
    ("the author", "", "laughs", "laugh", False),  # 0  ctx A
    ("the authors", "", "laugh", "laughs", True),  # 1  ctx B
    ("the author", "", "smiles", "smile", False),  # 2  ctx A again
    ("the pilots that the guard likes", "to the guards", "are", "is", True),  # 3
    ("the author", "", "swims", "swim", False),  # 4  ctx A, TSE NaN
    ("the author", "", "swim", "swims", True),  # 5  A's text, plural
    ("the farmer next to the guards", "in the park", "runs", "run", False),  # 6
    ("the farmer next to the guards", "", "knows", "know", False),  # 7  causal: = 6
    (
        "the skaters that the senators who the pilot likes admire near the old farmhouse",
        "",
        "write",
        "writes",
        True,
    ),  # 8
    ("the mechanic", "with the guards", "sings", "sing", False),  # 9
    ("the dancers in the big old theatre", "every night", "dance", "dances", True),  # 10
    ("the customer who the officers like", "", "exists", "exist", False),  # 11
    ("the ministers", "", "know", "knows", True),  # 12
]
MULTI_TOKEN_ROWS = {4, 5}

LEXICON = pd.DataFrame(
    [
        ("laugh", "laughs", "laugh"),
        ("smile", "smiles", "smile"),
        ("be", "is", "are"),
        ("swim", "swims", "swim"),
        ("run", "runs", "run"),
        ("know", "knows", "know"),
        ("write", "writes", "write"),
        ("sing", "sings", "sing"),
        ("dance", "dances", "dance"),
        ("exist", "exists", "exist"),
        ("like", "likes", "like"),
    ],
    columns=["lemma", "sing", "plur"],
)


def template_frame() -> pd.DataFrame:
    df = pd.DataFrame(ROWS, columns=["left", "right", "correct", "incorrect", "plural"])
    df.insert(0, "group", "g1")
    df["label"] = np.where(df["plural"], "plural", "singular")
    # a row of another group, which must never reach group g1's shards
    other = pd.DataFrame(
        [
            {
                "group": "g2",
                "left": "the guard",
                "right": "",
                "correct": "is",
                "incorrect": "are",
                "plural": False,
                "label": "singular",
            }
        ]
    )
    return pd.concat([df.iloc[:7], other, df.iloc[7:]], ignore_index=True)


def _sharpen(lm: LoadedModel, factor: float = 30.0) -> LoadedModel:
    """Scale the (tied) output embeddings so the random model's distributions are peaked rather
    than nearly uniform: then top-p and bottom-p cutoffs select different, non-trivial sets."""
    with torch.no_grad():
        lm.model.get_output_embeddings().weight.mul_(factor)
    return lm


@pytest.fixture(scope="module")
def masked_lm(wordpiece_path: Path, tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    """A tiny BERT on bert-base-cased (the shared folder's), else on bert-base-uncased (rebuilt from a
    PyPI package): the tests that use it hold for either vocabulary."""
    path = tiny_model(tmp_path_factory, wordpiece_path, "bert", tmp_path_factory.mktemp("bert"))
    return _sharpen(load_model(str(path), device="cpu"))


@pytest.fixture(scope="module")
def cased_masked_lm(
    masked_lm: LoadedModel, tokenizer_path: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> LoadedModel:
    """A tiny BERT on bert-base-cased, for the assertions about case (skipped where that tokenizer
    cannot be had: no PyPI package ships it)."""
    if _tokenizer_name(masked_lm) == "bert-base-cased":
        return masked_lm
    path = tiny_model(
        tmp_path_factory, tokenizer_path("bert-base-cased"), "bert", tmp_path_factory.mktemp("bert-cased")
    )
    return _sharpen(load_model(str(path), device="cpu"))


@pytest.fixture(scope="module")
def causal_lm(tokenizer_path: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    path = tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path_factory.mktemp("gpt2"))
    return _sharpen(load_model(str(path), device="cpu"))


@pytest.fixture(params=["masked", "causal"])
def lm(request: pytest.FixtureRequest) -> LoadedModel:
    return request.getfixturevalue(f"{request.param}_lm")


@pytest.fixture(params=["masked", "causal", "causal+bos"])
def lm_bos(request: pytest.FixtureRequest) -> tuple[LoadedModel, bool | None]:
    """A model and the prepend_bos setting to run it with."""
    name, _, bos = request.param.partition("+")
    return request.getfixturevalue(f"{name}_lm"), (True if bos else None)


def _tokenizer_name(lm: LoadedModel) -> str:
    """The name of the real tokenizer the tiny model was built on (its verbeval_tiny.json)."""
    from verbeval.core.provenance import random_init_record

    return str((random_init_record(lm.model_id) or {})["tokenizer"])


def _lemmas(lm: LoadedModel) -> pd.DataFrame:
    lem = eligible_lemmas(LEXICON, lm.tokenizer)
    assert "swim" not in set(lem["lemma"]) and len(lem) == len(LEXICON) - 1
    return lem


def _tse_ids(lm: LoadedModel, g: pd.DataFrame) -> np.ndarray:
    sing = np.where(g["plural"], g["incorrect"], g["correct"]).tolist()
    plur = np.where(g["plural"], g["correct"], g["incorrect"]).tolist()
    return np.stack([single_token_ids(lm.tokenizer, sing), single_token_ids(lm.tokenizer, plur)], axis=1)


def _run_all_chunks(
    lm: LoadedModel,
    templates: pd.DataFrame,
    lemmas: pd.DataFrame,
    out: Path,
    n_chunks: int,
    batch_size: int,
    prepend_bos: bool | None = None,
) -> list[Path]:
    paths = []
    for k in range(n_chunks):
        p = out / f"{chunk_label(k, n_chunks)}.parquet"
        infer_chunk(
            lm, templates, lemmas, "g1", k, n_chunks, p, batch_size=batch_size, prepend_bos=prepend_bos, progress=False
        )
        paths.append(p)
    return paths


# --------------------------------------------------------------------------- contexts


def test_build_contexts_masked_keys_by_left_right_plural() -> None:
    g = pd.DataFrame(ROWS, columns=["left", "right", "correct", "incorrect", "plural"])
    ctx, row_ctx = build_contexts(g, "masked")
    assert list(ctx.columns) == ["context_id", "left", "right", "plural"]
    assert ctx["context_id"].tolist() == list(range(len(ctx)))
    expected = [
        ("the author", "", False),
        ("the authors", "", True),
        ("the pilots that the guard likes", "to the guards", True),
        ("the author", "", True),
        ("the farmer next to the guards", "in the park", False),
        ("the farmer next to the guards", "", False),
        (ROWS[8][0], "", True),
        ("the mechanic", "with the guards", False),
        ("the dancers in the big old theatre", "every night", True),
        ("the customer who the officers like", "", False),
        ("the ministers", "", True),
    ]
    assert list(ctx[["left", "right", "plural"]].itertuples(index=False, name=None)) == expected
    assert row_ctx.tolist() == [0, 1, 0, 2, 0, 3, 4, 5, 6, 7, 8, 9, 10]
    assert row_ctx.dtype == np.int64


def test_build_contexts_causal_ignores_right_context() -> None:
    g = pd.DataFrame(ROWS, columns=["left", "right", "correct", "incorrect", "plural"])
    ctx, row_ctx = build_contexts(g, "causal")
    assert (ctx["right"] == "").all()
    assert list(ctx[["left", "plural"]].itertuples(index=False, name=None)) == [
        ("the author", False),
        ("the authors", True),
        ("the pilots that the guard likes", True),
        ("the author", True),
        ("the farmer next to the guards", False),
        (ROWS[8][0], True),
        ("the mechanic", False),
        ("the dancers in the big old theatre", True),
        ("the customer who the officers like", False),
        ("the ministers", True),
    ]
    # rows 6 and 7 differ only in the right context: one causal context
    assert row_ctx.tolist() == [0, 1, 0, 2, 0, 3, 4, 4, 5, 6, 7, 8, 9]


def test_build_contexts_uses_positions_not_index() -> None:
    g = pd.DataFrame(ROWS[:3], columns=["left", "right", "correct", "incorrect", "plural"], index=[10, 5, 7])
    ctx, row_ctx = build_contexts(g, "masked")
    assert len(ctx) == 2 and row_ctx.tolist() == [0, 1, 0]


# --------------------------------------------------------------------------- chunks


@pytest.mark.parametrize("n", [0, 1, 2, 5, 10, 13, 101])
@pytest.mark.parametrize("n_chunks", [1, 2, 3, 4, 7])
def test_chunk_range_covers_everything_once(n: int, n_chunks: int) -> None:
    ranges = [chunk_range(n, n_chunks, k) for k in range(n_chunks)]
    covered = [i for a, b in ranges for i in range(a, b)]
    assert covered == list(range(n))  # contiguous, in order, each item exactly once
    sizes = [b - a for a, b in ranges]
    assert max(sizes) - min(sizes) <= 1
    assert all(isinstance(x, int) for r in ranges for x in r)


@pytest.mark.parametrize("chunk", [-1, 4, 5])
def test_chunk_range_rejects_bad_chunk(chunk: int) -> None:
    with pytest.raises(VerbevalError, match="out of range"):
        chunk_range(10, 4, chunk)


def test_chunk_label() -> None:
    assert chunk_label(0, 4) == "1-of-4"
    assert chunk_label(3, 4) == "4-of-4"
    assert [chunk_label(k, 2) for k in range(2)] == ["1-of-2", "2-of-2"]


# --------------------------------------------------------------------------- encoding


def test_encode_masked_one_mask_at_target(masked_lm: LoadedModel) -> None:
    g = template_frame().query("group == 'g1'").reset_index(drop=True)
    ctx, _ = build_contexts(g, "masked")
    enc = encode_contexts(masked_lm, ctx)
    tok = masked_lm.tokenizer
    assert len(enc.ids) == len(ctx) == len(enc.target)
    for ids, t in zip(enc.ids, enc.target):
        assert ids.count(tok.mask_token_id) == 1
        assert ids[t] == tok.mask_token_id
        assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    # the sentence ends with a period (an uncased tokenizer lower-cases the first word again)
    assert tok.decode(enc.ids[0]).lower() == "[cls] the author [mask]. [sep]"
    assert tok.decode(enc.ids[2]).lower() == "[cls] the pilots that the guard likes [mask] to the guards. [sep]"


def test_encode_masked_capitalises_the_first_word_for_a_cased_model(cased_masked_lm: LoadedModel) -> None:
    g = template_frame().query("group == 'g1'").reset_index(drop=True)
    ctx, _ = build_contexts(g, "masked")
    enc = encode_contexts(cased_masked_lm, ctx)
    tok = cased_masked_lm.tokenizer
    assert cased_masked_lm.cased is True
    # cased model: the first word is capitalised; the sentence ends with a period
    assert tok.decode(enc.ids[0]) == "[CLS] The author [MASK]. [SEP]"
    assert tok.decode(enc.ids[2]) == "[CLS] The pilots that the guard likes [MASK] to the guards. [SEP]"


def test_encode_masked_rejects_a_second_mask(masked_lm: LoadedModel) -> None:
    ctx = pd.DataFrame({"context_id": [0], "left": ["the [MASK] author"], "right": [""], "plural": [False]})
    with pytest.raises(VerbevalError, match="2 mask tokens"):
        encode_contexts(masked_lm, ctx)


def test_encode_causal_target_is_last_token(causal_lm: LoadedModel) -> None:
    g = template_frame().query("group == 'g1'").reset_index(drop=True)
    ctx, _ = build_contexts(g, "causal")
    tok = causal_lm.tokenizer
    assert tok.bos_token_id == GPT2_BOS
    # default: follow the tokenizer, which does not add BOS for GPT-2 (as in the paper's code)
    enc = encode_contexts(causal_lm, ctx)
    assert enc.bos is False
    for ids, t, left in zip(enc.ids, enc.target, ctx["left"]):
        assert t == len(ids) - 1
        assert ids == tok(left[0].upper() + left[1:], add_special_tokens=False)["input_ids"]
        assert GPT2_BOS not in ids
    assert tok.decode(enc.ids[0]) == "The author"
    # explicit BOS: <|endoftext|> (id 50256) first, target still the last token
    with_bos = encode_contexts(causal_lm, ctx, prepend_bos=True)
    assert with_bos.bos is True
    assert with_bos.ids == [[GPT2_BOS, *ids] for ids in enc.ids]
    assert with_bos.target.tolist() == [t + 1 for t in enc.target]
    assert all(ids[t] == ids[-1] for ids, t in zip(with_bos.ids, with_bos.target))
    assert encode_contexts(causal_lm, ctx, prepend_bos=False).ids == enc.ids


# --------------------------------------------------------------------------- exactness


def _direct_logits(lm: LoadedModel, ctx: pd.DataFrame, prepend_bos: bool | None = None) -> torch.Tensor:
    """Logits at the target position, one context at a time, without padding or attention mask."""
    enc = encode_contexts(lm, ctx, prepend_bos)
    out = []
    with torch.inference_mode():
        for ids, t in zip(enc.ids, enc.target):
            out.append(lm.model(input_ids=torch.tensor([ids])).logits[0, int(t)].to(torch.float64))
    return torch.stack(out)


SIDES = (("top", PAPER_TOP_CUTOFFS), ("bottom", PAPER_BOTTOM_CUTOFFS))


def test_shards_reproduce_score_logits(lm_bos: tuple[LoadedModel, bool | None], tmp_path: Path) -> None:
    lm, bos = lm_bos
    templates = template_frame()
    lemmas = _lemmas(lm)
    paths = _run_all_chunks(lm, templates, lemmas, tmp_path, 3, batch_size=4, prepend_bos=bos)
    shards = read_shards(paths)
    assert shards.meta["prepend_bos"] is (bos is True)
    scores = context_scores(shards, PAPER_TOP_CUTOFFS, PAPER_BOTTOM_CUTOFFS)

    g = templates[templates["group"] == "g1"].reset_index(drop=True)
    ctx, row_ctx = build_contexts(g, lm.kind)
    assert scores["context_id"].tolist() == ctx["context_id"].tolist()
    assert scores["plural"].tolist() == ctx["plural"].tolist()
    logits = _direct_logits(lm, ctx, bos)
    lemma_ids = lemmas[["sing_id", "plur_id"]].to_numpy()
    direct = score_logits(logits, ctx["plural"].to_numpy(), lemma_ids, PAPER_TOP_CUTOFFS, PAPER_BOTTOM_CUTOFFS)

    n_defined = 0
    for side, cuts in SIDES:
        for metric in ("ew", "mw", "prob_counted"):
            want_all = getattr(direct, f"{metric}_{side}")
            for j, p in enumerate(cuts):
                got = scores[f"{metric}_{side}@{p:g}"].to_numpy()
                want = want_all[:, j]
                assert np.array_equal(np.isnan(got), np.isnan(want)), (metric, side, p)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{metric}_{side}@{p:g}")
                n_defined += int((~np.isnan(got)).sum())
    assert n_defined > 0
    # the sharpened model gives a mix of defined and undefined cutoffs (the test is not vacuous)
    assert scores.filter(like="ew_").isna().to_numpy().any()
    assert not scores["ew_top@1"].isna().any()

    # TSE: every row of the group (not only distinct contexts), exactly
    tse = row_tse(shards, g)
    assert tse["row"].tolist() == list(range(len(g)))
    assert tse["context_id"].tolist() == row_ctx.tolist()
    tse_ids = _tse_ids(lm, g)
    assert (tse_ids[sorted(MULTI_TOKEN_ROWS)] == -1).any(axis=1).all()
    want_tse = score_logits(
        logits[torch.as_tensor(row_ctx)], g["plural"].to_numpy(), lemma_ids, [1.0], [1.0], tse_ids=tse_ids
    ).tse
    got_tse = tse["tse"].to_numpy()
    assert np.array_equal(got_tse, want_tse, equal_nan=True)
    assert set(np.flatnonzero(np.isnan(got_tse))) == MULTI_TOKEN_ROWS
    # the stored pair probabilities are the model's own
    probs = torch.softmax(logits, dim=-1).numpy()
    safe = np.clip(tse_ids, 0, None)
    want_p = probs[row_ctx[:, None], safe]
    want_p[tse_ids < 0] = np.nan
    np.testing.assert_allclose(tse[["p_sing", "p_plur"]].to_numpy(), want_p, rtol=1e-5, atol=1e-12)


def test_empty_chunks_are_valid(causal_lm: LoadedModel, tmp_path: Path) -> None:
    """More chunks than contexts: some shards hold no context, aggregation still works."""
    templates = template_frame().iloc[:3]
    lemmas = _lemmas(causal_lm)
    paths = _run_all_chunks(causal_lm, templates, lemmas, tmp_path / "five", 5, batch_size=8)
    assert [read_shard_meta(p)["n_contexts"] for p in paths] == [0, 1, 0, 1, 0]
    one = _run_all_chunks(causal_lm, templates, lemmas, tmp_path / "one", 1, batch_size=8)
    a = context_scores(read_shards(paths), [0.5, 1.0], [0.5])
    b = context_scores(read_shards(one), [0.5, 1.0], [0.5])
    pd.testing.assert_frame_equal(a, b, rtol=1e-6)
    g = templates.reset_index(drop=True)
    pd.testing.assert_frame_equal(row_tse(read_shards(paths), g), row_tse(read_shards(one), g), rtol=1e-6)


def _shard_arrays(path: Path) -> dict[str, np.ndarray]:
    t = pq.read_table(path)
    out = {}
    for name in t.column_names:
        col = t[name].combine_chunks()
        out[name] = (
            np.asarray(col.flatten().to_numpy(zero_copy_only=False))
            if hasattr(col, "flatten")
            else col.to_numpy(zero_copy_only=False)
        )
    return out


#: The error of one logit of the float32 forward pass, in units of float32 epsilon times the
#: context's largest |logit|. A batch pads its contexts to its longest one, and the kernels then
#: reduce in another order and blocking, so a context's logits differ between batch sizes (and from
#: its own unpadded forward without attention mask) by rounding. Measured on the tiny models of
#: these tests (BERT on bert-base-cased and on bert-base-uncased, GPT-2 with and without BOS; batch
#: sizes 1, 2, 3, 4, 7, 8 and 16 against the unpadded forward): at most 3.1, i.e. 4.8e-6 at
#: |logit| <= 22. 8 leaves a margin for other CPUs' kernels; a leak of padding into attention or a
#: context's numbers stored in another's row moves logits by orders of magnitude more.
#: docs/metrics.md, "Batch size and padding".
FORWARD_ULPS = 8
F32 = float(np.finfo(np.float32).eps)  # float32 storage rounds by at most half of this, relatively
TINY = float(np.finfo(np.float32).tiny)  # below it float32 is subnormal: absolute rounding


@dataclass
class Unpadded:
    """A group's contexts forwarded one at a time without padding or attention mask (the reference),
    and the bound ``err`` [n] of each of a context's logits in any other forward of it."""

    logits: np.ndarray  # [n, V] float64 (the float32 logits, exactly)
    logp: np.ndarray  # [n, V] float64 log-softmax
    err: np.ndarray  # [n]

    @property
    def band(self) -> np.ndarray:
        """Two tokens whose reference logits are this close ([n, 1]) are tied within the error:
        another forward may order them either way (each logit moves by up to ``err``)."""
        return 2 * self.err[:, None]


def _unpadded(lm: LoadedModel, ctx: pd.DataFrame, prepend_bos: bool | None = None) -> Unpadded:
    z = _direct_logits(lm, ctx, prepend_bos).numpy()
    logp = z - np.logaddexp.reduce(z, axis=1, keepdims=True)
    return Unpadded(z, logp, FORWARD_ULPS * F32 * np.abs(z).max(axis=1))


def _assert_between(name: str, got: np.ndarray, lo: np.ndarray, hi: np.ndarray, err: np.ndarray) -> None:
    """``lo <= got <= hi``, widened by what the forward error (``err`` per logit, so 2 ``err`` per
    log-probability) and float32 storage can do to a probability or a sum of probabilities."""
    e = np.exp(2 * err).reshape(-1, *([1] * (got.ndim - 1)))
    low, high = lo / e * (1 - F32) - TINY, hi * e * (1 + F32) + TINY
    bad = ~((got >= low) & (got <= high))
    assert not bad.any(), (
        f"{name}: {int(bad.sum())} values outside the float32 forward error of the unpadded "
        f"forward, first at {np.argwhere(bad)[0].tolist()}: {got[bad][0]!r} not in "
        f"[{low[bad][0]!r}, {high[bad][0]!r}]"
    )


def _assert_within_forward_error(
    res: ChunkResult, ref: Unpadded, form_ids: np.ndarray, row_ctx: np.ndarray, tse_ids: np.ndarray
) -> np.ndarray:
    """Every number of ``res`` is one that a forward whose logits are each within ``ref.err`` of the
    unpadded ones gives. Returns the [n, F] forms that share their logit with another token within
    ``ref.band``: only their rank, and so their mass above and below, may differ between two
    forwards by more than rounding."""
    p = np.exp(ref.logp)
    n, f = len(p), len(form_ids)
    _assert_between("prob", res.prob, p[:, form_ids], p[:, form_ids], ref.err)
    above, below, tied_mass = np.zeros((n, f)), np.zeros((n, f)), np.zeros((n, f))
    tied = np.zeros((n, f), bool)
    for c in range(n):
        gap = ref.logits[c][None, :] - ref.logits[c, form_ids][:, None]  # [F, V]: token minus form
        near = np.abs(gap) <= ref.band[c]
        near[np.arange(f), form_ids] = False  # the form itself
        above[c] = np.where(gap > ref.band[c], p[c], 0).sum(axis=1)
        below[c] = np.where(gap < -ref.band[c], p[c], 0).sum(axis=1)
        tied_mass[c] = np.where(near, p[c], 0).sum(axis=1)
        tied[c] = near.any(axis=1)
    # a tied token may be ranked on either side of the form; every other one on its own side
    _assert_between("cum_above", res.cum_above, above, above + tied_mass, ref.err)
    _assert_between("cum_below", res.cum_below, below, below + tied_mass, ref.err)
    k = res.topk_ids.shape[1]
    rows = np.arange(n)[:, None]
    _assert_between("topk_probs", res.topk_probs, p[rows, res.topk_ids], p[rows, res.topk_ids], ref.err)
    # the i-th most probable token of a forward is one whose logit is within the band of the i-th largest
    kth = -np.sort(-ref.logits, axis=1)[:, :k]
    assert (np.abs(ref.logits[rows, res.topk_ids] - kth) <= ref.band).all(), "topk_ids"
    want = p[row_ctx[:, None], np.clip(tse_ids, 0, None)]
    want[tse_ids < 0] = np.nan
    assert np.array_equal(np.isnan(res.tse_p), np.isnan(want)), "tse_p"
    ok = ~np.isnan(want)
    _assert_between("tse_p", res.tse_p[ok], want[ok], want[ok], ref.err[row_ctx[:, None].repeat(2, 1)][ok])
    return tied


def _assert_batch_size_independent(
    a: ChunkResult, b: ChunkResult, ref: Unpadded, form_ids: np.ndarray, row_ctx: np.ndarray, tse_ids: np.ndarray
) -> list[str]:
    """``a`` and ``b``, the same contexts forwarded in batches of different sizes, are the unpadded
    forward's numbers within the float32 forward error, and make the same decisions except where
    the decision is between items tied within that error (identified from the unpadded logits).
    Returns those exceptions, asserted to be few."""
    tied_a = _assert_within_forward_error(a, ref, form_ids, row_ctx, tse_ids)
    _assert_within_forward_error(b, ref, form_ids, row_ctx, tse_ids)
    exceptions: list[str] = []
    # EW: which form of each lemma is the more probable one (or a tie, which counts as wrong)
    z_sg, z_pl = ref.logits[:, form_ids[0::2]], ref.logits[:, form_ids[1::2]]
    tied_lemma = np.abs(z_sg - z_pl) <= ref.band
    ew_a, ew_b = (np.sign(r.prob[:, 0::2] - r.prob[:, 1::2]) for r in (a, b))
    assert np.array_equal(ew_a[~tied_lemma], ew_b[~tied_lemma]), "an EW decision depends on the batch size"
    exceptions += [f"EW context {c} lemma {j}" for c, j in np.argwhere(tied_lemma & (ew_a != ew_b))]
    # TSE: the same, on each row's own verb pair
    has = (tse_ids >= 0).all(axis=1)
    tied_row = np.abs(ref.logits[row_ctx, tse_ids[:, 0]] - ref.logits[row_ctx, tse_ids[:, 1]]) <= 2 * ref.err[row_ctx]
    tse_a, tse_b = (np.sign(r.tse_p[:, 0] - r.tse_p[:, 1]) for r in (a, b))
    assert np.array_equal(tse_a[has & ~tied_row], tse_b[has & ~tied_row]), "a TSE decision depends on the batch size"
    exceptions += [f"TSE row {i}" for i in np.flatnonzero(has & tied_row & (tse_a != tse_b))]
    # the rank of each form (its mass above and below, so its top-p and bottom-p membership): apart
    # from rounding (what an untied form's bounds allow) it moves only for a tied form
    e = np.expm1(4 * ref.err)[:, None] + 2 * F32
    for name in ("cum_above", "cum_below"):
        x, y = getattr(a, name).astype(np.float64), getattr(b, name).astype(np.float64)
        moved = np.abs(x - y) > e * np.maximum(x, y) + TINY
        assert not (moved & ~tied_a).any(), f"{name} of an untied form depends on the batch size"
        exceptions += [
            f"{name} context {c} form {form_ids[j]} ({x[c, j]:.7g} vs {y[c, j]:.7g})" for c, j in np.argwhere(moved)
        ]
    # the exemptions are near-ties only, not most of the decisions (else the test could not fail)
    assert tied_lemma.mean() <= 0.1 and (has & tied_row).sum() <= 0.1 * has.sum(), (tied_lemma.mean(), tied_row)
    assert tied_a.mean() <= 0.5, f"{tied_a.mean():.0%} of the forms are tied within the forward error"
    assert len(exceptions) <= 0.05 * a.prob.size, exceptions  # a few flips among the tied forms
    return exceptions


def _shard_result(path: Path) -> ChunkResult:
    arr = _shard_arrays(path)
    n = len(arr["context_id"])
    return ChunkResult(
        prob=arr["prob"].reshape(n, -1),
        cum_above=arr["cum_above"].reshape(n, -1),
        cum_below=arr["cum_below"].reshape(n, -1),
        topk_ids=arr["topk_ids"].reshape(n, -1),
        topk_probs=arr["topk_probs"].reshape(n, -1),
        tse_p=np.stack([arr["tse_p_sing"], arr["tse_p_plur"]], axis=1),
    )


def test_batch_size_independence(lm: LoadedModel, tmp_path: Path) -> None:
    """Batch size 1 against 7: padding and attention masks change the numbers only by the float32
    forward's rounding, and the decisions only between items tied within it (docs/metrics.md,
    "Batch size and padding")."""
    templates = template_frame()
    lemmas = _lemmas(lm)
    (one,) = _run_all_chunks(lm, templates, lemmas, tmp_path / "bs1", 1, batch_size=1)
    (seven,) = _run_all_chunks(lm, templates, lemmas, tmp_path / "bs7", 1, batch_size=7)
    ra, rb = _shard_arrays(one), _shard_arrays(seven)
    assert ra.keys() == rb.keys()
    assert len(ra["context_id"]) > 7  # more than one batch, of different lengths: padding happens
    for key in ("context_id", "plural", "rows"):
        np.testing.assert_array_equal(ra[key], rb[key], err_msg=key)
    assert read_shard_meta(one) == read_shard_meta(seven)
    g = templates[templates["group"] == "g1"].reset_index(drop=True)
    ctx, row_ctx = build_contexts(g, lm.kind)
    assert ra["context_id"].tolist() == ctx["context_id"].tolist()
    rows = ra["rows"]  # the TSE rows in the shard's order
    form_ids = lemmas[["sing_id", "plur_id"]].to_numpy().reshape(-1)
    _assert_batch_size_independent(
        _shard_result(one), _shard_result(seven), _unpadded(lm, ctx), form_ids, row_ctx[rows], _tse_ids(lm, g)[rows]
    )


def test_thread_count_changes_no_number(lm: LoadedModel, tmp_path: Path) -> None:
    """The same shards, bit for bit, on 1 and on 2 CPU threads (inference.threads: config/quick.yaml
    runs its model jobs on 2, and its outputs must equal the 1-thread run's)."""
    templates = template_frame()
    lemmas = _lemmas(lm)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        (one,) = _run_all_chunks(lm, templates, lemmas, tmp_path / "t1", 1, batch_size=8)
        torch.set_num_threads(2)
        (two,) = _run_all_chunks(lm, templates, lemmas, tmp_path / "t2", 1, batch_size=8)
    finally:
        torch.set_num_threads(before)
    ra, rb = _shard_arrays(one), _shard_arrays(two)
    assert ra.keys() == rb.keys() and len(ra["context_id"]) > 8
    for key in ra:
        np.testing.assert_array_equal(ra[key], rb[key], err_msg=key)
    assert read_shard_meta(one) == read_shard_meta(two)


# --------------------------------------------------------------------------- metadata


def test_shard_metadata(lm: LoadedModel, tmp_path: Path) -> None:
    templates = template_frame()
    lemmas = _lemmas(lm)
    paths = _run_all_chunks(lm, templates, lemmas, tmp_path, 3, batch_size=8)
    g = templates[templates["group"] == "g1"].reset_index(drop=True)
    ctx, row_ctx = build_contexts(g, lm.kind)
    fingerprint = tokenizer_fingerprint(lm.tokenizer)
    for k, p in enumerate(paths):
        meta = read_shard_meta(p)
        start, stop = chunk_range(len(ctx), 3, k)
        assert meta["model_id"] == lm.model_id
        assert meta["revision"] == lm.revision and meta["revision"].startswith("local-sha256:")
        assert meta["tokenizer_fingerprint"] == fingerprint and len(fingerprint) == 64
        assert meta["lemma_set_sha256"] == lemma_set_hash(lemmas) and len(meta["lemma_set_sha256"]) == 64
        # GPT-2 and BERT-cased are cased, BERT-uncased (the stand-in without ../shared) is not
        assert meta["cased"] is (_tokenizer_name(lm) != "bert-base-uncased")
        assert meta["kind"] == lm.kind and meta["dtype"] == "float32"
        assert (meta["group"], meta["chunk"], meta["n_chunks"]) == ("g1", k, 3)
        assert (meta["context_start"], meta["context_stop"]) == (start, stop)
        assert meta["n_contexts"] == stop - start
        assert meta["n_rows"] == int(((row_ctx >= start) & (row_ctx < stop)).sum())
        assert meta["n_group_contexts"] == len(ctx)
        assert meta["n_lemmas"] == len(lemmas) and meta["top_k"] == 10
        assert meta["schema_version"] == SHARD_SCHEMA_VERSION
        assert meta["prepend_bos"] is False
        assert pq.read_table(p).num_rows == stop - start
    # a different lemma set changes its hash
    assert lemma_set_hash(lemmas.iloc[1:]) != lemma_set_hash(lemmas)


def test_shards_with_and_without_bos_do_not_mix(causal_lm: LoadedModel, tmp_path: Path) -> None:
    templates = template_frame()
    lemmas = _lemmas(causal_lm)
    plain = _run_all_chunks(causal_lm, templates, lemmas, tmp_path / "plain", 2, batch_size=8)
    bos = _run_all_chunks(causal_lm, templates, lemmas, tmp_path / "bos", 2, batch_size=8, prepend_bos=True)
    assert read_shard_meta(bos[0])["prepend_bos"] is True
    with pytest.raises(VerbevalError, match="prepend_bos"):
        read_shards([plain[0], bos[1]])


def test_infer_chunk_unknown_group(causal_lm: LoadedModel, tmp_path: Path) -> None:
    with pytest.raises(VerbevalError, match="no template rows"):
        infer_chunk(
            causal_lm, template_frame(), _lemmas(causal_lm), "nope", 0, 1, tmp_path / "x.parquet", progress=False
        )
    assert not (tmp_path / "x.parquet").exists()


# --------------------------------------------------------------------------- out of memory


def _prepare(lm: LoadedModel) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    g = template_frame().query("group == 'g1'").reset_index(drop=True)
    ctx, row_ctx = build_contexts(g, lm.kind)
    form_ids = _lemmas(lm)[["sing_id", "plur_id"]].to_numpy().reshape(-1)
    return encode_contexts(lm, ctx), form_ids, row_ctx, _tse_ids(lm, g)


@pytest.mark.parametrize("error", ["torch", "runtime"])
def test_oom_backoff(lm: LoadedModel, monkeypatch: pytest.MonkeyPatch, error: str) -> None:
    enc, form_ids, row_ctx, tse_ids = _prepare(lm)
    assert len(enc.ids) >= 8
    ref = _unpadded(lm, build_contexts(template_frame().query("group == 'g1'"), lm.kind)[0])
    reference = run_contexts(lm, enc, form_ids, row_ctx, tse_ids, batch_size=2, progress=False)
    unpatched_big = run_contexts(lm, enc, form_ids, row_ctx, tse_ids, batch_size=8, progress=False)

    original = lm.model.forward
    seen: list[tuple[int, bool]] = []

    def forward(*args: Any, **kwargs: Any) -> Any:
        n = kwargs["input_ids"].shape[0]
        if n > 2:
            seen.append((n, False))
            if error == "torch":
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        seen.append((n, True))
        return original(*args, **kwargs)

    monkeypatch.setattr(lm.model, "forward", forward)
    result = run_contexts(lm, enc, form_ids, row_ctx, tse_ids, batch_size=8, progress=False)
    assert any(not ok for _, ok in seen), "the patched forward never failed"
    assert all(n <= 2 for n, ok in seen if ok)
    assert sum(n for n, ok in seen if ok) == len(enc.ids)  # every context exactly once
    _assert_batch_size_independent(result, reference, ref, form_ids, row_ctx, tse_ids)
    _assert_batch_size_independent(result, unpatched_big, ref, form_ids, row_ctx, tse_ids)
    assert not np.isnan(result.tse_p[[i for i in range(len(row_ctx)) if i not in MULTI_TOKEN_ROWS]]).any()


def test_oom_at_batch_size_one_and_other_errors_propagate(
    causal_lm: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    enc, form_ids, row_ctx, tse_ids = _prepare(causal_lm)

    def oom(*args: Any, **kwargs: Any) -> Any:
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(causal_lm.model, "forward", oom)
    with pytest.raises(torch.OutOfMemoryError):
        run_contexts(causal_lm, enc, form_ids, row_ctx, tse_ids, batch_size=4, progress=False)

    calls: list[int] = []

    def other(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["input_ids"].shape[0])
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(causal_lm.model, "forward", other)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        run_contexts(causal_lm, enc, form_ids, row_ctx, tse_ids, batch_size=4, progress=False)
    assert calls == [4]  # no retry for an error that is not out-of-memory


def test_shard_permissions_follow_umask(causal_lm: LoadedModel, tmp_path: Path) -> None:
    """Shards are shared artifacts (results/ on a cluster, DVC): the writer's umask decides who may
    read them, as for any file the user creates, not the 0600 of a private temporary file."""
    old = os.umask(0o022)
    try:
        (path,) = _run_all_chunks(causal_lm, template_frame(), _lemmas(causal_lm), tmp_path, 1, batch_size=8)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# --------------------------------------------------------------------------- one process per model


def test_infer_model_writes_the_same_shards_as_infer_chunk(lm: LoadedModel, tmp_path: Path) -> None:
    """The per-model engine (group prepared once, background writer) gives byte-identical shards
    to the per-chunk path, and a manifest that checksums each."""
    from verbeval.agreement.engine.inference import infer_model
    from verbeval.agreement.engine.shardstore import manifest_shards

    templates, lemmas = template_frame(), _lemmas(lm)
    manifest = tmp_path / "store" / "manifest.json"
    body = infer_model(lm, templates, lemmas, ["g1", "g2"], 3, manifest, batch_size=4, progress=False)
    # g2 has one context: cut into one chunk, not three (two of them empty)
    assert [s["path"] for s in body["shards"]] == [f"g1/{k}-of-3.parquet" for k in (1, 2, 3)] + ["g2/1-of-1.parquet"]
    assert body["timing"]["contexts"] == sum(
        m for m in [len(build_contexts(templates[templates.group == g], lm.kind)[0]) for g in ("g1", "g2")]
    )
    reference = _run_all_chunks(lm, templates, lemmas, tmp_path / "ref", 3, batch_size=4)
    got = manifest_shards(manifest)
    assert list(got) == ["g1", "g2"]
    for mine, ref in zip(got["g1"], reference):
        assert mine.read_bytes() == ref.read_bytes()


def test_infer_model_resumes_without_recomputing_finished_shards(
    masked_lm: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verbeval.agreement.engine import inference
    from verbeval.agreement.engine.inference import infer_model

    templates, lemmas = template_frame(), _lemmas(masked_lm)
    manifest = tmp_path / "store" / "manifest.json"
    real = inference.compute_chunk
    calls: list[tuple[str, int]] = []

    def dies_on_third(lm: LoadedModel, mc: object, work: object, chunk: int, *args: object, **kw: object) -> object:
        calls.append((work.group, chunk))  # type: ignore[attr-defined]
        if len(calls) == 3:
            raise KeyboardInterrupt  # a kill in the middle of the run
        return real(lm, mc, work, chunk, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(inference, "compute_chunk", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        infer_model(masked_lm, templates, lemmas, ["g1"], 3, manifest, batch_size=4, progress=False)
    assert not manifest.exists()  # no manifest: the job did not finish
    done = sorted((tmp_path / "store" / "g1").glob("*.parquet"))
    assert [p.name for p in done] == ["1-of-3.parquet", "2-of-3.parquet"]
    mtimes = {p: p.stat().st_mtime_ns for p in done}
    (tmp_path / "store" / "g1" / ".3-of-3.parquet.abc.tmp").write_bytes(b"partial")  # a killed writer's leftover
    calls.clear()
    body = infer_model(masked_lm, templates, lemmas, ["g1"], 3, manifest, batch_size=4, progress=False)
    assert calls == [("g1", 2)]  # only the missing shard was computed
    assert {p: p.stat().st_mtime_ns for p in done} == mtimes
    assert not list((tmp_path / "store").rglob("*.tmp"))
    first = manifest.read_bytes()
    # a rerun with everything in place computes nothing and writes the same manifest
    calls.clear()
    again = infer_model(masked_lm, templates, lemmas, ["g1"], 3, manifest, batch_size=4, progress=False)
    assert calls == [] and again["timing"]["contexts"] == 0 and manifest.read_bytes() == first
    assert len(body["shards"]) == 3


def test_disk_full_during_a_shard_write_then_resume_gives_identical_shards(
    masked_lm: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC while the second shard is written (some bytes already on disk): the error names errno 28
    and the shard's path, nothing half-written is left (no such shard, no temporary, no manifest;
    the third shard, computed while the writer wrote, may be complete), and the rerun computes only
    the missing shards, ending byte-identical to a run that never failed."""
    import errno

    from verbeval.agreement.engine import shards as shards_mod
    from verbeval.agreement.engine.inference import infer_model

    templates, lemmas = template_frame(), _lemmas(masked_lm)
    ref = tmp_path / "ref" / "manifest.json"
    infer_model(masked_lm, templates, lemmas, ["g1"], 3, ref, batch_size=4, progress=False)
    store = tmp_path / "store"
    real = shards_mod.pq.write_table
    writes = [0]

    def disk_full_on_second(table: Any, where: Any, **kw: Any) -> None:
        writes[0] += 1
        if writes[0] == 2:
            Path(where).write_bytes(b"PAR1 partial")  # part of it reached the disk
            raise OSError(errno.ENOSPC, "No space left on device")
        real(table, where, **kw)

    monkeypatch.setattr(shards_mod.pq, "write_table", disk_full_on_second)
    with pytest.raises(OSError) as info:
        infer_model(masked_lm, templates, lemmas, ["g1"], 3, store / "manifest.json", batch_size=4, progress=False)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(store / "g1" / "2-of-3.parquet")
    assert str(info.value) == f"[Errno 28] No space left on device: '{store / 'g1' / '2-of-3.parquet'}'"
    left = sorted(p.name for p in (store / "g1").iterdir())  # no partial shard, no temporary
    assert "1-of-3.parquet" in left and set(left) <= {"1-of-3.parquet", "3-of-3.parquet"}, left
    assert not (store / "manifest.json").exists()
    monkeypatch.undo()
    body = infer_model(masked_lm, templates, lemmas, ["g1"], 3, store / "manifest.json", batch_size=4, progress=False)
    assert body["timing"]["contexts"] < len(templates[templates.group == "g1"])  # the first shard was kept
    for name in ("1-of-3.parquet", "2-of-3.parquet", "3-of-3.parquet"):
        assert (store / "g1" / name).read_bytes() == (ref.parent / "g1" / name).read_bytes(), name
    assert not list(store.rglob("*.tmp"))


def test_a_complete_store_gets_its_manifest_without_the_weights(
    lm: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The weight-free path: the model's identity from its tokenizer and config equals the loaded
    model's, and a store holding every shard writes the manifest the full run wrote, byte for byte,
    with no model load; a store missing a shard, without a journal, or a device map: None, nothing
    written."""
    from dataclasses import replace

    from verbeval.agreement.engine.inference import infer_model, manifest_if_complete
    from verbeval.core import models
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.models import model_identity

    templates, lemmas = template_frame(), _lemmas(lm)
    source = ModelSource.of(lm.model_id)
    manifest = tmp_path / "store" / "manifest.json"
    ident = model_identity(source, dtype=lm.dtype)
    assert replace(ident, tokenizer=None) == replace(lm.identity, tokenizer=None)
    assert ident.kind == lm.kind and ident.revision.startswith("local-sha256:")

    def kept(**kw: Any) -> dict[str, Any] | None:
        return manifest_if_complete(source, templates, lemmas, ["g1", "g2"], 3, manifest, random_init=True, **kw)

    assert kept() is None and not manifest.parent.exists()  # a first run: no journal, nothing asked
    infer_model(lm, templates, lemmas, ["g1", "g2"], 3, manifest, batch_size=4, progress=False, random_init=True)
    full = manifest.read_bytes()
    manifest.unlink()
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the weights were loaded"))
    assert kept(device_map="auto") is None and not manifest.exists()
    body = kept()
    assert body is not None and manifest.read_bytes() == full
    assert [s["path"] for s in body["shards"]] == [f"g1/{k}-of-3.parquet" for k in (1, 2, 3)] + ["g2/1-of-1.parquet"]
    manifest.unlink()
    (manifest.parent / "g1" / "3-of-3.parquet").unlink()
    assert kept() is None and not manifest.exists()


def test_infer_model_recomputes_when_the_inputs_change(masked_lm: LoadedModel, tmp_path: Path) -> None:
    from verbeval.agreement.engine.inference import infer_model

    templates, lemmas = template_frame(), _lemmas(masked_lm)
    manifest = tmp_path / "store" / "manifest.json"
    infer_model(masked_lm, templates, lemmas, ["g1"], 2, manifest, batch_size=4, progress=False)
    # a changed template row of the group: its shards are recomputed
    changed = templates.copy()
    changed.loc[0, "left"] = "the writer"
    body = infer_model(masked_lm, changed, lemmas, ["g1"], 2, manifest, batch_size=4, progress=False)
    assert body["timing"]["contexts"] > 0
    # another chunking: the old shards leave the store, the manifest lists the new ones
    body = infer_model(masked_lm, changed, lemmas, ["g1"], 3, manifest, batch_size=4, progress=False)
    assert sorted(p.name for p in (tmp_path / "store" / "g1").glob("*.parquet")) == [
        "1-of-3.parquet",
        "2-of-3.parquet",
        "3-of-3.parquet",
    ]
    # a shard damaged in place is recomputed on the next run (its checksum no longer matches)
    shard = tmp_path / "store" / "g1" / "2-of-3.parquet"
    good = shard.read_bytes()
    shard.write_bytes(good[:100] + bytes(b ^ 0xFF for b in good[100:104]) + good[104:])
    body = infer_model(masked_lm, changed, lemmas, ["g1"], 3, manifest, batch_size=4, progress=False)
    assert body["timing"]["contexts"] == read_shard_meta(shard)["n_contexts"] and shard.read_bytes() == good


def test_the_forward_job_scores_each_chunk_and_aggregate_gives_the_same_bytes(
    lm: LoadedModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each new chunk's contexts are scored beside its shard by the forward job (at the run's cutoffs);
    aggregate reads those, and its outputs are byte-identical to scoring the shards (the score files
    removed, or of other cutoffs, or of another shard)."""
    import logging
    import shutil
    from functools import partial

    from verbeval.agreement.engine.inference import infer_model
    from verbeval.agreement.engine.shardstore import scores_path
    from verbeval.agreement.runs import AggregateRun, aggregate
    from verbeval.agreement.scores.chunk_scores import ChunkScoring, score_written_chunk
    from verbeval.core.io import sha256_file

    templates, lemmas = template_frame(), _lemmas(lm)
    tpath = tmp_path / "templates.parquet"
    templates.to_parquet(tpath)
    manifest = tmp_path / "store" / "manifest.json"
    top, bottom = [0.3, 0.9, 1.0], [0.5, 0.01]
    body = infer_model(
        lm,
        templates,
        lemmas,
        ["g1", "g2"],
        3,
        manifest,
        batch_size=4,
        progress=False,
        after_write=partial(score_written_chunk, scoring=ChunkScoring(tuple(top), tuple(bottom), 16.0)),
    )
    shard_files = [tmp_path / "store" / s["path"] for s in body["shards"]]
    assert all(scores_path(p).is_file() for p in shard_files)
    # each score file's own size and sha256, recorded in its shard's manifest entry
    assert [(s["scores_bytes"], s["scores_sha256"]) for s in body["shards"]] == [
        (scores_path(p).stat().st_size, sha256_file(scores_path(p))) for p in shard_files
    ]
    assert scores_path(shard_files[0]) == tmp_path / "store" / "scores" / "g1" / "1-of-3.parquet"

    def outputs(out: str) -> dict[str, bytes]:
        caplog.clear()
        with caplog.at_level(logging.INFO):
            aggregate(AggregateRun(str(tpath), ("g1", "g2"), "m", str(manifest), str(tmp_path / out), tuple(top),
                                   tuple(bottom), resamples=50))  # fmt: skip
        return {p.relative_to(tmp_path / out).as_posix(): p.read_bytes() for p in (tmp_path / out).rglob("*.*")}

    from_job = outputs("a")
    assert caplog.text.count("(scores from the forward job)") == 2
    # the same cutoffs recomputed from the shards: the score files moved away
    shutil.move(tmp_path / "store" / "scores", tmp_path / "kept-scores")
    from_shards = outputs("b")
    assert caplog.text.count("(scores from the shards)") == 2
    assert sorted(from_job) == sorted(from_shards) and len(from_job) == 6
    assert from_job == from_shards
    # other cutoffs than the score files': scored from the shards, never from the stale files
    shutil.move(tmp_path / "kept-scores", tmp_path / "store" / "scores")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        aggregate(
            AggregateRun(str(tpath), ("g1",), "m", str(manifest), str(tmp_path / "c"), (1.0,), (0.5,), resamples=50)
        )
    assert "(scores from the shards)" in caplog.text
    expected = context_scores(read_shards(manifest_shards(manifest)["g1"]), [1.0], [0.5])
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "c" / "g1" / "scores.parquet"), expected)

    # the precision audit's EW counts, from the forward job's counts and from the shards: the same rows
    from verbeval.agreement.engine.shardstore import listed_shards
    from verbeval.agreement.scores.chunk_scores import read_chunk_audit
    from verbeval.agreement.scores.precision import audit_model

    row_tse = {g: pd.read_parquet(tmp_path / "a" / g / "tse.parquet") for g in ("g1", "g2")}
    shards = {g: [str(p) for p in ps] for g, ps in manifest_shards(manifest).items()}
    listed = {str(s.path): s for s in listed_shards(manifest)}
    counts = {p: read_chunk_audit(s, 16.0) for p, s in listed.items()}
    assert all(c is not None for c in counts.values())
    counted = audit_model("m", row_tse, shards, len(lemmas), 16.0, counted=counts)  # type: ignore[arg-type]
    read = audit_model("m", row_tse, shards, len(lemmas), 16.0)
    pd.testing.assert_frame_equal(counted, read)
    assert counted.loc[counted["metric"] == "ew", "decisions"].sum() == len(lemmas) * len(
        pd.concat([pd.read_parquet(tmp_path / "a" / g / "scores.parquet") for g in ("g1", "g2")])
    )
    first = listed[str(shard_files[0])]
    assert read_chunk_audit(first, 16.0) is not None
    assert read_chunk_audit(first, 8.0) is None  # another threshold: the shard is read
    assert read_chunk_audit(dataclasses.replace(first, scores_sha256=None), 16.0) is None  # none recorded: not used
    assert scores_path(first.path).is_file()  # (left in place: not damaged)
    assert read_chunk_audit(dataclasses.replace(first, sha256="0" * 64), 16.0) is None  # of another shard: never used
    assert not scores_path(first.path).is_file() and scores_path(first.path).with_suffix(".parquet.corrupt").is_file()


# --------------------------------------------------------------------------- tf32


def _ipc_bytes(table: Any) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _tf32_flags() -> tuple[bool, bool]:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("before", [(False, True), (True, False)])
def test_tf32_is_set_for_the_run_only_and_each_flag_restored(
    before: tuple[bool, bool], caplog: pytest.LogCaptureFixture
) -> None:
    """``tf32`` turns TF32 on in CUDA's matrix products and cuDNN for the run, then puts each flag back
    as it was (after an error too); any other dtype leaves both as they are. Off CUDA the run warns."""
    from verbeval.core.models import run_precision

    saved = _tf32_flags()
    try:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
        for dtype in ("float32", "float16", "bfloat16"):
            with run_precision("m", dtype, torch.device("cuda")):
                assert _tf32_flags() == before
        with run_precision("m", "tf32", torch.device("cuda")):
            assert _tf32_flags() == (True, True)
        assert _tf32_flags() == before
        with pytest.raises(KeyboardInterrupt), run_precision("m", "tf32", torch.device("cuda")):
            raise KeyboardInterrupt
        assert _tf32_flags() == before and not caplog.records  # on CUDA: no warning
        with run_precision("org/m", "tf32", torch.device("cpu")):
            assert _tf32_flags() == (True, True)
        assert _tf32_flags() == before
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "WARNING",
            "org/m: matrix products on a CPU are float32 with tf32: this run's numbers are those of a float32 run",
        )
    ]


def test_a_tf32_run_loads_float32_weights_and_its_shards_say_tf32(
    causal_lm: LoadedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A tf32 run: float32 weights, TF32 on during its forward passes only (a float32 run's flags are
    left alone), shards and manifest that say ``dtype: tf32`` and, on this CPU, ``matmul: float32`` (a
    store of their own: the key differs), and on a CPU the float32 run's very numbers; the weight-free
    path writes its manifest byte for byte."""
    import json

    from verbeval.agreement.engine import inference
    from verbeval.agreement.engine.inference import infer_model, manifest_if_complete
    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.core.model_sources.source import ModelSource

    path = causal_lm.model_id
    runs = {d: load_model(path, device="cpu", dtype=d) for d in ("float32", "tf32")}
    assert runs["tf32"].dtype == "tf32" and {p.dtype for p in runs["tf32"].model.parameters()} == {torch.float32}
    seen: list[tuple[str, bool, bool]] = []
    real = inference.run_contexts

    def spy(lm: LoadedModel, *a: Any, **k: Any) -> Any:
        seen.append((lm.dtype, *_tf32_flags()))
        return real(lm, *a, **k)

    monkeypatch.setattr(inference, "run_contexts", spy)
    before = _tf32_flags()
    templates, lemmas = template_frame(), _lemmas(causal_lm)
    shards, meta = {}, {}
    for d, lm in runs.items():
        manifest = tmp_path / d / "manifest.json"
        infer_model(lm, templates, lemmas, ["g1"], 2, manifest, batch_size=4, progress=False, random_init=True)
        shards[d], meta[d] = manifest_shards(manifest)["g1"], json.loads(manifest.read_text())["meta"]
    assert seen == [("float32", *before)] * 2 + [("tf32", True, True)] * 2 and _tf32_flags() == before
    assert meta["float32"]["dtype"] == "float32" and "matmul" not in meta["float32"]
    assert (meta["tf32"]["dtype"], meta["tf32"]["matmul"]) == ("tf32", "float32")
    assert {k: v for k, v in meta["tf32"].items() if k not in ("dtype", "matmul")} == {
        k: v for k, v in meta["float32"].items() if k != "dtype"
    }
    for f32, t32 in zip(shards["float32"], shards["tf32"]):
        assert (read_shard_meta(t32)["dtype"], read_shard_meta(t32)["matmul"]) == ("tf32", "float32")
        assert "matmul" not in read_shard_meta(f32)
        # the same bits in every column (NaN included: TSE rows of multi-token forms), metadata aside
        a, b = (_ipc_bytes(pq.read_table(p).replace_schema_metadata(None)) for p in (t32, f32))
        assert a == b
    warned = [r.getMessage() for r in caplog.records if r.name == "verbeval.core.models"]
    assert warned == [
        f"{path}: matrix products on a CPU are float32 with tf32: this run's numbers are those of a float32 run"
    ]
    # the weight-free path (every shard in the store) writes the tf32 run's manifest byte for byte
    manifest = tmp_path / "tf32" / "manifest.json"
    full = manifest.read_bytes()
    manifest.unlink()
    body = manifest_if_complete(
        ModelSource.of(path), templates, lemmas, ["g1"], 2, manifest, dtype="tf32", device="cpu", random_init=True
    )
    assert body is not None and manifest.read_bytes() == full
