"""Agreement scores over three lexicon modes: ``single_token``, ``all`` and ``common``.

Built on :mod:`verbeval.agreement.lexicon_modes.multitoken`, which gives every form of every lexicon lemma (and every
template verb) a log-probability in every context. The three modes differ only in which lemmas
(EW, MW) and which template rows (TSE) count:

* ``single_token``: the model's eligible lemmas (both forms single tokens, the paper's and
  Table 2's set); TSE rows whose two verb forms are single tokens. Equals Table 2 at p = 1.
* ``all``: every lexicon lemma (forms of any length); every TSE row.
* ``common``: the lemmas (and TSE verb pairs) that are single-token for *every* configured model,
  so that models are compared on identical verbs.

EW and MW are at p = 1 (the whole vocabulary, no cutoff): EW = mean over the mode's lemmas of
1[log P(l+) > log P(l-)], MW = sum P(l+) / sum (P(l+) + P(l-)). Every computation is vectorised
over contexts and lemmas.

Here: the verb pairs of a model (its form table) and which of them count in each mode, and the
scores. The log-probabilities come from the form shards (:mod:`verbeval.agreement.lexicon_modes.form_shards`);
the side-by-side table from :mod:`verbeval.agreement.lexicon_modes.table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.data.eligibility import form_token_ids, single_token_ids
from verbeval.agreement.scores.registry import LEXICON_MODE_METRICS, headline_rows
from verbeval.core.bootstrap import bootstrap_means
from verbeval.core.errors import VerbevalError

MODES: tuple[str, ...] = ("single_token", "all", "common")
#: the headline metrics scored in every mode (the registry's, :mod:`verbeval.agreement.scores.registry`)
METRICS: tuple[str, ...] = LEXICON_MODE_METRICS


# --------------------------------------------------------------------------- verb pairs of a model


def row_pairs(templates: pd.DataFrame) -> pd.DataFrame:
    """(sing, plur) verb forms of each template row (columns ``sing``, ``plur``; same index)."""
    pl = templates["plural"].to_numpy(dtype=bool)
    return pd.DataFrame(
        {
            "sing": np.where(pl, templates["incorrect"], templates["correct"]).astype(str),
            "plur": np.where(pl, templates["correct"], templates["incorrect"]).astype(str),
        },
        index=templates.index,
    )


def form_table(lexicon: pd.DataFrame, templates: pd.DataFrame, tokenizer: Any) -> pd.DataFrame:
    """Every verb pair a model is scored on, with its token ids.

    Rows: the lexicon lemmas in lexicon order (``in_lexicon`` True), then the template verb pairs
    not in the lexicon, sorted (TSE only). Columns: ``pair, lemma, sing, plur, in_lexicon,
    sing_ids, plur_ids, n_sing, n_plur, single_token, scorable``. ``single_token`` is the
    eligibility test of :func:`verbeval.agreement.data.eligibility.eligible_lemmas` (both forms single,
    non-unknown, distinct tokens); ``scorable``: no unknown token in either form and the two
    token sequences differ.
    """
    lex = lexicon[["lemma", "sing", "plur"]].astype(str).reset_index(drop=True)
    lex["in_lexicon"] = True
    rp = row_pairs(templates).drop_duplicates()
    known = pd.MultiIndex.from_frame(lex[["sing", "plur"]])
    extra = rp[~pd.MultiIndex.from_frame(rp).isin(known)].sort_values(["sing", "plur"]).reset_index(drop=True)
    extra.insert(0, "lemma", extra["plur"])
    extra["in_lexicon"] = False
    t = pd.concat([lex, extra], ignore_index=True)
    t.insert(0, "pair", np.arange(len(t), dtype=np.int64))
    sing, plur = t["sing"].tolist(), t["plur"].tolist()
    s_ids, p_ids = form_token_ids(tokenizer, sing), form_token_ids(tokenizer, plur)
    t["sing_ids"], t["plur_ids"] = s_ids, p_ids
    t["n_sing"] = np.array([len(x) for x in s_ids], np.int64)
    t["n_plur"] = np.array([len(x) for x in p_ids], np.int64)
    single = single_token_ids(tokenizer, sing + plur)
    ss, sp = single[: len(t)], single[len(t) :]
    t["single_token"] = (ss != -1) & (sp != -1) & (ss != sp)
    unk = tokenizer.unk_token_id
    t["scorable"] = [bool(a) and bool(b) and a != b and unk not in a and unk not in b for a, b in zip(s_ids, p_ids)]
    return t


def common_pairs(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """(sing, plur, in_lexicon) pairs that are single-token in every model's form table, sorted."""
    if not tables:
        raise VerbevalError("no form tables given")
    sets = [set(map(tuple, t.loc[t["single_token"], ["sing", "plur"]].to_numpy().tolist())) for t in tables]
    common = set.intersection(*sets)
    ref = tables[0][["sing", "plur", "in_lexicon"]]
    keep = pd.MultiIndex.from_frame(ref[["sing", "plur"]]).isin(list(common)) if common else np.zeros(len(ref), bool)
    return ref[keep].drop_duplicates(["sing", "plur"]).sort_values(["sing", "plur"]).reset_index(drop=True)


