"""Lemma frequencies and how they relate to the age of acquisition.

Frequency of a lemma, in Zipf units (log10 of its frequency per billion words), from one source:

* ``wordfreq``: ``log10(word_frequency(sing, "en") + word_frequency(plur, "en")) + 9``, the summed
  frequency of its two present-tense forms (wordfreq's ``word_frequency``, English, default
  wordlist); a lemma neither of whose forms wordfreq knows is missing (NaN, reason
  ``unknown_to_wordfreq``), never 0. Library and version are recorded.
* a CSV ``lemma,zipf`` (used as is) or ``lemma,count`` (``log10(count / total count) + 9``, the
  same units over the file's own counts), e.g. the toy corpus's planted frequencies; a lemma not in
  the file is missing (``not_in_frequency_file``), one with count 0 too (``zero_count``). A file
  that holds fewer than :data:`MIN_SHARED_LEMMAS` of the sweep's lemmas is probably another
  corpus's: one warning names it and the share.

Correlation (:func:`aoa_frequency`): Spearman's rho of log10 AoA and Zipf frequency over the lemmas
with both, with a percentile bootstrap CI over lemmas (resampled indices, ties ranked by their
average rank). Outliers: the lemmas whose residual from the least-squares line log10 AoA = a + b *
zipf lies beyond ``k`` robust standard deviations (1.4826 * the median absolute deviation of the
residuals from their median): ``later`` (acquired later than their frequency predicts) or
``earlier``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import InputError

log = logging.getLogger(__name__)

FREQUENCY_COLUMNS = ("lemma", "zipf", "frequency_reason")
#: a frequency file holding fewer than this share of the sweep's lemmas is warned about
MIN_SHARED_LEMMAS = 0.5


def wordfreq_zipf(forms: Mapping[str, tuple[str, str]]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Zipf frequency of each lemma's summed forms (``forms``: lemma -> (singular, plural)) from
    wordfreq, and the source's description (library, version, wordlist)."""
    from wordfreq import word_frequency

    rows = []
    for lemma in sorted(forms):
        sing, plur = forms[lemma]
        total = word_frequency(sing, "en") + (word_frequency(plur, "en") if plur != sing else 0.0)
        if total > 0:
            rows.append((lemma, float(np.log10(total) + 9.0), ""))
        else:
            rows.append((lemma, np.nan, "unknown_to_wordfreq"))
    info = {"source": "wordfreq", "library": "wordfreq", "version": _version("wordfreq"), "wordlist": "en/best"}
    return pd.DataFrame(rows, columns=list(FREQUENCY_COLUMNS)), info


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


