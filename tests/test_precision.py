"""Ties and fragile decisions (verbeval.agreement.scores.precision) on constructed probabilities with
known ties and near-ties, their margins checked against float32 spacings computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from verbeval.agreement.scores.precision import decision_counts, margin_ulps, tse_ties_correct
from verbeval.core.config import schema_default


def test_margins_in_float32_spacings_ties_and_near_ties() -> None:
    unit = float(np.spacing(np.float32(5.0)))  # 4.76837158203125e-07: float32 spacing at magnitude 5
    assert unit == 2.0**-21
    ps = np.exp(np.array([-5.0, -5.0, -5.0, -5.0, -60.0, 0.0, np.nan]))
    pp = np.exp(np.array([-5.0, -5.0 + 3 * unit, -5.0 - 100 * unit, -2.0, -np.inf, -np.inf, -1.0]))
    pp[4] = 0.0
    ps[5], pp[5] = 0.0, 0.0  # both underflowed: a tie
    m = margin_ulps(ps, pp)
    assert m[0] == 0.0  # an exact tie
    assert m[1] == pytest.approx(3.0, abs=1e-6)  # 3 spacings at magnitude 5
    # magnitude 5 + 100 units is still below 8, where the spacing doubles: 100 spacings
    assert m[2] == pytest.approx(100.0, abs=1e-6)
    assert m[3] == pytest.approx(3.0 / unit)  # a clear decision
    assert m[4] == np.inf and m[5] == 0.0 and np.isnan(m[6])
    counts = decision_counts(ps, pp)
    assert counts == {"n": 6, "ties": 2, "fragile": 1}  # the 3-spacing pair; 100 > FRAGILE_ULPS
    assert schema_default("agreement.precision_audit.fragile_ulps") == 16.0
    assert decision_counts(ps, pp, threshold=101)["fragile"] == 2


def test_tse_with_ties_counted_correct_as_lm_evaluation_harness_does() -> None:
    tse = np.array([1.0, 0.0, 0.0, np.nan])
    ps = np.array([0.6, 0.3, 0.2, np.nan])
    pp = np.array([0.4, 0.3, 0.5, 0.1])
    assert np.nanmean(tse) == pytest.approx(1 / 3)  # verbeval: the tie (row 1) is wrong
    assert tse_ties_correct(tse, ps, pp) == pytest.approx(2 / 3)
    assert np.isnan(tse_ties_correct(np.array([np.nan]), ps[:1], pp[:1]))


def test_a_softmax_tie_of_equal_logits_is_found_in_float64() -> None:
    """Two equal logits give equal probabilities (a tie), one float32 step apart a fragile decision."""
    logits = np.array([2.5, 2.5, np.float64(np.nextafter(np.float32(2.5), np.float32(3))), -1.0])
    p = np.exp(logits - np.log(np.exp(logits).sum()))
    counts = decision_counts(p[[0, 0]], p[[1, 2]])
    assert counts == {"n": 2, "ties": 1, "fragile": 1}
