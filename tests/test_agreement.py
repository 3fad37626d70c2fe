"""Agreement metrics: hand-worked numbers and a literal reference implementation of DESIGN.md."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from verbeval.agreement.engine.kernels import form_statistics, probabilities
from verbeval.agreement.scores.metrics import FormStats, score_logits, scores_from_stats, tse_scores

# vocabulary of the hand-worked examples: ids 0..4
IS, ARE, X, EXIST, EXISTS = 0, 1, 2, 3, 4
PROBS = np.array([0.3, 0.4, 0.15, 0.1, 0.05])
LEMMAS = np.array([[IS, ARE], [EXISTS, EXIST]])  # (singular id, plural id)


def _score(probs: np.ndarray, plural: bool, top=(1.0,), bottom=(1.0,), tse=None):
    return score_logits(
        np.log(np.atleast_2d(probs)),
        np.array([plural]),
        LEMMAS,
        top_cutoffs=top,
        bottom_cutoffs=bottom,
        tse_ids=None if tse is None else np.array([tse]),
    )


def test_paper_table1_toy():
    # one plural context; lemma "be": P(are)=0.6 > P(is)=0.1; lemma "exist": P(exist)=0.1 < P(exists)=0.2
    probs = np.array([[0.1, 0.6, 0.2, 0.1]])  # is, are, exists, exist
    res = score_logits(np.log(probs), np.array([True]), np.array([[0, 1], [2, 3]]), [1.0], [1.0], np.array([[0, 1]]))
    assert res.tse[0] == 1.0
    assert res.ew_top[0, 0] == 0.5
    assert res.mw_top[0, 0] == pytest.approx(0.7, abs=1e-12)
    # p = 1 from either end is the whole vocabulary
    assert res.ew_bottom[0, 0] == 0.5
    assert res.mw_bottom[0, 0] == pytest.approx(0.7, abs=1e-12)
    assert res.prob_counted_top[0, 0] == pytest.approx(1.0)
    assert res.prob_counted_forms_top[0, 0] == pytest.approx(1.0)


def test_top_p_interpolation_at_straddling_eligible_form():
    # descending: are .4, is .3, x .15, exist .1, exists .05; cum .4 .7 .85 .95 1
    res = _score(PROBS, plural=True, top=(0.5, 0.9, 0.3))
    # p=0.5: r*=1 ("is"); pre={are}: MW 1; post={are,is}: MW .4/.7; alpha=(.5-.4)/.3
    alpha = 0.1 / 0.3
    assert res.ew_top[0, 0] == pytest.approx(1.0)
    assert res.mw_top[0, 0] == pytest.approx(1 + alpha * (0.4 / 0.7 - 1))
    # counted mass: "be" counts in pre and post, so both its forms (.3 + .4) count in both (paper);
    # form level: pre {are} .4, post {are, is} .7 -> .4 + 1/3 * .3 = .5
    assert res.prob_counted_top[0, 0] == pytest.approx(0.7)
    assert res.prob_counted_forms_top[0, 0] == pytest.approx(0.4 + alpha * 0.3)
    assert res.prob_counted_forms_top[0, 0] == pytest.approx(0.5)
    # p=0.9: r*=3 ("exist"); pre MW .4/.7, post MW (.4+.1)/(.4+.3+.1); alpha=.5
    assert res.mw_top[0, 1] == pytest.approx(0.4 / 0.7 + 0.5 * (0.5 / 0.8 - 0.4 / 0.7))
    assert res.ew_top[0, 1] == pytest.approx(1.0)
    # paper: pre .7 (be), post .7 + .15 (exist enters: exist .1 + exists .05) -> .775
    assert res.prob_counted_top[0, 1] == pytest.approx(0.775)
    assert res.prob_counted_forms_top[0, 1] == pytest.approx(0.75)  # .7 -> .8
    # p=0.3: r*=0; pre is empty (NaN) so the post value is reported, alpha = .3/.4
    assert res.mw_top[0, 2] == pytest.approx(1.0)
    assert res.prob_counted_top[0, 2] == pytest.approx(0.75 * 0.7)  # 0 -> .7 (be, via "are")
    assert res.prob_counted_forms_top[0, 2] == pytest.approx(0.75 * 0.4)  # 0 -> .4 ("are" only)


def test_bottom_p_needs_both_forms_and_nan_cases():
    # ascending: exists .05, exist .1, x .15, is .3, are .4; cum .05 .15 .3 .6 1
    res = _score(PROBS, plural=True, bottom=(0.5, 0.2, 0.1, 0.01))
    # p=.5: pre={exists,exist,x}: only "exist" has both forms; "is" enters post but "are" is missing
    assert res.ew_bottom[0, 0] == pytest.approx(1.0)
    assert res.mw_bottom[0, 0] == pytest.approx(0.1 / 0.15)
    assert res.prob_counted_bottom[0, 0] == pytest.approx(0.15)
    # p=.2: straddling token is x (not eligible): pre == post
    assert res.mw_bottom[0, 1] == pytest.approx(0.1 / 0.15)
    # p=.1: pre={exists} counts no lemma (NaN) -> post value; counted mass interpolates from 0
    assert res.ew_bottom[0, 2] == pytest.approx(1.0)
    assert res.mw_bottom[0, 2] == pytest.approx(0.1 / 0.15)
    assert res.prob_counted_bottom[0, 2] == pytest.approx(0.5 * 0.15)
    # p=.01: neither pre={} nor post={exists} counts a lemma: undefined
    assert math.isnan(res.ew_bottom[0, 3]) and math.isnan(res.mw_bottom[0, 3])
    assert res.prob_counted_bottom[0, 3] == 0.0
    # bottom-p counts a lemma only with both forms in the set: the two counted masses coincide
    np.testing.assert_array_equal(res.prob_counted_forms_bottom, res.prob_counted_bottom)


def test_singular_context_and_wrong_lemmas():
    res = _score(PROBS, plural=False, tse=[IS, ARE])
    assert res.tse[0] == 0.0  # P(is)=.3 < P(are)=.4
    assert res.ew_top[0, 0] == 0.0
    assert res.mw_top[0, 0] == pytest.approx((0.3 + 0.05) / 0.85)


def test_tse_nan_for_multi_token_forms_and_ties():
    res = score_logits(
        np.zeros((2, 4)), np.array([True, False]), np.array([[0, 1]]), [1.0], [1.0], np.array([[0, -1], [2, 3]])
    )
    assert math.isnan(res.tse[0])
    assert res.tse[1] == 0.0  # equal probabilities: not strictly greater
    assert res.ew_top[0, 0] == 0.0  # ties count as wrong in EW too
    assert tse_scores([0.2], [0.1], [False]).tolist() == [1.0]


def test_no_eligible_lemmas_is_nan():
    res = score_logits(np.zeros((1, 3)), np.array([True]), np.zeros((0, 2), dtype=int), [0.5, 1.0], [0.1])
    assert np.isnan(res.ew_top).all() and np.isnan(res.mw_top).all() and np.isnan(res.ew_bottom).all()
    assert (res.prob_counted_top == 0).all() and (res.prob_counted_forms_top == 0).all()


def test_p1_counts_the_whole_tail_despite_peaked_distribution():
    # one token takes nearly all mass; the lemmas sit at ~1e-30: float32 accumulation drops them
    v = 1000
    logits = np.full((1, v), -70.0)
    logits[0, 0] = 0.0
    lemma_ids = np.array([[10, 11], [12, 13], [14, 15]])
    logits[0, 11] = -69.0  # only the first lemma prefers the plural
    res = score_logits(logits, np.array([True]), lemma_ids, [1.0], [1.0])
    assert res.ew_top[0, 0] == pytest.approx(1 / 3)
    assert res.ew_bottom[0, 0] == pytest.approx(1 / 3)
    e = math.e
    assert res.mw_top[0, 0] == pytest.approx((e + 2) / (e + 1 + 4), rel=1e-9)
    # float32 cumulative mass saturates: the paper's code would count nothing at p = 1
    cum32 = torch.cumsum(torch.softmax(torch.tensor(logits, dtype=torch.float32), -1).sort(descending=True).values, -1)
    assert float(cum32[0, 1]) == 1.0


@pytest.mark.parametrize("logit_dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_probabilities_equal_a_float64_softmax_of_float64_logits_bit_for_bit(logit_dtype: torch.dtype) -> None:
    """The softmax's own float64 conversion (no float64 copy of the logits first) gives the very
    bits of converting first, at an LM-like scale and a Gemma-sized row."""
    gen = torch.Generator().manual_seed(3)
    logits = (torch.randn(4, 262_144, generator=gen) * 3.0).to(logit_dtype)
    got = probabilities(logits)
    want = torch.softmax(logits.to(torch.float64), dim=-1)
    assert got.dtype == torch.float64
    assert torch.equal(got, want)
    assert abs(float(got[0].sum()) - 1.0) < 1e-12


def test_probabilities_into_a_reused_buffer_are_the_same_bits() -> None:
    """``out=``: the pipeline's CPU path writes every batch into one buffer (a view of its first rows
    for a smaller batch); the bits equal a fresh float64 softmax of float64 logits, whatever the
    buffer held before. A buffer of another shape or dtype is refused."""
    gen = torch.Generator().manual_seed(5)
    buf = torch.full((6, 50_000), float("nan"), dtype=torch.float64)
    for n in (6, 4):  # a full batch, then a smaller last one into the first rows
        logits = torch.randn(n, 50_000, generator=gen) * 3.0
        got = probabilities(logits, out=buf[:n])
        assert got.data_ptr() == buf.data_ptr()
        assert torch.equal(got, torch.softmax(logits.to(torch.float64), dim=-1))
    with pytest.raises(ValueError, match="contiguous float64 tensor of shape"):
        probabilities(torch.randn(2, 10), out=torch.empty(2, 10, dtype=torch.float32))
    with pytest.raises(ValueError, match="contiguous float64 tensor of shape"):
        probabilities(torch.randn(2, 10), out=torch.empty(3, 10, dtype=torch.float64))


def test_form_statistics_sum_to_one_and_rank_ties_by_id():
    probs = torch.tensor([[0.25, 0.25, 0.5]], dtype=torch.float64)
    prob, above, below = form_statistics(probs, torch.tensor([0, 1, 2]))
    assert above.tolist() == [[0.5, 0.75, 0.0]]
    assert below.tolist() == [[0.25, 0.0, 0.5]]
    assert torch.allclose(prob + above + below, torch.ones(1, 3, dtype=torch.float64))
    with pytest.raises(TypeError):
        form_statistics(probs.float(), torch.tensor([0]))


def test_bad_cutoffs_rejected():
    with pytest.raises(ValueError):
        _score(PROBS, True, top=(0.0,))


# ---------------------------------------------------------------------------------------------
# literal reference implementation of DESIGN.md, one context at a time (slow, for tests only)


def _ref_set_scores(probs, lemmas, plural, members, both):
    """EW, MW, prob_counted (both forms of every counted lemma: the paper's code) and
    prob_counted_forms (the counted lemmas' forms that are in the set)."""
    ok = tot = 0
    num = den = mass = forms = 0.0
    for s, p in lemmas:
        right, wrong = (p, s) if plural else (s, p)
        ins = (s in members, p in members)
        counted = all(ins) if both else any(ins)
        if not counted:
            continue
        tot += 1
        ok += probs[right] > probs[wrong]
        mass += probs[s] + probs[p]
        forms += (probs[s] if s in members else 0.0) + (probs[p] if p in members else 0.0)
        if both:
            num += probs[right]
            den += probs[right] + probs[wrong]
        else:
            num += probs[right] if right in members else 0.0
            den += (probs[right] if right in members else 0.0) + (probs[wrong] if wrong in members else 0.0)
    ew = ok / tot if tot else math.nan
    mw = num / den if tot and den > 0 else math.nan
    return ew, mw, mass, forms


def _ref_side(probs, lemmas, plural, p, top):
    v = len(probs)
    order = sorted(range(v), key=lambda i: (-probs[i], i))
    if not top:
        order = order[::-1]
    if p >= 1:
        return _ref_set_scores(probs, lemmas, plural, set(order), not top)
    cum, acc = [], 0.0
    for i in order:
        acc += probs[i]
        cum.append(acc)
    r = next((i for i, c in enumerate(cum) if c >= p), v - 1)
    pre = _ref_set_scores(probs, lemmas, plural, set(order[:r]), not top)
    post = _ref_set_scores(probs, lemmas, plural, set(order[: r + 1]), not top)
    lo = cum[r - 1] if r > 0 else 0.0
    alpha = (p - lo) / (cum[r] - lo)
    out = []
    for a, b in zip(pre, post):
        a2 = b if math.isnan(a) else a
        b2 = a if math.isnan(b) else b
        out.append((1 - alpha) * a2 + alpha * b2)
    return tuple(out)


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_matches_reference(seed):
    rng = np.random.default_rng(seed)
    n, v, n_lemmas = 7, 60, 12
    scale = [0.5, 3.0, 8.0][seed % 3]
    logits = rng.normal(size=(n, v)) * scale
    if seed % 2:
        logits = np.round(logits, 0)  # many exact ties
    lemma_ids = rng.permutation(v)[: 2 * n_lemmas].reshape(n_lemmas, 2)
    plural = rng.random(n) < 0.5
    top = [0.05, 0.1, 0.3, 0.5, 0.77, 0.9, 0.97, 1.0]
    bottom = [0.5, 0.1, 0.03, 1e-2, 1e-3, 1e-6]
    res = score_logits(logits, plural, lemma_ids, top, bottom)
    probs = probabilities(logits).numpy()
    for i in range(n):
        for j, p in enumerate(top):
            want = _ref_side(list(probs[i]), lemma_ids.tolist(), plural[i], p, True)
            got = [res.ew_top[i, j], res.mw_top[i, j], res.prob_counted_top[i, j], res.prob_counted_forms_top[i, j]]
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
        for j, p in enumerate(bottom):
            want = _ref_side(list(probs[i]), lemma_ids.tolist(), plural[i], p, False)
            got = [
                res.ew_bottom[i, j],
                res.mw_bottom[i, j],
                res.prob_counted_bottom[i, j],
                res.prob_counted_forms_bottom[i, j],
            ]
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
            assert want[2] == pytest.approx(want[3], rel=1e-12, abs=1e-15)  # the definitions coincide at bottom-p


def test_scores_from_stored_float32_stats_match_logits():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(5, 200)) * 4
    lemma_ids = rng.permutation(200)[:40].reshape(20, 2)
    plural = np.array([True, False, True, True, False])
    res = score_logits(logits, plural, lemma_ids, [0.5, 1.0], [0.01])
    probs = probabilities(logits)
    prob, above, below = form_statistics(probs, torch.as_tensor(lemma_ids.reshape(-1)))
    stats = FormStats(*(t.reshape(5, 20, 2).numpy().astype(np.float32) for t in (prob, above, below)))
    top, bottom = scores_from_stats(stats, plural, [0.5, 1.0], [0.01])
    np.testing.assert_allclose(top.mw, res.mw_top, atol=1e-5, equal_nan=True)
    np.testing.assert_allclose(top.ew, res.ew_top, atol=1e-5, equal_nan=True)
    np.testing.assert_allclose(bottom.mw, res.mw_bottom, atol=1e-5, equal_nan=True)


def test_cutoff_search_counts_as_torch_searchsorted_even_with_nan() -> None:
    """The batched binary search of the numpy scoring gives torch.searchsorted's counts, also on
    rows holding NaN (contexts with non-finite logits), where numpy.searchsorted would differ."""
    from verbeval.agreement.scores.metrics import _count_below

    rng = np.random.default_rng(5)
    keys = np.sort(rng.random((40, 33)), axis=1)
    keys[::3, rng.integers(0, 33, 14)] = np.nan  # unsorted by NaN, as a bad context's masses are
    keys[1] = 0.25  # all tied
    p = np.concatenate([rng.random((40, 6)), np.full((40, 1), 0.25), np.ones((40, 1)), np.full((40, 1), 2.0)], axis=1)
    want = torch.searchsorted(torch.from_numpy(keys), torch.from_numpy(np.where(p >= 1, np.inf, p)), side="left")
    assert np.array_equal(_count_below(keys, p), want.numpy())
    assert _count_below(keys[1:2], p[1:2]).tolist() == [[0 if q <= 0.25 else 33 for q in p[1]]]


def test_prob_counted_paper_vs_forms_worked_example():
    """docs/metrics.md, "Counted probability mass": one plural context over the vocabulary
    are .4, is .3, x .15, exist .1, exists .05 (descending; cum .4 .7 .85 .95 1).

    Top p = .5: r* = 1 ("is"), alpha = (.5 - .4) / .3 = 1/3; pre = {are}, post = {are, is}.
      prob_counted (paper): "be" counts in both sets -> .3 + .4 = .7 in both -> .7
      prob_counted_forms: pre .4, post .7 -> .4 + 1/3 * .3 = .5
    Top p = .9: r* = 3 ("exist"), alpha = .5; pre = {are, is, x}, post adds "exist".
      paper: pre .7, post .7 + (.1 + .05) = .85 -> .775; forms: pre .7, post .8 -> .75
    Top p = .3: r* = 0, alpha = .75; pre = {}, post = {are}.
      paper: 0 -> .7 -> .525; forms: 0 -> .4 -> .3
    Bottom p = .5 (ascending exists .05, exist .1, x .15, is .3, are .4; cum .05 .15 .3 .6 1):
      r* = 3 ("is"), alpha = (.5 - .3) / .3 = 2/3; "exist" counts in pre and post, "be" in neither
      (its "are" is outside): both quantities .15.
    """
    probs = np.array([[0.3, 0.4, 0.15, 0.1, 0.05]])  # is, are, x, exist, exists
    res = score_logits(
        np.log(probs), np.array([True]), np.array([[0, 1], [4, 3]]), top_cutoffs=[0.5, 0.9, 0.3], bottom_cutoffs=[0.5]
    )
    np.testing.assert_allclose(res.prob_counted_top[0], [0.7, 0.775, 0.525], rtol=1e-12)
    np.testing.assert_allclose(res.prob_counted_forms_top[0], [0.5, 0.75, 0.3], rtol=1e-12)
    np.testing.assert_allclose(res.prob_counted_bottom[0], [0.15], rtol=1e-12)
    np.testing.assert_allclose(res.prob_counted_forms_bottom[0], [0.15], rtol=1e-12)
    # the literal oracle agrees
    for j, p in enumerate([0.5, 0.9, 0.3]):
        _, _, mass, forms = _ref_side(list(probs[0]), [[0, 1], [4, 3]], True, p, True)
        assert (mass, forms) == (
            pytest.approx(res.prob_counted_top[0, j]),
            pytest.approx(res.prob_counted_forms_top[0, j]),
        )
