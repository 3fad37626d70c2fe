"""Russian verb lexicon: 3sg / 3pl present and past singular of each gender / past plural.

Source: the OpenCorpora dictionary as packaged for pymorphy3 (``pymorphy3-dicts-ru``: MIT for the
package's code, CC BY-SA 3.0 for its OpenCorpora data, as the package states), read with
``pymorphy3`` 2.0.6 (MIT). Every lexeme of the dictionary whose normal form is an infinitive
(``INFN``) is one lemma; its paradigm gives the cells:

* ``pres``: ``VERB`` indicative present, third person singular / plural (``ждёт`` / ``ждут``). Only
  imperfective (and biaspectual) verbs have it: OpenCorpora tags the non-past of a perfective verb
  ``futr`` (``напишет``), and those forms are left out, since the CLAMS sets use imperfective
  present and a perfective non-past is a future;
* ``past_m``, ``past_f``, ``past_n``: past singular of that gender / past plural (``ждал`` /
  ``ждали``, ``ждала`` / ``ждали``, ``ждало`` / ``ждали``), for verbs of both aspects.

Forms the dictionary marks as misspelt, distorted or abbreviated (``Erro``, ``Dist``, ``Abbr``: the
``е`` it lists for ``быть``) are left out; archaic ones are kept (``быть``: ``есть``/``суть``).
Variants of one cell (``машет``/``махает``) are paired by :func:`pair_forms`. All lemmas are kept,
none capped. As in every lexicon, a ``(cell, sing, plur)`` pair two lemmas share is kept once, under
the lemma first in alphabetical order: ``спал``/``спали`` stands under ``спасть`` (perfective, "fall
off"), not ``спать``, which keeps its ``pres`` row.

Orthography: the dictionary writes ``ё`` (``ждёт``, ``идёт``), and so do the CLAMS Russian sets
(``режиссёр``, ``режиссёры``; none of their verbs happens to have ``ё``). The lexicon keeps ``ё``: a
model scored on ``ждет`` instead would see another string than the data's convention. Forms are
lowercase.

Speed: the dictionary's word list (5.1 million forms) is walked once to find the infinitives. With
the C extension ``DAWG2`` (pymorphy3's ``fast`` extra, in verbeval's ``multilingual`` extra) the
build takes about 6 s (2 cores); with the pure-Python reader alone (``DAWG2-Python``) about 45 s,
with the same result.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from verbeval.multilingual.lexicons import LexiconSource, lexicon_frame, pair_forms, require_version

if TYPE_CHECKING:
    import pandas as pd

SOURCE = LexiconSource(
    language="ru",
    package="pymorphy3-dicts-ru",
    version="2.4.417150.4580142",
    sha256="718bac64c73c10c16073a199402657283d9b64c04188b694f6d3e9b0d85440f4",
    url="https://pypi.org/project/pymorphy3-dicts-ru/2.4.417150.4580142/#files",
    licence="MIT (the package's code); the OpenCorpora dictionary data: CC BY-SA 3.0 (as the package states)",
    cells=("pres", "past_m", "past_f", "past_n"),
)
#: the analyser that reads the dictionary, pinned the same way
ANALYZER = LexiconSource(
    language="ru",
    package="pymorphy3",
    version="2.0.6",
    sha256="0254317c02ce3ea17e080b7fc9d675e44662b3a5296bae68605b7a41d25b36c3",
    url="https://pypi.org/project/pymorphy3/2.0.6/#files",
    licence="MIT",
    cells=(),
)

#: (cell, side) -> the grammemes a form of that cell and side has (besides VERB, indc)
CELLS: dict[tuple[str, str], frozenset[str]] = {
    ("pres", "sing"): frozenset({"pres", "3per", "sing"}),
    ("pres", "plur"): frozenset({"pres", "3per", "plur"}),
    ("past_m", "sing"): frozenset({"past", "masc", "sing"}),
    ("past_f", "sing"): frozenset({"past", "femn", "sing"}),
    ("past_n", "sing"): frozenset({"past", "neut", "sing"}),
}
_PAST_PLUR = frozenset({"past", "plur"})
_SKIP = frozenset({"Erro", "Dist", "Abbr"})
_WORD = re.compile(r"[а-яё]+(?:-[а-яё]+)*")


class _Paradigm(NamedTuple):
    """An infinitive paradigm: the infinitive's prefix and suffix, and the forms of the cells."""

    prefix: str
    suffix: str
    cells: tuple[tuple[str, str, str, str], ...]


