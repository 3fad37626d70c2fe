"""French verb lexicon: third person singular / plural present indicative, from the DELA.

Source: ``dict-fr-AU-DELA`` (PyPI), the inflected-form DELA French dictionary of the LADL (Institut
Gaspard Monge, Université Gustave Eiffel), March 2006 release as edited by Hubert Tournier, licence
LGPLLR. The wheel installs the dictionary as a data file, ``<prefix>/share/dict/dict-fr-AU-DELA``,
one entry a line: ``form,lemma.CATEGORY+features:code:code...`` (an empty lemma is the form itself).
The verb entries (category ``V``, a one-word lemma) with the codes ``P3s`` and ``P3p`` (present
indicative, third person singular and plural) give cell ``pres``: ``manger`` ``mange``/``mangent``,
``être`` ``est``/``sont``, ``avoir`` ``a``/``ont``. A lemma with spelling variants in a cell
(``payer``: ``paie``, ``paye``; ``paient``, ``payent``) pairs them by :func:`pair_forms`; where
prefixes tie every tied pair is kept (``asseoir``: ``assied`` and ``assoit`` each with ``asseyent``
and ``assoient``). 12,014 one-word verb lemmas, 11,940 of them with both forms: 12,008 rows, built
in about 4 s.

Why this package: the two French conjugators on PyPI cannot be installed beside verbeval.
``verbecc`` 2.0.3 pins ``numpy==2.3.3`` and ``scipy==1.16.2`` (verbeval needs numpy >= 2.4 and
scipy >= 1.17) and is LGPL-3, as does 1.11.7; ``mlconjug3`` 4.0.1 needs ``numpy<2.0`` and 3.11.0
pins ``scikit-learn==1.3.0``. The DELA is data only (no
dependencies), ships its own lemma list (102,073 lemmas in all; :func:`source_lemma_count` counts its
one-word verb lemmas) and reads offline.

Orthography: the DELA writes the traditional spelling with circumflexes (``connaît``), as the CLAMS
French sets do; forms are lowercased.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from verbeval.core.errors import VerbevalError
from verbeval.multilingual.lexicons import LexiconSource, lexicon_frame, pair_forms, require_version

if TYPE_CHECKING:
    import pandas as pd

SOURCE = LexiconSource(
    language="fr",
    package="dict-fr-AU-DELA",
    version="2021.9.9",
    sha256="47367285bd407147985da96d740c7516048e1b534e05aa6d529f192a2d175931",
    url="https://pypi.org/project/dict-fr-AU-DELA/2021.9.9/#files",
    licence="LGPLLR (Lesser General Public License For Linguistic Resources)",
    cells=("pres",),
)

#: the name of the dictionary's data file inside the distribution
DATA_FILE = "dict-fr-AU-DELA"
#: DELA inflection code -> (cell, side)
CODES: dict[str, tuple[str, str]] = {"P3s": ("pres", "sing"), "P3p": ("pres", "plur")}
#: ``form,lemma.codes``; a backslash escapes a comma or a dot inside the form or the lemma
_ENTRY = re.compile(r"((?:[^,\\]|\\.)*),((?:[^.\\]|\\.)*)\.(.*)")


def _data_path() -> Path:
    require_version(SOURCE)
    for file in metadata.files(SOURCE.package) or ():
        if file.name == DATA_FILE:
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    raise VerbevalError(
        f"{SOURCE.package} {SOURCE.version} is installed without its {DATA_FILE}; reinstall it: pip install --force-reinstall '{SOURCE.requirement}'"
    )


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


@cache
def _verb_entries() -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """Every one-word verb entry of the DELA: ``(form, lemma, codes)``."""
    entries = []
    with _data_path().open(encoding="utf-8") as lines:
        for line in lines:
            if ".V" not in line:
                continue
            m = _ENTRY.fullmatch(line.rstrip("\r\n"))
            if not m:
                continue
            category, *codes = m.group(3).split(":")
            if category.split("+")[0] != "V":
                continue
            form = _unescape(m.group(1))
            lemma = _unescape(m.group(2)) or form
            if " " in lemma or " " in form:
                continue
            entries.append((form, lemma, tuple(codes)))
    return tuple(entries)


def source_lemma_count() -> int:
    """The number of one-word verb lemmas the DELA lists (with or without a ``P3s``/``P3p`` form)."""
    require_version(SOURCE)
    return len({lemma.lower() for _, lemma, _ in _verb_entries()})


def build_lexicon() -> pd.DataFrame:
    """The French lexicon: cell ``pres`` of every DELA verb lemma that has both forms."""
    require_version(SOURCE)
    forms: dict[tuple[str, str], dict[str, set[str]]] = {}
    for form, lemma, codes in _verb_entries():
        for code in codes:
            if code in CODES:
                cell, side = CODES[code]
                forms.setdefault((lemma.lower(), cell), {"sing": set(), "plur": set()})[side].add(form.lower())
    rows = [
        (lemma, sing, plur, cell)
        for (lemma, cell), sides in forms.items()
        for sing, plur in pair_forms(sides["sing"], sides["plur"])
    ]
    return lexicon_frame(rows, SOURCE)
