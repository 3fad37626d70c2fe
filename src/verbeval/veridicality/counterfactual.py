"""Counterfactual manipulations of the verb veridicality data (Ross & Pavlick 2019, section 6.3).

Each item's premise (``sentence`` in the positive environment, ``neg_sentence`` in the negative
one) is edited, and an NLI model's 3-way distribution on the edited pair is compared with its
distribution on the original pair by the KL divergence KL(original || manipulated).

Manipulations (one name each, used in every output):

``main_verb_matched``
    the clause-embedding verb is replaced by another dataset verb that takes the same complement
    type (``to`` or ``that``);
``main_verb_mismatched``
    ... by a dataset verb that takes only the *other* complement type;
``complement_verb``
    the verb of the embedded clause is replaced by another complement verb observed in the data,
    in the premise *and* in the hypothesis (so the pair stays aligned);
``to_that``
    a to-complement becomes a that-clause: ``He tried to stop the car.`` -> ``He tried that he
    stopped the car.`` (the clause is the hypothesis, with the premise's subject);
``that_to``
    a that-clause becomes an infinitival complement with the clause's subject as object (ECM):
    ``The doctor believed that the theory was correct.`` -> ``The doctor believed the theory to be
    correct.``

The sentence edits themselves (finding the verbs, inflecting the inserted ones) are
:mod:`verbeval.veridicality.sentence_edits`; the KL divergences and Tables 7 and 8,
:mod:`verbeval.veridicality.kl_tables`. Here: the pairs table, every manipulation of every item
and environment, and its coverage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import VerbevalError
from verbeval.veridicality.sentence_edits import (
    AUXILIARY_LEMMAS,
    MODALS,
    Unhandled,
    complement_verb_spans,
    normalise_lemma,
    replace_complement_verb,
    replace_main_verb,
    that_to,
    to_that,
    verb_lemmas,
)
from verbeval.veridicality.steps import VERIDICALITY_COUNTERFACTUALS

MAIN_MANIPULATIONS = ("main_verb_matched", "main_verb_mismatched", "complement_verb")
SWAP_MANIPULATIONS = ("to_that", "that_to")
MANIPULATIONS = (*MAIN_MANIPULATIONS, *SWAP_MANIPULATIONS)
PAIR_COLUMNS = [
    "manipulation",
    "index",
    "task",
    "verb",
    "signature",
    "environment",
    "sample",
    "replaced",
    "replacement",
    "premise",
    "hypothesis",
]
UNHANDLED_COLUMNS = ["manipulation", "index", "task", "verb", "environment", "reason", "premise"]


def _rng_choice(pool: Sequence[str], exclude: str, k: int, seed: int, index: int, manipulation: str) -> list[str]:
    candidates = [v for v in pool if v != exclude]
    if not candidates:
        return []
    rng = np.random.default_rng([seed, index, MANIPULATIONS.index(manipulation)])
    picks = rng.choice(len(candidates), size=min(k, len(candidates)), replace=False)
    return [candidates[j] for j in picks]  # in draw order: truncating the list stays unbiased


#: one edited pair: (premise, hypothesis, the replaced word, its replacement)
_Row = tuple[str, str, str, str]


def _draw_matched(pools: dict[str, list[str]], r: Any, lemma: str, samples: int, seed: int, m: str) -> list[str]:
    return _rng_choice(pools[r.task], lemma, samples, seed, r.index, m)


def _draw_mismatched(pools: dict[str, list[str]], r: Any, lemma: str, samples: int, seed: int, m: str) -> list[str]:
    other = "that" if r.task == "to" else "to"
    return _rng_choice([v for v in pools[other] if v not in pools[r.task]], lemma, samples, seed, r.index, m)


def _draw_complement(pools: dict[str, list[str]], r: Any, lemma: str, samples: int, seed: int, m: str) -> list[str]:
    return _rng_choice(pools["complement"], "", samples + 1, seed, r.index, m)


def _draw_none(pools: dict[str, list[str]], r: Any, lemma: str, samples: int, seed: int, m: str) -> list[str]:
    return [""]


def _edit_main_verb(premise: str, r: Any, lemma: str, news: list[str], samples: int) -> list[_Row]:
    if not news:
        raise Unhandled("no replacement verb available")
    rows = []
    for v in news:
        p2, old = replace_main_verb(premise, lemma, r.task, v)
        rows.append((p2, r.complement, old, v))
    return rows


def _edit_complement_verb(premise: str, r: Any, lemma: str, news: list[str], samples: int) -> list[_Row]:
    _, _, h, _ = complement_verb_spans(premise, r.complement, lemma, r.task)
    own = verb_lemmas(h.low)[:1]
    chosen = [v for v in news if v not in own][:samples]
    if not chosen:
        raise Unhandled("no replacement verb available")
    rows = []
    for v in chosen:
        p2, h2, old = replace_complement_verb(premise, r.complement, lemma, r.task, v)
        rows.append((p2, h2, old, v))
    return rows


def _edit_to_that(premise: str, r: Any, lemma: str, news: list[str], samples: int) -> list[_Row]:
    return [(to_that(premise, r.complement, lemma), r.complement, r.verb, "")]


def _edit_that_to(premise: str, r: Any, lemma: str, news: list[str], samples: int) -> list[_Row]:
    return [(that_to(premise, r.complement, lemma), r.complement, r.verb, "")]


@dataclass(frozen=True)
class _Manipulation:
    """How one manipulation edits an item: the items it applies to (``task``; None: every item), the
    replacement verbs it draws once per item (``draw(pools, item, lemma, samples, seed, name)``) and
    the edited pairs of one premise (``edit(premise, item, lemma, drawn, samples)``; raises
    :class:`Unhandled`)."""

    task: str | None
    draw: Callable[[dict[str, list[str]], Any, str, int, int, str], list[str]]
    edit: Callable[[str, Any, str, list[str], int], list[_Row]]


#: every manipulation of :data:`MANIPULATIONS`, by name
_MANIPULATION_SPECS = {
    "main_verb_matched": _Manipulation(None, _draw_matched, _edit_main_verb),
    "main_verb_mismatched": _Manipulation(None, _draw_mismatched, _edit_main_verb),
    "complement_verb": _Manipulation(None, _draw_complement, _edit_complement_verb),
    "to_that": _Manipulation("to", _draw_none, _edit_to_that),
    "that_to": _Manipulation("that", _draw_none, _edit_that_to),
}


def verb_pools(data: pd.DataFrame) -> dict[str, list[str]]:
    """Replacement verbs: ``to``/``that`` (dataset verbs by complement type) and ``complement``
    (the base-form verbs right after ``to`` in the to-items, which are unambiguously verbs);
    lemmas, sorted, without be/have/do and modals."""
    pools: dict[str, list[str]] = {}
    for task in ("to", "that"):
        lems = {normalise_lemma(v) for v in data.loc[data["task"] == task, "verb"]}
        pools[task] = sorted(lems - AUXILIARY_LEMMAS)
    comp: set[str] = set()
    for r in data[data["task"] == "to"].itertuples(index=False):
        try:
            p, _, _, _ = complement_verb_spans(r.sentence, r.complement, normalise_lemma(r.verb), r.task)
            comp.update(verb_lemmas(p.low)[:1])
        except Unhandled:
            pass
    pools["complement"] = sorted(comp - AUXILIARY_LEMMAS - MODALS)
    return pools


def build_pairs(
    data: pd.DataFrame,
    samples: int | None = None,
    seed: int | None = None,
    manipulations: Iterable[str] = MANIPULATIONS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pairs, unhandled) for every item, environment and manipulation.

    ``samples`` replacement verbs per item for the verb replacements (the same verbs in both
    environments, drawn from a generator seeded by (seed, item index, manipulation)); None:
    ``veridicality.counterfactual``'s defaults (:data:`verbeval.veridicality.steps.VERIDICALITY_COUNTERFACTUALS`).
    """
    samples = VERIDICALITY_COUNTERFACTUALS.default("samples") if samples is None else samples
    seed = VERIDICALITY_COUNTERFACTUALS.default("seed") if seed is None else seed
    manipulations = list(manipulations)
    bad = [m for m in manipulations if m not in MANIPULATIONS]
    if bad:
        raise VerbevalError(f"unknown manipulation(s) {bad}; choose from {MANIPULATIONS}")
    if samples < 1:
        raise VerbevalError("samples must be at least 1")
    pools = verb_pools(data)
    pairs: list[dict[str, Any]] = []
    unhandled: list[dict[str, Any]] = []
    for r in data.itertuples(index=False):
        lemma = normalise_lemma(r.verb)
        for m in manipulations:
            spec = _MANIPULATION_SPECS[m]
            if spec.task is not None and r.task != spec.task:
                continue
            news = spec.draw(pools, r, lemma, samples, seed, m)
            for env, premise in (("positive", r.sentence), ("negative", r.neg_sentence)):
                base = {"manipulation": m, "index": r.index, "task": r.task, "verb": r.verb, "environment": env}
                try:
                    rows = spec.edit(premise, r, lemma, news, samples)
                except Unhandled as exc:
                    unhandled.append({**base, "reason": str(exc), "premise": premise})
                    continue
                for s, (p2, h2, old, new) in enumerate(rows):
                    pairs.append(
                        {
                            **base,
                            "signature": r.signature,
                            "sample": s,
                            "replaced": old,
                            "replacement": new,
                            "premise": p2,
                            "hypothesis": h2,
                        }
                    )
    pairs_df = pd.DataFrame(pairs, columns=PAIR_COLUMNS)
    pairs_df = pairs_df.sort_values(
        ["manipulation", "index", "environment", "sample"], kind="stable", ignore_index=True
    )
    un_df = pd.DataFrame(unhandled, columns=UNHANDLED_COLUMNS).sort_values(
        ["manipulation", "index", "environment"], kind="stable", ignore_index=True
    )
    return pairs_df, un_df


def coverage(data: pd.DataFrame, pairs: pd.DataFrame, unhandled: pd.DataFrame) -> pd.DataFrame:
    """Per manipulation and environment: eligible items, handled items, unhandled items."""
    rows = []
    for m in MANIPULATIONS:
        task = _MANIPULATION_SPECS[m].task
        eligible = int((data["task"] == task).sum()) if task else len(data)
        for env in ("positive", "negative"):
            handled = pairs[(pairs["manipulation"] == m) & (pairs["environment"] == env)]["index"].nunique()
            bad = int(((unhandled["manipulation"] == m) & (unhandled["environment"] == env)).sum())
            rows.append(
                {"manipulation": m, "environment": env, "items": eligible, "handled": int(handled), "unhandled": bad}
            )
    return pd.DataFrame(rows)