def _require() -> None:
    require_version(ANALYZER)
    require_version(SOURCE)


def _analyzer() -> Any:
    """pymorphy3's analyser of Russian (pymorphy3 is imported only here)."""
    _require()
    import pymorphy3

    return pymorphy3.MorphAnalyzer(lang="ru")


def _paradigm_cells(dictionary: Any, para_id: int) -> _Paradigm | None:
    """For a paradigm whose first form is an infinitive: the infinitive's prefix and suffix, and
    ``(prefix, suffix, cell, side)`` of each form of a cell (the past plural once per past cell);
    None for any other paradigm."""
    info = dictionary.build_paradigm_info(para_id)
    if info[0][1].POS != "INFN":
        return None
    cells = []
    for prefix, tag, suffix in info:
        grammemes = tag.grammemes
        if tag.POS != "VERB" or "indc" not in grammemes or grammemes & _SKIP:
            continue
        for (cell, side), needed in CELLS.items():
            if needed <= grammemes:
                cells.append((prefix, suffix, cell, side))
        if _PAST_PLUR <= grammemes:
            cells += [(prefix, suffix, cell, "plur") for cell in ("past_m", "past_f", "past_n")]
    return _Paradigm(info[0][0], info[0][2], tuple(cells))


@cache
def _lexemes() -> tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...]:
    """Every infinitive lexeme: ``(lemma, ((form, cell, side), ...))``, in the dictionary's order.

    The dictionary keeps each word with its paradigm and its index there: an infinitive is a word
    at index 0 of a paradigm that starts with ``INFN``, and its stem, put between each form's
    prefix and suffix, gives the lexeme's forms.
    """
    dictionary = _analyzer().dictionary
    paradigms: dict[int, _Paradigm | None] = {}
    lexemes = []
    for word, (para_id, idx) in dictionary.words.iteritems():
        if idx != 0:
            continue
        if para_id not in paradigms:
            paradigms[para_id] = _paradigm_cells(dictionary, para_id)
        paradigm = paradigms[para_id]
        if paradigm is None:
            continue
        stem = word[len(paradigm.prefix) : len(word) - len(paradigm.suffix)]
        forms = tuple((prefix + stem + suffix, cell, side) for prefix, suffix, cell, side in paradigm.cells)
        lexemes.append((word, forms))
    return tuple(lexemes)


def source_lemma_count() -> int:
    """The number of distinct infinitives (verb lemmas) in the dictionary."""
    _require()
    return len({lemma for lemma, _ in _lexemes()})


def build_lexicon() -> pd.DataFrame:
    """The Russian lexicon: cells ``pres``, ``past_m``, ``past_f``, ``past_n`` of every verb lemma
    of the dictionary that has both forms of the cell."""
    _require()
    by_cell: dict[tuple[str, str], dict[str, set[str]]] = {}
    for lemma, forms in _lexemes():
        if not _WORD.fullmatch(lemma):
            continue
        for form, cell, side in forms:
            by_cell.setdefault((lemma, cell), {"sing": set(), "plur": set()})[side].add(form)
    rows = [
        (lemma, sing, plur, cell)
        for (lemma, cell), sides in by_cell.items()
        if sides["sing"] and sides["plur"]
        for sing, plur in pair_forms(sides["sing"], sides["plur"])
    ]
    return lexicon_frame(rows, SOURCE)