def mode_masks(forms: pd.DataFrame, common: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per pair of ``forms``: whether it counts in each mode (bool arrays aligned with ``forms``)."""
    in_common = (
        pd.MultiIndex.from_frame(forms[["sing", "plur"]]).isin(pd.MultiIndex.from_frame(common[["sing", "plur"]]))
        if len(common)
        else np.zeros(len(forms), bool)
    )
    scorable = forms["scorable"].to_numpy(bool)
    return {
        "single_token": forms["single_token"].to_numpy(bool),
        "all": scorable,
        "common": np.asarray(in_common, bool) & scorable,
    }


# --------------------------------------------------------------------------- metrics


def context_mode_scores(logp: np.ndarray, plural: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """EW and MW (p = 1) per context over the lemmas where ``mask`` is True.

    ``logp``: ``[N, L, 2]`` (singular, plural) log-probabilities; ``plural``: ``[N]``; ``mask``: ``[L]``.
    A tie counts as wrong. NaN when the mask is empty.
    """
    lp = np.asarray(logp, np.float64)[:, np.asarray(mask, bool)]
    n = lp.shape[0]
    if lp.shape[1] == 0:
        return np.full(n, np.nan), np.full(n, np.nan)
    pl = np.asarray(plural, bool)[:, None]
    right = np.where(pl, lp[:, :, 1], lp[:, :, 0])
    wrong = np.where(pl, lp[:, :, 0], lp[:, :, 1])
    ew = (right > wrong).mean(axis=1)
    shift = np.maximum(right.max(axis=1), wrong.max(axis=1))[:, None]
    num = np.exp(right - shift).sum(axis=1)
    mw = num / (num + np.exp(wrong - shift).sum(axis=1))
    return ew, mw


def row_mode_tse(
    logp: np.ndarray, plural: np.ndarray, row_context: np.ndarray, row_pair: np.ndarray, pair_mask: np.ndarray
) -> np.ndarray:
    """TSE per row (1 / 0 / NaN where the row's pair is outside ``pair_mask``); ``logp`` ``[N, P, 2]``."""
    lp = np.asarray(logp)[row_context, row_pair]  # [R, 2]
    pl = np.asarray(plural, bool)[row_context]
    right = np.where(pl, lp[:, 1], lp[:, 0])
    wrong = np.where(pl, lp[:, 0], lp[:, 1])
    out = (right > wrong).astype(np.float64)
    out[~np.asarray(pair_mask, bool)[row_pair]] = np.nan
    return out


def group_summary(
    shards: dict[str, Any],
    masks: dict[str, np.ndarray],
    n_lexicon: int,
    *,
    model: str,
    group: str,
    resamples: int,
    seed: int,
    confidence: float,
) -> pd.DataFrame:
    """Long summary of one (model, group): one row per (mode, metric) with value, CI, n, n_total and
    the mode's lemma count."""
    lex_logp = shards["logp"][:, :n_lexicon]
    cols, names = [], []
    for mode in MODES:
        ew, mw = context_mode_scores(lex_logp, shards["plural"], masks[mode][:n_lexicon])
        cols += [ew, mw]
        names += [(mode, "ew"), (mode, "mw")]
    mean, lo, hi = bootstrap_means(np.stack(cols, axis=1), resamples, seed, confidence)
    tse = np.stack(
        [
            row_mode_tse(shards["logp"], shards["plural"], shards["row_context"], shards["row_pair"], masks[mode])
            for mode in MODES
        ],
        axis=1,
    )
    t_mean, t_lo, t_hi = bootstrap_means(tse, resamples, seed, confidence)
    recs = []
    n_ctx = lex_logp.shape[0]
    for j, mode in enumerate(MODES):
        n_lem = int(masks[mode][:n_lexicon].sum())
        recs.append(
            {
                "mode": mode,
                "metric": "tse",
                "value": t_mean[j],
                "ci_low": t_lo[j],
                "ci_high": t_hi[j],
                "n": int((~np.isnan(tse[:, j])).sum()),
                "n_total": len(tse),
                "n_lemmas": n_lem,
            }
        )
        for metric in ("ew", "mw"):
            k = names.index((mode, metric))
            recs.append(
                {
                    "mode": mode,
                    "metric": metric,
                    "value": mean[k],
                    "ci_low": lo[k],
                    "ci_high": hi[k],
                    "n": int((~np.isnan(cols[k])).sum()),
                    "n_total": n_ctx,
                    "n_lemmas": n_lem,
                }
            )
    df = pd.DataFrame(recs)
    df.insert(0, "group", group)
    df.insert(0, "model", model)
    return df


def lemma_scores(
    logp: np.ndarray, plural: np.ndarray, forms: pd.DataFrame, masks: dict[str, np.ndarray], model: str
) -> pd.DataFrame:
    """Per lexicon lemma over all given contexts: accuracy (EW test) and mean log10 P(sing) + P(plur)."""
    n_lex = int(forms["in_lexicon"].sum())
    lp = np.asarray(logp, np.float64)[:, :n_lex]
    pl = np.asarray(plural, bool)[:, None]
    right = np.where(pl, lp[:, :, 1], lp[:, :, 0])
    wrong = np.where(pl, lp[:, :, 0], lp[:, :, 1])
    lex = forms.iloc[:n_lex]
    n = lp.shape[0]
    correct = (right > wrong).sum(axis=0)
    out = pd.DataFrame(
        {
            "model": model,
            "lemma": lex["lemma"].to_numpy(),
            "sing": lex["sing"].to_numpy(),
            "plur": lex["plur"].to_numpy(),
            "n_sing": lex["n_sing"].to_numpy(),
            "n_plur": lex["n_plur"].to_numpy(),
            "single_token": masks["single_token"][:n_lex],
            "common": masks["common"][:n_lex],
            "scorable": masks["all"][:n_lex],
            "n_contexts": n,
            "n_correct": correct,
            "accuracy": correct / n if n else np.full(n_lex, np.nan),
            "mean_log10_prob": np.logaddexp(lp[:, :, 0], lp[:, :, 1]).mean(axis=0) / np.log(10) if n else np.nan,
        }
    )
    return out


def lemma_differences(lemmas: pd.DataFrame, *, resamples: int, seed: int, confidence: float) -> pd.DataFrame:
    """Single-token vs multi-token lemmas of one model: mean accuracy (bootstrap CI), mean log10
    probability, and a two-sided Mann-Whitney U test of the accuracies (scipy)."""
    from scipy.stats import mannwhitneyu

    ok = lemmas[lemmas["scorable"]]
    recs: dict[str, Any] = {"model": lemmas["model"].iloc[0] if len(lemmas) else ""}
    sets = {"single": ok[ok["single_token"]], "multi": ok[~ok["single_token"]]}
    for name, s in sets.items():
        m, lo, hi = bootstrap_means(s["accuracy"].to_numpy(float), resamples, seed, confidence)
        recs[f"n_{name}"] = len(s)
        recs[f"acc_{name}"], recs[f"acc_{name}_ci_low"], recs[f"acc_{name}_ci_high"] = m[0], lo[0], hi[0]
        recs[f"log10p_{name}"] = float(s["mean_log10_prob"].mean()) if len(s) else np.nan
    recs["acc_diff"] = recs["acc_multi"] - recs["acc_single"]
    if len(sets["single"]) and len(sets["multi"]):
        res = mannwhitneyu(sets["multi"]["accuracy"], sets["single"]["accuracy"], alternative="two-sided")
        recs["mannwhitney_u"], recs["mannwhitney_p"] = float(res.statistic), float(res.pvalue)
    else:
        recs["mannwhitney_u"] = recs["mannwhitney_p"] = np.nan
    return pd.DataFrame([recs])


def consistency(summary: pd.DataFrame, table2_summaries: pd.DataFrame) -> pd.DataFrame:
    """single_token mode against the single-token pipeline (Table 2 summaries): TSE, EW and MW at top p = 1."""
    ref = table2_summaries[headline_rows(table2_summaries)]
    ref = ref[["model", "group", "metric", "value", "n"]].rename(columns={"value": "table2", "n": "n_table2"})
    st = summary[summary["mode"] == "single_token"][["model", "group", "metric", "value", "n"]]
    out = st.merge(ref, on=["model", "group", "metric"], how="left")
    out["abs_diff"] = (out["value"] - out["table2"]).abs()
    return out