def file_zipf(path: str | Path, lemmas: list[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Zipf frequency of ``lemmas`` from a CSV ``lemma,zipf`` or ``lemma,count`` (``zipf`` wins when
    both are there)."""
    p = Path(path)
    try:
        df = pd.read_csv(p, keep_default_na=False, na_values=[""])
    except FileNotFoundError:
        raise InputError(p, "no such frequency file") from None
    except (OSError, ValueError) as exc:
        raise InputError(p, f"unreadable frequency CSV ({str(exc).splitlines()[0]})") from None
    if "lemma" not in df.columns or not ({"zipf", "count"} & set(df.columns)):
        raise InputError(p, "a frequency file needs columns lemma and zipf or count", 1)
    df["lemma"] = df["lemma"].astype(str)
    dup = df["lemma"].duplicated()
    if dup.any():
        raise InputError(p, f"lemma {df['lemma'][dup].iloc[0]!r} is listed twice", int(np.flatnonzero(dup)[0]) + 2)
    col = "zipf" if "zipf" in df.columns else "count"
    vals = pd.to_numeric(df[col], errors="coerce")
    bad = vals.isna() | ((vals < 0) if col == "count" else False)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(p, f"{col} {df[col].iloc[i]!r} of lemma {df['lemma'].iloc[i]!r} is not a number >= 0", i + 2)
    by = dict(zip(df["lemma"], vals.astype(float)))
    total = float(vals.sum()) if col == "count" else 1.0
    rows = []
    for lemma in sorted(lemmas):
        if lemma not in by:
            rows.append((lemma, np.nan, "not_in_frequency_file"))
        elif col == "count" and by[lemma] <= 0:
            rows.append((lemma, np.nan, "zero_count"))
        else:
            z = by[lemma] if col == "zipf" else float(np.log10(by[lemma] / total) + 9.0)
            rows.append((lemma, z, ""))
    shared = sum(1 for lemma in set(lemmas) if lemma in by)
    if lemmas and shared < MIN_SHARED_LEMMAS * len(set(lemmas)):
        log.warning(
            "%s: the frequency file lists %d of the sweep's %d lemmas (fewer than %d%%): is it this sweep's "
            "corpus? Only those enter the frequency analysis",
            p,
            shared,
            len(set(lemmas)),
            round(MIN_SHARED_LEMMAS * 100),
        )
    info = {"source": str(p), "library": "", "version": "", "wordlist": f"column {col}"}
    return pd.DataFrame(rows, columns=list(FREQUENCY_COLUMNS)), info


def average_ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 1..n along the last axis, tied values sharing their average rank (as
    ``scipy.stats.rankdata``'s default)."""
    a = np.asarray(a, dtype=np.float64)
    n = a.shape[-1]
    order = np.argsort(a, axis=-1, kind="stable")
    sv = np.take_along_axis(a, order, axis=-1)
    idx = np.broadcast_to(np.arange(n), a.shape)
    new = np.ones(a.shape, dtype=bool)
    new[..., 1:] = sv[..., 1:] != sv[..., :-1]
    last = np.ones(a.shape, dtype=bool)
    last[..., :-1] = new[..., 1:]
    start = np.maximum.accumulate(np.where(new, idx, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, idx, n - 1), -1), axis=-1), -1)
    ranks = np.empty(a.shape)
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=-1)
    return ranks


def spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair of ``a``, ``b`` ``[R, n]`` (average ranks for ties)."""
    ra = average_ranks(a)
    rb = average_ranks(b)
    ra = ra - ra.mean(-1, keepdims=True)
    rb = rb - rb.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ra * rb).sum(-1) / np.sqrt((ra * ra).sum(-1) * (rb * rb).sum(-1))


def aoa_frequency(
    log_aoa: np.ndarray, zipf: np.ndarray, *, resamples: int, seed: int, confidence: float, outlier_sd: float
) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """Spearman of ``log_aoa`` and ``zipf`` (lemmas with both) with its CI, the regression line and
    outliers: ``(summary, residual, outlier)``, the last two per lemma (NaN / "" where not fitted)."""
    from verbeval.core.bootstrap import bootstrap_statistic, percentile_ci

    la, z = np.asarray(log_aoa, float), np.asarray(zipf, float)
    ok = np.isfinite(la) & np.isfinite(z)
    n = int(ok.sum())
    residual = np.full(len(la), np.nan)
    outlier = np.full(len(la), "", dtype=object)
    out: dict[str, Any] = {
        "n_lemmas": n,
        "spearman": np.nan,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "slope": np.nan,
        "intercept": np.nan,
        "robust_sd": np.nan,
        "n_later": 0,
        "n_earlier": 0,
    }
    if n < 3:
        return out, residual, outlier
    a, b = la[ok], z[ok]
    out["spearman"] = float(spearman_rows(a[None], b[None])[0])
    if resamples > 0:
        rho = bootstrap_statistic(lambda idx: spearman_rows(a[idx], b[idx]), n, resamples, seed, 100, "indices")
        lo, hi = percentile_ci(rho, confidence)
        out["ci_low"], out["ci_high"] = float(lo), float(hi)
    if np.ptp(b) > 0:
        slope, intercept = np.polyfit(b, a, 1)
        res = a - (intercept + slope * b)
        sd = 1.4826 * float(np.median(np.abs(res - np.median(res))))
        out.update(slope=float(slope), intercept=float(intercept), robust_sd=sd)
        residual[ok] = res
        if sd > 0:
            flag = np.where(res > outlier_sd * sd, "later", np.where(res < -outlier_sd * sd, "earlier", ""))
            outlier[ok] = flag
        out["n_later"] = int((outlier == "later").sum())
        out["n_earlier"] = int((outlier == "earlier").sum())
    return out, residual, outlier.astype(str)
