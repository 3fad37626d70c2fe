"""CLAMS pairs as agreement template rows: each pair's verb contrast found in its language's lexicon.

A CLAMS pair (:mod:`verbeval.multilingual.clams`) is split at the first word where its two sentences
differ: ``correct`` and ``incorrect`` are the two words there. :func:`clams_templates` looks the two
words up in the language's lexicon (:mod:`verbeval.multilingual.lexicons`): where ``(correct,
incorrect)`` is a lemma's ``(sing, plur)`` in a cell, the row's ``label`` is ``singular`` and its
``cell`` that cell; where it is ``(plur, sing)``, ``plural``. EW and MW of the row are then taken over
the eligible lemmas of that cell only (a Russian past-tense masculine row over every verb's
``past_m`` pair). A pair whose two words are no lexicon contrast (a Russian predicative adjective,
``большие``/``большой``; a verb the lexicon lacks) gets the cell :data:`CELL_NONE`: it is scored for
TSE only, and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import pandas as pd

from verbeval.agreement.data.template_files import TEMPLATE_COLUMNS

log = logging.getLogger(__name__)

#: the cell of a row whose two words are no contrast of the lexicon: TSE only
CELL_NONE = "none"

#: the template table's columns, then the multilingual ones
CLAMS_TEMPLATE_COLUMNS: dict[str, str] = {**TEMPLATE_COLUMNS, "language": "str", "cell": "str", "differs_after": "bool"}


def cell_index(
    lexicon: pd.DataFrame, cells: Sequence[str] | None = None
) -> dict[tuple[str, str], tuple[str, str, str]]:
    """``{(word a, word b): (cell, label of a, lemma)}`` for every contrast of ``lexicon``, both ways
    round. A pair found in more than one cell takes the first in ``cells`` order (default: the
    lexicon's order of first appearance), then the first lemma."""
    order = list(cells) if cells is not None else list(dict.fromkeys(lexicon["cell"]))
    rank = {c: i for i, c in enumerate(order)}
    lex = lexicon[lexicon["cell"].isin(rank)].copy()
    lex["_rank"] = lex["cell"].map(rank)
    lex = lex.sort_values(["_rank", "lemma", "sing", "plur"], kind="stable")
    out: dict[tuple[str, str], tuple[str, str, str]] = {}
    for lemma, sing, plur, cell in zip(lex["lemma"], lex["sing"], lex["plur"], lex["cell"]):
        out.setdefault((sing, plur), (cell, "singular", lemma))
        out.setdefault((plur, sing), (cell, "plural", lemma))
    return out


def clams_templates(
    pairs: pd.DataFrame, lexicon: pd.DataFrame, language: str, cells: Sequence[str] | None = None
) -> pd.DataFrame:
    """The template rows (:data:`CLAMS_TEMPLATE_COLUMNS`) of a language's CLAMS ``pairs``, each
    assigned its lexicon cell and number (:func:`cell_index`); rows in the pairs' order.

    A row of no cell (:data:`CELL_NONE`) keeps ``label`` ``singular`` (its ``correct`` word stands
    as the ``sing`` form): TSE compares the two words whichever way round, and no EW or MW is taken
    for it. ``note`` says so.
    """
    index = cell_index(lexicon, cells)
    found = [index.get((c, i)) for c, i in zip(pairs["correct"], pairs["incorrect"])]
    out = pd.DataFrame(
        {
            "group": pairs["group"],
            "source": pairs["source"],
            "line": pairs["line"],
            "left": pairs["left"],
            "right": pairs["right"],
            "correct": pairs["correct"],
            "incorrect": pairs["incorrect"],
            "label": [f[1] if f else "singular" for f in found],
            "plural": [bool(f and f[1] == "plural") for f in found],
            "pair_id": "",
            "note": ["" if f else "no lexicon contrast: TSE only" for f in found],
            "subject_item": "",
            "verb_item": [f[2] if f else "" for f in found],
            "language": language,
            "cell": [f[0] if f else CELL_NONE for f in found],
            "differs_after": pairs["differs_after"].astype(bool),
        }
    )
    return out.astype(CLAMS_TEMPLATE_COLUMNS).reset_index(drop=True)


def cell_counts(templates: pd.DataFrame) -> pd.DataFrame:
    """Rows per language, group and cell (``rows``), in the table's order."""
    keys = ["language", "group", "cell"]
    return templates.groupby(keys, sort=False).size().rename("rows").reset_index()


def uncovered_pairs(templates: pd.DataFrame, top: int = 10) -> Mapping[str, list[tuple[str, str, int]]]:
    """Per language, the most frequent word pairs of no cell: ``(correct, incorrect, rows)``."""
    none = templates[templates["cell"] == CELL_NONE]
    out: dict[str, list[tuple[str, str, int]]] = {}
    for lang, part in none.groupby("language", sort=False):
        counts = part.groupby(["correct", "incorrect"], sort=False).size().sort_values(ascending=False, kind="stable")
        out[str(lang)] = [(str(c), str(i), int(n)) for (c, i), n in counts.head(top).items()]
    return out
