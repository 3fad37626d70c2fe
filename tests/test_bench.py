"""The benchmark harness: the paper-style baseline against verbeval's vectorised scores (a real
correctness check of both), the fast kernels against straightforward references, the throughput
measurement's bookkeeping, and the workflow parts: Snakemake runs the workflow (no copy of a rule's
command in the bench) and reports each job's time from its own metadata. No test asserts a time."""

from __future__ import annotations

import ast
import math
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from tiny_cache import tiny_model
from verbeval.agreement.data.eligibility import eligible_lemmas, single_token_ids
from verbeval.agreement.engine import kernels as agreement
from verbeval.agreement.engine.encoding import encode_contexts
from verbeval.agreement.engine.forward_pass import split_head, target_logits
from verbeval.agreement.engine.kernels import form_statistics
from verbeval.agreement.scores.metrics import PAPER_BOTTOM_CUTOFFS, PAPER_TOP_CUTOFFS, _stable_order, score_logits
from verbeval.bench.baseline_ratio import compare_with_verbeval
from verbeval.bench.paper_baseline import PaperBaseline
from verbeval.bench.throughput import throughput
from verbeval.core.models import LoadedModel, load_model
from verbeval.core.tiny_models import make_tiny_model

LEXICON = pd.DataFrame(
    [
        ("laugh", "laughs", "laugh"),
        ("smile", "smiles", "smile"),
        ("be", "is", "are"),
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
# (left, right, plural, correct, incorrect)
ROWS = [
    ("the author", "", False, "laughs", "laugh"),
    ("the pilots that the guard likes", "to the guards", True, "are", "is"),
    ("the farmer next to the guards", "in the park", False, "runs", "run"),
    ("the dancers in the big old theatre", "every night", True, "dance", "dances"),
    ("the author", "", False, "swims", "swim"),  # not a single token: TSE undefined
]


def _sharpened(path: Path) -> LoadedModel:
    lm = load_model(str(path), device="cpu")
    with torch.no_grad():  # peaked distributions, so the cutoffs select non-trivial sets
        lm.model.get_output_embeddings().weight.mul_(30.0)
    return lm


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def lm(
    request: pytest.FixtureRequest,
    tokenizer_path: Callable[[str], Path],
    wordpiece_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> LoadedModel:
    tok = wordpiece_path if request.param == "bert" else tokenizer_path("gpt2")
    return _sharpened(tiny_model(tmp_path_factory, tok, request.param, tmp_path_factory.mktemp(request.param)))


def _verbeval_scores(lm: LoadedModel, lemmas: pd.DataFrame) -> Any:
    ctx = pd.DataFrame([(r[0], r[1]) for r in ROWS], columns=["left", "right"])
    enc = encode_contexts(lm, ctx)
    width = max(len(s) for s in enc.ids)
    ids = torch.tensor([s + [0] * (width - len(s)) for s in enc.ids])
    att = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in enc.ids])
    with torch.inference_mode():
        logits = target_logits(lm.model, ids, att, torch.as_tensor(enc.target))
    plural = np.array([r[2] for r in ROWS])
    sing = [r[4] if r[2] else r[3] for r in ROWS]
    plur = [r[3] if r[2] else r[4] for r in ROWS]
    tse_ids = np.stack([single_token_ids(lm.tokenizer, sing), single_token_ids(lm.tokenizer, plur)], axis=1)
    return score_logits(
        logits, plural, lemmas[["sing_id", "plur_id"]].to_numpy(), PAPER_TOP_CUTOFFS, PAPER_BOTTOM_CUTOFFS, tse_ids
    )


def test_baseline_matches_verbeval(lm: LoadedModel) -> None:
    """The per-row, per-lemma Python baseline and the vectorised scorer agree on every score."""
    lemmas = eligible_lemmas(LEXICON, lm.tokenizer)
    assert len(lemmas) == len(LEXICON)
    base = PaperBaseline(lm, lemmas, PAPER_TOP_CUTOFFS, PAPER_BOTTOM_CUTOFFS)
    ref = _verbeval_scores(lm, lemmas)
    seen_non_trivial = False
    for i, row in enumerate(ROWS):
        got = base.score_row(row[0], row[1], row[2], row[3], row[4])
        assert (math.isnan(got["tse"]) and math.isnan(ref.tse[i])) or got["tse"] == ref.tse[i]
        for side, cuts in (("top", PAPER_TOP_CUTOFFS), ("bottom", PAPER_BOTTOM_CUTOFFS)):
            for j, p in enumerate(cuts):
                for metric in ("ew", "mw", "prob_counted", "prob_counted_forms"):
                    want = getattr(ref, f"{metric}_{side}")[i, j]
                    # the baseline's own batch-1 forward differs from the batched one by float32
                    # rounding (~1e-7); the exact check with shared logits is the test below
                    np.testing.assert_allclose(
                        got[f"{metric}_{side}@{p:g}"],
                        want,
                        rtol=1e-5,
                        atol=1e-6,
                        err_msg=f"row {i} {metric}_{side}@{p:g}",
                    )
                counted = getattr(ref, f"prob_counted_{side}")[i, j]
                seen_non_trivial |= not math.isnan(getattr(ref, f"ew_{side}")[i, j]) and counted < ref.prob_counted_top[
                    i, -1
                ] * (1 - 1e-6)
    assert math.isnan(ref.tse[4])
    assert seen_non_trivial, "no cutoff selected a proper subset of the lemmas"


class _FixedLogits(torch.nn.Module):
    """A 'model' whose logits at every position are fixed (the paper's Table 1 toy)."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> Any:
        return SimpleNamespace(logits=self.logits.expand(input_ids.shape[0], input_ids.shape[1], -1))


def test_baseline_table1_toy(lm: LoadedModel) -> None:
    """Table 1 of the paper: P(is)=.1, P(are)=.6, P(exists)=.2, P(exist)=.1 in a plural context:
    TSE 1.0, EW 0.5, MW 0.7 at top p = 1 (hand-computed)."""
    tok = lm.tokenizer
    lemmas = eligible_lemmas(LEXICON[LEXICON["lemma"].isin(["be", "exist"])], tok)
    probs = torch.zeros(len(tok), dtype=torch.float64)
    ids = dict(zip(lemmas["sing"], lemmas["sing_id"])) | dict(zip(lemmas["plur"], lemmas["plur_id"]))
    for form, p in (("is", 0.1), ("are", 0.6), ("exists", 0.2), ("exist", 0.1)):
        probs[ids[form]] = p
    toy = LoadedModel(
        lm.model_id, _FixedLogits(torch.log(probs).float()), tok, lm.kind, lm.cased, lm.device, "float32", "toy"
    )
    base = PaperBaseline(toy, lemmas, [1.0], [1.0])
    got = base.score_row("the pilots that the guard likes", "to the guards", True, "are", "is")
    assert got["tse"] == 1.0
    assert got["ew_top@1"] == 0.5 and got["ew_bottom@1"] == 0.5
    assert got["mw_top@1"] == pytest.approx(0.7, abs=1e-7)
    assert got["prob_counted_top@1"] == pytest.approx(1.0, abs=1e-7)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_baseline_equals_score_logits_on_shared_logits(lm: LoadedModel, seed: int) -> None:
    """Same logits in, same scores out (to float64 rounding): baseline and vectorised scorer."""
    tok = lm.tokenizer
    lemmas = eligible_lemmas(LEXICON, tok)
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(len(tok), generator=gen) * 4
    boost = torch.randn(len(lemmas), generator=gen) * 4 + 6
    logits[torch.tensor(lemmas["sing_id"].to_list())] += boost  # singular forms near the top
    toy = LoadedModel(lm.model_id, _FixedLogits(logits), tok, lm.kind, lm.cased, lm.device, "float32", "toy")
    base = PaperBaseline(toy, lemmas, PAPER_TOP_CUTOFFS, PAPER_BOTTOM_CUTOFFS)
    for plural in (False, True):
        got = base.score_row("the authors", "", plural, "laugh", "laughs")
        want = score_logits(
            logits[None],
            np.array([plural]),
            lemmas[["sing_id", "plur_id"]].to_numpy(),
            PAPER_TOP_CUTOFFS,
            PAPER_BOTTOM_CUTOFFS,
        )
        for side, cuts in (("top", PAPER_TOP_CUTOFFS), ("bottom", PAPER_BOTTOM_CUTOFFS)):
            for j, p in enumerate(cuts):
                for metric in ("ew", "mw", "prob_counted", "prob_counted_forms"):
                    np.testing.assert_allclose(
                        got[f"{metric}_{side}@{p:g}"],
                        getattr(want, f"{metric}_{side}")[0, j],
                        rtol=1e-9,
                        atol=1e-12,
                        err_msg=f"{metric}_{side}@{p:g}",
                    )


def test_target_logits_equal_full_forward(lm: LoadedModel) -> None:
    """The head applied at the target position only gives the full forward's logits there."""
    assert split_head(lm.model) is not None
    torch.manual_seed(0)
    ids = torch.randint(1000, 2000, (4, 9))
    att = torch.ones_like(ids)
    att[1, 6:] = 0
    tgt = torch.tensor([0, 5, 8, 3])
    shapes: list[tuple[int, ...]] = []
    hook = split_head(lm.model)[1].register_forward_hook(lambda m, i, o: shapes.append(tuple(o.shape)))
    with torch.inference_mode():
        got = target_logits(lm.model, ids, att, tgt)
        hook.remove()
        full = lm.model(input_ids=ids, attention_mask=att).logits[torch.arange(4), tgt]
    assert shapes == [(4, 1, len(lm.tokenizer))]  # the vocabulary projection ran once per sequence
    torch.testing.assert_close(got, full, rtol=1e-5, atol=1e-5)


def _reference_form_statistics(probs: torch.Tensor, form_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The straightforward version: a stable argsort of the whole vocabulary."""
    b, v = probs.shape
    sorted_p, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    zeros = torch.zeros((b, 1), dtype=probs.dtype)
    above_sorted = torch.cat([zeros, torch.cumsum(sorted_p, dim=-1)[:, :-1]], dim=-1)
    tail = torch.cumsum(torch.flip(sorted_p, dims=[-1]), dim=-1)
    below_sorted = torch.flip(torch.cat([zeros, tail[:, :-1]], dim=-1), dims=[-1])
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(v).expand(b, v))
    fr = ranks[:, form_ids]
    return probs[:, form_ids], above_sorted.gather(1, fr), below_sorted.gather(1, fr)


@pytest.mark.parametrize("vocab,scale,decimals", [(3000, 3.0, 1), (200, 0.5, 1), (3000, 3.0, 5)])
def test_form_statistics_equals_full_argsort(vocab: int, scale: float, decimals: int) -> None:
    """Rows with many ties (full stable sort) and with a few (counted) give the reference ranks."""
    torch.manual_seed(1)
    logits = (torch.randn(16, vocab) * scale).round(decimals=decimals)  # exact ties
    logits[:, 7] = logits[:, 3]
    logits[0] = 0.0  # a uniform row: every item tied
    probs = torch.softmax(logits.double(), dim=-1)
    forms = torch.cat([torch.tensor([0, 3, 7, vocab - 1]), torch.randperm(vocab)[:50]])
    p_f = probs[:, forms]
    n_tied = ((probs.unsqueeze(1) == p_f.unsqueeze(2)).sum(-1) > 1).sum(1)
    assert bool((n_tied[1:] > 0).all())
    if decimals == 5:  # a few ties per row: the counting path
        assert int(n_tied[1:].max()) <= agreement.MAX_COUNTED_TIES
    for got, want in zip(form_statistics(probs, forms), _reference_form_statistics(probs, forms)):
        assert torch.equal(got, want)
    # the uniform row by hand: item i has i items above it and v-1-i below
    _, above, below = form_statistics(probs[:1], torch.tensor([0, vocab - 1]))
    torch.testing.assert_close(above[0], torch.tensor([0.0, (vocab - 1) / vocab], dtype=torch.float64))
    torch.testing.assert_close(below[0], torch.tensor([(vocab - 1) / vocab, 0.0], dtype=torch.float64))


@pytest.mark.parametrize("decimals", [1, 5])
def test_form_statistics_accelerator_path(monkeypatch: pytest.MonkeyPatch, decimals: int) -> None:
    """The torch code that runs on GPUs (torch.sort values, torch.searchsorted, tie counting in
    torch) gives the same statistics, run here on CPU tensors."""
    torch.manual_seed(2)
    logits = (torch.randn(12, 2000) * 3.0).round(decimals=decimals)
    logits[:, 7] = logits[:, 3]
    probs = torch.softmax(logits.double(), dim=-1)
    forms = torch.cat([torch.tensor([0, 3, 7, 1999]), torch.randperm(2000)[:40]])
    want = _reference_form_statistics(probs, forms)
    monkeypatch.setattr(agreement, "_numpy_path", lambda t: False)
    for got, ref in zip(form_statistics(probs, forms), want):
        assert torch.equal(got, ref)


def test_stable_order_packed_sort() -> None:
    """The packed float32 sort of the scoring (agreement.metrics) against torch's stable sort."""
    keys32 = torch.tensor([[0.5, 0.25, 0.5, 0.0, -0.0, 1.0], [3.0, 3.0, 3.0, 1e-30, 2.0, 0.0]])
    keys = keys32.double()
    want = torch.sort(keys, dim=-1, stable=True).indices.numpy()
    assert np.array_equal(_stable_order(keys.numpy()), want)
    assert _stable_order(keys.numpy())[0].tolist() == [3, 4, 1, 0, 2, 5]  # ties (0.0/-0.0, 0.5/0.5) by position
    not_float32 = keys + 1e-12  # not exactly float32: the stable argsort path, same answer
    assert np.array_equal(
        _stable_order(not_float32.numpy()), torch.sort(not_float32, dim=-1, stable=True).indices.numpy()
    )
    with_nan = torch.tensor([[0.5, float("nan"), 0.25, 0.5]], dtype=torch.float64)  # NaN last, as torch puts it
    assert np.array_equal(_stable_order(with_nan.numpy()), torch.sort(with_nan, dim=-1, stable=True).indices.numpy())


def test_compare_with_verbeval(tmp_path: Path) -> None:
    """The comparison reads the right context's scores and counts disagreements."""
    g = tmp_path / "g1"
    g.mkdir()
    pd.DataFrame({"context_id": [0, 1], "ew_top@1": [0.5, np.nan]}).to_parquet(g / "scores.parquet")
    pd.DataFrame({"row": [0, 1, 2], "context_id": [0, 1, 0], "tse": [1.0, 0.0, np.nan]}).to_parquet(g / "tse.parquet")
    sample = pd.DataFrame({"group": ["g1", "g1", "g1"], "row_in_group": [0, 1, 2]})
    scored = [{"tse": 1.0, "ew_top@1": 0.5}, {"tse": 0.0, "ew_top@1": np.nan}, {"tse": np.nan, "ew_top@1": 0.5 + 1e-3}]
    out = compare_with_verbeval(sample, scored, tmp_path)
    assert out["scores_compared"] == 6
    assert out["max_abs_diff_vs_verbeval"] == pytest.approx(1e-3)
    assert out["n_diff_over_1e-5"] == 1


def test_throughput_bookkeeping(lm: LoadedModel) -> None:
    ctx = pd.DataFrame(
        {"left": [r[0] for r in ROWS] * 3, "right": [r[1] for r in ROWS] * 3, "plural": [r[2] for r in ROWS] * 3}
    )
    forms = eligible_lemmas(LEXICON, lm.tokenizer)[["sing_id", "plur_id"]].to_numpy().reshape(-1)
    r = throughput(lm, ctx, forms, batch_size=4)
    assert r["contexts"] == 15 and r["batch_size"] == 4
    for key in ("pipeline_ctx_per_s", "forward_head_at_target_ctx_per_s", "forward_raw_ctx_per_s"):
        assert r[key] > 0
    share = r["pipeline_ctx_per_s"] / r["forward_head_at_target_ctx_per_s"]
    if share <= 1:
        assert r["forward_share_of_pipeline"] == pytest.approx(share, abs=2e-3)
    else:  # the pipeline includes the forward pass: faster than it only when other work spoiled a timing
        assert (
            r["forward_share_of_pipeline"]
            == f"unreliable (load {r['load_at_start']} at start, {r['load_at_end']} at end)"
        )
    assert r["peak_rss_mib_process"] > 0 and "peak_gpu_mib" not in r


def test_postprocess_bench_rows(capsys: pytest.CaptureFixture[str]) -> None:
    from verbeval.bench.postprocess import bench_postprocess
    from verbeval.bench.report import print_report

    res = bench_postprocess(
        vocab_sizes=(3_000, 7_000),
        n_forms=40,
        batch_size=4,
        devices=("cpu", "cuda"),
        logit_dtypes=("float32", "bfloat16"),
        repeats=1,
    )
    rows = res["results"]
    cuda = torch.cuda.is_available()
    assert len(rows) == 4 * (2 if cuda else 1)
    assert [(r["device"], r["vocab"], r["logits"]) for r in rows[:4]] == [
        ("cpu", 3000, "float32"),
        ("cpu", 3000, "bfloat16"),
        ("cpu", 7000, "float32"),
        ("cpu", 7000, "bfloat16"),
    ]
    for r in rows:
        assert r["forms"] == 40 and r["batch_size"] == 4
        assert r["ms_per_context"] > 0
        assert math.isclose(r["contexts_per_s"], 1000 / r["ms_per_context"], rel_tol=0.01)
    print_report({"quick": True, "machine": {"load_avg_start": [0.0]}, "postprocess": res})
    assert "vocab    7000, 40 forms, bfloat16 logits, batch 4" in capsys.readouterr().out


def _numpy_reference(p: np.ndarray, form_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mass above / below each form, written independently: a float64 lexsort by (-p, id) of every
    row, and the running sums of its descending and ascending values."""
    b, v = p.shape
    above, below = np.zeros((b, len(form_ids))), np.zeros((b, len(form_ids)))
    for i in range(b):
        order = np.lexsort((np.arange(v), -p[i]))  # descending probability, ties by id
        rank = np.empty(v, dtype=np.int64)
        rank[order] = np.arange(v)
        desc = p[i][order]
        down, up = np.cumsum(desc), np.cumsum(desc[::-1])
        r = rank[form_ids]
        above[i] = np.where(r > 0, down[np.maximum(r - 1, 0)], 0.0)
        below[i] = np.where(r < v - 1, up[np.maximum(v - 2 - r, 0)], 0.0)
    return above, below


def _distribution(kind: str, rng: np.random.Generator, b: int, v: int) -> np.ndarray:
    logits = rng.standard_normal((b, v)) * 3.0
    if kind == "float32":  # a float32 model: a few exact ties in a large vocabulary
        logits = logits.astype(np.float32).astype(np.float64)
    elif kind == "bfloat16":  # most of the vocabulary shares a few hundred values
        logits = torch.from_numpy(logits).to(torch.bfloat16).double().numpy()
    elif kind == "rounded":  # many ties, each value shared by a few items
        logits = logits.round(1)
    elif kind == "peaked":  # p = 1 saturation: float64 cumulative sums reach exactly 1.0
        logits = logits * 300.0
    p = torch.softmax(torch.from_numpy(logits), dim=-1).numpy()
    if kind == "peaked":
        p[0] = 0.0
        p[0, 5] = 1.0  # one-hot: every other item tied at zero
    return p


@pytest.mark.parametrize("kind", ["random", "float32", "bfloat16", "tied", "tied20", "rounded", "peaked"])
@pytest.mark.parametrize("threads", [1, 3])
def test_form_statistics_equals_numpy_lexsort_reference(
    monkeypatch: pytest.MonkeyPatch, kind: str, threads: int
) -> None:
    """Bit for bit the sums of an independent full lexsort, on CPU, one thread and several; and,
    order aside, the definition (the total mass of the items ranked above / below each form)."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    rng = np.random.default_rng(7)
    v = 20_000 if kind in ("float32", "bfloat16") else 3000
    p = _distribution(kind, rng, 5, v)
    forms = np.concatenate([[0, 5, v - 1], rng.choice(v, 400, replace=False)])
    if kind == "tied":  # a form tied with a vocabulary item on each side of its id, and two tied forms
        p[:, [10, 11, 12]] = p[:, [11]]
        p[:, 20] = p[:, 21] = p[:, 22]
        forms = np.concatenate([forms, [11, 21, 22]])
    if kind == "tied20":  # 20 distinct tied values (a float32 model at 256k has about 12): still compared
        for j in range(20):
            p[:, 100 + 2 * j] = p[:, 101 + 2 * j]
        forms = np.concatenate([forms[~np.isin(forms, np.arange(100, 140))], 101 + 2 * np.arange(20)])
    prob, above, below = form_statistics(torch.from_numpy(p), torch.from_numpy(forms))
    want_above, want_below = _numpy_reference(p, forms)
    np.testing.assert_array_equal(prob.numpy(), p[:, forms])
    np.testing.assert_array_equal(above.numpy(), want_above)
    np.testing.assert_array_equal(below.numpy(), want_below)
    ids = np.arange(v)
    for i in range(len(p)):  # the definition, for a few forms: mass strictly above / below in (-p, id) order
        for f in forms[:4].tolist() + forms[-2:].tolist():
            higher = (p[i] > p[i, f]) | ((p[i] == p[i, f]) & (ids < f))
            lower = (p[i] < p[i, f]) | ((p[i] == p[i, f]) & (ids > f))
            assert above[i, forms.tolist().index(f)].item() == pytest.approx(
                math.fsum(p[i][higher]), rel=1e-12, abs=1e-300
            )
            assert below[i, forms.tolist().index(f)].item() == pytest.approx(
                math.fsum(p[i][lower]), rel=1e-12, abs=1e-300
            )
    distinct_ties = max(
        len(np.unique(p[i, forms][(p[i][None, :] == p[i, forms][:, None]).sum(1) > 1])) for i in range(len(p))
    )
    if kind in ("bfloat16", "rounded", "peaked"):  # the argsort branch of the tie count
        assert distinct_ties > agreement._COMPARED_TIES or kind == "peaked"
    if kind == "tied":  # the compare branch
        assert 0 < distinct_ties <= agreement._COMPARED_TIES
    if kind == "tied20":  # the compare branch with more tied values than the earlier limit of 8
        assert 8 < distinct_ties <= agreement._COMPARED_TIES


def test_real_part_skips_without_gguf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No GGUF file there: the real part prints why, records it, and runs no workflow."""
    from verbeval.bench.runner import run_bench

    missing = tmp_path / "absent.gguf"
    report = run_bench(
        out=tmp_path / "bench.json",
        quick=True,
        config=".test/config/ci.yaml",
        shared=tmp_path,
        workdir=tmp_path / "wd",
        parts=["real"],
        ggufs=[str(missing)],
    )
    assert report["real"]["results"] == []
    assert report["real"]["skipped"] == [f"{missing}: no such GGUF file: skipped"]
    assert f"bench real: {missing}: no such GGUF file: skipped" in capsys.readouterr().out
    assert "workflow" not in report and not (tmp_path / "wd").exists()


# --------------------------------------------------------------------------- the workflow parts

BENCH_SOURCES = sorted((Path(__file__).resolve().parents[1] / "src" / "verbeval" / "bench").glob("*.py"))
RULES = sorted((Path(__file__).resolve().parents[1] / "workflow" / "rules").glob("*.smk"))
MODEL_STEPS = Path(__file__).resolve().parents[1] / "src" / "verbeval" / "workflow" / "model_steps.py"
AGREEMENT_STEPS = Path(__file__).resolve().parents[1] / "src" / "verbeval" / "agreement" / "steps.py"
#: the Snakemake options the bench's own command line uses, and its start-up probe `verbeval --version`
SNAKEMAKE_OPTIONS = {
    "--cores",
    "--configfile",
    "--config",
    "--report",
    "--persistence-backend",
    "--persistence-backend-db-url",
    "--version",
}


def _string_constants(path: Path) -> list[str]:
    return [
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def test_bench_holds_no_copy_of_a_rule_command() -> None:
    """The bench runs the workflow through Snakemake: none of its strings is a ``verbeval
    <sub-command>`` line of a rule, and every option string it holds is one of its own or
    Snakemake's, never an option of the commands the rules run."""
    from verbeval.cli import build_parser
    from verbeval.workflow.model_steps import STEP_FILES

    # the rules' command lines, and the per-model steps' (verbeval.workflow.model_steps) that rules run
    rule_text = "\n".join(p.read_text() for p in [*RULES, MODEL_STEPS, AGREEMENT_STEPS])
    rule_commands = set(re.findall(r"verbeval ([a-z][a-z0-9-]*)", rule_text)) | set(STEP_FILES)
    rule_options = set(re.findall(r"(--[a-z][a-z0-9-]*)", rule_text))
    assert {"fetch", "templates", "lexicon", "lemmas", "run-model", "aggregate", "table"} <= rule_commands
    assert {"--manifest", "--groups-file", "--top-cutoffs", "--summaries", "--n-chunks"} <= rule_options
    commands = build_parser()._subparsers._group_actions[0].choices
    own = {o for c in ("bench", "bench-hashes") for a in commands[c]._actions for o in a.option_strings}
    found = []
    for path in BENCH_SOURCES:
        for text in _string_constants(path):
            found += [
                f"{path.name}: verbeval {c}"
                for c in re.findall(r"\bverbeval ([a-z][a-z0-9-]*)", text)
                if c in rule_commands
            ]
            if re.fullmatch(r"--[a-z][a-z0-9-]*", text) and text not in own | SNAKEMAKE_OPTIONS:
                found.append(f"{path.name}: {text}")
    assert found == []


def test_snakemake_command_runs_the_workflow(tmp_path: Path) -> None:
    from verbeval.bench.snakemake_jobs import snakemake_command

    cmd = snakemake_command(
        configfiles=["config/tiny-full.yaml", tmp_path / "bench.yaml"],
        targets=["table2"],
        cores=2,
        metadata_db=tmp_path / "m.sqlite",
        config_values=["data_mirror=DIR"],
    )
    assert cmd[1:] == [
        "-m",
        "snakemake",
        "table2",
        "--cores",
        "2",
        "--configfile",
        "config/tiny-full.yaml",
        str(tmp_path / "bench.yaml"),
        "--config",
        "data_mirror=DIR",
        "--persistence-backend",
        "db",
        "--persistence-backend-db-url",
        f"sqlite:///{tmp_path / 'm.sqlite'}",
    ]


def test_job_times_from_snakemake_metadata(tmp_path: Path) -> None:
    """A real Snakemake run: three jobs (one with two outputs) found in its metadata file, by rule,
    and each output's job."""
    from verbeval.bench.snakemake_jobs import run_snakemake

    (tmp_path / "Snakefile").write_text(
        textwrap.dedent("""\
        rule all:
            input: "b.txt", "c.txt"
        rule a:
            output: "a1.txt", "a2.txt"
            shell: "echo 1 > {output[0]}; echo 2 > {output[1]}"
        rule b:
            input: "a1.txt"
            output: "b.txt"
            shell: "cat {input} > {output}"
        rule c:
            input: "a2.txt"
            output: "c.txt"
            shell: "cat {input} > {output}"
        """)
    )
    (tmp_path / "config.yaml").write_text("{}\n")
    run = run_snakemake(configfiles=[tmp_path / "config.yaml"], run_dir=tmp_path / "run", cores=1, cwd=tmp_path)
    assert sorted(j.rule for j in run.jobs) == ["a", "b", "c"]
    assert run.job_writing(tmp_path / "a2.txt").outputs == ("a1.txt", "a2.txt")
    assert run.jobs[0].rule == "a"  # b and c wait for it
    summary = run.summary()
    assert summary["jobs"] == 3 and summary["cores"] == 1
    assert {r: d["jobs"] for r, d in summary["by_rule"].items()} == {"a": 1, "b": 1, "c": 1}
    assert all(j.wall_s >= 0 for j in run.jobs)
    with pytest.raises(LookupError):
        run.job_writing(tmp_path / "Snakefile")


def test_workflow_part_plans_the_agreement_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workflow part's configuration files, given to the real Snakefile (dry run in process):
    the table2 jobs on the bench models, one thread per inference job on the CPU, the quick slice;
    and the outputs the other parts read are the ones those jobs write."""
    from conftest import checkout_view
    from inprocess import dry_run
    from verbeval.bench.workflow_runs import plan_workflow

    view = checkout_view(tmp_path / "view")
    monkeypatch.chdir(view)
    models = {}
    for name in ("tiny-bert-cased", "tiny-gpt2"):  # stand-ins: the plan reads a model folder's config.json only
        models[name] = tmp_path / "models" / name
        models[name].mkdir(parents=True)
        (models[name] / "config.json").write_text("{}\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    files, out, agr = plan_workflow("config/tiny-full.yaml", run_dir, models, quick=True, threads=1)
    assert agr["max_rows_per_source"] == 40 and out.resamples == 200
    dry = dry_run(view, files, targets=["table2"])
    stats = dry.stats
    assert stats.pop("fetch") > 0
    assert stats == {"lexicon": 1, "templates": 1, "lemmas": 2, "infer": 2, "aggregate": 2, "table2": 1}
    assert all(str(models[n]) in " ".join(dry.commands("lemmas")) for n in models)
    assert all("--device=cpu" in c and "--threads 1" in c for c in dry.commands("infer"))
    assert all("--resamples=200" in c for c in dry.commands("aggregate"))
    assert "--max-rows-per-source=40" in dry.commands("templates")[0]
    written = {Path(o).resolve() for j in dry.jobs for o in j["outputs"]}
    assert {out.manifests[n].resolve() for n in models} <= written
    assert out.templates.resolve() in written and out.lexicon.resolve() in written
    assert out.agreement_dir.resolve() == (run_dir / "results" / "agreement").resolve()


def test_model_figures_and_their_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from verbeval.bench.report import print_workflow
    from verbeval.bench.snakemake_jobs import Job, SnakemakeRun
    from verbeval.bench.workflow_runs import WorkflowOutputs, model_figures

    agr = tmp_path / "agreement"
    out = WorkflowOutputs(
        agr, ["simple", "prep"], [1.0], [0.5], 200, {"m": tmp_path / "m"}, {"m": agr / "m" / "shards" / "manifest.json"}
    )
    run = SnakemakeRun(
        ["snakemake"],
        2,
        30.0,
        [
            Job("infer", (str(agr / "m" / "shards" / "manifest.json"),), 100.0, 108.0),
            Job(
                "aggregate",
                (str(agr / "m" / "simple" / "summary.csv"), str(agr / "m" / "prep" / "summary.csv")),
                108.5,
                111.0,
            ),
            Job("table2", (str(agr / "table2.csv"),), 111.0, 112.0),
        ],
    )
    fig = model_figures(run, out, "m", contexts=400, rows=500)
    assert fig == {
        "contexts": 400,
        "rows": 500,
        "infer_job_s": 8.0,
        "contexts_per_s_infer_job": 50.0,
        "aggregate_job_s": 2.5,
    }
    assert run.by_rule() == {
        "infer": {"jobs": 1, "wall_s": 8.0},
        "aggregate": {"jobs": 1, "wall_s": 2.5},
        "table2": {"jobs": 1, "wall_s": 1.0},
    }
    print_workflow(
        {
            **run.summary(),
            "target": "table2",
            "job_s_total": 11.5,
            "models": {"m": fig},
            "startup": {"verbeval_cli_s": 0.1, "import_torch_transformers_s": 3.0},
            "model_jobs": 1,
            "startup_share_estimate": 0.07,
        }
    )
    printed = capsys.readouterr().out
    assert "workflow (snakemake table2): 30.0 s wall, 3 jobs on 2 cores, 11.5 s of jobs" in printed
    assert "infer 1x 8.0 s, aggregate 1x 2.5 s, table2 1x 1.0 s" in printed
    assert (
        "m: 400 contexts, 500 rows; inference job 8.0 s (50 ctx/s, start-up included), aggregation job 2.5 s" in printed
    )


def test_paper_part_runs_the_paper_configuration_at_the_paper_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], wordpiece_path: Path
) -> None:
    """The paper part (verbeval.bench.paper_shapes): its models are config/config.yaml's four at the
    released sizes; its configuration file replaces the paper configuration's models by the built
    folders (dry run of the real Snakefile, in process); its timing rows on a tiny model (CPU here);
    without CUDA it is skipped with the reason."""
    import yaml

    from conftest import checkout_view
    from inprocess import dry_run
    from verbeval.bench import paper_shapes
    from verbeval.bench.report import print_paper

    paper = yaml.safe_load(Path(paper_shapes.PAPER_CONFIG).read_text())
    assert [m["id"] for m in paper["models"]] == [s.name for s in paper_shapes.PAPER_MODELS]
    sizes = {s.name: (s.layers, s.hidden, s.heads) for s in paper_shapes.PAPER_MODELS}
    assert sizes["gpt2-xl"] == (48, 1600, 25) and sizes["roberta-large"] == (24, 1024, 16)

    view = checkout_view(tmp_path / "view")
    monkeypatch.chdir(view)
    dirs = {}
    for s in paper_shapes.PAPER_MODELS:  # stand-ins: the plan reads a model folder's config.json only
        dirs[s.name] = tmp_path / "models" / s.name
        dirs[s.name].mkdir(parents=True)
        (dirs[s.name] / "config.json").write_text("{}\n")
    extra = tmp_path / "paper-models.yaml"
    extra.write_text(paper_shapes.models_config(dirs))
    dry = dry_run(view, [paper_shapes.PAPER_CONFIG, str(extra)], targets=["table2"])
    assert dry.stats["infer"] == 4
    assert sorted(c.split("--model ")[1].split()[0] for c in dry.commands("infer")) == sorted(
        str(d.resolve()) for d in dirs.values()
    )

    tiny = tmp_path / "tiny"
    make_tiny_model(wordpiece_path, "bert", tiny)
    templates = pd.DataFrame(
        [
            {"group": "simple", "left": left, "right": right, "plural": plural, "correct": c, "incorrect": i}
            for left, right, plural, c, i in ROWS
        ]
    )
    rows = paper_shapes._throughput(
        {"tiny": tiny}, templates, LEXICON, device="cpu", n_contexts=8, batch_size=4, repeats=1
    )
    assert [(r["model"], r["dtype"]) for r in rows] == [("tiny", "float32"), ("tiny", "bfloat16")]
    for r in rows:
        assert r["pipeline_over_raw_forward"] == round(r["pipeline_ctx_per_s"] / r["forward_raw_ctx_per_s"], 3)
        assert r["contexts"] == len(templates) - 1  # distinct contexts: two rows share "the author"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = paper_shapes.bench_paper(tmp_path, tmp_path / "work", cores=2)
    assert out == {"skipped": "no CUDA device: paper part skipped (the paper's model sizes take hours on a CPU)"}
    assert not (tmp_path / "work").exists()  # nothing built
    capsys.readouterr()
    print_paper(out)
    assert "paper configuration: no CUDA device" in capsys.readouterr().out


def test_impossible_real_model_figures_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """A pipeline timed faster than its own forward pass (what load 5-6 on 2 cores gave: ratio 1.95,
    post-processing -95 ms per context) is reported as unreliable with the load, never as a number;
    a possible pair of timings gives its figures."""
    from verbeval.bench.real_models import real_figures
    from verbeval.bench.report import print_real

    lengths = np.array([9, 11])
    bad = real_figures(128, 32, lengths, pipeline_s=1.0, forward_s=1.95, load_start=5.12, load_end=6.03)
    unreliable = "unreliable (load 5.12 at start, 6.03 at end)"
    assert bad["pipeline_over_forward"] == unreliable and bad["postprocess_ms_per_context"] == unreliable
    assert (bad["load_at_start"], bad["load_at_end"]) == (5.12, 6.03)
    good = real_figures(128, 32, lengths, pipeline_s=2.0, forward_s=1.5, load_start=0.4, load_end=0.5)
    assert good["pipeline_over_forward"] == 0.75 and good["postprocess_ms_per_context"] == pytest.approx(
        3.906, abs=1e-3
    )
    row = {"model": "m.gguf", "vocab": 100, "n_forms": 8, "device": "cpu", "dtype": "float32", "load_avg": [5.1]}
    print_real({"results": [{**row, **bad}, {**row, **good}]})
    lines = capsys.readouterr().out.splitlines()
    assert f"ratio {unreliable}; post-processing {unreliable} ms/context" in lines[0]
    assert "ratio 0.75; post-processing 3.91 ms/context" in lines[1]
    assert not re.search(r"ratio 1\.[0-9]*[1-9]|-[0-9.]+ ms", "\n".join(lines))


@pytest.mark.parametrize(
    ("value", "bounds", "expected"),
    [
        (1.0, {"highest": 1}, 1.0),
        (1.001, {"highest": 1}, "unreliable (load 3 at start, 4 at end)"),
        (0.0, {"lowest": 0}, 0.0),
        (-0.054, {"lowest": 0}, "unreliable (load 3 at start, 4 at end)"),
        (math.nan, {"lowest": 0}, "unreliable (load 3 at start, 4 at end)"),
    ],
)
def test_possible_keeps_possible_figures_only(value: float, bounds: dict[str, float], expected: Any) -> None:
    from verbeval.bench.timing import possible

    assert possible(value, load_start=3, load_end=4, **bounds) == expected


def test_a_timed_part_warns_when_the_load_exceeds_the_cores(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from verbeval.bench import timing

    monkeypatch.setattr(timing.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (5.5, 4.0, 3.0))
    assert timing.load_before("real") == 5.5
    assert "warning: load 5.5 exceeds the 2 cores before the timed part real" in capsys.readouterr().err
    monkeypatch.setattr(timing.os, "getloadavg", lambda: (1.5, 4.0, 3.0))
    assert timing.load_before("real") == 1.5
    assert capsys.readouterr().err == ""


def test_the_workflows_run_the_verbeval_that_runs_the_bench(tmp_path: Path) -> None:
    """Run as VENV/bin/verbeval bench without the venv activated, the bench's Snakemake jobs found no
    `verbeval` on PATH: its own folder now comes first on its children's PATH."""
    import subprocess
    import sys

    from verbeval.bench.snakemake_jobs import child_environ, verbeval_bin

    assert verbeval_bin() == Path(sys.executable).parent and (verbeval_bin() / "verbeval").is_file()
    env = child_environ({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert env["PATH"] == f"{verbeval_bin()}:/usr/bin:/bin" and env["HOME"] == str(tmp_path)
    found = subprocess.run(["sh", "-c", "command -v verbeval"], env=env, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == str(verbeval_bin() / "verbeval")


# --------------------------------------------------------------------------- the sweep part (issue 43)

REPO = Path(__file__).resolve().parents[1]


def _cheap_sweep(tmp_path: Path, n: int) -> list[Path]:
    """``n`` dry-run checkpoint folders (a GPT-2 config.json, a tokenizer file) under ``tmp_path``."""
    import json

    from verbeval.bench.sweep import cheap_checkpoints

    template = tmp_path / "template"
    template.mkdir()
    config = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 50257}
    (template / "config.json").write_text(json.dumps(config))
    (template / "tokenizer.json").write_text("{}")
    return cheap_checkpoints(template, tmp_path / "models", n)


def test_sweep_config_validates_and_plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_view: Path) -> None:
    """The sweep's configuration passes the schema and plans: one model per revision, its step, the
    two groups, SimVerb on the first checkpoint only, results under the run folder."""
    from verbeval.bench.sweep import sweep_config, write_sweep_config
    from verbeval.core.config import validate_config
    from verbeval.workflow.loading import merged_config, plan_from_files

    monkeypatch.chdir(repo_view)
    folders = _cheap_sweep(tmp_path, 3)
    assert [p.name for p in folders] == ["step-1", "step-2", "step-3"]
    assert (folders[2] / "tokenizer.json").is_symlink() and not (folders[2] / "config.json").is_symlink()
    cfg = write_sweep_config(tmp_path / "run" / "sweep.yaml", sweep_config(folders, tmp_path / "run"))
    base = REPO / "config" / "config.yaml"
    validate_config(merged_config([base, cfg]))
    plan = plan_from_files([base, cfg])
    assert list(plan.models) == ["sweep@step-1", "sweep@step-2", "sweep@step-3"]
    assert [plan.models[m]["step"] for m in plan.models] == [1, 2, 3]
    assert {plan.models[m]["kind"] for m in plan.models} == {"causal"}
    assert {plan.models[m]["gpus"] for m in plan.models} == {0}
    assert plan.group_ids == ["simple", "sent_comp"]
    assert list(plan.simverb.models) == ["sweep@step-1"]
    assert Path(plan.agreement_dir) == tmp_path / "run" / "results" / "agreement"


def test_sweep_steps_and_marginal_cost_fit() -> None:
    from verbeval.bench.sweep import fit_line, step_of

    assert step_of(Path("/x/step-32")) == 32
    with pytest.raises(ValueError):
        step_of(Path("/x/checkpoint-3"))
    slope, intercept = fit_line([2, 8, 32], [30 + 4.5 * n for n in (2, 8, 32)])
    assert slope == pytest.approx(4.5) and intercept == pytest.approx(30.0)
    # noisy: the least-squares slope, not the end points'
    slope, intercept = fit_line([2, 8, 32], [40.0, 60.0, 170.0])
    assert slope == pytest.approx(2220 / 504) and intercept == pytest.approx(90 - 14 * 2220 / 504)
    assert fit_line([8], [60.0]) is None and fit_line([8, 8], [60.0, 61.0]) is None


INFER_LOG = """\
Loading weights: 100%|##########| 28/28 [00:00<00:00, 23177.52it/s]
2026-11-28 02:42:51,016 INFO verbeval: /m/step-1: model loaded in 13.9 s (once for every branch)
2026-11-28 02:42:51,624 INFO verbeval.agreement.engine.shardstore: inference /m/step-1: 2 shards, 2 to compute (120 contexts), 0 kept
2026-11-28 02:42:52,514 INFO verbeval: /m/step-1: 2 shards -> /r/agreement/sweep@step-1/shards/manifest.json; model load 13.9 s, 120 contexts computed in 0.8 s (144.0 contexts/s), writer busy 0.1 s, total 14.8 s (load included)
2026-11-28 02:42:52,514 INFO verbeval: /m/step-1: agreement branch 1.5 s
2026-11-28 02:42:52,600 INFO verbeval: /m/step-1: 1 form shards -> /r/lexicon_modes/f.json; 30 contexts computed in 0.2 s (150.00 contexts/s)
2026-11-28 02:42:52,869 INFO verbeval: /m/step-1: every branch in 15.7 s (load included)
"""
#: one warm process scoring two revisions (the rework of issue 43 may log so): no load on the lines
WARM_LOG = """\
2026-11-28 03:00:00,000 INFO verbeval: /m/step-2: model loaded in 0.5 s (once for every branch)
2026-11-28 03:00:01,000 INFO verbeval: /m/step-2: 2 shards -> /r/agreement/sweep@step-2/shards/manifest.json; 120 contexts computed in 1.0 s (120.0 contexts/s), writer busy 0.1 s, total 1.5 s
2026-11-28 03:00:01,000 INFO verbeval: /m/step-2: agreement branch 1.5 s
2026-11-28 03:00:02,000 INFO verbeval: /m/step-3: 2 shards -> /r/agreement/sweep@step-3/shards/manifest.json; 120 contexts computed in 1.2 s (100.0 contexts/s), writer busy 0.1 s, total 1.7 s
2026-11-28 03:00:00,000 INFO verbeval: /m/step-2: module built (from_pretrained) in 4.20 s
2026-11-28 03:00:01,500 INFO verbeval: /m/step-3: weights swapped into the built module in 0.31 s
2026-11-28 03:00:01,500 INFO verbeval: /m/step-4: weights swapped into the built module in 0.29 s
"""


def test_sweep_log_parser(tmp_path: Path) -> None:
    """Planted inference logs: the contexts computed (forward plus scoring) per revision, the model
    loads, the agreement branches; the multi-token forms line counted apart."""
    from verbeval.bench.sweep import parse_log_lines, parse_logs, parse_weight_loads, per_revision, weights_figures

    computed, loads, branches = parse_log_lines(INFER_LOG.splitlines(), "infer.log")
    assert [(c.model, c.kind, c.contexts, c.compute_s, c.load_s) for c in computed] == [
        ("/m/step-1", "agreement", 120, 0.8, 13.9),
        ("/m/step-1", "forms", 30, 0.2, None),
    ]
    assert loads == {"/m/step-1": 13.9} and branches == {"/m/step-1": 1.5}
    (tmp_path / "a" / "sweep@step-1").mkdir(parents=True)
    (tmp_path / "a" / "sweep@step-1" / "infer.log").write_text(INFER_LOG)
    (tmp_path / "a" / "chunk-0.log").write_text(WARM_LOG)
    (tmp_path / "a" / "not-a-log.txt").write_text(WARM_LOG)
    figures = per_revision(*parse_logs(tmp_path))
    assert figures == {
        "revisions_logged": 3,
        "compute_s_total": 3.0,
        "compute_s_per_revision": 1.0,
        "model_load_s_per_revision": pytest.approx((13.9 + 0.5) / 2),
        "contexts_per_revision": 120.0,
        "agreement_branch_s_per_revision": 1.5,
    }
    loads = parse_weight_loads(tmp_path)
    assert loads == {"/m/step-2": ("built", 4.2), "/m/step-3": ("swapped", 0.31), "/m/step-4": ("swapped", 0.29)}
    assert weights_figures(loads) == {
        "built_revisions": 1,
        "built_load_s_per_revision": 4.2,
        "swapped_revisions": 2,
        "swapped_load_s_per_revision": 0.3,
    }
    assert weights_figures({}) == {
        "built_revisions": 0,
        "built_load_s_per_revision": None,
        "swapped_revisions": 0,
        "swapped_load_s_per_revision": None,
    }
    assert per_revision([], {}) == {
        "revisions_logged": 0,
        "compute_s_total": 0,
        "compute_s_per_revision": None,
        "model_load_s_per_revision": None,
        "contexts_per_revision": None,
        "agreement_branch_s_per_revision": None,
    }


def test_sweep_runs_snakemake_without_the_slurm_wait(tmp_path: Path) -> None:
    """A stand-in scontrol goes first on PATH only where one is installed."""
    from verbeval.bench.sweep import no_slurm_environ

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    assert no_slurm_environ({"PATH": str(bin_dir)}, tmp_path / "stand-in") == {"PATH": str(bin_dir)}
    (bin_dir / "scontrol").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "scontrol").chmod(0o755)
    env = no_slurm_environ({"PATH": str(bin_dir)}, tmp_path / "stand-in")
    assert env["PATH"].split(":")[0] == str(tmp_path / "stand-in")
    assert (tmp_path / "stand-in" / "scontrol").read_text() == "#!/bin/sh\nexit 127\n"


def test_sweep_options_reach_the_part(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from verbeval.bench import runner
    from verbeval.cli import build_parser

    seen: dict[str, Any] = {}
    monkeypatch.setattr(runner, "run_bench", lambda **kw: seen.update(kw))
    a = build_parser().parse_args(
        ["bench", "--parts", "sweep", "--sweep-revisions", "2,4", "--sweep-dry-run", "10", "--out", "x.json"]
    )
    a.func(a)
    assert seen["parts"] == ["sweep"] and seen["sweep_revisions"] == [2, 4] and seen["sweep_dry_run"] == 10
    assert seen["sweep_tree"] is None and seen["sweep_size"] == "tiny"
    a = build_parser().parse_args(["bench", "--parts", "sweep", "--sweep-size", "gpt2-small", "--out", "x.json"])
    a.func(a)
    assert seen["sweep_size"] == "gpt2-small"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--sweep-size", "gpt2-huge"])


def test_sweep_size_plumbing_in_process(tmp_path: Path) -> None:
    """The sized sweep's pieces at the tiny size (no timing asserted): revisions built as files of
    their own with different weights; the loads as a queue makes them (the first built, the next
    swapped into its module) beside from_pretrained and one read of the files; the printed lines."""
    from verbeval.bench.sweep import SWEEP_SIZES, bench_loads, build_checkpoints, report_lines, weights_bytes
    from verbeval.core.wordtok import save_word_tokenizer

    assert {k: SWEEP_SIZES["gpt2-small"][k] for k in ("arch", "layers", "hidden", "heads", "tokenizer")} == {
        "arch": "gpt2",
        "layers": 12,
        "hidden": 768,
        "heads": 12,
        "tokenizer": "gpt2",
    }
    assert SWEEP_SIZES["pythia-160m"]["arch"] == "gpt-neox" and SWEEP_SIZES["pythia-160m"]["hidden"] == 768
    (tmp_path / "corpus.txt").write_text("the dog walks and the dogs walk\n")
    tok = save_word_tokenizer([tmp_path / "corpus.txt"], "causal", tmp_path / "tok")  # type: ignore[list-item]
    folders = build_checkpoints(tok, tmp_path / "models", 2, "tiny")
    weights = [f / "model.safetensors" for f in folders]
    assert len({w.stat().st_ino for w in weights}) == 2 and len({w.read_bytes() for w in weights}) == 2
    assert weights_bytes(folders[0]) == weights[0].stat().st_size
    loads = bench_loads(folders)
    assert [(r["revision"], r["queue_load"]) for r in loads["revisions"]] == [
        ("step-1", "built"),
        ("step-2", "swapped"),
    ]
    assert all(r[k] >= 0 for r in loads["revisions"] for k in ("queue_load_s", "from_pretrained_s", "read_once_s"))
    run = {
        "revisions": 3,
        "wall_s": 12.0,
        "load_before": 0.5,
        "logs": {"compute_s_per_revision": 1.25},
        "after_queue_s": 7.5,
        "report_s": 4.0,
        "post_s_per_revision": {"table3": 0.01, "figure_cutoffs": 0.5, "acquisition": 0.1},
        "weights": {
            "built_revisions": 2,
            "built_load_s_per_revision": 4.0,
            "swapped_revisions": 1,
            "swapped_load_s_per_revision": 0.5,
        },
    }
    figures = {
        "size": "tiny",
        "weights_bytes_per_revision": 2_000_000,
        "cores": 2,
        "runs": [run],
        "marginal_s_per_revision": 2.5,
        "plan": {"revisions": 3, "cold_s": 9.0, "warm_s": 3.0},
        "loads": loads,
    }
    lines = report_lines(figures)
    assert lines[:5] == [
        "size tiny: 2 MB of weights per revision, 2 cores",
        "3 revisions: wall 12.0 s (load before 0.5); per revision: forward + scoring 1.25 s, weights built 2 x 4.0 s, "
        "swapped 1 x 0.5 s",
        "  after the last scoring job 7.5 s; report 4.0 s; per rule (s / revision): figure_cutoffs 0.5, "
        "acquisition 0.1, table3 0.01",
        "marginal wall time per revision: 2.5 s",
        "plan of 3 revisions (snakemake -n): cold 9.0 s, warm 3.0 s",
    ]
    assert [line.split(":")[0] for line in lines[5:]] == ["step-1 in this process", "step-2 in this process"]
    assert lines[6].startswith("step-2 in this process: swapped in ")


@pytest.mark.e2e
def test_sweep_part_runs_snakemake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tokenizer_path: Any, data_dir: Path
) -> None:
    """The sweep part for real: 2 and 3 revisions from scratch, the dry run of 5 (from a view of the
    checkout: Snakemake's .snakemake/ is written there, not into the checkout). From 2 revisions on, a
    sweep has its consecutive pairs (one comparisons job, whatever their number): 2 and 3 are the
    fewest whose plans must be equal. What is checked is the plans and the logs, not the scores: each
    sweep scores one group, 10 rows a template source (the bench's own: SWEEP_GROUPS, SWEEP_ROWS), with
    no veridicality model and no precision audit (28 jobs a run, not 35)."""
    from conftest import checkout_view
    from verbeval.bench import sweep
    from verbeval.bench.sweep import bench_sweep

    def small(checkpoints: Any, run_dir: Path, **kw: Any) -> dict[str, Any]:
        cfg = sweep_config(checkpoints, run_dir, **{"groups": ("simple",), "rows": 10, **kw})
        cfg["veridicality"] = {"models": []}
        cfg["agreement"]["precision_audit"] = {"enabled": False}
        return cfg

    sweep_config = sweep.sweep_config
    monkeypatch.setattr(sweep, "sweep_config", small)
    monkeypatch.chdir(checkout_view(tmp_path / "view"))
    figures = bench_sweep(
        tokenizer_path("gpt2"), tmp_path, revisions=(2, 3), dry_run=5, config_values=[f"data_mirror={data_dir}"]
    )
    assert [r["revisions"] for r in figures["runs"]] == [2, 3]
    assert [r["logs"]["revisions_logged"] for r in figures["runs"]] == [2, 3]
    # one queue job scores the sweep (inference.revisions_per_job): the plan does not grow with revisions
    assert figures["marginal_s_per_revision"] is not None and figures["marginal_jobs_per_revision"] == 0
    assert figures["runs"][0]["jobs"] == figures["runs"][1]["jobs"]
    assert figures["dry_run"]["revisions"] == 5 and figures["dry_run"]["jobs"] > 0
    for r in figures["runs"]:  # the report made after each run; what follows the queue job, per rule
        assert (Path(r["run_dir"]) / "report.html").stat().st_size > 0 and r["report_s"] > 0
        assert 0 < r["after_queue_s"] < r["wall_s"]
        assert "table3" in r["post_s_per_revision"] and "queue_0" not in r["post_s_per_revision"]


def test_sizes_setups_time_more_contexts_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from verbeval.bench.throughput import Sizes

    sizes = Sizes(128, 16, 64, threads=2, repeats=1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert sizes.setups() == [("cpu", "float32", 16, 128)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert sizes.setups() == [
        ("cpu", "float32", 16, 128),
        ("cuda", "float32", 64, 1024),
        ("cuda", "bfloat16", 64, 1024),
    ]


def test_bench_real_without_a_file_skips_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verbeval.bench.real_models import bench_real
    from verbeval.bench.throughput import Sizes

    threads: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    missing = tmp_path / "m.gguf"
    report = bench_real([missing], pd.DataFrame(), pd.DataFrame(), Sizes(8, 4, 4, threads=1, repeats=1))
    assert report["skipped"] == [f"{missing}: no such GGUF file: skipped"]
    assert report["results"] == []
    assert threads == [1]
    assert capsys.readouterr().out == f"bench real: {missing}: no such GGUF file: skipped\n"
