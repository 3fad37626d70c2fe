"""EW and MW at top p = 1 under lemma weights (verbeval.agreement.scores.lemma_weights)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from verbeval.agreement.scores.aggregate import score_contexts
from verbeval.agreement.scores.lemma_weights import (
    finite_contexts,
    lemma_weighted_p1,
    model_lemma_counts,
    union_lemma_index,
)
from verbeval.agreement.scores.metrics import FormStats
from verbeval.core.errors import MismatchError, VerbevalError

N_CTX, N_LEMMAS, VOCAB = 9, 7, 40
TIE, NAN_CTX, NO_MASS = 1, 4, 6  # a context with planted ties, one with NaN, one whose lemma forms have no mass


def _form_stats(probs: np.ndarray, ids: np.ndarray) -> FormStats:
    """Form statistics as the inference kernels store them: each form's probability and the mass
    ranked strictly above / below it (descending probability, ties by token id), float32."""
    n, v = probs.shape
    order = np.argsort(-probs, axis=1, kind="stable")
    ranked = np.take_along_axis(probs, order, axis=1)
    above_r = np.cumsum(ranked, axis=1) - ranked
    below_r = ranked.sum(axis=1, keepdims=True) - above_r - ranked
    above, below = np.empty_like(probs), np.empty_like(probs)
    np.put_along_axis(above, order, above_r, axis=1)
    np.put_along_axis(below, order, below_r, axis=1)
    flat = ids.reshape(-1)
    shape = (n, ids.shape[0], 2)
    return FormStats(*(a[:, flat].reshape(shape).astype(np.float32) for a in (probs, above, below)))


@pytest.fixture
def example() -> tuple[FormStats, np.ndarray]:
    rng = np.random.default_rng(55)
    logits = rng.normal(0.0, 2.0, (N_CTX, VOCAB))
    ids = rng.permutation(VOCAB)[: 2 * N_LEMMAS].reshape(N_LEMMAS, 2)
    logits[TIE, ids[:3, 1]] = logits[TIE, ids[:3, 0]]  # three lemmas whose forms tie: wrong for EW
    logits[NO_MASS, ids.reshape(-1)] = -np.inf  # no eligible form has mass: MW NaN, EW 0
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    stats = _form_stats(probs, ids)
    prob = stats.prob.copy()
    prob[NAN_CTX, 2, 0] = np.nan  # a context with non-finite output (inference.allow_nonfinite)
    plural = rng.random(N_CTX) < 0.5
    return FormStats(prob, stats.cum_above, stats.cum_below), plural


def _reference(stats: FormStats, plural: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """EW and MW at p = 1 written out with loops over draws, contexts and lemmas (float64)."""
    b, (n, n_lemmas) = counts.shape[0], stats.prob.shape[:2]
    ew, mw = np.full((b, n), np.nan), np.full((b, n), np.nan)
    for d in range(b):
        for c in range(n):
            forms = [stats.prob[c], stats.cum_above[c], stats.cum_below[c]]
            if not all(np.isfinite(float(x)) for a in forms for x in a.ravel()):
                continue
            weight = right_sum = mass_sum = correct_sum = 0.0
            for lem in range(n_lemmas):
                sing, plur = float(stats.prob[c, lem, 0]), float(stats.prob[c, lem, 1])
                right, wrong = (plur, sing) if plural[c] else (sing, plur)
                w = float(counts[d, lem])
                weight += w
                correct_sum += w * (1.0 if right > wrong else 0.0)
                right_sum += w * right
                mass_sum += w * (right + wrong)
            if weight > 0:
                ew[d, c] = correct_sum / weight
                if mass_sum > 0:
                    mw[d, c] = right_sum / mass_sum
    return ew, mw


def test_all_ones_is_the_scorers_top_p1(example):
    stats, plural = example
    table = score_contexts(np.arange(N_CTX), plural, stats, [0.5, 1.0], [1.0])
    ew, mw = lemma_weighted_p1(stats, plural, np.ones((1, N_LEMMAS)))
    np.testing.assert_array_equal(ew[0], table["ew_top@1"].to_numpy())
    np.testing.assert_allclose(mw[0], table["mw_top@1"].to_numpy(), rtol=1e-13, atol=0)
    # the planted cases: ties count as wrong, the NaN context and the massless one
    right = np.where(plural[TIE], stats.prob[TIE, :, 1], stats.prob[TIE, :, 0])
    wrong = np.where(plural[TIE], stats.prob[TIE, :, 0], stats.prob[TIE, :, 1])
    assert (right[:3] == wrong[:3]).all()
    assert ew[0, TIE] == (right > wrong).sum() / N_LEMMAS
    assert np.isnan(ew[0, NAN_CTX]) and np.isnan(mw[0, NAN_CTX])
    assert ew[0, NO_MASS] == 0.0 and np.isnan(mw[0, NO_MASS])
    assert finite_contexts(stats).tolist() == [c != NAN_CTX for c in range(N_CTX)]


def test_random_draws_match_a_loop_reference(example):
    stats, plural = example
    rng = np.random.default_rng(7)
    counts = rng.multinomial(N_LEMMAS, np.full(N_LEMMAS, 1 / N_LEMMAS), size=6).astype(np.float64)
    counts[5] = 0.0  # a draw without any lemma: NaN everywhere
    ew, mw = lemma_weighted_p1(stats, plural, counts)
    ref_ew, ref_mw = _reference(stats, plural, counts)
    assert ew.shape == mw.shape == (6, N_CTX) and ew.dtype == mw.dtype == np.float64
    np.testing.assert_allclose(ew, ref_ew, rtol=1e-14, atol=0)
    np.testing.assert_allclose(mw, ref_mw, rtol=1e-13, atol=0)
    assert np.isnan(ew[5]).all() and np.isnan(mw[5]).all()
    assert np.isfinite(ew[:5, [c for c in range(N_CTX) if c != NAN_CTX]]).all()
    # slicing the contexts does not change a value
    ew2, mw2 = lemma_weighted_p1(stats, plural, counts, block=2)
    np.testing.assert_array_equal(ew2, ew)
    np.testing.assert_array_equal(mw2, mw)


def test_a_lemma_drawn_zero_times_drops_out(example):
    stats, plural = example
    rng = np.random.default_rng(3)
    counts = rng.integers(1, 4, (3, N_LEMMAS)).astype(np.float64)
    counts[:, 2] = 0.0
    keep = [j for j in range(N_LEMMAS) if j != 2]
    ew, mw = lemma_weighted_p1(stats, plural, counts)
    # NaN_CTX's only NaN is lemma 2's: without it the context is finite and scored
    without = FormStats(stats.prob[:, keep], stats.cum_above[:, keep], stats.cum_below[:, keep])
    ew_w, mw_w = lemma_weighted_p1(without, plural, counts[:, keep])
    scored = [c for c in range(N_CTX) if c != NAN_CTX]
    np.testing.assert_array_equal(ew[:, scored], ew_w[:, scored])
    np.testing.assert_allclose(mw[:, scored], mw_w[:, scored], rtol=1e-15, atol=0)
    assert np.isnan(ew[:, NAN_CTX]).all() and np.isfinite(ew_w[:, NAN_CTX]).all()
    # and at weight 1 on the others, the scorer's own p = 1 scores of the lemmas kept
    ones = np.ones((1, N_LEMMAS))
    ones[0, 2] = 0.0
    ew1, mw1 = lemma_weighted_p1(stats, plural, ones)
    table = score_contexts(np.arange(N_CTX), plural, without, [1.0], [1.0])
    np.testing.assert_array_equal(ew1[0, scored], table["ew_top@1"].to_numpy()[scored])
    np.testing.assert_allclose(mw1[0, scored], table["mw_top@1"].to_numpy()[scored], rtol=1e-13, atol=0)


def _lemmas(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["lemma", "sing", "plur"])
    df["sing_id"] = np.arange(len(df)) * 2
    df["plur_id"] = df["sing_id"] + 1
    return df


def test_union_of_two_models_lemmas(example):
    bert = _lemmas([("run", "runs", "run"), ("walk", "walks", "walk"), ("be", "is", "are")])
    gpt2 = _lemmas([("walk", "walks", "walk"), ("eat", "eats", "eat")])
    union, (cols_bert, cols_gpt2) = union_lemma_index(bert, gpt2)
    assert union == [("eats", "eat"), ("is", "are"), ("runs", "run"), ("walks", "walk")]
    assert cols_bert.tolist() == [2, 3, 1] and cols_gpt2.tolist() == [3, 0]
    assert cols_bert.dtype == np.int64
    # the same union whichever model comes first
    union2, (cols_gpt2_2, cols_bert_2) = union_lemma_index(gpt2, bert)
    assert union2 == union and cols_bert_2.tolist() == [2, 3, 1] and cols_gpt2_2.tolist() == [3, 0]
    draw = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 4.0, 0.0]])
    assert model_lemma_counts(draw, cols_bert).tolist() == [[3.0, 4.0, 2.0], [4.0, 0.0, 0.0]]
    assert model_lemma_counts(draw, cols_gpt2).tolist() == [[4.0, 1.0], [0.0, 0.0]]
    # plain keys (lemma names) work the same way
    names, (a, b) = union_lemma_index(["run", "walk"], ["walk", "eat"])
    assert names == ["eat", "run", "walk"] and a.tolist() == [1, 2] and b.tolist() == [2, 0]


def test_errors_name_the_cause(example):
    stats, plural = example
    with pytest.raises(MismatchError) as err:
        lemma_weighted_p1(stats, plural, np.ones((2, N_LEMMAS + 1)))
    assert str(err.value) == "lemma counts of shape (2, 8) do not weigh the form statistics' 7 lemmas"
    twice = _lemmas([("quiz", "quizes", "quiz"), ("walk", "walks", "walk"), ("quiz", "quizes", "quiz")])
    with pytest.raises(VerbevalError) as err:
        union_lemma_index(twice)
    assert str(err.value) == "lemma ('quizes', 'quiz') is listed twice in one model's lemmas"
